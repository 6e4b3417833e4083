package metricsdoc

import (
	"errors"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"kubelb.dev/kubelb/e2e/prom"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/testsupport"
)

var update = flag.Bool("update", false, "rewrite docs/metrics.md")

const metricsPkg = "kubelb.dev/kubelb/internal/metrics"

// TestReferenceUpToDate fails when docs/metrics.md differs from what the code declares and the
// dashboards query.
func TestReferenceUpToDate(t *testing.T) {
	ms, err := All()
	if err != nil {
		t.Fatal(err)
	}
	got := Render(ms, dashboardPanels(t, ms))
	testsupport.GeneratedFile(t, filepath.Join("docs", "metrics.md"), got, *update, "go test ./internal/metricsdoc -update")
}

// dashboardPanels maps each metric to the dashboard panels whose queries read it.
func dashboardPanels(t *testing.T, ms []Metric) map[string][]string {
	t.Helper()
	files, err := prom.DashboardFiles(testsupport.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	qs, err := prom.DashboardTargets(files...)
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]string{}
	for _, m := range ms {
		for _, s := range m.Series() {
			series[s] = m.Name
		}
	}
	out := map[string][]string{}
	for _, q := range qs {
		if strings.HasPrefix(q.Panel, "variable ") {
			continue
		}
		for _, n := range prom.MetricNames(q.Raw) {
			p := q.Dashboard + " › " + q.Panel
			if m, ok := series[n]; ok && !slices.Contains(out[m], p) {
				out[m] = append(out[m], p)
			}
		}
	}
	return out
}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		c    prometheus.Collector
		want Metric
	}{
		{prometheus.NewGauge(prometheus.GaugeOpts{Name: "a_b", Help: `say "hi" | bye`}),
			Metric{Name: "a_b", Type: "gauge", Help: `say "hi" | bye`, Binary: "x"}},
		{prometheus.NewCounter(prometheus.CounterOpts{Name: "c_total", Help: "h"}),
			Metric{Name: "c_total", Type: "counter", Help: "h", Binary: "x"}},
		{prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "d_seconds", Help: "h"}, []string{"tenant", "le2"}),
			Metric{Name: "d_seconds", Type: "histogram", Labels: []string{"tenant", "le2"}, Help: "h", Binary: "x"}},
		{prometheus.NewCounterVec(prometheus.CounterOpts{Name: "e_total", Help: "h"}, []string{"result"}),
			Metric{Name: "e_total", Type: "counter", Labels: []string{"result"}, Help: "h", Binary: "x"}},
	} {
		got, err := Describe(metrics.Declared{Binary: "x", Collector: tc.c})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("Describe (-want +got):\n%s", d)
		}
	}
}

// declaredVars parses internal/metrics and returns each package-level variable that holds
// metrics, with the metric names it declares.
func declaredVars(t *testing.T) map[string][]string {
	t.Helper()
	dir := filepath.Join(testsupport.RepoRoot(), "internal", "metrics")
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						if names := metricNamesIn(vs.Values[i]); len(names) > 0 {
							out[name.Name] = names
						}
					}
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("found no metric declarations in internal/metrics")
	}
	return out
}

// metricNamesIn finds Name: "..." in prometheus option literals, newReconcile("prefix", ...)
// and newAddressProvider("prefix", reconcile, served, pools).
func metricNamesIn(e ast.Expr) []string {
	var names []string
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.KeyValueExpr:
			if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Name" {
				if v, ok := n.Value.(*ast.BasicLit); ok && v.Kind == token.STRING {
					s, _ := strconv.Unquote(v.Value)
					names = append(names, s)
				}
			}
		case *ast.CallExpr:
			if f, ok := n.Fun.(*ast.Ident); ok && f.Name == "newReconcile" && len(n.Args) > 0 {
				if v, ok := n.Args[0].(*ast.BasicLit); ok && v.Kind == token.STRING {
					s, _ := strconv.Unquote(v.Value)
					names = append(names, s+"_reconcile_total", s+"_reconcile_duration_seconds")
				}
			}
			if f, ok := n.Fun.(*ast.Ident); ok && f.Name == "newAddressProvider" && len(n.Args) == 4 {
				if v, ok := n.Args[0].(*ast.BasicLit); ok && v.Kind == token.STRING {
					s, _ := strconv.Unquote(v.Value)
					names = append(names, s+"_services")
					if pools, ok := n.Args[3].(*ast.Ident); ok && pools.Name == "true" {
						names = append(names, s+"_pool_addresses", s+"_pool_allocated")
					}
				}
			}
		}
		return true
	})
	return names
}

