package source

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport/objects"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// TestPolicyAttachment: which policy applies to a route, one of its rules (sectionName) and
// the routes its targetSelectors select, as Envoy Gateway: a section's oldest policy applies
// to the section, the object's oldest (by targetRef or by selector) to the rest; what the
// Route carries follows (whole object and one entry per section, sorted).
func TestPolicyAttachment(t *testing.T) {
	at := func(p *unstructured.Unstructured, sec int) *unstructured.Unstructured {
		p.SetCreationTimestamp(metav1.NewTime(time.Date(2026, 11, 1, 0, 0, sec, 0, time.UTC)))
		return p
	}
	ref := `{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}`
	whole := at(trafficPolicy(t, "app", "whole", `{targetRefs: [`+ref+`], retry: {numRetries: 1}}`), 3)
	ruleA := at(trafficPolicy(t, "app", "rule-a", `{targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web, sectionName: a}], retry: {numRetries: 2}}`), 2)
	ruleANewer := at(trafficPolicy(t, "app", "rule-a-newer", `{targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web, sectionName: a}], retry: {numRetries: 3}}`), 5)
	selectorOlder := at(trafficPolicy(t, "app", "by-label", `{targetSelectors: [{kind: HTTPRoute, matchLabels: {team: a}}], retry: {numRetries: 4}}`), 1)
	all := []*unstructured.Unstructured{whole, ruleA, ruleANewer, selectorOlder}

	labelled := PolicyTarget{Kind: "HTTPRoute", Name: "web", Labels: map[string]string{"team": "a"}}
	if w := TrafficWinnerOf(all, "app", labelled); w != selectorOlder {
		t.Errorf("labelled web: winner %s, want by-label (older than the targetRef's)", w.GetName())
	}
	unlabelled := PolicyTarget{Kind: "HTTPRoute", Name: "web"}
	if w := TrafficWinnerOf(all, "app", unlabelled); w != whole {
		t.Errorf("unlabelled web: winner %s, want whole", w.GetName())
	}
	if w := TrafficWinnerOf(all, "app", PolicyTarget{Kind: "HTTPRoute", Name: "web", Section: "a", Labels: map[string]string{"team": "a"}}); w != ruleA {
		t.Errorf("rule a: winner %s, want rule-a (the oldest naming the rule; a selector selects whole objects)", w.GetName())
	}
	if w := TrafficWinnerOf(all, "app", PolicyTarget{Kind: "HTTPRoute", Name: "other", Labels: map[string]string{"team": "b"}}); w != nil {
		t.Errorf("route other: winner %s, want none", w.GetName())
	}

	wv, secs := BackendTrafficPolicyKind.DesiredOf(all, "app", unlabelled, []string{"b", "a"}, BackendTrafficPolicyKind.Read)
	c := &v1alpha1.SourceContext{PolicySections: []v1alpha1.PolicySection{{Name: "z", Security: &v1alpha1.Security{Name: "s"}}}}
	BackendTrafficPolicyKind.CarryOf(c, wv, secs)
	if c.BackendTraffic == nil || c.BackendTraffic.Name != "whole" {
		t.Errorf("the route carries %+v for the whole route, want whole", c.BackendTraffic)
	}
	if len(c.PolicySections) != 2 || c.PolicySections[0].Name != "a" || c.PolicySections[0].BackendTraffic.Name != "rule-a" ||
		c.PolicySections[1].Name != "z" || c.PolicySections[1].Security == nil {
		t.Errorf("sections %+v, want rule a with rule-a, then z's SecurityPolicy kept", c.PolicySections)
	}

	u := map[string]any{"spec": map[string]any{"rules": []any{
		map[string]any{"name": "a"}, map[string]any{}, map[string]any{"name": "b"}, map[string]any{"name": "a"},
	}}}
	if got := ObjectSections("HTTPRoute", u); strings.Join(got, ",") != "a,b" {
		t.Errorf("rule sections %v, want a,b (named rules, once)", got)
	}
	g := map[string]any{"spec": map[string]any{"listeners": []any{map[string]any{"name": "http"}, map[string]any{"name": "https"}}}}
	if got := ObjectSections("Gateway", g); strings.Join(got, ",") != "http,https" {
		t.Errorf("listener sections %v", got)
	}

	sel := make([]PolicyTarget, trafficpolicy.MaxSelected+1)
	if msg := OverSelected(sel); !strings.Contains(msg, "select 17 objects; at most 16") {
		t.Errorf("over the bound: %q", msg)
	}
	if msg := OverSelected(sel[:trafficpolicy.MaxSelected]); msg != "" {
		t.Errorf("at the bound: %q", msg)
	}

	// A selector of a kind the policy's kind never targets is Invalid.
	ct := egPolicy(t, ClientTrafficPolicyKind, "app", "ct", `{targetSelectors: [{kind: HTTPRoute}], headers: {withUnderscoresAction: Allow}}`)
	if v := ClientTrafficPolicyKind.Read(ct); !strings.Contains(v.Invalid, "targetSelector of HTTPRoute") {
		t.Errorf("a ClientTrafficPolicy selecting HTTPRoutes: %q", v.Invalid)
	}
	if v := BackendTrafficPolicyKind.Read(selectorOlder); v.Invalid != "" {
		t.Errorf("a policy with targetSelectors only: %q", v.Invalid)
	}
}

