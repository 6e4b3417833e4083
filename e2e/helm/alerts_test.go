package helm

import (
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/e2e/prom"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/metricsdoc"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// alertCharts are the charts that ship alert rules (files/alerts.yaml), with the binary whose
// metrics they read and their promtool unit tests.
var alertCharts = []struct{ chart, binary, tests string }{
	{ManagerChart, metrics.BinaryManager, "alerts-manager.test.yaml"},
	{CCMChart, metrics.BinaryCCM, "alerts-ccm.test.yaml"},
}

// managerLease is the name of the manager's leader-election Lease (cmd/kubelb).
const managerLease = "kubelb-manager.kubelb.k8c.io"

// externalMetrics are the metrics the alerts read that are not kubelb's own (not in
// internal/metrics), with their labels. TestManagerAlertsOnRealPrometheus proves that the real
// binaries export them.
var externalMetrics = map[string]map[string][]string{
	metrics.BinaryManager: {"leader_election_master_status": {"name"}},
}

func alertsFile(chart string) string { return filepath.Join(ChartDir(chart), "files", "alerts.yaml") }

type ruleFile struct {
	Groups []struct {
		Name  string     `json:"name"`
		Rules []ruleSpec `json:"rules"`
	} `json:"groups"`
}

type ruleSpec struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func readRules(t *testing.T, path string) ruleFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f
}

func alertRules(f ruleFile) []ruleSpec {
	var out []ruleSpec
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// promtool is the path of Prometheus' promtool: $KUBELB_PROMTOOL, else promtool on $PATH
// (Debian's prometheus package has it; `make tools` installs it).
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KUBELB_PROMTOOL"); p != "" {
		return p
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found on $PATH: run `make tools` (hack/tools.sh prometheus installs Debian's package) or set KUBELB_PROMTOOL")
	}
	return p
}

// TestAlertRulesUnderPromtool: both rule files are valid Prometheus rule files (`promtool
// check rules`), and their promtool unit tests pass (`promtool test rules`): fed with series
// as the binaries export them, each alert fires when its condition holds for its `for`, with
// its labels and rendered annotations, and stays quiet on a healthy system. Every alert has
// a test in which it fires.
func TestAlertRulesUnderPromtool(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	for _, c := range alertCharts {
		t.Run(c.chart, func(t *testing.T) {
			out, err := exec.Command(bin, "check", "rules", alertsFile(c.chart)).CombinedOutput()
			if err != nil {
				t.Fatalf("promtool check rules %s: %v\n%s", alertsFile(c.chart), err, out)
			}
			tests := filepath.Join(testsupport.RepoRoot(), "e2e", "helm", "testdata", c.tests)
			cmd := exec.Command(bin, "test", "rules", filepath.Base(tests))
			cmd.Dir = filepath.Dir(tests)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("promtool test rules %s: %v\n%s", tests, err, out)
			}

			b, err := os.ReadFile(tests)
			if err != nil {
				t.Fatal(err)
			}
			var unit struct {
				Tests []struct {
					AlertRuleTest []struct {
						Alertname string `json:"alertname"`
						ExpAlerts []any  `json:"exp_alerts"`
					} `json:"alert_rule_test"`
				} `json:"tests"`
			}
			if err := yaml.Unmarshal(b, &unit); err != nil {
				t.Fatal(err)
			}
			fires := map[string]bool{}
			for _, tc := range unit.Tests {
				for _, a := range tc.AlertRuleTest {
					if len(a.ExpAlerts) > 0 {
						fires[a.Alertname] = true
					}
				}
			}
			for _, r := range alertRules(readRules(t, alertsFile(c.chart))) {
				if !fires[r.Alert] {
					t.Errorf("no test of %s makes %s fire", c.tests, r.Alert)
				}
			}
		})
	}
}

// selector is a metric an expression reads and the labels its matchers name.
type selector struct {
	metric string
	labels []string
}

