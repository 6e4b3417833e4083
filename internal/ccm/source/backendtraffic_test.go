package source

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// trafficPolicy is a BackendTrafficPolicy of namespace ns with a spec written in YAML.
func trafficPolicy(t *testing.T, ns, name, spec string) *unstructured.Unstructured {
	t.Helper()
	return egPolicy(t, BackendTrafficPolicyKind, ns, name, spec)
}

// egPolicy is a policy of kind pk of namespace ns with a spec written in YAML.
func egPolicy(t *testing.T, pk *PolicyKind, ns, name, spec string) *unstructured.Unstructured {
	t.Helper()
	p := pk.New()
	p.SetNamespace(ns)
	p.SetName(name)
	s := map[string]any{}
	if err := yaml.Unmarshal([]byte(spec), &s); err != nil {
		t.Fatal(err)
	}
	p.Object["spec"] = s
	return p
}

// kubelbAncestor waits until BackendTrafficPolicy ns/name has kubelb's entry for the ancestor
// kind/ns/name with an Accepted condition of the status and reason, and returns its message.
func (e *env) kubelbAncestor(t *testing.T, ns, name, kind, ancestorNS, ancestor, status, reason string) string {
	t.Helper()
	return e.policyAncestor(t, BackendTrafficPolicyKind, ns, name, kind, ancestorNS, ancestor, status, reason)
}

// policyAncestor is kubelbAncestor for a policy of kind pk.
func (e *env) policyAncestor(t *testing.T, pk *PolicyKind, ns, name, kind, ancestorNS, ancestor, status, reason string) string {
	t.Helper()
	var msg string
	objects.WaitFor(t, e.Tenant.Client, timeout, client.ObjectKey{Namespace: ns, Name: name}, pk.New(), func(p *unstructured.Unstructured) error {
		for _, a := range ReadPolicyStatus(p).Ancestors {
			if a.ControllerName != ControllerName || a.AncestorRef.Kind == nil || string(*a.AncestorRef.Kind) != kind ||
				string(*a.AncestorRef.Namespace) != ancestorNS || string(a.AncestorRef.Name) != ancestor {
				continue
			}
			c := meta.FindStatusCondition(a.Conditions, string(gwapiv1.PolicyConditionAccepted))
			if c == nil || string(c.Status) != status || c.Reason != reason {
				return fmt.Errorf("ancestor %s %s: condition %+v", kind, ancestor, c)
			}
			if c.ObservedGeneration != p.GetGeneration() {
				return fmt.Errorf("observedGeneration %d, generation %d", c.ObservedGeneration, p.GetGeneration())
			}
			msg = c.Message
			return nil
		}
		return fmt.Errorf("no kubelb ancestor %s %s/%s in %+v", kind, ancestorNS, ancestor, ReadPolicyStatus(p).Ancestors)
	})
	return msg
}

// policyOverridden waits until kubelb's entry for Gateway ancestorNS/ancestor on policy
// ns/name of kind pk is Accepted with a message that says nothing of overrides, and has the
// Overridden condition (True, reason Overridden, at the policy's generation) with message
// want, or no Overridden condition when want is "".
func (e *env) policyOverridden(t *testing.T, pk *PolicyKind, ns, name, ancestorNS, ancestor, want string) {
	t.Helper()
	objects.WaitFor(t, e.Tenant.Client, timeout, client.ObjectKey{Namespace: ns, Name: name}, pk.New(), func(p *unstructured.Unstructured) error {
		for _, a := range ReadPolicyStatus(p).Ancestors {
			if a.ControllerName != ControllerName || a.AncestorRef.Kind == nil || string(*a.AncestorRef.Kind) != "Gateway" ||
				string(*a.AncestorRef.Namespace) != ancestorNS || string(a.AncestorRef.Name) != ancestor {
				continue
			}
			acc := meta.FindStatusCondition(a.Conditions, string(gwapiv1.PolicyConditionAccepted))
			if acc == nil || acc.Status != metav1.ConditionTrue || strings.Contains(acc.Message, "overrid") {
				return fmt.Errorf("Accepted %+v: want True, its message without overrides", acc)
			}
			c := meta.FindStatusCondition(a.Conditions, PolicyConditionOverridden)
			switch {
			case want == "" && c != nil:
				return fmt.Errorf("Overridden %+v: want none", c)
			case want == "":
				return nil
			case c == nil || c.Status != metav1.ConditionTrue || c.Reason != PolicyReasonOverridden || c.Message != want ||
				c.ObservedGeneration != p.GetGeneration():
				return fmt.Errorf("Overridden %+v: want True, Overridden, %q", c, want)
			}
			return nil
		}
		return fmt.Errorf("no kubelb ancestor Gateway %s/%s in %+v", ancestorNS, ancestor, ReadPolicyStatus(p).Ancestors)
	})
}

