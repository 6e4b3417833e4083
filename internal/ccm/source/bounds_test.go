package source

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// TestPolicyOverPlatformBound: the platform team bounds the tenant's policies on its Tenant
// (spec.trafficPolicies: the features RateLimit, Retry and Authorization, at most 100
// requests per second). The hub tells the ccm the bounds in the tenant's TenantState, as the
// manager's Tenant controller writes them (settings.Resolve of the Tenant the hub's API
// server stored). A BackendTrafficPolicy whose rule allows 500 requests per second, and one
// using loadBalancer (a feature not allowed), are Accepted False, OverPlatformBound, naming
// the bound, where it is set and what the policy asks, with a Warning Event; a SecurityPolicy
// with an authorization, within the bounds, is Accepted. The Route still carries the policy
// over a bound (the hub checks it itself and leaves it out). Raising the Tenant's bound to
// 1000 makes the rate-limit policy Accepted. The Gateway's BackendTrafficPolicy is
// Overridden by a route's only when that one is within the bounds.
func TestPolicyOverPlatformBound(t *testing.T) {
	e := newEnv(t)
	const ns = "bounds"
	gw, web, _ := e.policyTargets(t, ns)

	// The platform team's Tenant, stored (and validated) by the hub's API server.
	tenant := &v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "bounded"}, Spec: v1alpha1.TenantSpec{
		TrafficPolicies: &v1alpha1.TrafficPolicyBounds{
			Features:             &[]v1alpha1.TrafficPolicyFeature{v1alpha1.TrafficPolicyFeatureRateLimit, v1alpha1.TrafficPolicyFeatureRetry, v1alpha1.TrafficPolicyFeatureAuthorization},
			MaxRequestsPerSecond: ptr.To[int64](100),
		}}}
	if err := e.Hub.Client.Create(e.ctx, tenant); err != nil {
		t.Fatal(err)
	}
	ts := &v1alpha1.TenantState{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "default"}}
	if err := e.Hub.Client.Create(e.ctx, ts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, o := range []client.Object{ts, tenant} {
			if err := e.Hub.Client.Delete(e.ctx, o); err != nil {
				t.Errorf("deleting %s: %v", o.GetName(), err)
			}
		}
	})
	// publish writes the bounds of the Tenant as the hub stores it into the TenantState, as
	// the manager does.
	publish := func() {
		t.Helper()
		stored := &v1alpha1.Tenant{}
		if err := e.Hub.Client.Get(e.ctx, client.ObjectKey{Name: tenant.Name}, stored); err != nil {
			t.Fatal(err)
		}
		if err := e.Hub.Client.Get(e.ctx, client.ObjectKeyFromObject(ts), ts); err != nil {
			t.Fatal(err)
		}
		ts.Status.TrafficPolicies = settings.Resolve(nil, stored).TrafficPolicies
		if err := e.Hub.Client.Status().Update(e.ctx, ts); err != nil {
			t.Fatal(err)
		}
	}
	publish()

	e.create(t, trafficPolicy(t, ns, "fast", `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}]
rateLimit: {type: Local, local: {rules: [{limit: {requests: 500, unit: Second}}]}}
retry: {numRetries: 2}
`))
	e.create(t, trafficPolicy(t, ns, "sticky", `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: other}]
loadBalancer: {type: Random}
`))
	e.create(t, trafficPolicy(t, ns, "gateway-wide", `
targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: edge}]
retry: {numRetries: 1}
`))
	e.create(t, egPolicy(t, SecurityPolicyKind, ns, "office", `
targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: edge}]
authorization: {defaultAction: Deny, rules: [{action: Allow, principal: {clientCIDRs: [10.0.0.0/8]}}]}
`))

	msg := e.kubelbAncestor(t, ns, "fast", "Gateway", ns, "edge", "False", "OverPlatformBound")
	for _, want := range []string{"rateLimit.local.rules[0] asks 500 requests per second", "spec.trafficPolicies.maxRequestsPerSecond of Tenant bounded is 100", "none of the policy applies"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
	}
	objects.WaitEvent(t, e.Tenant.Client, timeout, objects.EventFilter{Namespace: ns, Kind: "BackendTrafficPolicy", Name: "fast", Reason: "OverPlatformBound", Type: "Warning"})
	msg = e.kubelbAncestor(t, ns, "sticky", "Gateway", ns, "edge", "False", "OverPlatformBound")
	if want := "the policy uses loadBalancer (LoadBalancer); spec.trafficPolicies.features of Tenant bounded allows RateLimit, Retry, Authorization"; !strings.Contains(msg, want) {
		t.Errorf("message %q does not say %q", msg, want)
	}
	objects.WaitEvent(t, e.Tenant.Client, timeout, objects.EventFilter{Namespace: ns, Kind: "BackendTrafficPolicy", Name: "sticky", Reason: "OverPlatformBound", Type: "Warning"})
	e.policyAncestor(t, SecurityPolicyKind, ns, "office", "Gateway", ns, "edge", "True", "Accepted")
	// The routes' policies over the bounds override nothing: the hub applies the Gateway's.
	e.policyOverridden(t, BackendTrafficPolicyKind, ns, "gateway-wide", ns, "edge", "")

	// The Route carries the policy over the bound: the hub decides with its own bounds.
	e.routeOf(t, tenantNS, web.UID, func(rt *v1alpha1.Route) error {
		if bt := rt.Spec.Source.Kubernetes.Context.BackendTraffic; bt == nil || bt.Name != "fast" {
			return fmt.Errorf("backendTraffic %+v", bt)
		}
		return nil
	})
	e.routeOf(t, tenantNS, gw.UID, func(rt *v1alpha1.Route) error {
		if sec := rt.Spec.Source.Kubernetes.Context.Security; sec == nil || sec.Name != "office" {
			return fmt.Errorf("security %+v", sec)
		}
		return nil
	})

	// The platform team raises the bound: the policy is accepted.
	objects.Update(t, e.Hub.Client, &v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: tenant.Name}}, func(t *v1alpha1.Tenant) {
		t.Spec.TrafficPolicies.MaxRequestsPerSecond = ptr.To[int64](1000)
	})
	publish()
	e.kubelbAncestor(t, ns, "fast", "Gateway", ns, "edge", "True", "Accepted")
	e.kubelbAncestor(t, ns, "sticky", "Gateway", ns, "edge", "False", "OverPlatformBound")
	e.policyOverridden(t, BackendTrafficPolicyKind, ns, "gateway-wide", ns, "edge",
		"other BackendTrafficPolicies take precedence for HTTPRoute bounds/web (fast); this one applies to the rest")
}