// TestAllListsEveryDeclaredMetric guards metrics.All(): a metric declared in internal/metrics
// but missing from the list would be missing from the reference and the dashboards check.
func TestAllListsEveryDeclaredMetric(t *testing.T) {
	var declared []string
	for _, names := range declaredVars(t) {
		declared = append(declared, names...)
	}
	ms, err := All()
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, m := range ms {
		listed = append(listed, m.Name)
	}
	slices.Sort(declared)
	slices.Sort(listed)
	if d := cmp.Diff(declared, listed); d != "" {
		t.Errorf("metrics.All() (internal/metrics/list.go) does not list exactly the declared metrics (-declared +listed):\n%s", d)
	}
}

// TestAllMatchesRegisterFunctions proves each metric's Binary: RegisterCCM registers exactly
// the ccm's metrics and RegisterManager exactly the manager's, into controller-runtime's
// registry that the binaries serve.
func TestAllMatchesRegisterFunctions(t *testing.T) {
	all := metrics.All()
	for _, step := range []struct {
		binary   string
		register func()
	}{{metrics.BinaryCCM, metrics.RegisterCCM}, {metrics.BinaryManager, metrics.RegisterManager}} {
		step.register()
		for _, d := range all {
			m, err := Describe(d)
			if err != nil {
				t.Fatal(err)
			}
			// Unregister reports whether the collector was registered, and leaves the registry
			// clean for the next step.
			if got, want := ctrlmetrics.Registry.Unregister(d.Collector), d.Binary == step.binary; got != want {
				t.Errorf("%s: registered by Register%s = %v, but metrics.All() says binary %q",
					m.Name, map[string]string{metrics.BinaryCCM: "CCM", metrics.BinaryManager: "Manager"}[step.binary], got, d.Binary)
			}
		}
	}
}

// TestEveryMetricIsSet: a metric that is declared but never updated is a defect. It scans
// every non-test Go file of the module for uses of each metric variable; a controller's
// metrics are declared when the controller lands, not before.
func TestEveryMetricIsSet(t *testing.T) {
	used := usedMetricVars(t)
	var unset []string
	for v := range declaredVars(t) {
		if len(used[v]) == 0 {
			unset = append(unset, v)
		}
	}
	slices.Sort(unset)
	if len(unset) > 0 {
		t.Errorf("metrics declared in internal/metrics but never updated by non-test code outside it: %v", unset)
	}
}

// usedMetricVars maps each metrics.X referenced from non-test code to the packages using it.
func usedMetricVars(t *testing.T) map[string][]string {
	t.Helper()
	root := testsupport.RepoRoot()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "bin" || rel == ".git" || rel == filepath.Join("internal", "metrics") || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		local := ""
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == metricsPkg {
				local = "metrics"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		if local == "" {
			return nil
		}
		pkg := filepath.Dir(rel)
		ast.Inspect(f, func(n ast.Node) bool {
			if s, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := s.X.(*ast.Ident); ok && x.Name == local && !slices.Contains(out[s.Sel.Name], pkg) {
					out[s.Sel.Name] = append(out[s.Sel.Name], pkg)
				}
			}
			return true
		})
		return nil
	})
	if err != nil && !errors.Is(err, fs.SkipAll) {
		t.Fatal(err)
	}
	return out
}