// policyTargets makes namespace ns with what the policy tests target: Gateway edge of kubelb's
// class, and HTTPRoutes web and other on it (to Service web).
func (e *env) policyTargets(t *testing.T, ns string) (gw *gwapiv1.Gateway, web, other *gwapiv1.HTTPRoute) {
	t.Helper()
	e.namespace(t, ns, nil)
	e.create(t, gateway(ns, "edge", "kubelb"))
	e.create(t, clusterIP(ns, "web", 80))
	web = httpRoute(ns, "web", []gwapiv1.ParentReference{{Name: "edge"}}, backend("", "web"))
	other = httpRoute(ns, "other", []gwapiv1.ParentReference{{Name: "edge"}}, backend("", "web"))
	e.create(t, web)
	e.create(t, other)
	gw = &gwapiv1.Gateway{}
	if err := e.Tenant.Client.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "edge"}, gw); err != nil {
		t.Fatal(err)
	}
	return gw, web, other
}

// TestBackendTrafficPolicies: Envoy Gateway's BackendTrafficPolicies on kubelb's Gateways and
// routes. A Gateway's policy travels in the Gateway's Route, an HTTPRoute's in the route's;
// each is Accepted on its Gateway. A younger policy on the same route is Conflicted (Warning
// Event) and does not travel; a policy with a field kubelb does not serve is Invalid, naming
// the field (Warning Event), and its route carries nothing; a policy on a route that does
// not exist is TargetNotFound; a policy on another implementation's Gateway gets no entry of
// kubelb's. Fixing the invalid policy (a global rate limit's shared) makes it travel, its
// global rate limit with it.
func TestBackendTrafficPolicies(t *testing.T) {
	e := newEnv(t)
	const ns = "traffic"
	gw, web, other := e.policyTargets(t, ns)
	e.create(t, gateway(ns, "theirs", "other-class"))

	e.create(t, trafficPolicy(t, ns, "gateway-wide", `
targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: edge}]
loadBalancer: {type: LeastRequest}
timeout: {tcp: {connectTimeout: 2s}}
healthCheck: {passive: {consecutive5XxErrors: 3}}
circuitBreaker: {maxParallelRequests: 10}
`))
	e.create(t, trafficPolicy(t, ns, "for-web", `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}]
retry: {numRetries: 3, retryOn: {httpStatusCodes: [503]}}
rateLimit:
  type: Local
  local:
    rules:
    - clientSelectors: [{sourceCIDR: {type: Distinct, value: 0.0.0.0/0}, headers: [{name: X-Tier, value: free}]}]
      limit: {requests: 10, unit: Minute}
`))
	e.create(t, trafficPolicy(t, ns, "later-for-web", `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}]
loadBalancer: {type: Random}
`))
	e.create(t, trafficPolicy(t, ns, "limits", `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: other}]
rateLimit: {type: Global, global: {rules: [{limit: {requests: 10, unit: Second}, shared: true}]}}
retry: {numRetries: 2}
`))
	e.create(t, trafficPolicy(t, ns, "nowhere", `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: nope}]
retry: {numRetries: 2}
`))
	e.create(t, trafficPolicy(t, ns, "not-ours", `
targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: theirs}]
retry: {numRetries: 2}
`))

	// The Gateway's Route carries its policy, the HTTPRoute's the route's own.
	e.routeOf(t, tenantNS, gw.UID, func(rt *v1alpha1.Route) error {
		bt := rt.Spec.Source.Kubernetes.Context.BackendTraffic
		// The CRD's defaults (passive health check, circuit breaker) are fields kubelb serves.
		if bt == nil || bt.Name != "gateway-wide" || bt.LoadBalancer == nil || bt.LoadBalancer.Type != "LeastRequest" || bt.Timeout.TCP.ConnectTimeout != "2s" ||
			bt.HealthCheck == nil || *bt.HealthCheck.Passive.Consecutive5xxErrors != 3 || bt.HealthCheck.Passive.BaseEjectionTime != "30s" ||
			bt.CircuitBreaker == nil || *bt.CircuitBreaker.MaxParallelRequests != 10 || *bt.CircuitBreaker.MaxPendingRequests != 1024 {
			return fmt.Errorf("backendTraffic %+v", bt)
		}
		return nil
	})
	e.routeOf(t, tenantNS, web.UID, func(rt *v1alpha1.Route) error {
		bt := rt.Spec.Source.Kubernetes.Context.BackendTraffic
		if bt == nil || bt.Name != "for-web" || bt.Retry == nil || *bt.Retry.NumRetries != 3 || bt.LoadBalancer != nil {
			return fmt.Errorf("backendTraffic %+v", bt)
		}
		// The local rate limit travels in the hub's Route (its CRD holds it).
		if rl := bt.RateLimit; rl == nil || rl.Local == nil || len(rl.Local.Rules) != 1 || rl.Local.Rules[0].Limit.Requests != 10 ||
			rl.Local.Rules[0].ClientSelectors[0].SourceCIDR.Type != "Distinct" || *rl.Local.Rules[0].ClientSelectors[0].Headers[0].Value != "free" {
			return fmt.Errorf("backendTraffic %+v", bt)
		}
		return nil
	})
	e.kubelbAncestor(t, ns, "gateway-wide", "Gateway", ns, "edge", "True", "Accepted")
	e.kubelbAncestor(t, ns, "for-web", "Gateway", ns, "edge", "True", "Accepted")
	// The Gateway's policy is Overridden where web's own applies (other's is Invalid: not yet);
	// the route's policy is not overridden.
	e.policyOverridden(t, BackendTrafficPolicyKind, ns, "gateway-wide", ns, "edge",
		"other BackendTrafficPolicies take precedence for HTTPRoute traffic/web (for-web); this one applies to the rest")
	e.policyOverridden(t, BackendTrafficPolicyKind, ns, "for-web", ns, "edge", "")

	msg := e.kubelbAncestor(t, ns, "later-for-web", "Gateway", ns, "edge", "False", "Conflicted")
	if !strings.Contains(msg, "for-web") {
		t.Errorf("Conflicted message %q does not name the policy that applies", msg)
	}
	objects.WaitEvent(t, e.Tenant.Client, timeout, objects.EventFilter{Namespace: ns, Kind: "BackendTrafficPolicy", Name: "later-for-web", Reason: "Conflicted", Type: "Warning"})

	msg = e.kubelbAncestor(t, ns, "limits", "Gateway", ns, "edge", "False", "Invalid")
	if !strings.Contains(msg, "spec.rateLimit.global.rules[0].shared not yet supported") {
		t.Errorf("Invalid message %q does not name spec.rateLimit.global.rules[0].shared", msg)
	}
	objects.WaitEvent(t, e.Tenant.Client, timeout, objects.EventFilter{Namespace: ns, Kind: "BackendTrafficPolicy", Name: "limits", Reason: "Invalid", Type: "Warning"})
	e.routeOf(t, tenantNS, other.UID, func(rt *v1alpha1.Route) error {
		if bt := rt.Spec.Source.Kubernetes.Context.BackendTraffic; bt != nil {
			return fmt.Errorf("an invalid policy travels: %+v", bt)
		}
		return nil
	})

	e.kubelbAncestor(t, ns, "nowhere", "HTTPRoute", ns, "nope", "False", "TargetNotFound")

	// The invalid policy fixed (shared removed): it is accepted and travels, its global rate
	// limit with it (the hub's Route CRD holds it).
	objects.Update(t, e.Tenant.Client, trafficPolicy(t, ns, "limits", ""), func(p *unstructured.Unstructured) {
		rules := p.Object["spec"].(map[string]any)["rateLimit"].(map[string]any)["global"].(map[string]any)["rules"].([]any)
		delete(rules[0].(map[string]any), "shared")
	})
	e.kubelbAncestor(t, ns, "limits", "Gateway", ns, "edge", "True", "Accepted")
	e.routeOf(t, tenantNS, other.UID, func(rt *v1alpha1.Route) error {
		bt := rt.Spec.Source.Kubernetes.Context.BackendTraffic
		if bt == nil || bt.Name != "limits" || *bt.Retry.NumRetries != 2 {
			return fmt.Errorf("backendTraffic %+v", bt)
		}
		if rl := bt.RateLimit; rl == nil || rl.Type != "Global" || rl.Global == nil || len(rl.Global.Rules) != 1 || rl.Global.Rules[0].Limit != (v1alpha1.TrafficRateLimitValue{Requests: 10, Unit: "Second"}) {
			return fmt.Errorf("rateLimit %+v", bt.RateLimit)
		}
		return nil
	})

	// Fixed, other's policy overrides the Gateway's too; with web's two policies deleted, only
	// other's; with other's deleted, nowhere: no Overridden condition.
	e.policyOverridden(t, BackendTrafficPolicyKind, ns, "gateway-wide", ns, "edge",
		"other BackendTrafficPolicies take precedence for HTTPRoute traffic/other (limits), HTTPRoute traffic/web (for-web); this one applies to the rest")
	for _, name := range []string{"for-web", "later-for-web"} {
		if err := e.Tenant.Client.Delete(e.ctx, trafficPolicy(t, ns, name, "")); err != nil {
			t.Fatal(err)
		}
	}
	e.policyOverridden(t, BackendTrafficPolicyKind, ns, "gateway-wide", ns, "edge",
		"other BackendTrafficPolicies take precedence for HTTPRoute traffic/other (limits); this one applies to the rest")
	if err := e.Tenant.Client.Delete(e.ctx, trafficPolicy(t, ns, "limits", "")); err != nil {
		t.Fatal(err)
	}
	e.policyOverridden(t, BackendTrafficPolicyKind, ns, "gateway-wide", ns, "edge", "")

	// Another implementation's Gateway: kubelb wrote nothing on its policy (created before
	// the policies whose statuses were written since).
	p := BackendTrafficPolicyKind.New()
	if err := e.Tenant.Client.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "not-ours"}, p); err != nil {
		t.Fatal(err)
	}
	if st := ReadPolicyStatus(p); len(st.Ancestors) > 0 {
		t.Errorf("kubelb wrote on a policy of another class's Gateway: %+v", st.Ancestors)
	}
}

