package translate

import (
	"reflect"
	"slices"
	"time"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// ReasonInvalidClientTraffic: the ClientTrafficPolicy a Gateway's Route carries cannot be used
// as written; none of it applies (its listeners keep Envoy's defaults).
const ReasonInvalidClientTraffic = "InvalidClientTraffic"

// clientChecks checks the ClientTrafficPolicies of Gateways' Route contexts (policies.go).
func clientChecks() policyChecks[v1alpha1.ClientTraffic, trafficpolicy.ClientSettings] {
	return policyChecks[v1alpha1.ClientTraffic, trafficpolicy.ClientSettings]{
		kind: "ClientTrafficPolicy", reason: ReasonInvalidClientTraffic,
		of:        func(c *v1alpha1.SourceContext) *v1alpha1.ClientTraffic { return c.ClientTraffic },
		ofSection: func(s *v1alpha1.PolicySection) *v1alpha1.ClientTraffic { return s.ClientTraffic },
		name:      func(c *v1alpha1.ClientTraffic) (string, string) { return c.Namespace, c.Name },
		resolve:   trafficpolicy.ResolveClient,
		bound:     trafficpolicy.CheckClientBounds,
	}
}

// underscoresActions are the IR's actions for the policy's withUnderscoresAction.
var underscoresActions = map[string]ir.UnderscoresAction{
	trafficpolicy.UnderscoresAllow:         ir.UnderscoresAllow,
	trafficpolicy.UnderscoresRejectRequest: ir.UnderscoresReject,
	trafficpolicy.UnderscoresDropHeader:    ir.UnderscoresDrop,
}

// clientTrafficFor is what the ClientTrafficPolicies of Gateway g ask of one of its HTTP or
// HTTPS Envoy listeners, the port of its listeners ls (those of its ListenerSets too: they
// share its ports; TLS listeners share the HTTPS ones, and get its connection settings), nil
// when none applies, when the policy asks for nothing, or when the hub cannot use it
// (reported on the Gateway's Route once; none of it applies). As Envoy Gateway, a policy
// targeting one of the Gateway's listeners (sectionName) overrides the Gateway's on that
// listener's port; listeners sharing a port share one Envoy listener, so the first of them
// (in the Gateway's order) with a policy of its own decides for the port, and the others'
// are reported.
func (t *l7) clientTrafficFor(g *gateway, ls []*gwListener) *ir.ClientTraffic {
	return t.clientTrafficOf(g, ls, t.clientSettingsFor(g, ls))
}

// clientTrafficOf is clientTrafficFor with the port's checked policy s (clientSettingsFor).
func (t *l7) clientTrafficOf(g *gateway, ls []*gwListener, s *trafficpolicy.ClientSettings) *ir.ClientTraffic {
	if s == nil {
		return nil
	}
	var tls *ir.ClientTLS
	if c := s.TLS; c != nil {
		tls = &ir.ClientTLS{MinVersion: c.MinVersion, MaxVersion: c.MaxVersion, Ciphers: c.Ciphers, ECDHCurves: c.ECDHCurves,
			SignatureAlgorithms: c.SignatureAlgorithms, ALPN: c.ALPN}
		if ss := c.Session; ss != nil {
			tls.NoStatelessResumption, tls.NoStatefulResumption = !ss.Stateless, !ss.Stateful
		}
		if reflect.ValueOf(*tls).IsZero() { // only a client validation: the chains carry it
			tls = nil
		}
	}
	out := clientConnection(s)
	out.HTTP = t.clientHTTP(g, ls, s)
	ct := out.withHTTP(ir.ClientTraffic{
		RequestHeadersTimeout:    ir.Duration(s.RequestHeadersTimeout),
		StreamIdleTimeout:        ir.Duration(t.clientStreamIdleTimeout(g, ls, s)),
		MaxConnectionDuration:    ir.Duration(s.MaxConnectionDuration),
		MaxRequestsPerConnection: s.MaxRequestsPerConnection,
		MaxStreamDuration:        ir.Duration(s.MaxStreamDuration),
		TLSHandshakeTimeout:      ir.Duration(s.TLSHandshakeTimeout),
		TLS:                      tls,
		RequestReceivedTimeout:   ir.Duration(s.RequestReceivedTimeout),
		IdleTimeout:              ir.Duration(s.IdleTimeout),
		HeadersWithUnderscores:   underscoresActions[s.WithUnderscores],
		ConnectionLimit:          s.ConnectionLimit,
		ConnectionLimitDelay:     ir.Duration(s.CloseDelay),
		MaxAcceptPerSocketEvent:  s.MaxAcceptPerSocketEvent,
		XFFTrustedHops:           s.XFFTrustedHops,
		XFFTrustedCIDRs:          slices.Clone(s.XFFTrustedCIDRs),
		ClientIPHeader:           s.ClientIPHeader,
		ClientIPHeaderFailClosed: s.ClientIPHeaderFailClosed,
	})
	if reflect.ValueOf(*ct).IsZero() { // a policy of client certificates only: its chains carry them
		return nil
	}
	return ct
}

// clientSettingsFor is the checked ClientTrafficPolicy that applies to the Envoy listener of
// Gateway g's listeners ls (clientTrafficFor), nil when none or when it asks for nothing.
func (t *l7) clientSettingsFor(g *gateway, ls []*gwListener) *trafficpolicy.ClientSettings {
	ctx := sourceContext(g.route)
	if ctx == nil {
		return nil
	}
	var s *trafficpolicy.ClientSettings
	var chosen, chosenPolicy string
	for _, l := range ls {
		name := gatewayListenerName(l)
		sec := ctx.PolicySection(name)
		if name == "" || sec == nil || sec.ClientTraffic == nil {
			continue
		}
		policy := sec.ClientTraffic.Namespace + "/" + sec.ClientTraffic.Name
		if s != nil {
			if policy != chosenPolicy {
				t.problems.Add(l.ref(t), ir.SeverityWarning, ReasonInvalidClientTraffic,
					"ClientTrafficPolicy %s does not apply: the listener shares its port with listener %s, whose ClientTrafficPolicy %s applies to the port's connections",
					truncateMessage(policy), truncate(chosen), truncateMessage(chosenPolicy))
			}
			continue
		}
		if v, _ := t.client.check(t, sec.ClientTraffic, "the Gateway's listener "+truncate(name)+"'s", l.ref(t)); v != nil {
			s, chosen, chosenPolicy = v, name, policy
		}
	}
	if s == nil && ctx.ClientTraffic != nil {
		s, _ = t.client.check(t, ctx.ClientTraffic, "the Gateway's", t.ref(g.route, ""))
	}
	if s == nil || s.IsZero() {
		return nil
	}
	return s
}

// clientStreamIdleTimeout is the policy's stream idle timeout for the Envoy listener of
// Gateway g's listeners ls: a policy may shorten the tenant's (spec.http.streamIdleTimeout),
// never lengthen it (an idle stream holds the hub's memory and sockets): a longer one is a
// Warning and the tenant's applies (0).
func (t *l7) clientStreamIdleTimeout(g *gateway, ls []*gwListener, s *trafficpolicy.ClientSettings) time.Duration {
	d, tenant := s.StreamIdleTimeout, t.opts.StreamIdleTimeout
	if d == 0 || tenant <= 0 || d < tenant {
		return d
	}
	if d > tenant {
		t.problems.Add(t.ref(g.route, ""), ir.SeverityWarning, ReasonInvalidClientTraffic,
			"ClientTrafficPolicy timeout.http.streamIdleTimeout %s on port %d is longer than the tenant's stream idle timeout %s (spec.http.streamIdleTimeout), which applies: a policy may only shorten it",
			shortDuration(d), ls[0].spec.Port, shortDuration(tenant))
	}
	return 0
}

// detectsClientAddress: Gateway g's ClientTrafficPolicy reads its clients' addresses from
// X-Forwarded-For (trusted hops), a header or a PROXY protocol header, on all its listeners (the Gateway's policy
// applies as written, and every listener's own policy, if any, does so too): the proxy
// before the hub gives the addresses, so the hub Service need not keep them
// (ReasonClientAddressUnknown is not reported). Nothing is reported here.
func (t *l7) detectsClientAddress(g *gateway) bool {
	ctx := sourceContext(g.route)
	if ctx == nil || ctx.ClientTraffic == nil {
		return false
	}
	detects := func(ct *v1alpha1.ClientTraffic) bool {
		s, err := trafficpolicy.ResolveClient(ct)
		return err == nil && trafficpolicy.CheckClientBounds(t.opts.TrafficPolicies, s) == nil && (s.XFFTrustedHops > 0 || len(s.XFFTrustedCIDRs) > 0 || s.ClientIPHeader != "" || s.ProxyProtocol)
	}
	if !detects(ctx.ClientTraffic) {
		return false
	}
	for i := range ctx.PolicySections {
		if c := ctx.PolicySections[i].ClientTraffic; c != nil && !detects(c) {
			return false
		}
	}
	return true
}
