package source

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// TestPolicyForStreamKinds: on a TLSRoute, a TCPRoute or a UDPRoute, a policy asking what
// only HTTP requests can take is Invalid there, naming those fields; the same policy on an
// HTTPRoute is served. A SecurityPolicy may target TCPRoutes and TLSRoutes (authorization
// only), not UDPRoutes.
func TestPolicyForStreamKinds(t *testing.T) {
	retry := trafficPolicy(t, "app", "retry", `{targetRefs: [{group: gateway.networking.k8s.io, kind: TCPRoute, name: db}], retry: {numRetries: 1}, loadBalancer: {type: Random}}`)
	v := BackendTrafficPolicyKind.Read(retry)
	if v.Invalid != "" {
		t.Fatalf("Read: %s", v.Invalid)
	}
	if got := BackendTrafficPolicyKind.ForKind(v, "HTTPRoute"); got.Invalid != "" {
		t.Errorf("HTTPRoute: %s", got.Invalid)
	}
	for _, kind := range []string{"TCPRoute", "TLSRoute", "UDPRoute"} {
		if got := BackendTrafficPolicyKind.ForKind(v, kind); !strings.HasPrefix(got.Invalid, "spec.retry: not served on a "+kind) || got.Value != nil {
			t.Errorf("%s: %+v", kind, got)
		}
	}
	conns := BackendTrafficPolicyKind.Read(trafficPolicy(t, "app", "conns", `{targetRefs: [{group: gateway.networking.k8s.io, kind: TCPRoute, name: db}],
circuitBreaker: {maxConnections: 10}, timeout: {tcp: {connectTimeout: 1s}}}`))
	if got := BackendTrafficPolicyKind.ForKind(conns, "TCPRoute"); got.Invalid != "" || got.Value == nil {
		t.Errorf("TCPRoute: %+v", got)
	}
	if got := BackendTrafficPolicyKind.ForKind(conns, "UDPRoute"); !strings.Contains(got.Invalid, "spec.circuitBreaker, spec.timeout.tcp.connectTimeout: not served on a UDPRoute") {
		t.Errorf("UDPRoute: %+v", got)
	}

	auth := egPolicy(t, SecurityPolicyKind, "app", "auth", `{targetRefs: [{group: gateway.networking.k8s.io, kind: TCPRoute, name: db}],
authorization: {defaultAction: Deny, rules: [{action: Allow, principal: {clientCIDRs: [10.0.0.0/8]}}]}, basicAuth: {users: {name: users}}}`)
	v = SecurityPolicyKind.Read(auth)
	if got := SecurityPolicyKind.ForKind(v, "TLSRoute"); !strings.HasPrefix(got.Invalid, "spec.basicAuth: not served on a TLSRoute") {
		t.Errorf("TLSRoute: %+v", got)
	}
	if got := SecurityPolicyKind.ForKind(v, "Gateway"); got.Invalid != "" {
		t.Errorf("Gateway: %s", got.Invalid)
	}
	udp := egPolicy(t, SecurityPolicyKind, "app", "udp", `{targetRefs: [{group: gateway.networking.k8s.io, kind: UDPRoute, name: dns}],
authorization: {defaultAction: Deny, rules: [{action: Allow, principal: {clientCIDRs: [10.0.0.0/8]}}]}}`)
	if v := SecurityPolicyKind.Read(udp); !strings.Contains(v.Invalid, "kubelb serves a SecurityPolicy on Gateways, HTTPRoutes, GRPCRoutes, TCPRoutes and TLSRoutes") {
		t.Errorf("UDPRoute: %+v", v)
	}
	if ClientTrafficPolicyKind.targets("TCPRoute") {
		t.Error("a ClientTrafficPolicy targets Gateways only")
	}
}

