package source

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// TestClientTrafficPolicies: Envoy Gateway's ClientTrafficPolicies on kubelb's Gateways,
// against real API servers. A Gateway's policy travels in the Gateway's Route (never in its
// routes', its clientIPDetection too) and is Accepted on the Gateway; a younger policy on the same Gateway is Conflicted
// (Warning Event); a policy with fields kubelb does not serve (http2.connectionKeepalive,
// connection.socketBufferLimit) is Invalid naming them (Warning Event) and nothing travels;
// one naming a listener (sectionName) is Invalid naming it; one on a Gateway that does not
// exist is TargetNotFound. Fixed with an idle timeout beyond the hub's hour, 20 trusted
// X-Forwarded-For hops, TLS 1.0 and a buffer limit of 2Mi it is Invalid naming the four;
// fixed again (TLS 1.3, ALPN http/1.1, an optional PROXY protocol header, keepalive, a
// buffer limit of 64Ki, HTTP/1.0, 50 HTTP/2 streams, escaped slashes refused, HTTP/3), it
// is Accepted and travels.
func TestClientTrafficPolicies(t *testing.T) {
	e := newEnv(t)
	const ns = "clients"
	gw, web, _ := e.policyTargets(t, ns)
	e.create(t, gateway(ns, "second", "kubelb"))
	second := &gwapiv1.Gateway{}
	if err := e.Tenant.Client.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "second"}, second); err != nil {
		t.Fatal(err)
	}
	ctp := func(name, spec string) *unstructured.Unstructured {
		return egPolicy(t, ClientTrafficPolicyKind, ns, name, spec)
	}

	e.create(t, ctp("clients", `
targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: edge}]
timeout: {http: {requestReceivedTimeout: 10s, idleTimeout: 2m}}
headers: {withUnderscoresAction: DropHeader}
connection: {connectionLimit: {value: 500}}
clientIPDetection: {xForwardedFor: {numTrustedHops: 2}}
`))
	e.create(t, ctp("later", `
targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: edge}]
headers: {withUnderscoresAction: Allow}
`))
	e.create(t, ctp("with-tls", `
targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: second}]
tls: {minVersion: "1.3"}
connection: {socketBufferLimit: 1Mi}
http2: {connectionKeepalive: {interval: 10s}}
timeout: {http: {idleTimeout: 30s}}
`))
	e.create(t, ctp("per-listener", `
targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: edge, sectionName: http}]
timeout: {http: {idleTimeout: 30s}}
`))
	e.create(t, ctp("nowhere", `
targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: nope}]
timeout: {http: {idleTimeout: 30s}}
`))

	e.routeOf(t, tenantNS, gw.UID, func(rt *v1alpha1.Route) error {
		ct := rt.Spec.Source.Kubernetes.Context.ClientTraffic
		if ct == nil || ct.Name != "clients" || ct.Namespace != ns || ct.Timeout == nil || ct.Timeout.HTTP == nil ||
			ct.Timeout.HTTP.RequestReceivedTimeout != "10s" || ct.Timeout.HTTP.IdleTimeout != "2m" || ct.Headers == nil || ct.Headers.WithUnderscoresAction != "DropHeader" {
			return fmt.Errorf("clientTraffic %+v", ct)
		}
		// The CRD's default maxAcceptPerSocketEvent (1) travels with the limit.
		if c := ct.Connection; c == nil || c.ConnectionLimit == nil || c.ConnectionLimit.Value == nil || *c.ConnectionLimit.Value != 500 ||
			c.MaxAcceptPerSocketEvent == nil || *c.MaxAcceptPerSocketEvent != 1 {
			return fmt.Errorf("clientTraffic.connection %+v", ct.Connection)
		}
		if d := ct.ClientIPDetection; d == nil || d.XForwardedFor == nil || d.XForwardedFor.NumTrustedHops == nil || *d.XForwardedFor.NumTrustedHops != 2 || d.CustomHeader != nil {
			return fmt.Errorf("clientTraffic.clientIPDetection %+v", ct.ClientIPDetection)
		}
		return nil
	})
	e.routeOf(t, tenantNS, web.UID, func(rt *v1alpha1.Route) error {
		if c := rt.Spec.Source.Kubernetes.Context; c != nil && c.ClientTraffic != nil {
			return fmt.Errorf("an HTTPRoute's Route carries clientTraffic %+v", c.ClientTraffic)
		}
		return nil
	})
	e.policyAncestor(t, ClientTrafficPolicyKind, ns, "clients", "Gateway", ns, "edge", "True", "Accepted")

	msg := e.policyAncestor(t, ClientTrafficPolicyKind, ns, "later", "Gateway", ns, "edge", "False", "Conflicted")
	if !strings.Contains(msg, "ClientTrafficPolicy "+ns+"/clients") {
		t.Errorf("Conflicted message %q does not name the policy that applies", msg)
	}
	objects.WaitEvent(t, e.Tenant.Client, timeout, objects.EventFilter{Namespace: ns, Kind: "ClientTrafficPolicy", Name: "later", Reason: "Conflicted", Type: "Warning"})

	msg = e.policyAncestor(t, ClientTrafficPolicyKind, ns, "with-tls", "Gateway", ns, "second", "False", "Invalid")
	if !strings.Contains(msg, "spec.connection.socketBufferLimit, spec.http2.connectionKeepalive not yet supported by kubelb") {
		t.Errorf("Invalid message %q does not name spec.connection.socketBufferLimit and spec.http2.connectionKeepalive", msg)
	}
	objects.WaitEvent(t, e.Tenant.Client, timeout, objects.EventFilter{Namespace: ns, Kind: "ClientTrafficPolicy", Name: "with-tls", Reason: "Invalid", Type: "Warning"})
	e.routeOf(t, tenantNS, second.UID, func(rt *v1alpha1.Route) error {
		if c := rt.Spec.Source.Kubernetes.Context; c != nil && c.ClientTraffic != nil {
			return fmt.Errorf("an invalid policy travels: %+v", c.ClientTraffic)
		}
		return nil
	})

	// A policy on one listener (sectionName): accepted besides the Gateway's, carried for
	// that listener; one naming a listener the Gateway does not have: TargetNotFound.
	e.policyAncestor(t, ClientTrafficPolicyKind, ns, "per-listener", "Gateway", ns, "edge", "True", "Accepted")
	e.routeOf(t, tenantNS, gw.UID, func(rt *v1alpha1.Route) error {
		c := rt.Spec.Source.Kubernetes.Context
		if sec := c.PolicySection("http"); sec == nil || sec.ClientTraffic == nil || sec.ClientTraffic.Name != "per-listener" ||
			sec.ClientTraffic.Timeout.HTTP.IdleTimeout != "30s" || c.ClientTraffic == nil || c.ClientTraffic.Name != "clients" {
			return fmt.Errorf("clientTraffic %+v, sections %+v: want clients for the Gateway, per-listener for listener http", c.ClientTraffic, c.PolicySections)
		}
		return nil
	})
	e.create(t, ctp("no-listener", `
targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: edge, sectionName: nope}]
timeout: {http: {idleTimeout: 30s}}
`))
	msg = e.policyAncestor(t, ClientTrafficPolicyKind, ns, "no-listener", "Gateway", ns, "edge", "False", "TargetNotFound")
	if !strings.Contains(msg, "no section named nope found for Gateway "+ns+"/edge") {
		t.Errorf("TargetNotFound message %q does not name the listener", msg)
	}
	e.policyAncestor(t, ClientTrafficPolicyKind, ns, "nowhere", "Gateway", ns, "nope", "False", "TargetNotFound")

	// Its unsupported fields removed, an idle timeout beyond the hub's bound: Invalid, naming it.
	objects.Update(t, e.Tenant.Client, ctp("with-tls", ""), func(p *unstructured.Unstructured) {
		spec := p.Object["spec"].(map[string]any)
		delete(spec, "http2")
		spec["connection"] = map[string]any{"bufferLimit": "2Mi"}
		spec["tls"] = map[string]any{"minVersion": "1.0"}
		spec["timeout"] = map[string]any{"http": map[string]any{"idleTimeout": "2h"}}
		spec["clientIPDetection"] = map[string]any{"xForwardedFor": map[string]any{"numTrustedHops": int64(20)}}
	})
	msg = e.policyAncestor(t, ClientTrafficPolicyKind, ns, "with-tls", "Gateway", ns, "second", "False", "Invalid")
	if !strings.Contains(msg, "timeout.http.idleTimeout 2h is out of range; use 1s to 1h") ||
		!strings.Contains(msg, "clientIPDetection.xForwardedFor.numTrustedHops 20 is out of range; use 0 to 8") ||
		!strings.Contains(msg, "tls.minVersion 1.0 is refused: TLS 1.0 and 1.1 are deprecated") ||
		!strings.Contains(msg, "connection.bufferLimit 2Mi is out of range; use 1Ki to 1Mi") {
		t.Errorf("Invalid message %q does not name the bounds", msg)
	}

	// Fixed: it is accepted and travels.
	objects.Update(t, e.Tenant.Client, ctp("with-tls", ""), func(p *unstructured.Unstructured) {
		p.Object["spec"].(map[string]any)["timeout"] = map[string]any{"http": map[string]any{"idleTimeout": "30m"}}
		delete(p.Object["spec"].(map[string]any), "clientIPDetection")
		p.Object["spec"].(map[string]any)["tls"] = map[string]any{"minVersion": "1.3", "alpnProtocols": []any{"http/1.1"}}
		p.Object["spec"].(map[string]any)["connection"] = map[string]any{"bufferLimit": "64Ki"}
		p.Object["spec"].(map[string]any)["proxyProtocol"] = map[string]any{"optional": true}
		p.Object["spec"].(map[string]any)["tcpKeepalive"] = map[string]any{"probes": int64(3), "idleTime": "1m"}
		p.Object["spec"].(map[string]any)["http1"] = map[string]any{"http10": map[string]any{}}
		p.Object["spec"].(map[string]any)["http2"] = map[string]any{"maxConcurrentStreams": int64(50)}
		p.Object["spec"].(map[string]any)["path"] = map[string]any{"escapedSlashesAction": "RejectRequest"}
		p.Object["spec"].(map[string]any)["http3"] = map[string]any{}
	})
	e.policyAncestor(t, ClientTrafficPolicyKind, ns, "with-tls", "Gateway", ns, "second", "True", "Accepted")
	e.routeOf(t, tenantNS, second.UID, func(rt *v1alpha1.Route) error {
		c := rt.Spec.Source.Kubernetes.Context
		if c == nil || c.ClientTraffic == nil || c.ClientTraffic.Name != "with-tls" ||
			c.ClientTraffic.Timeout.HTTP.IdleTimeout != "30m" || c.ClientTraffic.TLS == nil || c.ClientTraffic.TLS.MinVersion != "1.3" ||
			len(c.ClientTraffic.TLS.ALPNProtocols) != 1 || c.ClientTraffic.TLS.ALPNProtocols[0] != "http/1.1" {
			return fmt.Errorf("context %+v", c)
		}
		ct := c.ClientTraffic
		if ct.Connection == nil || ct.Connection.BufferLimit == nil || ct.Connection.BufferLimit.String() != "64Ki" ||
			ct.ProxyProtocol == nil || ct.ProxyProtocol.Optional == nil || !*ct.ProxyProtocol.Optional ||
			ct.TCPKeepalive == nil || ct.TCPKeepalive.Probes == nil || *ct.TCPKeepalive.Probes != 3 || ct.TCPKeepalive.IdleTime != "1m" ||
			ct.HTTP1 == nil || ct.HTTP1.HTTP10 == nil || ct.HTTP2 == nil || ct.HTTP2.MaxConcurrentStreams == nil || *ct.HTTP2.MaxConcurrentStreams != 50 ||
			ct.Path == nil || ct.Path.EscapedSlashesAction != "RejectRequest" || ct.HTTP3 == nil {
			return fmt.Errorf("connection and protocol options %+v", ct)
		}
		return nil
	})
}

