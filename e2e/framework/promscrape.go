package framework

import (
	"context"
	"fmt"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape reads a Prometheus text endpoint (e.g. a binary's http://<metrics-addr>/metrics)
// and returns its metric families by name.
func Scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// SumBy adds up the samples of a counter, gauge or untyped family by the value of one label
// ("" adds everything up under ""). For a histogram or summary it adds up the sample counts,
// and with sum set the sample sums. A missing family gives an empty map.
func SumBy(families map[string]*dto.MetricFamily, name, label string, sum bool) map[string]float64 {
	out := map[string]float64{}
	f := families[name]
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		key := ""
		if label != "" {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					key = l.GetValue()
				}
			}
		}
		var v float64
		switch {
		case m.Counter != nil:
			v = m.GetCounter().GetValue()
		case m.Gauge != nil:
			v = m.GetGauge().GetValue()
		case m.Untyped != nil:
			v = m.GetUntyped().GetValue()
		case m.Histogram != nil && sum:
			v = m.GetHistogram().GetSampleSum()
		case m.Histogram != nil:
			v = float64(m.GetHistogram().GetSampleCount())
		case m.Summary != nil && sum:
			v = m.GetSummary().GetSampleSum()
		case m.Summary != nil:
			v = float64(m.GetSummary().GetSampleCount())
		}
		out[key] += v
	}
	return out
}