var (
	quotedString = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	token        = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*|[0-9][0-9.]*[a-z]*|=~|!~|!=|==|>=|<=|""|\S`)
	// label_replace(v, "dst", "replacement", "src", "regex"): the label it adds.
	labelReplaceDst = regexp.MustCompile(`"([A-Za-z_][A-Za-z0-9_]*)"\s*,\s*"[^"]*"\s*,\s*"[^"]*"\s*,\s*"[^"]*"\s*\)`)
	templateLabel   = regexp.MustCompile(`\$labels\.([A-Za-z_][A-Za-z0-9_]*)`)
	identifier      = regexp.MustCompile(`^[A-Za-z_:]`)
)

// promqlKeywords are PromQL's keywords and aggregation operators (which may be followed by
// "by" or "without" instead of "(").
var promqlKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right",
	"and", "or", "unless", "bool", "offset", "inf", "nan", "sum", "min", "max", "avg", "group",
	"stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile"}

// parseExpr reads the selectors of a PromQL expression, the labels of its by/without/on/
// ignoring clauses and the labels label_replace adds. It knows enough PromQL for the rules
// kubelb ships: a selector is a name not followed by "(", with optional {matchers}.
func parseExpr(expr string) (sels []selector, grouping, added []string) {
	for _, m := range labelReplaceDst.FindAllStringSubmatch(expr, -1) {
		added = append(added, m[1])
	}
	toks := token.FindAllString(quotedString.ReplaceAllString(expr, `""`), -1)
	isIdent := identifier.MatchString
	next := func(i int) string {
		if i+1 < len(toks) {
			return toks[i+1]
		}
		return ""
	}
	for i := 0; i < len(toks); i++ {
		tok := toks[i]
		if !isIdent(tok) {
			continue
		}
		switch {
		case slices.Contains([]string{"by", "without", "on", "ignoring", "group_left", "group_right"}, tok) && next(i) == "(":
			for i += 2; i < len(toks) && toks[i] != ")"; i++ {
				if isIdent(toks[i]) {
					grouping = append(grouping, toks[i])
				}
			}
		case next(i) == "(" || slices.Contains(promqlKeywords, strings.ToLower(tok)):
			// a function or aggregation, or a keyword
		default:
			s := selector{metric: tok}
			if next(i) == "{" {
				for i += 2; i < len(toks) && toks[i] != "}"; i++ {
					if isIdent(toks[i]) && slices.Contains([]string{"=", "!=", "=~", "!~"}, next(i)) {
						s.labels = append(s.labels, toks[i])
					}
				}
			}
			sels = append(sels, s)
		}
	}
	return sels, grouping, added
}

// checkRule returns what is wrong with the metrics and labels a rule uses: every metric must
// be one the binary exports (series: metric name → labels), every label of a matcher one of
// that metric, every label of a grouping clause or an annotation one the expression has.
func checkRule(r ruleSpec, series map[string][]string) []string {
	var problems []string
	sels, grouping, added := parseExpr(r.Expr)
	if len(sels) == 0 {
		problems = append(problems, "reads no metric")
	}
	have := slices.Clone(added)
	for _, s := range sels {
		labels, ok := series[s.metric]
		if !ok {
			problems = append(problems, fmt.Sprintf("reads %s, which the binary does not export", s.metric))
			continue
		}
		have = append(have, labels...)
		for _, l := range s.labels {
			if !slices.Contains(labels, l) {
				problems = append(problems, fmt.Sprintf("matches label %q of %s, which has only %v", l, s.metric, labels))
			}
		}
	}
	for _, l := range grouping {
		if !slices.Contains(have, l) {
			problems = append(problems, fmt.Sprintf("groups by %q, a label none of its metrics has (%v)", l, have))
		}
	}
	// Prometheus adds instance and job to every scraped series.
	have = append(have, "instance", "job")
	for _, text := range r.Annotations {
		for _, m := range templateLabel.FindAllStringSubmatch(text, -1) {
			if !slices.Contains(have, m[1]) {
				problems = append(problems, fmt.Sprintf("an annotation reads $labels.%s, a label none of its metrics has", m[1]))
			}
		}
	}
	return problems
}

