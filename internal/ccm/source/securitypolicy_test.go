package source

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// TestSecurityPolicies: Envoy Gateway's SecurityPolicies (authorization by client address)
// on kubelb's Gateways and routes. A Gateway's policy travels in the Gateway's Route, an
// HTTPRoute's in the route's (with the route's BackendTrafficPolicy, each kind on its own);
// each is Accepted on its Gateway. A younger policy on the same route is Conflicted (Warning
// Event) and does not travel; a policy kubelb cannot serve (jwt.remoteJWKS without
// backendRefs) is Invalid, saying why (Warning Event), and its route carries nothing; one with a CIDR that is
// not one is Invalid naming it; a policy on a route that does not exist is TargetNotFound.
// Fixing the invalid policy makes it travel.
func TestSecurityPolicies(t *testing.T) {
	e := newEnv(t)
	const ns = "security"
	gw, web, other := e.policyTargets(t, ns)
	sp := func(name, spec string) *unstructured.Unstructured {
		return egPolicy(t, SecurityPolicyKind, ns, name, spec)
	}

	e.create(t, sp("office", `
targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: edge}]
authorization: {defaultAction: Deny, rules: [{action: Allow, principal: {clientCIDRs: [10.0.0.0/8]}}]}
`))
	e.create(t, sp("for-web", `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}]
authorization:
  rules:
  - {name: kiosk, action: Deny, principal: {clientCIDRs: [10.1.2.3/32]}}
  - {action: Allow, principal: {clientCIDRs: [10.0.0.0/8, "2001:db8::/32"]}}
`))
	e.create(t, trafficPolicy(t, ns, "web-retries", `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}]
retry: {numRetries: 3}
`))
	e.create(t, sp("later-for-web", `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}]
authorization: {defaultAction: Allow}
`))
	e.create(t, sp("with-jwt", `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: other}]
jwt: {providers: [{name: p, remoteJWKS: {uri: "http://example.com/jwks"}}]}
authorization: {defaultAction: Allow, rules: [{action: Deny, principal: {clientCIDRs: [192.0.2.0/24]}}]}
`))
	e.create(t, sp("nowhere", `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: nope}]
authorization: {defaultAction: Allow}
`))

	// The Gateway's Route carries its policy, the HTTPRoute's the route's own, in order, next
	// to its BackendTrafficPolicy.
	e.routeOf(t, tenantNS, gw.UID, func(rt *v1alpha1.Route) error {
		sec := rt.Spec.Source.Kubernetes.Context.Security
		if sec == nil || sec.Name != "office" || sec.Authorization.DefaultAction != "Deny" || len(sec.Authorization.Rules) != 1 ||
			!slices.Equal(sec.Authorization.Rules[0].Principal.ClientCIDRs, []string{"10.0.0.0/8"}) {
			return fmt.Errorf("security %+v", sec)
		}
		return nil
	})
	e.routeOf(t, tenantNS, web.UID, func(rt *v1alpha1.Route) error {
		c := rt.Spec.Source.Kubernetes.Context
		if sec := c.Security; sec == nil || sec.Name != "for-web" || len(sec.Authorization.Rules) != 2 || sec.Authorization.Rules[0].Action != "Deny" || sec.Authorization.Rules[0].Name != "kiosk" {
			return fmt.Errorf("security %+v", sec)
		}
		if c.BackendTraffic == nil || c.BackendTraffic.Name != "web-retries" {
			return fmt.Errorf("backendTraffic %+v", c.BackendTraffic)
		}
		return nil
	})
	e.policyAncestor(t, SecurityPolicyKind, ns, "office", "Gateway", ns, "edge", "True", "Accepted")
	e.policyAncestor(t, SecurityPolicyKind, ns, "for-web", "Gateway", ns, "edge", "True", "Accepted")

	msg := e.policyAncestor(t, SecurityPolicyKind, ns, "later-for-web", "Gateway", ns, "edge", "False", "Conflicted")
	if !strings.Contains(msg, "SecurityPolicy "+ns+"/for-web") {
		t.Errorf("Conflicted message %q does not name the policy that applies", msg)
	}
	objects.WaitEvent(t, e.Tenant.Client, timeout, objects.EventFilter{Namespace: ns, Kind: "SecurityPolicy", Name: "later-for-web", Reason: "Conflicted", Type: "Warning"})

	msg = e.policyAncestor(t, SecurityPolicyKind, ns, "with-jwt", "Gateway", ns, "edge", "False", "Invalid")
	if !strings.Contains(msg, `jwt.providers[0] (p) remoteJWKS.uri "http://example.com/jwks": an absolute https URL`) {
		t.Errorf("Invalid message %q does not say jwt.providers[0] (p) remoteJWKS.uri needs https", msg)
	}
	objects.WaitEvent(t, e.Tenant.Client, timeout, objects.EventFilter{Namespace: ns, Kind: "SecurityPolicy", Name: "with-jwt", Reason: "Invalid", Type: "Warning"})
	e.routeOf(t, tenantNS, other.UID, func(rt *v1alpha1.Route) error {
		if sec := rt.Spec.Source.Kubernetes.Context.Security; sec != nil {
			return fmt.Errorf("an invalid policy travels: %+v", sec)
		}
		return nil
	})

	e.policyAncestor(t, SecurityPolicyKind, ns, "nowhere", "HTTPRoute", ns, "nope", "False", "TargetNotFound")

	// A CIDR that is not one: Invalid, naming it.
	objects.Update(t, e.Tenant.Client, sp("with-jwt", ""), func(p *unstructured.Unstructured) {
		spec := p.Object["spec"].(map[string]any)
		delete(spec, "jwt")
		spec["authorization"].(map[string]any)["rules"].([]any)[0].(map[string]any)["principal"] = map[string]any{"clientCIDRs": []any{"192.0.2.0/33"}}
	})
	msg = e.policyAncestor(t, SecurityPolicyKind, ns, "with-jwt", "Gateway", ns, "edge", "False", "Invalid")
	if !strings.Contains(msg, `"192.0.2.0/33" is not a CIDR`) {
		t.Errorf("Invalid message %q does not name the bad CIDR", msg)
	}

	// Fixed: it is accepted and travels.
	objects.Update(t, e.Tenant.Client, sp("with-jwt", ""), func(p *unstructured.Unstructured) {
		spec := p.Object["spec"].(map[string]any)
		spec["authorization"].(map[string]any)["rules"].([]any)[0].(map[string]any)["principal"] = map[string]any{"clientCIDRs": []any{"192.0.2.0/24"}}
	})
	e.policyAncestor(t, SecurityPolicyKind, ns, "with-jwt", "Gateway", ns, "edge", "True", "Accepted")
	e.routeOf(t, tenantNS, other.UID, func(rt *v1alpha1.Route) error {
		if sec := rt.Spec.Source.Kubernetes.Context.Security; sec == nil || sec.Name != "with-jwt" || sec.Authorization.DefaultAction != "Allow" {
			return fmt.Errorf("security %+v", sec)
		}
		return nil
	})
}