// TestPolicySectionsAndSelectors: policies targeting one section and policies selecting
// routes by label, against real API servers. A SecurityPolicy on rule locked of HTTPRoute
// named and a BackendTrafficPolicy on listener http of Gateway edge are Accepted and travel
// for their section only; a policy naming a rule the route does not have is TargetNotFound,
// naming it. A BackendTrafficPolicy selecting HTTPRoutes labelled team=a travels in web's
// Route once web gets the label, and leaves it when the label goes; one selecting more
// routes than kubelb allows is Invalid, saying so (Warning Event), and leaves the routes that
// carried it while it was within the bound.
func TestPolicySectionsAndSelectors(t *testing.T) {
	e := newEnv(t)
	const ns = "attach"
	gw, web, _ := e.policyTargets(t, ns)
	named := httpRoute(ns, "named", []gwapiv1.ParentReference{{Name: "edge"}}, backend("", "web"))
	named.Spec.Rules = append(named.Spec.Rules, named.Spec.Rules[0])
	named.Spec.Rules[0].Name = ptr.To(gwapiv1.SectionName("open"))
	named.Spec.Rules[1].Name = ptr.To(gwapiv1.SectionName("locked"))
	e.create(t, named)

	e.create(t, egPolicy(t, SecurityPolicyKind, ns, "locked-rule", `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: named, sectionName: locked}]
authorization: {defaultAction: Deny}
`))
	e.create(t, trafficPolicy(t, ns, "on-listener", `
targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: edge, sectionName: http}]
retry: {numRetries: 2}
`))
	e.create(t, trafficPolicy(t, ns, "no-rule", `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: named, sectionName: nope}]
retry: {numRetries: 2}
`))
	e.create(t, trafficPolicy(t, ns, "by-team", `
targetSelectors: [{kind: HTTPRoute, matchLabels: {team: a}}]
retry: {numRetries: 4}
`))

	e.policyAncestor(t, SecurityPolicyKind, ns, "locked-rule", "Gateway", ns, "edge", "True", "Accepted")
	e.routeOf(t, tenantNS, named.UID, func(rt *v1alpha1.Route) error {
		c := rt.Spec.Source.Kubernetes.Context
		if c == nil || c.Security != nil || len(c.PolicySections) != 1 || c.PolicySections[0].Name != "locked" ||
			c.PolicySections[0].Security == nil || c.PolicySections[0].Security.Name != "locked-rule" {
			return fmt.Errorf("context %+v: want locked-rule for rule locked only", c)
		}
		return nil
	})
	e.policyAncestor(t, BackendTrafficPolicyKind, ns, "on-listener", "Gateway", ns, "edge", "True", "Accepted")
	// A policy on the whole route is Accepted too, and Overridden where a rule's applies; with
	// the rule's deleted, not Overridden.
	e.create(t, egPolicy(t, SecurityPolicyKind, ns, "whole-named", `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: named}]
authorization: {defaultAction: Allow}
`))
	e.policyOverridden(t, SecurityPolicyKind, ns, "whole-named", ns, "edge",
		"other SecurityPolicies take precedence for HTTPRoute attach/named rule locked (locked-rule); this one applies to the rest")
	// The listener's policy is not overridden: no route on it has a usable BackendTrafficPolicy.
	e.policyOverridden(t, BackendTrafficPolicyKind, ns, "on-listener", ns, "edge", "")
	e.routeOf(t, tenantNS, gw.UID, func(rt *v1alpha1.Route) error {
		c := rt.Spec.Source.Kubernetes.Context
		if sec := c.PolicySection("http"); c.BackendTraffic != nil || sec == nil || sec.BackendTraffic == nil || sec.BackendTraffic.Name != "on-listener" {
			return fmt.Errorf("backendTraffic %+v, sections %+v: want on-listener for listener http only", c.BackendTraffic, c.PolicySections)
		}
		return nil
	})
	locked := SecurityPolicyKind.New()
	locked.SetNamespace(ns)
	locked.SetName("locked-rule")
	if err := e.Tenant.Client.Delete(e.ctx, locked); err != nil {
		t.Fatal(err)
	}
	e.policyOverridden(t, SecurityPolicyKind, ns, "whole-named", ns, "edge", "")
	msg := e.policyAncestor(t, BackendTrafficPolicyKind, ns, "no-rule", "Gateway", ns, "edge", "False", "TargetNotFound")
	if !strings.Contains(msg, "no section named nope found for HTTPRoute "+ns+"/named") {
		t.Errorf("TargetNotFound message %q does not name the rule", msg)
	}

	// The selector: web labelled team=a carries by-team; unlabelled, not.
	objects.Update(t, e.Tenant.Client, web, func(r *gwapiv1.HTTPRoute) { r.Labels = map[string]string{"team": "a"} })
	e.routeOf(t, tenantNS, web.UID, func(rt *v1alpha1.Route) error {
		if c := rt.Spec.Source.Kubernetes.Context; c == nil || c.BackendTraffic == nil || c.BackendTraffic.Name != "by-team" {
			return fmt.Errorf("context %+v: want by-team", c)
		}
		return nil
	})
	e.policyAncestor(t, BackendTrafficPolicyKind, ns, "by-team", "Gateway", ns, "edge", "True", "Accepted")
	// web, on listener http (its parentRef names no section), has a policy of its own now: the
	// listener's is Overridden there, until web loses the label.
	e.policyOverridden(t, BackendTrafficPolicyKind, ns, "on-listener", ns, "edge",
		"other BackendTrafficPolicies take precedence for HTTPRoute attach/web (by-team); this one applies to the rest")
	objects.Update(t, e.Tenant.Client, web, func(r *gwapiv1.HTTPRoute) { r.Labels = nil })
	e.policyOverridden(t, BackendTrafficPolicyKind, ns, "on-listener", ns, "edge", "")
	e.routeOf(t, tenantNS, web.UID, func(rt *v1alpha1.Route) error {
		if c := rt.Spec.Source.Kubernetes.Context; c != nil && c.BackendTraffic != nil {
			return fmt.Errorf("web unlabelled still carries %+v", c.BackendTraffic)
		}
		return nil
	})

	// At the bound: MaxSelected routes labelled bulk=yes carry the policy selecting them; one
	// more, and it is Invalid and leaves every one of them (the others re-mirrored).
	var bulk []*gwapiv1.HTTPRoute
	addBulk := func(i int) {
		r := httpRoute(ns, fmt.Sprintf("bulk-%02d", i), []gwapiv1.ParentReference{{Name: "edge"}}, backend("", "web"))
		r.Labels = map[string]string{"bulk": "yes"}
		e.create(t, r)
		bulk = append(bulk, r)
	}
	for i := range trafficpolicy.MaxSelected {
		addBulk(i)
	}
	e.create(t, trafficPolicy(t, ns, "everyone", `
targetSelectors: [{kind: HTTPRoute, matchLabels: {bulk: "yes"}}]
retry: {numRetries: 1}
`))
	e.policyAncestor(t, BackendTrafficPolicyKind, ns, "everyone", "Gateway", ns, "edge", "True", "Accepted")
	// 16 routes override the listener's policy: the first 8 by name are named, then "…".
	e.policyOverridden(t, BackendTrafficPolicyKind, ns, "on-listener", ns, "edge",
		"other BackendTrafficPolicies take precedence for HTTPRoute attach/bulk-00 (everyone), HTTPRoute attach/bulk-01 (everyone), "+
			"HTTPRoute attach/bulk-02 (everyone), HTTPRoute attach/bulk-03 (everyone), HTTPRoute attach/bulk-04 (everyone), "+
			"HTTPRoute attach/bulk-05 (everyone), HTTPRoute attach/bulk-06 (everyone), HTTPRoute attach/bulk-07 (everyone), …; this one applies to the rest")
	e.routeOf(t, tenantNS, bulk[0].UID, func(rt *v1alpha1.Route) error {
		if c := rt.Spec.Source.Kubernetes.Context; c == nil || c.BackendTraffic == nil || c.BackendTraffic.Name != "everyone" {
			return fmt.Errorf("context %+v: want everyone", c)
		}
		return nil
	})
	addBulk(trafficpolicy.MaxSelected)
	msg = e.policyAncestor(t, BackendTrafficPolicyKind, ns, "everyone", "Gateway", ns, "edge", "False", "Invalid")
	if !strings.Contains(msg, "the targetSelectors select 17 objects; at most 16") {
		t.Errorf("Invalid message %q does not name the bound", msg)
	}
	objects.WaitEvent(t, e.Tenant.Client, timeout, objects.EventFilter{Namespace: ns, Kind: "BackendTrafficPolicy", Name: "everyone", Reason: "Invalid", Type: "Warning"})
	// An Invalid policy overrides nothing: the listener's applies to the routes again.
	e.policyOverridden(t, BackendTrafficPolicyKind, ns, "on-listener", ns, "edge", "")
	for _, r := range []*gwapiv1.HTTPRoute{bulk[0], bulk[trafficpolicy.MaxSelected]} {
		e.routeOf(t, tenantNS, r.UID, func(rt *v1alpha1.Route) error {
			if c := rt.Spec.Source.Kubernetes.Context; c == nil || c.BackendTraffic != nil {
				return fmt.Errorf("route %s, selected by a policy over the bound, carries %+v", r.Name, c)
			}
			return nil
		})
	}
}