// exportedSeries maps every series name a binary exports (declared in internal/metrics, plus
// externalMetrics) to its labels.
func exportedSeries(t *testing.T, binary string) map[string][]string {
	t.Helper()
	ms, err := metricsdoc.All()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, m := range ms {
		if m.Binary != binary {
			continue
		}
		for _, s := range m.Series() {
			out[s] = m.Labels
			if strings.HasSuffix(s, "_bucket") {
				out[s] = append(slices.Clone(m.Labels), "le")
			}
		}
	}
	for name, labels := range externalMetrics[binary] {
		out[name] = labels
	}
	return out
}

// TestAlertRulesUseExportedMetrics: every metric an alert of a chart reads is one its binary
// exports (internal/metrics, as docs/metrics.md lists them), with the labels the alert
// matches and groups by; a renamed metric or label fails it.
func TestAlertRulesUseExportedMetrics(t *testing.T) {
	t.Parallel()
	for _, c := range alertCharts {
		series := exportedSeries(t, c.binary)
		rules := alertRules(readRules(t, alertsFile(c.chart)))
		if len(rules) == 0 {
			t.Errorf("%s has no alerts", alertsFile(c.chart))
		}
		for _, r := range rules {
			for _, p := range checkRule(r, series) {
				t.Errorf("%s alert %s %s", c.chart, r.Alert, p)
			}
		}
	}

	// The check itself: a renamed metric, a label the metric lacks, grouping by a label
	// nothing has, and an annotation reading such a label are all caught.
	series := exportedSeries(t, metrics.BinaryManager)
	for _, bad := range []ruleSpec{
		{Expr: `max(kubelb_manager_tenant_total) > 0`},
		{Expr: `sum by (tenant) (rate(kubelb_manager_envoycp_nack_total[5m])) > 0`},
		{Expr: `max(leader_election_master_status{lease="x"}) < 1`},
		{Expr: `sum by (tenant_name) (kubelb_manager_envoycp_connected_proxies) < 1`},
		{Expr: `kubelb_manager_ports_free < 1`, Annotations: map[string]string{"summary": "{{ $labels.tenant }}"}},
		{Expr: `kubelb_ccm_kubelb_cluster_connected == 0`},
	} {
		if p := checkRule(bad, series); len(p) == 0 {
			t.Errorf("checkRule accepts %q", bad.Expr)
		}
	}
	good := ruleSpec{Expr: `sum by (controller, namespace) (label_replace(rate(kubelb_manager_route_reconcile_total{result="error"}[5m]), "controller", "route", "", "")) > 0`,
		Annotations: map[string]string{"summary": "{{ $labels.controller }} {{ $labels.namespace }}"}}
	if p := checkRule(good, series); len(p) != 0 {
		t.Errorf("checkRule refuses %q: %v", good.Expr, p)
	}
}

// TestAlertRulesDocumented: every alert has a severity, a summary, a description and a
// runbook_url pointing at its own section of docs/operations.md, which exists.
func TestAlertRulesDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join(testsupport.RepoRoot(), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range alertCharts {
		for _, r := range alertRules(readRules(t, alertsFile(c.chart))) {
			if seen[r.Alert] {
				t.Errorf("alert %s is defined twice", r.Alert)
			}
			seen[r.Alert] = true
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s lacks a summary or a description", r.Alert)
			}
			want := "https://github.com/kubelb/kubelb/blob/main/docs/operations.md#" + strings.ToLower(r.Alert)
			if r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
			if !regexp.MustCompile(`(?m)^#+ ` + r.Alert + `$`).Match(doc) {
				t.Errorf("docs/operations.md has no section %q (the runbook of the alert)", r.Alert)
			}
		}
	}
}

// prometheusRules returns the PrometheusRules among objs.
func prometheusRules(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "PrometheusRule" {
			out = append(out, o)
		}
	}
	return out
}