// TestHubBounds: the bounds are read from the TenantState "default" first; a TenantState
// without bounds, or none, bounds nothing; a policy within them keeps its verdict, one over
// them gets OverBound naming the bound, and an Invalid one stays Invalid.
func TestHubBounds(t *testing.T) {
	state := func(name string, rps int64) v1alpha1.TenantState {
		s := v1alpha1.TenantState{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if rps > 0 {
			s.Status.TrafficPolicies = &v1alpha1.TenantTrafficPolicyBounds{TrafficPolicyBounds: v1alpha1.TrafficPolicyBounds{MaxRequestsPerSecond: ptr.To(rps)},
				SetBy: map[string]string{"maxRequestsPerSecond": "Tenant " + name}}
		}
		return s
	}
	if b := HubBounds(nil); b != nil {
		t.Errorf("no TenantState: %+v", b)
	}
	if b := HubBounds([]v1alpha1.TenantState{state("default", 0)}); b != nil {
		t.Errorf("no bounds: %+v", b)
	}
	b := HubBounds([]v1alpha1.TenantState{state("another", 5), state("default", 100)})
	if b == nil || b.MaxRequestsPerSecond != 100 {
		t.Fatalf("got %+v, want the default TenantState's", b)
	}
	read := func(spec string) EGPolicyVerdict {
		return BackendTrafficPolicyKind.Read(trafficPolicy(t, "ns", "p", spec))
	}
	const target = "targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}]\n"
	if v := BackendTrafficPolicyKind.CheckBounds(read(target+"rateLimit: {local: {rules: [{limit: {requests: 100, unit: Second}}]}}"), b); v.OverBound != "" || v.Value == nil {
		t.Errorf("within the bound: %+v", v)
	}
	v := BackendTrafficPolicyKind.CheckBounds(read(target+"rateLimit: {local: {rules: [{limit: {requests: 101, unit: Second}}]}}"), b)
	if want := "rateLimit.local.rules[0] asks 101 requests per second; spec.trafficPolicies.maxRequestsPerSecond of Tenant default is 100"; v.OverBound != want {
		t.Errorf("over the bound: %q, want %q", v.OverBound, want)
	}
	if v := BackendTrafficPolicyKind.CheckBounds(read(target+"rateLimit: {type: Global}"), b); v.Invalid == "" || v.OverBound != "" {
		t.Errorf("an invalid policy: %+v", v)
	}
}