// TestTrafficWinnerAndStatus: the oldest policy targeting an object wins (then the first by
// name), whether it can be used or not, and only whole-object targets count for the whole object
// (a section's policy applies to the section, besides); kubelb's status
// entries keep one verdict per ancestor (a refusal over an acceptance), leave other
// controllers' entries alone and keep the transition time of an unchanged condition.
func TestTrafficWinnerAndStatus(t *testing.T) {
	at := func(p *unstructured.Unstructured, sec int) *unstructured.Unstructured {
		p.SetCreationTimestamp(metav1.NewTime(time.Date(2026, 11, 1, 0, 0, sec, 0, time.UTC)))
		p.SetGeneration(2)
		return p
	}
	older := at(trafficPolicy(t, "app", "b-older", `{targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}], rateLimit: {}}`), 1)
	sameTimeA := at(trafficPolicy(t, "app", "a-same", `{targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: api}], retry: {numRetries: 1}}`), 2)
	sameTimeC := at(trafficPolicy(t, "app", "c-same", `{targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: api}], retry: {numRetries: 2}}`), 2)
	section := at(trafficPolicy(t, "app", "a-section", `{targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web, sectionName: r1}], retry: {numRetries: 1}}`), 0)
	newer := at(trafficPolicy(t, "app", "d-newer", `{targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}], retry: {numRetries: 3}}`), 3)
	all := []*unstructured.Unstructured{newer, sameTimeC, section, older, sameTimeA}

	if w := TrafficWinner(all, "app", "HTTPRoute", "web"); w != older {
		t.Errorf("web: winner %s, want b-older (the oldest whole-object target)", w.GetName())
	}
	if bt := DesiredBackendTraffic(all, "app", "HTTPRoute", "web"); bt != nil {
		t.Errorf("web carries %+v from an Invalid winner, want nothing", bt)
	}
	if bt := DesiredBackendTraffic(all, "app", "HTTPRoute", "api"); bt == nil || bt.Name != "a-same" || *bt.Retry.NumRetries != 1 {
		t.Errorf("api carries %+v, want a-same (first by name among the same age)", bt)
	}
	if v := BackendTrafficPolicyKind.Read(section); v.Invalid != "" {
		t.Errorf("a sectionName target is refused: %q", v.Invalid)
	}
	whole, secs := BackendTrafficPolicyKind.DesiredOf(all, "app", PolicyTarget{Kind: "HTTPRoute", Name: "web"}, []string{"r1", "r2"}, BackendTrafficPolicyKind.Read)
	if whole != nil || len(secs) != 1 || secs["r1"].(*v1alpha1.BackendTraffic).Name != "a-section" {
		t.Errorf("web carries %+v and sections %+v, want nothing for the whole route (its Invalid winner) and a-section for rule r1", whole, secs)
	}

	gw := GatewayAncestor("app", "edge")
	merged := MergeTrafficAncestors([]TrafficAncestor{
		{Ref: gw, Status: metav1.ConditionTrue, Reason: "Accepted"},
		{Ref: ObjectAncestor("app", "HTTPRoute", "gone"), Status: metav1.ConditionFalse, Reason: "TargetNotFound"},
		{Ref: gw, Status: metav1.ConditionFalse, Reason: "Conflicted"},
	})
	if len(merged) != 2 || merged[0].Reason != "Conflicted" || merged[1].Reason != "TargetNotFound" {
		t.Fatalf("merged %+v", merged)
	}

	p := newer.DeepCopy()
	then := metav1.NewTime(time.Date(2026, 11, 1, 1, 0, 0, 0, time.UTC))
	p.Object["status"] = map[string]any{"ancestors": []any{
		map[string]any{"ancestorRef": map[string]any{"group": gatewayGroup, "kind": "Gateway", "namespace": "app", "name": "edge"},
			"controllerName": "gateway.envoyproxy.io/gatewayclass-controller",
			"conditions":     []any{map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "", "lastTransitionTime": then.UTC().Format(time.RFC3339)}}},
		map[string]any{"ancestorRef": map[string]any{"group": gatewayGroup, "kind": "Gateway", "namespace": "app", "name": "edge"},
			"controllerName": ControllerName,
			"conditions":     []any{map[string]any{"type": "Accepted", "status": "False", "reason": "Conflicted", "message": "m", "observedGeneration": int64(2), "lastTransitionTime": then.UTC().Format(time.RFC3339)}}},
	}}
	now := metav1.NewTime(then.Add(time.Hour))
	st := DesiredTrafficPolicyStatus(p, []TrafficAncestor{{Ref: gw, Status: metav1.ConditionFalse, Reason: "Conflicted", Message: "m"}}, now)
	if len(st.Ancestors) != 2 || st.Ancestors[0].ControllerName == ControllerName {
		t.Fatalf("ancestors %+v: the other controller's entry must stay first", st.Ancestors)
	}
	if c := st.Ancestors[1].Conditions[0]; !c.LastTransitionTime.Equal(&then) || c.ObservedGeneration != 2 {
		t.Errorf("unchanged condition: transition %v (want %v), generation %d", c.LastTransitionTime, then, c.ObservedGeneration)
	}
	st = DesiredTrafficPolicyStatus(p, []TrafficAncestor{{Ref: gw, Status: metav1.ConditionTrue, Reason: "Accepted", Message: "ok"}}, now)
	if c := st.Ancestors[1].Conditions[0]; !c.LastTransitionTime.Equal(&now) || c.Reason != "Accepted" {
		t.Errorf("changed condition: %+v", c)
	}
	if reason, _ := TrafficWarning(merged); reason != "Conflicted" {
		t.Errorf("warning %q", reason)
	}
}