// renderedAlerts returns the alert names of a rendered PrometheusRule, and checks that its
// groups are the rule file's with only the alerts left out that are not in want.
func renderedAlerts(t *testing.T, chart string, pr *unstructured.Unstructured) []string {
	t.Helper()
	if pr.GetAPIVersion() != "monitoring.coreos.com/v1" || pr.GetNamespace() != ns {
		t.Errorf("PrometheusRule %s %s/%s", pr.GetAPIVersion(), pr.GetNamespace(), pr.GetName())
	}
	b, err := yaml.Marshal(pr.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	var got ruleFile
	if err := yaml.UnmarshalStrict(b, &got); err != nil {
		t.Fatalf("PrometheusRule spec: %v", err)
	}
	file := readRules(t, alertsFile(chart))
	var names []string
	for i, g := range got.Groups {
		if i >= len(file.Groups) || g.Name != file.Groups[i].Name {
			t.Errorf("PrometheusRule group %d is %q, not the file's", i, g.Name)
			continue
		}
		var kept []ruleSpec
		for _, r := range file.Groups[i].Rules {
			if slices.ContainsFunc(g.Rules, func(x ruleSpec) bool { return x.Alert == r.Alert }) {
				kept = append(kept, r)
			}
		}
		if jsonString(g.Rules) != jsonString(kept) {
			t.Errorf("PrometheusRule group %s:\n%s\nwant the file's rules:\n%s", g.Name, jsonString(g.Rules), jsonString(kept))
		}
		for _, r := range g.Rules {
			names = append(names, r.Alert)
		}
	}
	return names
}

// TestPrometheusRuleTemplate: each chart renders a PrometheusRule only with
// prometheusRule.enabled, holding exactly the groups and rules of its files/alerts.yaml, with
// the extra labels; disabledAlerts leaves alerts out and refuses an unknown name; the manager
// chart leaves out the alerts that cannot hold (one replica, no leader election).
func TestPrometheusRuleTemplate(t *testing.T) {
	t.Parallel()
	all := func(chart string) []string {
		var out []string
		for _, r := range alertRules(readRules(t, alertsFile(chart))) {
			out = append(out, r.Alert)
		}
		return out
	}
	without := func(chart string, names ...string) []string {
		return slices.DeleteFunc(all(chart), func(n string) bool { return slices.Contains(names, n) })
	}
	for _, tc := range []struct {
		name  string
		chart string
		args  []string
		want  []string // nil: no PrometheusRule
	}{
		{"manager/defaults", ManagerChart, nil, nil},
		{"manager/enabled", ManagerChart, []string{"--set", "prometheusRule.enabled=true"}, without(ManagerChart, "KubeLBAddressPoolExhausted")},
		{"manager/address pools", ManagerChart, []string{"--set", "prometheusRule.enabled=true", "--set", "addressProvider.type=ipam"}, all(ManagerChart)},
		{"manager/one replica, no leader election", ManagerChart, []string{"--set", "prometheusRule.enabled=true", "--set", "replicaCount=1", "--set", "leaderElection.enabled=false"},
			without(ManagerChart, "KubeLBManagerReplicasMissing", "KubeLBManagerNoLeader", "KubeLBAddressPoolExhausted")},
		{"manager/disabledAlerts", ManagerChart, []string{"--set", "prometheusRule.enabled=true", "--set", "prometheusRule.disabledAlerts={KubeLBListenerPortsNearlyExhausted,KubeLBManagerDown}"},
			without(ManagerChart, "KubeLBListenerPortsNearlyExhausted", "KubeLBManagerDown", "KubeLBAddressPoolExhausted")},
		{"manager/full", ManagerChart, []string{"-f", FullValues(ManagerChart)}, without(ManagerChart, "KubeLBListenerPortsNearlyExhausted", "KubeLBAddressPoolExhausted")},
		{"ccm/defaults", CCMChart, minimalCCM, nil},
		{"ccm/enabled", CCMChart, append([]string{"--set", "prometheusRule.enabled=true"}, minimalCCM...), without(CCMChart, "KubeLBCCMAddressPoolExhausted")},
		{"ccm/standalone address pools", CCMChart, []string{"--set", "mode=standalone", "--set", "standalone.addressProvider=ipam", "--set", "prometheusRule.enabled=true"},
			without(CCMChart, "KubeLBCCMHubUnreachable")},
		{"ccm/every alert disabled", CCMChart, append([]string{"--set", "prometheusRule.enabled=true", "--set", "prometheusRule.disabledAlerts={KubeLBCCMDown,KubeLBCCMHubUnreachable,KubeLBCCMReconcileErrors}"}, minimalCCM...), nil},
		{"ccm/full", CCMChart, []string{"-f", FullValues(CCMChart)}, without(CCMChart, "KubeLBCCMReconcileErrors", "KubeLBCCMAddressPoolExhausted")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prs := prometheusRules(Template(t, tc.chart, tc.chart, ns, tc.args...))
			if tc.want == nil {
				if len(prs) != 0 {
					t.Fatalf("%d PrometheusRules, want none", len(prs))
				}
				return
			}
			if len(prs) != 1 {
				t.Fatalf("%d PrometheusRules, want 1", len(prs))
			}
			if got := renderedAlerts(t, tc.chart, prs[0]); !slices.Equal(got, tc.want) {
				t.Errorf("alerts %v, want %v", got, tc.want)
			}
			if strings.HasSuffix(tc.name, "/full") && prs[0].GetLabels()["release"] != "prometheus" {
				t.Errorf("labels %v, want prometheusRule.labels' release: prometheus", prs[0].GetLabels())
			}
		})
	}

	for _, c := range alertCharts {
		args := []string{"template", c.chart, ChartDir(c.chart), "--set", "prometheusRule.enabled=true", "--set", "prometheusRule.disabledAlerts={KubeLBNoSuchAlert}"}
		if c.chart == CCMChart {
			args = append(args, minimalCCM...)
		}
		if _, err := Run(t, args...); err == nil || !strings.Contains(err.Error(), `there is no alert "KubeLBNoSuchAlert"`) {
			t.Errorf("%s with an unknown alert in disabledAlerts: %v, want an error naming it", c.chart, err)
		}
	}
}

