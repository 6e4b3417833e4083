package prom

import (
	"fmt"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/metricsdoc"
	"kubelb.dev/kubelb/internal/testsupport"
)

func dashboards(t *testing.T) []Query {
	t.Helper()
	files, err := DashboardFiles(testsupport.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Errorf("dashboards %v, want the manager, Envoy control plane, Envoy data plane and ccm dashboards", files)
	}
	qs, err := DashboardTargets(files...)
	if err != nil {
		t.Fatal(err)
	}
	return qs
}

func TestSubstitute(t *testing.T) {
	declared := map[string]bool{"job": true, "tenant": true, "__rate_interval": true, "__range": true}
	got, err := substitute(`sum(rate(x{job=~"$job",tenant=~"${tenant:regex}"}[$__rate_interval])) + label_replace(y, "a", "$1", "b", "(.*)") + z[$__range] + [[job]]`, declared)
	if err != nil {
		t.Fatal(err)
	}
	want := `sum(rate(x{job=~".*",tenant=~".*"}[1m])) + label_replace(y, "a", "$1", "b", "(.*)") + z[5m] + .*`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if _, err := substitute(`x{a=~"$nope"}`, declared); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("undeclared variable: err %v", err)
	}
}

func TestMetricNames(t *testing.T) {
	got := MetricNames(`histogram_quantile(0.95, sum by (le) (rate(kubelb_a_bucket{x="kubelb_not_a_metric"}[1m]))) / kubelb_b or kubelb_b`)
	if want := []string{"kubelb_a_bucket", "kubelb_b"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestDashboardsUseDeclaredMetrics: every kubelb_ series a panel reads is declared in
// internal/metrics, and every declared metric feeds at least one panel.
func TestDashboardsUseDeclaredMetrics(t *testing.T) {
	ms, err := metricsdoc.All()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]string{}
	for _, m := range ms {
		for _, s := range m.Series() {
			series[s] = m.Name
		}
	}
	used := map[string]bool{}
	for _, q := range dashboards(t) {
		for _, n := range MetricNames(q.Raw) {
			m, ok := series[n]
			if !ok {
				t.Errorf("%s reads %s, which internal/metrics does not declare", q, n)
			}
			if !strings.HasPrefix(q.Panel, "variable ") {
				used[m] = true
			}
		}
	}
	for _, m := range ms {
		if !used[m.Name] {
			t.Errorf("no dashboard panel shows %s", m.Name)
		}
	}
}

var exactVariableMatch = regexp.MustCompile(`\w+\s*(=|!=)\s*"[^"]*\$`)

// TestDashboardVariablesAreRegexMatches: multi-value variables expand to regexes (a|b, .*),
// so a label matcher with a variable must use =~.
func TestDashboardVariablesAreRegexMatches(t *testing.T) {
	for _, q := range dashboards(t) {
		if m := exactVariableMatch.FindString(q.Raw); m != "" {
			t.Errorf("%s: %q compares a variable with %s; use =~", q, m, strings.TrimSpace(m[strings.IndexAny(m, "=!"):][:1]))
		}
	}
}

// exposeAllMetrics serves every metric internal/metrics declares, each with one series, on a
// loopback HTTP server, in a registry of its own. It plays the binaries: the proof that the
// binaries themselves set these series is the e2e, which scrapes the real manager and ccm.
func exposeAllMetrics(t *testing.T) string {
	t.Helper()
	values := map[string]string{
		"namespace": "tenant-a", "tenant": "tenant-a", "result": metrics.ResultSuccess,
		"operation": "update", "type_url": "type.googleapis.com/envoy.config.listener.v3.Listener",
		"reason": "Assigned", "pool": "default", "family": "IPv4",
		"kind": "LoadBalancer", "field": "spec.ipFamilies",
		"loadbalancer": "web", "state": "unreachable", "limit": "loadBalancers",
	}
	reg := prometheus.NewRegistry()
	for _, d := range metrics.All() {
		m, err := metricsdoc.Describe(d)
		if err != nil {
			t.Fatal(err)
		}
		var lv []string
		for _, l := range m.Labels {
			v, ok := values[l]
			if !ok {
				t.Fatalf("%s: no test value for label %q", m.Name, l)
			}
			lv = append(lv, v)
		}
		switch c := d.Collector.(type) {
		case *prometheus.CounterVec:
			c.WithLabelValues(lv...).Inc()
		case *prometheus.GaugeVec:
			c.WithLabelValues(lv...).Set(1)
		case *prometheus.HistogramVec:
			c.WithLabelValues(lv...).Observe(0.01)
		case prometheus.Gauge:
			c.Set(1)
		case prometheus.Histogram:
			c.Observe(0.01)
		case prometheus.Counter:
			c.Inc()
		default:
			t.Fatalf("%s: unexpected collector %T", m.Name, c)
		}
		reg.MustRegister(d.Collector)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// recorder captures what CheckQueries reports instead of failing the test.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestDashboardQueriesOnRealPrometheus runs every dashboard query against a real Prometheus
// server that scrapes every kubelb metric: each one must be valid PromQL and return series.
// It also proves that CheckQueries catches an invalid and an empty query.
func TestDashboardQueriesOnRealPrometheus(t *testing.T) {
	qs := dashboards(t)
	addr := exposeAllMetrics(t)
	start := time.Now()
	p := Start(t, map[string][]string{"kubelb": {addr}})
	p.WaitTargetsUp(t, 30*time.Second)
	t.Logf("Prometheus ready and scraping after %s", time.Since(start).Round(time.Millisecond))
	// The data plane dashboard reads Envoy's metrics: TestDataPlaneDashboardOnRealEnvoy.
	results := CheckDashboards(t, testsupport.RepoRoot(), p.URL, CheckOptions{
		AllowEmpty: func(q Query) bool { return q.Dashboard == DataPlaneDashboard }})
	t.Logf("%d dashboard queries returned series after %s", len(qs), time.Since(start).Round(time.Millisecond))
	for i, r := range results {
		if !r.Empty() && r.Type != "vector" {
			t.Errorf("%s: result type %s, want an instant vector", qs[i], r.Type)
		}
	}

	rec := &recorder{TB: t}
	CheckQueries(rec, p.URL, []Query{
		{Dashboard: "d", Panel: "bad", Expr: `sum(rate(kubelb_manager_tenants_total[1m])`},
		{Dashboard: "d", Panel: "empty", Expr: `kubelb_no_such_metric`},
		{Dashboard: "d", Panel: "allowed", Expr: `kubelb_no_such_metric`},
		{Dashboard: "d", Panel: "good", Expr: `kubelb_manager_tenants_total`},
	}, CheckOptions{Timeout: 2 * time.Second, AllowEmpty: func(q Query) bool { return q.Panel == "allowed" }})
	if len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "2 of 4") ||
		!strings.Contains(rec.errs[0], "bad") || !strings.Contains(rec.errs[0], "bad_data") ||
		!strings.Contains(rec.errs[0], "empty") || !strings.Contains(rec.errs[0], "no series") ||
		strings.Contains(rec.errs[0], "allowed") || strings.Contains(rec.errs[0], "good") {
		t.Errorf("CheckQueries reported %q, want the bad and the empty query only", rec.errs)
	}
}