// TestClientTrafficPolicyTargets: a ClientTrafficPolicy targets Gateways only. One naming a
// ListenerSet (which Envoy Gateway's CRD allows) or an HTTPRoute is Invalid, saying what it
// may target; only the oldest whole-Gateway policy is carried, and only by the Gateway's
// Route (never a route's, even one a policy names).
func TestClientTrafficPolicyTargets(t *testing.T) {
	at := func(name, spec string, sec int) *unstructured.Unstructured {
		p := egPolicy(t, ClientTrafficPolicyKind, "app", name, spec)
		p.SetCreationTimestamp(metav1.NewTime(time.Date(2026, 11, 1, 0, 0, sec, 0, time.UTC)))
		return p
	}
	set := at("on-set", `{targetRefs: [{group: gateway.networking.k8s.io, kind: ListenerSet, name: extra}], timeout: {http: {idleTimeout: 30s}}}`, 0)
	route := at("on-route", `{targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}], timeout: {http: {idleTimeout: 30s}}}`, 0)
	section := at("on-listener", `{targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: edge, sectionName: http}], timeout: {http: {idleTimeout: 10s}}}`, 0)
	older := at("b-older", `{targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: edge}], timeout: {http: {idleTimeout: 20s}}}`, 1)
	newer := at("a-newer", `{targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: edge}], timeout: {http: {idleTimeout: 40s}}}`, 2)
	all := []*unstructured.Unstructured{newer, set, route, section, older}

	for _, p := range []*unstructured.Unstructured{set, route} {
		v := ClientTrafficPolicyKind.Read(p)
		if !strings.Contains(v.Invalid, "kubelb serves a ClientTrafficPolicy on Gateways (gateway.networking.k8s.io) only") {
			t.Errorf("%s: Invalid %q", p.GetName(), v.Invalid)
		}
	}
	if ct := DesiredClientTraffic(all, "app", "edge"); ct == nil || ct.Name != "b-older" || ct.Timeout.HTTP.IdleTimeout != "20s" {
		t.Errorf("Gateway edge carries %+v, want b-older (the oldest whole-Gateway policy)", ct)
	}
	if ClientTrafficPolicyKind.targets("HTTPRoute") || !ClientTrafficPolicyKind.targets("Gateway") {
		t.Error("a ClientTrafficPolicy targets Gateways only")
	}
	if v := BackendTrafficPolicyKind.Read(trafficPolicy(t, "app", "bt", `{targetRefs: [{group: gateway.networking.k8s.io, kind: ListenerSet, name: extra}], retry: {numRetries: 1}}`)); !strings.Contains(v.Invalid,
		"kubelb serves a BackendTrafficPolicy on Gateways, HTTPRoutes, GRPCRoutes, TLSRoutes, TCPRoutes and UDPRoutes (gateway.networking.k8s.io) only") {
		t.Errorf("a BackendTrafficPolicy on a ListenerSet: Invalid %q", v.Invalid)
	}
}