// waitRulesHealthy waits until Prometheus has loaded and evaluated, without error, exactly the
// alerts of the charts' rule files.
func waitRulesHealthy(t *testing.T, p *prom.Server, charts ...string) {
	t.Helper()
	var names []string
	for _, c := range charts {
		for _, r := range alertRules(readRules(t, alertsFile(c))) {
			names = append(names, r.Alert)
		}
	}
	slices.Sort(names)
	testsupport.Eventually(t, time.Minute, "every alert rule to be loaded and evaluated without error", func() error {
		groups, err := p.Rules(t.Context())
		if err != nil {
			return err
		}
		var loaded []string
		for _, g := range groups {
			for _, r := range g.Rules {
				if r.Health != "ok" {
					return fmt.Errorf("rule %s of group %s: health %q %s", r.Name, g.Name, r.Health, r.LastError)
				}
				loaded = append(loaded, r.Name)
			}
		}
		slices.Sort(loaded)
		if !slices.Equal(loaded, names) {
			return fmt.Errorf("rules %v loaded, want %v", loaded, names)
		}
		return nil
	})
}

// waitActiveAlerts waits until the active alerts of Prometheus (name → pending or firing)
// are exactly want, give or take the alerts named in mayBe.
func waitActiveAlerts(t *testing.T, p *prom.Server, timeout time.Duration, what string, want map[string]string, mayBe ...string) {
	t.Helper()
	testsupport.Eventually(t, timeout, what, func() error {
		alerts, err := p.Alerts(t.Context())
		if err != nil {
			return err
		}
		got := map[string]string{}
		for _, a := range alerts {
			if _, wanted := want[a.Name()]; wanted || !slices.Contains(mayBe, a.Name()) {
				got[a.Name()] = a.State
			}
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("active alerts %v, want %v", got, want)
		}
		return nil
	})
}

