package prom

import (
	"context"

	"kubelb.dev/kubelb/internal/testenv"
)

// StartWithRules is Start loading the Prometheus rule files ruleFiles too (rule_files of
// prometheus.yml: absolute paths); rules are evaluated every ScrapeInterval.
func StartWithRules(t testenv.TB, targets map[string][]string, ruleFiles ...string) *Server {
	t.Helper()
	return start(t, jobsOf(targets), ruleFiles)
}

// RuleGroup is a rule group as /api/v1/rules reports it.
type RuleGroup struct {
	Name  string `json:"name"`
	File  string `json:"file"`
	Rules []Rule `json:"rules"`
}

// Rule is one rule of a group: Health is "ok" once it evaluated without error, "err" (then
// LastError says why) or "unknown" before its first evaluation; State (alerting rules) is
// inactive, pending or firing.
type Rule struct {
	Name      string `json:"name"`
	Query     string `json:"query"`
	Type      string `json:"type"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
	State     string `json:"state"`
}

// Rules returns the rule groups the server loaded (/api/v1/rules).
func (s *Server) Rules(ctx context.Context) ([]RuleGroup, error) {
	var data struct {
		Groups []RuleGroup `json:"groups"`
	}
	if err := get(ctx, s.URL+"/api/v1/rules", &data); err != nil {
		return nil, err
	}
	return data.Groups, nil
}

// Alert is an active (pending or firing) alert as /api/v1/alerts reports it.
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	Value       string            `json:"value"`
}

// Name is the alert's name (its alertname label).
func (a Alert) Name() string { return a.Labels["alertname"] }

// Alerts returns the active alerts (/api/v1/alerts).
func (s *Server) Alerts(ctx context.Context) ([]Alert, error) {
	var data struct {
		Alerts []Alert `json:"alerts"`
	}
	if err := get(ctx, s.URL+"/api/v1/alerts", &data); err != nil {
		return nil, err
	}
	return data.Alerts, nil
}
