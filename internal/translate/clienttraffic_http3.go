package translate

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// A ClientTrafficPolicy's http3 serves a Gateway's HTTPS listeners over HTTP/3 too: an HTTP3
// listener (QUIC) on the Envoy port of the hub Service's UDP port of the same number (the
// planner adds it: routekind.HTTP3Ports), with the chains of the HTTPS port that serve HTTP
// routes, and the same route configurations; those advertise it (alt-svc, HTTP3Port), so
// clients learn of it over HTTPS. What HTTP/3 cannot carry is said, never silently dropped:
// a port whose policy needs the PROXY protocol or TLS 1.2 at most, or whose listeners
// validate client certificates (trafficpolicy's WhyNotHTTP3, the Gateway's
// spec.tls.frontend), is not served over HTTP/3 (a Warning); the policy's settings
// of TCP connections and TLS parameters apply to HTTPS over TCP only (a Warning names them).

// http3Listener is the HTTP3 listener of HTTPS listener il (Gateway g's listeners ls) when
// the port's checked ClientTrafficPolicy s asks for http3, nil when not, or when the port
// cannot be served over HTTP/3 (reported). made are the route configurations made for il's
// chains: those the HTTP3 listener serves advertise it.
func (t *l7) http3Listener(g *gateway, ls []*gwListener, il *ir.Listener, s *trafficpolicy.ClientSettings, made []*ir.RouteConfig) *ir.Listener {
	if s == nil || !s.HTTP3 {
		return nil
	}
	port := ls[0].spec.Port
	var chains []*ir.TLSServer
	for _, srv := range il.TLS {
		if !srv.Proxies() { // TLS listeners' chains carry TCP, not HTTP
			chains = append(chains, srv)
		}
	}
	if len(chains) == 0 { // TLS listeners only (reported by emitGateway)
		return nil
	}
	notServed := func(format string, args ...any) *ir.Listener {
		t.problems.Add(t.ref(g.route, ""), ir.SeverityWarning, ReasonInvalidClientTraffic,
			"ClientTrafficPolicy http3: port %d is not served over HTTP/3: %s", port, fmt.Sprintf(format, args...))
		return nil
	}
	if why := s.WhyNotHTTP3(); why != "" {
		return notServed("%s", why)
	}
	if slices.ContainsFunc(chains, func(c *ir.TLSServer) bool { return c.ClientValidation != nil }) {
		return notServed("kubelb does not yet validate client certificates over HTTP/3, and the Gateway's spec.tls.frontend asks for them on the port")
	}
	for _, l := range g.listeners {
		if l.family == familyUDP && l.spec.Port == port {
			return notServed("UDP listener %s uses UDP port %d", truncate(string(l.spec.Name)), port)
		}
	}
	udp := listenerPort(g.svc, int32(port), corev1.ProtocolUDP)
	if udp == 0 {
		// Not ReasonPortPending: the Gateway is served as it is meanwhile (over TCP), never
		// held at an earlier version for its HTTP/3.
		t.problems.Add(t.ref(g.route, ""), ir.SeverityWarning, ReasonInvalidClientTraffic,
			"ClientTrafficPolicy http3: the hub Service %s%s has no UDP port %d with an Envoy listener port yet; port %d is served over HTTP/3 (and advertised) once it has one",
			v1alpha1.GatewayServicePrefix, truncate(g.route.Name), port, port)
		return nil
	}
	if other := t.boundBy(il.Address, udp, true); other != "" {
		return notServed("Envoy listener port %d/UDP is already used by %s", udp, other)
	}
	if ignored := http3Ignores(s); len(ignored) > 0 {
		t.problems.Add(t.ref(g.route, ""), ir.SeverityWarning, ReasonInvalidClientTraffic,
			"ClientTrafficPolicy http3: %s of the policy act on HTTPS over TCP only, not on HTTP/3 on port %d (QUIC has no TCP connection and its own TLS 1.3 settings)",
			strings.Join(ignored, ", "), port)
	}
	q := &ir.Listener{
		Name:              fmt.Sprintf("gateway/%s/quic-%d", g.route.Name, port),
		Address:           il.Address,
		Port:              udp,
		Protocol:          ir.ProtocolHTTP3,
		StatPrefix:        fmt.Sprintf("%s/%s/quic-%d", g.namespace, g.obj.Name, port),
		Owners:            slices.Clone(il.Owners),
		TLS:               chains,
		HeaderLimits:      il.HeaderLimits,
		StreamIdleTimeout: il.StreamIdleTimeout,
		ClientTraffic:     il.ClientTraffic.ForHTTP3(),
		AccessLog:         il.AccessLog,
		CORS:              il.CORS,
		StatefulSession:   il.StatefulSession,
	}
	served := map[string]bool{}
	for _, c := range chains {
		served[c.RouteConfig] = true
	}
	for _, rc := range made {
		if served[rc.Name] {
			rc.HTTP3Port = uint32(port)
		}
	}
	return q
}

// http3Ignores names the settings of policy s that act on TCP connections or on TLS
// parameters, which an HTTP3 listener does not take (ir.ClientTraffic.ForHTTP3).
func http3Ignores(s *trafficpolicy.ClientSettings) []string {
	var out []string
	add := func(set bool, field string) {
		if set {
			out = append(out, field)
		}
	}
	add(s.ConnectionLimit > 0, "connection.connectionLimit")
	add(s.MaxAcceptPerSocketEvent > 0, "connection.maxAcceptPerSocketEvent")
	add(s.BufferLimit > 0, "connection.bufferLimit")
	add(s.Keepalive != nil, "tcpKeepalive")
	add(s.TLSHandshakeTimeout > 0, "timeout.tcp.tlsHandshakeTimeout")
	if c := s.TLS; c != nil {
		add(len(c.Ciphers) > 0, "tls.ciphers")
		add(len(c.ECDHCurves) > 0, "tls.ecdhCurves")
		add(len(c.SignatureAlgorithms) > 0, "tls.signatureAlgorithms")
		add(len(c.ALPN) > 0, "tls.alpnProtocols")
		add(c.Session != nil, "tls.session")
	}
	return out
}

// http3NotHere reports, on each of listeners ls of protocol p whose own ClientTrafficPolicy
// (sectionName) asks for http3, that it is not served over HTTP/3, and why. A Gateway's
// policy asks it of the HTTPS listeners only: its other listeners are not reported.
func (t *l7) http3NotHere(ls []*gwListener, p gwv1.ProtocolType, why string) {
	for _, l := range ls {
		name := gatewayListenerName(l)
		if name == "" || l.spec.Protocol != p {
			continue
		}
		sec := sourceContext(l.gw.route).PolicySection(name)
		if sec == nil || sec.ClientTraffic == nil || sec.ClientTraffic.HTTP3 == nil {
			continue
		}
		t.problems.Add(l.ref(t), ir.SeverityWarning, ReasonInvalidClientTraffic,
			"ClientTrafficPolicy %s/%s asks for http3, but the listener is not served over HTTP/3: %s",
			truncate(sec.ClientTraffic.Namespace), truncate(sec.ClientTraffic.Name), why)
	}
}