// TestManagerAlertsOnRealPrometheus: a real Prometheus loads the manager chart's rule file as
// it is (rule_files) and scrapes a real manager, run against a real API server while another
// identity holds its leader Lease. Every rule evaluates without error and the metrics the
// alerts read that are not kubelb's own are really exported. Before the manager runs,
// KubeLBManagerDown is pending; with the manager standing by, KubeLBManagerNoLeader and
// KubeLBManagerReplicasMissing (one replica) are; once the foreign Lease is gone the manager
// leads and KubeLBManagerNoLeader clears.
func TestManagerAlertsOnRealPrometheus(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	hub := testenv.Start(t, "hub", testenv.Options{})
	if err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	now := metav1.NewMicroTime(time.Now())
	foreign := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: managerLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("another-manager"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now},
	}
	if err := hub.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	bin := testsupport.BuildBinary(t, "./cmd/kubelb")

	metricsAddr := testsupport.Loopback(testsupport.FreePort(t))
	p := prom.StartWithRules(t, map[string][]string{"kubelb": {metricsAddr}}, alertsFile(ManagerChart))
	waitRulesHealthy(t, p, ManagerChart)
	waitActiveAlerts(t, p, time.Minute, "KubeLBManagerDown to be pending before the manager runs",
		map[string]string{"KubeLBManagerDown": "pending"})

	probeAddr := testsupport.Loopback(testsupport.FreePort(t))
	proc := testsupport.StartProcess(t, "kubelb", bin,
		"--kubeconfig", hub.Kubeconfig, "--namespace", ns,
		"--metrics-addr", metricsAddr, "--health-probe-bind-address", probeAddr,
		"--listen-address", testsupport.Loopback(testsupport.FreePort(t)))
	testsupport.WaitHTTP200(t, proc, "http://"+probeAddr+"/readyz", time.Minute)
	p.WaitTargetsUp(t, time.Minute)

	// The metrics the alerts read from outside internal/metrics, as the binary exports them.
	// Leader election registers its series once it starts, which can be after the first
	// scrape: wait for a scrape that has them.
	testsupport.Eventually(t, time.Minute, "the manager's leader election and other external series in Prometheus", func() error {
		for name, labels := range externalMetrics[metrics.BinaryManager] {
			q := fmt.Sprintf(`count by (%s) (%s)`, strings.Join(labels, ", "), name)
			r, err := prom.InstantQuery(ctx, p.URL, q)
			if err != nil || r.Empty() {
				return fmt.Errorf("%s: %v %+v, want the series the manager exports", q, err, r)
			}
		}
		r, err := prom.InstantQuery(ctx, p.URL, fmt.Sprintf(`leader_election_master_status{name=%q}`, managerLease))
		if err != nil || len(r.Series) != 1 || r.Series[0].Value[1] != "0" {
			return fmt.Errorf("leader_election_master_status of the standby: %v %+v, want 0", err, r)
		}
		return nil
	})
	waitActiveAlerts(t, p, time.Minute, "KubeLBManagerNoLeader and KubeLBManagerReplicasMissing to be pending",
		map[string]string{"KubeLBManagerNoLeader": "pending", "KubeLBManagerReplicasMissing": "pending"})

	if err := hub.Client.Delete(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	hub.WaitLeaseHolder(t, ns, managerLease, time.Minute)
	waitActiveAlerts(t, p, time.Minute, "KubeLBManagerNoLeader to clear once the manager leads",
		map[string]string{"KubeLBManagerReplicasMissing": "pending"})
}

// link forwards TCP connections from a loopback port to an upstream address until it is cut:
// then it refuses new connections and closes the open ones, as a partition would.
type link struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startLink(t *testing.T, upstream string) *link {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	k := &link{l: l}
	t.Cleanup(k.cut)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				_ = c.Close()
				continue
			}
			k.mu.Lock()
			k.conns = append(k.conns, c, u)
			k.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); _ = u.Close() }()
			go func() { _, _ = io.Copy(c, u); _ = c.Close() }()
		}
	}()
	return k
}

func (k *link) addr() string { return k.l.Addr().String() }

func (k *link) cut() {
	_ = k.l.Close()
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.conns {
		_ = c.Close()
	}
	k.conns = nil
}