// TestStreamRoutePolicies: BackendTrafficPolicies and SecurityPolicies on TCPRoutes and
// UDPRoutes against real API servers. A TCPRoute's SecurityPolicy (authorization) and
// BackendTrafficPolicy (load balancer, circuit breaker, connect timeout) travel in its Route
// and are Accepted on its Gateway; a UDPRoute's policy with a retry and a circuit breaker
// is Invalid naming them (Warning Event) and its Route carries nothing, as a TLSRoute's
// hashing a header; a policy on the TCPRoute's rule by name applies to that rule. Fixing the UDPRoute's policy (the load
// balancer only) makes it travel.
func TestStreamRoutePolicies(t *testing.T) {
	e := newEnv(t)
	const ns = "streams"
	e.namespace(t, ns, nil)
	e.create(t, gateway(ns, "edge", "kubelb"))
	e.create(t, clusterIP(ns, "db", 5432))
	parents := []gwapiv1.ParentReference{{Name: "edge"}}
	ref := gwapiv1.BackendRef{BackendObjectReference: gwapiv1.BackendObjectReference{Name: "db", Port: ptr.To(gwapiv1.PortNumber(5432))}}
	tcp := &gwapiv1.TCPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tcp"}, Spec: gwapiv1.TCPRouteSpec{
		CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: parents},
		Rules:           []gwapiv1.TCPRouteRule{{Name: ptr.To(gwapiv1.SectionName("main")), BackendRefs: []gwapiv1.BackendRef{ref}}}}}
	udp := &gwapiv1.UDPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "udp"}, Spec: gwapiv1.UDPRouteSpec{
		CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: parents}, Rules: []gwapiv1.UDPRouteRule{{BackendRefs: []gwapiv1.BackendRef{ref}}}}}
	tls := &gwapiv1.TLSRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tls"}, Spec: gwapiv1.TLSRouteSpec{
		CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: parents}, Hostnames: []gwapiv1.Hostname{"db.example.com"},
		Rules: []gwapiv1.TLSRouteRule{{BackendRefs: []gwapiv1.BackendRef{ref}}}}}
	e.create(t, tcp)
	e.create(t, udp)
	e.create(t, tls)

	e.create(t, egPolicy(t, SecurityPolicyKind, ns, "office", `
targetRefs: [{group: gateway.networking.k8s.io, kind: TCPRoute, name: tcp}]
authorization: {defaultAction: Deny, rules: [{action: Allow, principal: {clientCIDRs: [10.0.0.0/8]}}]}
`))
	e.create(t, trafficPolicy(t, ns, "conns", `
targetRefs: [{group: gateway.networking.k8s.io, kind: TCPRoute, name: tcp}]
loadBalancer: {type: LeastRequest}
circuitBreaker: {maxConnections: 100}
timeout: {tcp: {connectTimeout: 2s}}
`))
	e.create(t, trafficPolicy(t, ns, "main-rule", `
targetRefs: [{group: gateway.networking.k8s.io, kind: TCPRoute, name: tcp, sectionName: main}]
loadBalancer: {type: Random}
`))
	e.create(t, trafficPolicy(t, ns, "udp-http", `
targetRefs: [{group: gateway.networking.k8s.io, kind: UDPRoute, name: udp}]
loadBalancer: {type: Random}
retry: {numRetries: 2}
circuitBreaker: {maxConnections: 100}
`))

	e.create(t, trafficPolicy(t, ns, "tls-by-user", `
targetRefs: [{group: gateway.networking.k8s.io, kind: TLSRoute, name: tls}]
loadBalancer: {type: ConsistentHash, consistentHash: {type: Header, header: {name: X-User}}}
`))

	e.routeOf(t, tenantNS, tcp.UID, func(rt *v1alpha1.Route) error {
		c := rt.Spec.Source.Kubernetes.Context
		if c == nil || c.Security == nil || c.Security.Name != "office" || c.Security.Authorization == nil ||
			c.BackendTraffic == nil || c.BackendTraffic.Name != "conns" || c.BackendTraffic.LoadBalancer.Type != "LeastRequest" || c.BackendTraffic.Timeout.TCP.ConnectTimeout != "2s" {
			return fmt.Errorf("context %+v", c)
		}
		if s := c.PolicySection("main"); s == nil || s.BackendTraffic == nil || s.BackendTraffic.Name != "main-rule" {
			return fmt.Errorf("policy sections %+v", c.PolicySections)
		}
		return nil
	})
	e.policyAncestor(t, SecurityPolicyKind, ns, "office", "Gateway", ns, "edge", "True", "Accepted")
	e.kubelbAncestor(t, ns, "conns", "Gateway", ns, "edge", "True", "Accepted")
	e.kubelbAncestor(t, ns, "main-rule", "Gateway", ns, "edge", "True", "Accepted")

	msg := e.kubelbAncestor(t, ns, "udp-http", "Gateway", ns, "edge", "False", "Invalid")
	if !strings.Contains(msg, "spec.circuitBreaker, spec.retry: not served on a UDPRoute") {
		t.Errorf("Invalid message %q does not name the fields", msg)
	}
	objects.WaitEvent(t, e.Tenant.Client, timeout, objects.EventFilter{Namespace: ns, Kind: "BackendTrafficPolicy", Name: "udp-http", Reason: "Invalid", Type: "Warning"})
	e.routeOf(t, tenantNS, udp.UID, func(rt *v1alpha1.Route) error {
		if c := rt.Spec.Source.Kubernetes.Context; c != nil && c.BackendTraffic != nil {
			return fmt.Errorf("an invalid policy travels: %+v", c.BackendTraffic)
		}
		return nil
	})

	// A TLSRoute's connections carry no header to hash.
	msg = e.kubelbAncestor(t, ns, "tls-by-user", "Gateway", ns, "edge", "False", "Invalid")
	if !strings.Contains(msg, "spec.loadBalancer.consistentHash.header: not served on a TLSRoute") {
		t.Errorf("Invalid message %q does not name the header hash", msg)
	}
	e.routeOf(t, tenantNS, tls.UID, func(rt *v1alpha1.Route) error {
		if c := rt.Spec.Source.Kubernetes.Context; c != nil && c.BackendTraffic != nil {
			return fmt.Errorf("an invalid policy travels: %+v", c.BackendTraffic)
		}
		return nil
	})

	// Fixed (the load balancer only): Accepted, and it travels.
	objects.Update(t, e.Tenant.Client, trafficPolicy(t, ns, "udp-http", ""), func(p *unstructured.Unstructured) {
		spec := p.Object["spec"].(map[string]any)
		delete(spec, "retry")
		delete(spec, "circuitBreaker")
	})
	e.kubelbAncestor(t, ns, "udp-http", "Gateway", ns, "edge", "True", "Accepted")
	e.routeOf(t, tenantNS, udp.UID, func(rt *v1alpha1.Route) error {
		if c := rt.Spec.Source.Kubernetes.Context; c == nil || c.BackendTraffic == nil || c.BackendTraffic.LoadBalancer.Type != "Random" || c.BackendTraffic.Retry != nil {
			return fmt.Errorf("context %+v", c)
		}
		return nil
	})
}
