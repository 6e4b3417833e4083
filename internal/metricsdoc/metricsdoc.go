// Package metricsdoc renders the metrics reference, docs/metrics.md, from the metrics that
// internal/metrics declares. `go test ./internal/metricsdoc -update` rewrites the file; the
// same test fails when the file is stale.
package metricsdoc

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"kubelb.dev/kubelb/internal/metrics"
)

// Metric describes one declared metric.
type Metric struct {
	Name   string
	Type   string
	Labels []string
	Help   string
	Binary string
}

// Series are the names of the series Prometheus stores for the metric (a histogram has
// _bucket, _sum and _count).
func (m Metric) Series() []string {
	if m.Type == "histogram" {
		return []string{m.Name + "_bucket", m.Name + "_sum", m.Name + "_count"}
	}
	return []string{m.Name}
}

var descString = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), .*variableLabels: \{([^}]*)\}\}$`)

// Describe reads name, help and labels from a collector's descriptor and its type from its Go
// type.
func Describe(d metrics.Declared) (Metric, error) {
	ch := make(chan *prometheus.Desc, 4)
	d.Collector.Describe(ch)
	close(ch)
	var descs []*prometheus.Desc
	for desc := range ch {
		descs = append(descs, desc)
	}
	if len(descs) != 1 {
		return Metric{}, fmt.Errorf("collector %T describes %d metrics, want 1", d.Collector, len(descs))
	}
	s := descs[0].String()
	m := descString.FindStringSubmatch(s)
	if m == nil {
		return Metric{}, fmt.Errorf("cannot parse descriptor %s", s)
	}
	name, err := strconv.Unquote(m[1])
	if err != nil {
		return Metric{}, err
	}
	help, err := strconv.Unquote(m[2])
	if err != nil {
		return Metric{}, err
	}
	var labels []string
	for l := range strings.SplitSeq(m[3], ",") {
		if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
			labels = append(labels, l)
		}
	}
	typ, err := typeOf(d.Collector)
	if err != nil {
		return Metric{}, fmt.Errorf("%s: %w", name, err)
	}
	return Metric{Name: name, Type: typ, Labels: labels, Help: help, Binary: d.Binary}, nil
}

func typeOf(c prometheus.Collector) (string, error) {
	switch c.(type) {
	case *prometheus.CounterVec:
		return "counter", nil
	case *prometheus.GaugeVec:
		return "gauge", nil
	case *prometheus.HistogramVec:
		return "histogram", nil
	case *prometheus.SummaryVec:
		return "summary", nil
	case prometheus.Gauge: // before Counter: a Gauge has Inc and Add too
		return "gauge", nil
	case prometheus.Histogram:
		return "histogram", nil
	case prometheus.Counter:
		return "counter", nil
	}
	return "", fmt.Errorf("unknown collector type %T", c)
}

// All describes every metric of metrics.All().
func All() ([]Metric, error) {
	var out []Metric
	for _, d := range metrics.All() {
		m, err := Describe(d)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// Binaries and where they serve metrics, in the order of the reference.
var binaries = []struct{ name, title, port string }{
	{metrics.BinaryManager, "Manager (`kubelb`, management cluster)", "9443"},
	{metrics.BinaryCCM, "ccm (`ccm`, tenant clusters)", "9445"},
}

// Render writes the metrics reference. panels maps a metric name to the dashboard panels that
// query it ("Dashboard › Panel").
func Render(ms []Metric, panels map[string][]string) []byte {
	var b bytes.Buffer
	b.WriteString(`# Metrics reference

<!-- Generated from internal/metrics by internal/metricsdoc; do not edit.
     Regenerate with: go test ./internal/metricsdoc -update -->

Both binaries serve Prometheus metrics over plain HTTP at ` + "`/metrics`" + ` on ` + "`--metrics-addr`" + `
(manager ` + "`:9443`" + `, ccm ` + "`:9445`" + `; ` + "`0`" + ` turns the endpoint off). The Helm charts expose that port on
their Service and can create a Prometheus Operator ` + "`ServiceMonitor`" + ` (` + "`serviceMonitor.enabled`" + `), the
Grafana dashboards (` + "`grafanaDashboards.enabled`" + `) and a ` + "`PrometheusRule`" + ` with the alerts of
` + "`files/alerts.yaml`" + ` (` + "`prometheusRule.enabled`" + `; what each alert means: [operations.md](operations.md#alerts)). Next to the metrics below, both serve
controller-runtime's own (` + "`controller_runtime_reconcile_*`" + `, ` + "`workqueue_*`" + `, ` + "`rest_client_*`" + `,
` + "`leader_election_master_status`" + `) and the Go and process collectors. The ` + "`workqueue_*`" + ` series
of the manager's LoadBalancer, Route and SyncSecret controllers (and of the ` + "`ownerrefs-*`" + `
controllers) describe their fair queue's round robin (` + "`fairqueue.New`" + `): ` + "`workqueue_depth`" + `
counts the tenant namespaces with requests waiting, not the requests, and retries are not
counted in ` + "`workqueue_retries_total`" + `.

The tenants' Envoy proxies serve Envoy's own metrics (` + "`envoy_*`" + `, not listed here) on their stats
listener, port 9904, path ` + "`/stats/prometheus`" + ` only; the manager chart's PodMonitor
(` + "`config.envoyProxy.podMonitor.enabled`" + `) scrapes them with a ` + "`tenant`" + ` label, and the *kubelb / Envoy
data plane* dashboard shows them ([operations.md](operations.md#envoy-data-plane-metrics)).

Conventions: reconcile counters carry ` + "`result`" + ` (` + "`success`" + `, ` + "`error`" + ` or ` + "`skipped`" + `) and, for namespaced
objects, ` + "`namespace`" + `; durations are histograms in seconds (buckets from 0.5 ms doubling to about 16 s);
gauges that only the leader sets read 0 on other replicas, so dashboards aggregate them with ` + "`max`" + `.
The manager's series labelled by tenant (` + "`tenant`" + `, and ` + "`namespace`" + ` of its per-tenant controllers'
reconciles) exist only for Tenants that exist: other label values are dropped, and a removed Tenant's
series are deleted.

Only metrics that a controller actually updates are declared (a test checks it); the last column
names the dashboard panels that read each one.
`)
	for _, bin := range binaries {
		fmt.Fprintf(&b, "\n## %s\n\n", bin.title)
		b.WriteString("| Metric | Type | Labels | Description | Dashboard panels |\n")
		b.WriteString("|---|---|---|---|---|\n")
		for _, m := range ms {
			if m.Binary != bin.name {
				continue
			}
			labels := "—"
			if len(m.Labels) > 0 {
				labels = "`" + strings.Join(m.Labels, "`, `") + "`"
			}
			ps := slices.Clone(panels[m.Name])
			slices.Sort(ps)
			used := "—"
			if len(ps) > 0 {
				used = strings.Join(ps, "<br>")
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", m.Name, m.Type, labels, cell(m.Help), cell(used))
		}
	}
	return b.Bytes()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