// TestCCMAlertsOnRealPrometheus: a real Prometheus loads the ccm chart's rule file as it is
// and scrapes a real ccm whose hub API server it reaches through a link the test can cut.
// Every rule evaluates without error. A ccm started without a reachable hub exits, and
// KubeLBCCMDown is pending; with a ccm connected to the hub no alert is active; once its link
// to the hub is cut, its next hub request fails and KubeLBCCMHubUnreachable is pending.
func TestCCMAlertsOnRealPrometheus(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	start := time.Now()
	pair := testenv.StartPair(t)
	t.Logf("API servers up after %s", time.Since(start).Round(time.Millisecond))
	cfg, err := clientcmd.LoadFromFile(pair.Hub.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	hubURL, err := url.Parse(pair.Hub.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	toHub := startLink(t, hubURL.Host)
	for _, c := range cfg.Clusters {
		c.Server = "https://" + toHub.addr()
	}
	hubKubeconfig := filepath.Join(t.TempDir(), "hub.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, hubKubeconfig); err != nil {
		t.Fatal(err)
	}
	bin := testsupport.BuildBinary(t, "./cmd/ccm")

	metricsAddr := testsupport.Loopback(testsupport.FreePort(t))
	p := prom.StartWithRules(t, map[string][]string{"ccm": {metricsAddr}}, alertsFile(CCMChart))
	waitRulesHealthy(t, p, CCMChart)

	// A ccm that cannot reach the hub when it starts exits: it is not scraped (KubeLBCCMDown)
	// rather than reporting kubelb_ccm_kubelb_cluster_connected 0.
	for _, c := range cfg.Clusters {
		c.Server = "https://" + testsupport.Loopback(testsupport.FreePort(t)) // nothing listens there
	}
	nowhere := filepath.Join(t.TempDir(), "nowhere.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, nowhere); err != nil {
		t.Fatal(err)
	}
	cutOff := testsupport.StartProcess(t, "ccm-cut-off", bin,
		"--kubeconfig", pair.Tenant.Kubeconfig, "--kubelb-kubeconfig", nowhere,
		"--cluster-name", "shop", "--leader-election-namespace", "kube-system",
		"--metrics-addr", metricsAddr, "--health-probe-bind-address", testsupport.Loopback(testsupport.FreePort(t)))
	testsupport.Eventually(t, time.Minute, "a ccm without a hub to exit", func() error {
		if !cutOff.Exited() {
			return fmt.Errorf("still running")
		}
		return nil
	})
	if out := cutOff.Output(); !strings.Contains(out, "connection refused") {
		t.Errorf("the ccm without a hub exited without naming the refused connection:\n%s", out)
	}
	waitActiveAlerts(t, p, time.Minute, "KubeLBCCMDown to be pending while no ccm runs",
		map[string]string{"KubeLBCCMDown": "pending"})
	t.Logf("KubeLBCCMDown pending after %s", time.Since(start).Round(time.Millisecond))

	probeAddr := testsupport.Loopback(testsupport.FreePort(t))
	proc := testsupport.StartProcess(t, "ccm", bin,
		"--kubeconfig", pair.Tenant.Kubeconfig, "--kubelb-kubeconfig", hubKubeconfig,
		"--cluster-name", "shop", "--leader-election-namespace", "kube-system",
		"--metrics-addr", metricsAddr, "--health-probe-bind-address", probeAddr)
	testsupport.WaitHTTP200(t, proc, "http://"+probeAddr+"/readyz", time.Minute)
	p.WaitTargetsUp(t, time.Minute)
	testsupport.Eventually(t, time.Minute, "the ccm to report the hub connected", func() error {
		r, err := prom.InstantQuery(ctx, p.URL, "kubelb_ccm_kubelb_cluster_connected")
		if err != nil {
			return err
		}
		if len(r.Series) != 1 || r.Series[0].Value[1] != "1" {
			return fmt.Errorf("kubelb_ccm_kubelb_cluster_connected %+v, want one series at 1", r.Series)
		}
		return nil
	})
	waitActiveAlerts(t, p, time.Minute, "no alert with the ccm connected", map[string]string{})
	t.Logf("ccm connected, no alert, after %s", time.Since(start).Round(time.Millisecond))

	toHub.cut()
	cut := time.Now()
	// A tenant change the ccm must write to the hub finds it unreachable at once; without one
	// the ccm's probe (every 30 s) does.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	if err := pair.Tenant.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	// The ccm's failed writes are reconcile errors too (KubeLBCCMReconcileErrors may be pending).
	waitActiveAlerts(t, p, time.Minute, "KubeLBCCMHubUnreachable to be pending once the hub is cut off",
		map[string]string{"KubeLBCCMHubUnreachable": "pending"}, "KubeLBCCMReconcileErrors")
	t.Logf("KubeLBCCMHubUnreachable pending %s after the hub was cut off", time.Since(cut).Round(time.Millisecond))
}
