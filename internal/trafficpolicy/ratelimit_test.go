package trafficpolicy

import (
	"strings"
	"testing"
	"time"
)

// TestRateLimitReadAndResolve: a local rate limit comes through as Envoy Gateway means it:
// a rule without selectors, per client address, per header value, an exact header from a
// range (canonical; with the defaults Envoy Gateway's CRD writes, invert false), a regular
// expression.
func TestRateLimitReadAndResolve(t *testing.T) {
	bt, err := Read("ns", "p", spec(t, `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]
rateLimit:
  type: Local
  local:
    rules:
    - limit: {requests: 5, unit: Minute}
    - clientSelectors: [{sourceCIDR: {type: Distinct, value: 0.0.0.0/0}}]
      limit: {requests: 10, unit: Second}
    - clientSelectors: [{headers: [{name: X-User, type: Distinct}]}]
      limit: {requests: 20, unit: Hour}
    - clientSelectors: [{headers: [{name: X-Tier, value: free, type: Exact, invert: false}], sourceCIDR: {value: 10.1.2.3/8, type: Exact, invert: false}}]
      limit: {requests: 2, unit: Second}
    - clientSelectors: [{headers: [{name: x-plan, type: RegularExpression, value: "basic|trial"}]}]
      limit: {requests: 1, unit: Second}
`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Resolve(bt)
	if err != nil {
		t.Fatal(err)
	}
	want := []RateLimitRule{
		{Requests: 5, Interval: time.Minute},
		{Requests: 10, Interval: time.Second, ClientCIDR: "0.0.0.0/0", PerClient: true},
		{Requests: 20, Interval: time.Hour, Headers: []RateLimitHeader{{Name: "x-user", Distinct: true}}},
		{Requests: 2, Interval: time.Second, ClientCIDR: "10.0.0.0/8", Headers: []RateLimitHeader{{Name: "x-tier", Exact: "free"}}},
		{Requests: 1, Interval: time.Second, Headers: []RateLimitHeader{{Name: "x-plan", Regex: "basic|trial"}}},
	}
	if len(s.RateLimit) != len(want) {
		t.Fatalf("rules %+v", s.RateLimit)
	}
	for i := range want {
		g, w := s.RateLimit[i], want[i]
		if g.Requests != w.Requests || g.Interval != w.Interval || g.ClientCIDR != w.ClientCIDR || g.PerClient != w.PerClient || len(g.Headers) != len(w.Headers) {
			t.Errorf("rule %d: %+v, want %+v", i, g, w)
			continue
		}
		for j := range w.Headers {
			if g.Headers[j] != w.Headers[j] {
				t.Errorf("rule %d header %d: %+v, want %+v", i, j, g.Headers[j], w.Headers[j])
			}
		}
	}
}

// TestRateLimitRefused: what kubelb does not serve is named (global, methods, shared, invert
// true), and
// what it serves is bounded: every problem is reported, the policy is not used.
func TestRateLimitRefused(t *testing.T) {
	_, err := Read("ns", "p", spec(t, `
rateLimit:
  local:
    rules:
    - clientSelectors: [{methods: [{value: GET}], headers: [{name: a, value: b, invert: true}]}]
      limit: {requests: 1, unit: Second}
      shared: true
`))
	for _, f := range []string{"spec.rateLimit.local.rules[0].clientSelectors[0].methods", "spec.rateLimit.local.rules[0].shared"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("%v does not name %s", err, f)
		}
	}
	many := "rateLimit: {local: {rules: [" + strings.Repeat("{limit: {requests: 1, unit: Second}},", 17) + "]}}"
	for y, want := range map[string][]string{
		"rateLimit: {type: Global}": {"rateLimit.global.rules is empty"},
		"rateLimit: {type: Local}":  {"rateLimit.local.rules is empty"},
		many:                        {"17 rules; at most 16"},
		"rateLimit: {local: {rules: [{limit: {requests: 0, unit: Day}}]}}": {"requests 0 is out of range", `unit "Day" is not supported`},
		`rateLimit: {local: {rules: [{limit: {requests: 1, unit: Second}, clientSelectors: [{headers: [{name: a, type: Distinct, value: x}, {name: "b c", value: v}, {name: d, type: RegularExpression, value: "("}]}]}]}}`: {
			"type Distinct counts every value apart", `name "b c" is not a header name`, "is not a regular expression"},
		`rateLimit: {local: {rules: [{limit: {requests: 1, unit: Second}, clientSelectors: [{sourceCIDR: {value: 10.0.0.0/33}}, {sourceCIDR: {value: 10.0.0.0/8}}, {}]}]}}`: {
			"is not a CIDR", "one sourceCIDR per rule", "clientSelectors[2] has no headers and no sourceCIDR"},
	} {
		bt, err := Read("ns", "p", spec(t, y))
		if err == nil {
			_, err = Resolve(bt)
		}
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want %q", y, err, w)
			}
		}
	}
}