// TestOverriddenCondition: an Accepted ancestor that more specific policies override gets
// Envoy Gateway's Overridden condition (True, reason Overridden) naming where and by which
// policy, at most 8 then "…"; the overrides of two targets under one Gateway are merged once;
// a refused ancestor and one not overridden get none, and a condition that stays keeps its
// transition time. attachedTo: a route attaches to a listener by its sectionName or by naming
// none.
func TestOverriddenCondition(t *testing.T) {
	var by []string
	more := true
	for i := range 10 {
		by, more = addOverride(by, fmt.Sprintf("HTTPRoute app/r%d (p%d)", i, i))
	}
	if more || len(by) != maxOverriddenBy+1 {
		t.Fatalf("addOverride kept %d entries (more %v), want %d and no more", len(by), more, maxOverriddenBy+1)
	}
	msg := OverriddenMessage("BackendTrafficPolicy", by)
	if !strings.HasPrefix(msg, "other BackendTrafficPolicies take precedence for HTTPRoute app/r0 (p0), ") ||
		!strings.Contains(msg, "HTTPRoute app/r7 (p7), …; this one applies to the rest") || strings.Contains(msg, "r8") {
		t.Errorf("message %q: want 8 names then …", msg)
	}

	gw := GatewayAncestor("app", "edge")
	merged := MergeTrafficAncestors([]TrafficAncestor{
		{Ref: gw, Status: metav1.ConditionTrue, Reason: "Accepted", OverriddenBy: []string{"Gateway app/edge listener http (l)"}},
		{Ref: gw, Status: metav1.ConditionTrue, Reason: "Accepted", OverriddenBy: []string{"HTTPRoute app/web (w)", "Gateway app/edge listener http (l)"}},
	})
	if len(merged) != 1 || strings.Join(merged[0].OverriddenBy, ",") != "Gateway app/edge listener http (l),HTTPRoute app/web (w)" {
		t.Fatalf("merged %+v", merged)
	}

	p := trafficPolicy(t, "app", "gw", `{targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: edge}]}`)
	p.SetGeneration(3)
	then := metav1.NewTime(time.Date(2026, 11, 1, 1, 0, 0, 0, time.UTC))
	st := DesiredTrafficPolicyStatus(p, merged, then)
	conds := st.Ancestors[0].Conditions
	if len(conds) != 2 || conds[0].Type != "Accepted" || conds[1].Type != "Overridden" || conds[1].Status != metav1.ConditionTrue ||
		conds[1].Reason != "Overridden" || conds[1].ObservedGeneration != 3 ||
		conds[1].Message != "other BackendTrafficPolicies take precedence for Gateway app/edge listener http (l), HTTPRoute app/web (w); this one applies to the rest" {
		t.Fatalf("conditions %+v", conds)
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		t.Fatal(err)
	}
	p.Object["status"] = raw
	later := metav1.NewTime(then.Add(time.Hour))
	if again := DesiredTrafficPolicyStatus(p, merged, later); !equality.Semantic.DeepEqual(again, st) {
		t.Errorf("the same overrides an hour later: %+v, want the status unchanged (no write)", again)
	}
	st = DesiredTrafficPolicyStatus(p, []TrafficAncestor{{Ref: gw, Status: metav1.ConditionTrue, Reason: "Accepted"}}, later)
	if conds := st.Ancestors[0].Conditions; len(conds) != 1 || conds[0].Type != "Accepted" {
		t.Errorf("no longer overridden: conditions %+v, want Accepted only", conds)
	}
	st = DesiredTrafficPolicyStatus(p, []TrafficAncestor{{Ref: gw, Status: metav1.ConditionFalse, Reason: "Invalid", OverriddenBy: by}}, later)
	if conds := st.Ancestors[0].Conditions; len(conds) != 1 || conds[0].Reason != "Invalid" {
		t.Errorf("refused: conditions %+v, want Accepted False only", conds)
	}

	route := func(refs string) map[string]any {
		u := map[string]any{}
		if err := yaml.Unmarshal([]byte(`{spec: {parentRefs: `+refs+`}}`), &u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	for _, c := range []struct {
		refs, listener string
		want           bool
	}{
		{`[{name: edge}]`, "", true},
		{`[{name: edge}]`, "http", true},
		{`[{name: edge, sectionName: https}]`, "http", false},
		{`[{name: edge, sectionName: https}, {name: edge, sectionName: http}]`, "http", true},
		{`[{name: edge, namespace: other}]`, "", false},
		{`[{name: edge, kind: ListenerSet}]`, "", false},
		{`[{name: side}]`, "", false},
	} {
		if got := attachedTo(route(c.refs), "app", "edge", c.listener); got != c.want {
			t.Errorf("parentRefs %s, listener %q: attached %v, want %v", c.refs, c.listener, got, c.want)
		}
	}
}
