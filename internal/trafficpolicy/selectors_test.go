package trafficpolicy

import (
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestSelectors: a policy's targetSelectors select objects of their kind and group (Gateway
// API's when unset) by matchLabels and matchExpressions; those kubelb cannot serve as written
// (other namespaces, an invalid selector, too many) are refused with words a user can act on.
func TestSelectors(t *testing.T) {
	spec := func(s string) map[string]any {
		t.Helper()
		out := map[string]any{}
		if err := yaml.Unmarshal([]byte(s), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	sel, err := Selectors(spec(`{targetSelectors: [{kind: HTTPRoute, matchLabels: {team: a}, matchExpressions: [{key: tier, operator: In, values: [web, api]}]}]}`))
	if err != nil || len(sel) != 1 {
		t.Fatalf("selectors %+v, %v", sel, err)
	}
	for _, c := range []struct {
		kind   string
		labels map[string]string
		want   bool
	}{
		{"HTTPRoute", map[string]string{"team": "a", "tier": "web"}, true},
		{"HTTPRoute", map[string]string{"team": "a", "tier": "db"}, false},
		{"HTTPRoute", map[string]string{"team": "b", "tier": "web"}, false},
		{"GRPCRoute", map[string]string{"team": "a", "tier": "web"}, false},
	} {
		if got := sel[0].Matches(gatewayAPIGroup, c.kind, c.labels); got != c.want {
			t.Errorf("%s %v: selected %v, want %v", c.kind, c.labels, got, c.want)
		}
	}
	if sel, err := Selectors(spec(`{targetRefs: []}`)); err != nil || sel != nil {
		t.Errorf("no targetSelectors: %+v, %v", sel, err)
	}
	many := make([]string, MaxSelectors+1)
	for i := range many {
		many[i] = fmt.Sprintf("{kind: HTTPRoute, matchLabels: {n: %q}}", fmt.Sprint(i))
	}
	terms := make([]string, MaxSelectorTerms+1)
	for i := range terms {
		terms[i] = fmt.Sprintf("k%d: v", i)
	}
	values := make([]string, MaxSelectorValues+1)
	for i := range values {
		values[i] = fmt.Sprintf("v%d", i)
	}
	for _, c := range []struct{ spec, want string }{
		{`{targetSelectors: [{kind: HTTPRoute, matchLabels: {` + strings.Join(terms, ", ") + `}}]}`, fmt.Sprintf("33 matchLabels and matchExpressions; at most %d", MaxSelectorTerms)},
		{`{targetSelectors: [{kind: HTTPRoute, matchExpressions: [{key: a, operator: In, values: [` + strings.Join(values, ", ") + `]}]}]}`, fmt.Sprintf("65 values; at most %d", MaxSelectorValues)},
		{`{targetSelectors: [{kind: HTTPRoute, namespaces: {from: All}}]}`, "other namespaces is not yet supported"},
		{`{targetSelectors: [{kind: HTTPRoute, matchLabels: {"bad key!": a}}]}`, "not a valid label selector"},
		{`{targetSelectors: [{kind: HTTPRoute, matchExpressions: [{key: a, operator: Near}]}]}`, "not a valid label selector"},
		{`{targetSelectors: [{matchLabels: {a: b}}]}`, "kind is required"},
		{`{targetSelectors: [{kind: HTTPRoute, matchLabels: {a: 1}}]}`, "cannot be read"},
		{`{targetSelectors: [` + strings.Join(many, ",") + `]}`, fmt.Sprintf("at most %d", MaxSelectors)},
	} {
		if _, err := Selectors(spec(c.spec)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.spec, err, c.want)
		}
	}
	// Read leaves targetSelectors to Selectors: the settings are read as before.
	if _, err := Read("app", "p", spec(`{targetSelectors: [{kind: HTTPRoute}], retry: {numRetries: 1}}`)); err != nil {
		t.Errorf("a policy with targetSelectors: %v", err)
	}
	if _, err := ReadSecurity("app", "p", spec(`{targetSelectors: [{kind: HTTPRoute}], authorization: {defaultAction: Deny}}`)); err != nil {
		t.Errorf("a SecurityPolicy with targetSelectors: %v", err)
	}
	if _, err := ReadClient("app", "p", spec(`{targetSelectors: [{kind: Gateway}], headers: {withUnderscoresAction: Allow}}`)); err != nil {
		t.Errorf("a ClientTrafficPolicy with targetSelectors: %v", err)
	}
}