// TestGlobalRateLimitReadAndResolve: a global rate limit is read by the same reader as a local
// one (every selector, the same bounds), with the unit Day besides; type Global, or global
// set without a type.
func TestGlobalRateLimitReadAndResolve(t *testing.T) {
	for _, typ := range []string{"type: Global", ""} {
		bt, err := Read("ns", "p", spec(t, `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]
rateLimit:
  `+typ+`
  global:
    rules:
    - limit: {requests: 6, unit: Minute}
    - clientSelectors: [{headers: [{name: X-User, type: Distinct}], sourceCIDR: {type: Distinct, value: 10.1.2.3/8}}]
      limit: {requests: 1000, unit: Day}
`))
		if err != nil {
			t.Fatal(err)
		}
		s, err := Resolve(bt)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.RateLimit) != 0 || len(s.GlobalRateLimit) != 2 {
			t.Fatalf("%q: local %+v, global %+v", typ, s.RateLimit, s.GlobalRateLimit)
		}
		g := s.GlobalRateLimit
		if g[0].Requests != 6 || g[0].Interval != time.Minute || g[1].Requests != 1000 || g[1].Interval != 24*time.Hour ||
			g[1].ClientCIDR != "10.0.0.0/8" || !g[1].PerClient || len(g[1].Headers) != 1 || g[1].Headers[0] != (RateLimitHeader{Name: "x-user", Distinct: true}) {
			t.Errorf("%q: global %+v", typ, g)
		}
	}
}

// TestGlobalRateLimitRefused: a global limit has the local one's bounds, and what kubelb
// does not serve of it is named.
func TestGlobalRateLimitRefused(t *testing.T) {
	_, err := Read("ns", "p", spec(t, `
rateLimit:
  global:
    rules:
    - clientSelectors: [{path: {value: /x}, queryParams: [{name: a}]}]
      limit: {requests: 1, unit: Second}
      shared: true
      cost: {request: {from: Number, number: 2}}
      shadowMode: true
`))
	for _, f := range []string{"spec.rateLimit.global.rules[0].clientSelectors[0].path", "spec.rateLimit.global.rules[0].clientSelectors[0].queryParams",
		"spec.rateLimit.global.rules[0].shared", "spec.rateLimit.global.rules[0].cost", "spec.rateLimit.global.rules[0].shadowMode"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("%v does not name %s", err, f)
		}
	}
	many := "rateLimit: {global: {rules: [" + strings.Repeat("{limit: {requests: 1, unit: Second}},", 17) + "]}}"
	for y, want := range map[string][]string{
		"rateLimit: {type: Global, local: {rules: [{limit: {requests: 1, unit: Second}}]}}":                                            {"rateLimit.type is Global, but rateLimit.local is set"},
		"rateLimit: {type: Local, global: {rules: [{limit: {requests: 1, unit: Second}}]}}":                                            {"rateLimit.type is Local, but rateLimit.global is set"},
		"rateLimit: {local: {rules: [{limit: {requests: 1, unit: Second}}]}, global: {rules: [{limit: {requests: 1, unit: Second}}]}}": {"both set"},
		"rateLimit: {type: Other}": {`rateLimit.type "Other" is not supported; use Local or Global`},
		many:                       {"rateLimit.global.rules has 17 rules; at most 16"},
		"rateLimit: {global: {rules: [{limit: {requests: 4294967296, unit: Week}}]}}": {"rateLimit.global.rules[0].limit.requests 4294967296 is out of range",
			`rateLimit.global.rules[0].limit.unit "Week" is not supported; use Second, Minute, Hour or Day`},
		`rateLimit: {global: {rules: [{limit: {requests: 1, unit: Second}, clientSelectors: [{headers: [{name: a, type: Distinct, value: x}]}, {sourceCIDR: {value: 10.0.0.0/33}}]}]}}`: {
			"type Distinct counts every value apart", "is not a CIDR"},
	} {
		bt, err := Read("ns", "p", spec(t, y))
		if err == nil {
			_, err = Resolve(bt)
		}
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want %q", y, err, w)
			}
		}
	}
}
