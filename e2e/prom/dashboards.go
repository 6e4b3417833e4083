// Package prom proves kubelb's Grafana dashboards against a real Prometheus server: it
// extracts every query from the dashboards the Helm charts ship, starts Debian's prometheus
// binary on loopback with a scrape config for given targets, and runs every query over the
// HTTP API, failing on a query that errors or returns no series.
package prom

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Query is one PromQL query of a dashboard: a panel target, or the query behind a template
// variable (label_values(m, l) becomes count by (l) (m)).
type Query struct {
	// Dashboard is the dashboard title.
	Dashboard string
	// Row is the title of the row the panel sits in ("" before the first row).
	Row string
	// Panel is the panel title, or "variable <name>" for a template variable.
	Panel string
	// Expr is the PromQL with Grafana variables replaced by concrete values.
	Expr string
	// Raw is the expression as written in the dashboard.
	Raw string
}

// String names the query for test output.
func (q Query) String() string {
	return fmt.Sprintf("%s › %s › %s: %s", q.Dashboard, q.Row, q.Panel, q.Expr)
}

// DataPlaneDashboard is the title of the dashboard of Envoy's own metrics, which only a
// Prometheus scraping the Envoy proxies (the chart's PodMonitor) fills; a Prometheus scraping
// the kubelb binaries finds none of its series.
const DataPlaneDashboard = "kubelb / Envoy data plane"

// Intervals replace Grafana's built-in interval variables; any other variable is a label
// filter whose "All" value is the regex ".*".
var Intervals = map[string]string{
	"__rate_interval": "1m",
	"__interval":      "1m",
	"__range":         "5m",
}

type dashboardJSON struct {
	Title      string      `json:"title"`
	Panels     []panelJSON `json:"panels"`
	Templating struct {
		List []variableJSON `json:"list"`
	} `json:"templating"`
}

type panelJSON struct {
	Type    string      `json:"type"`
	Title   string      `json:"title"`
	Panels  []panelJSON `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

type variableJSON struct {
	Name  string          `json:"name"`
	Type  string          `json:"type"`
	Query json.RawMessage `json:"query"`
}

// variableRef matches $name, ${name}, ${name:format} and [[name]]; names start with a letter
// or underscore so that label_replace's "$1" is left alone.
var variableRef = regexp.MustCompile(`\$\{([A-Za-z_]\w*)(?::\w+)?\}|\$([A-Za-z_]\w*)|\[\[([A-Za-z_]\w*)\]\]`)

var labelValues = regexp.MustCompile(`^\s*label_values\((.+),\s*([A-Za-z_]\w*)\s*\)\s*$`)

// DashboardFiles lists the dashboards the charts under root ship
// (charts/*/dashboards/*.json), sorted.
func DashboardFiles(root string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(root, "charts", "*", "dashboards", "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no dashboards under %s/charts/*/dashboards", root)
	}
	sort.Strings(files)
	return files, nil
}

// DashboardQueries returns the PromQL of every panel target and template variable of the
// dashboards at paths, with Grafana variables replaced by concrete values.
func DashboardQueries(paths ...string) ([]string, error) {
	qs, err := DashboardTargets(paths...)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(qs))
	for i, q := range qs {
		out[i] = q.Expr
	}
	return out, nil
}

// DashboardTargets is DashboardQueries with the dashboard, row and panel of each query. It
// fails on a panel target without an expression and on a variable the dashboard does not
// declare.
func DashboardTargets(paths ...string) ([]Query, error) {
	var out []Query
	for _, p := range paths {
		qs, err := dashboardTargets(p)
		if err != nil {
			return nil, fmt.Errorf("dashboard %s: %w", p, err)
		}
		out = append(out, qs...)
	}
	return out, nil
}

func dashboardTargets(path string) ([]Query, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d dashboardJSON
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, err
	}
	declared := map[string]bool{}
	for k := range Intervals {
		declared[k] = true
	}
	for _, v := range d.Templating.List {
		declared[v.Name] = true
	}
	var out []Query
	add := func(row, panel, raw string) error {
		expr, err := substitute(raw, declared)
		if err != nil {
			return fmt.Errorf("panel %q: %w", panel, err)
		}
		out = append(out, Query{Dashboard: d.Title, Row: row, Panel: panel, Expr: expr, Raw: raw})
		return nil
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		raw, err := variableQuery(v.Query)
		if err != nil {
			return nil, fmt.Errorf("variable %s: %w", v.Name, err)
		}
		m := labelValues.FindStringSubmatch(raw)
		if m == nil {
			return nil, fmt.Errorf("variable %s: query %q is not label_values(metric, label)", v.Name, raw)
		}
		if err := add("", "variable "+v.Name, fmt.Sprintf("count by (%s) (%s)", m[2], m[1])); err != nil {
			return nil, err
		}
	}
	row := ""
	var walk func(ps []panelJSON) error
	walk = func(ps []panelJSON) error {
		for _, p := range ps {
			if p.Type == "row" {
				row = p.Title
				if err := walk(p.Panels); err != nil { // collapsed rows hold their panels
					return err
				}
				continue
			}
			for i, t := range p.Targets {
				if strings.TrimSpace(t.Expr) == "" {
					return fmt.Errorf("panel %q target %d has no expr", p.Title, i)
				}
				if err := add(row, p.Title, t.Expr); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(d.Panels); err != nil {
		return nil, err
	}
	return out, nil
}

// variableQuery reads a variable's query, a string or {"query": "..."}.
func variableQuery(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var o struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return "", err
	}
	return o.Query, nil
}

func substitute(expr string, declared map[string]bool) (string, error) {
	var bad []string
	out := variableRef.ReplaceAllStringFunc(expr, func(ref string) string {
		m := variableRef.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[3]
		if !declared[name] {
			bad = append(bad, name)
			return ref
		}
		if v, ok := Intervals[name]; ok {
			return v
		}
		return ".*"
	})
	if len(bad) > 0 {
		return "", fmt.Errorf("undeclared variables %v in %q", bad, expr)
	}
	return out, nil
}

var identifier = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)

// MetricNames returns the kubelb_ metric names an expression reads (histogram series keep
// their _bucket/_sum/_count suffix), sorted and deduplicated.
func MetricNames(expr string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range identifier.FindAllString(stripStrings(expr), -1) {
		if strings.HasPrefix(id, "kubelb_") && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// stripStrings blanks string literals so label values are not taken for metric names.
func stripStrings(expr string) string { return quoted.ReplaceAllString(expr, `""`) }
