package translate

import (
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
		of:      func(c *v1alpha1.SourceContext) *v1alpha1.ClientTraffic { return c.ClientTraffic },
		name:    func(c *v1alpha1.ClientTraffic) (string, string) { return c.Namespace, c.Name },
		resolve: trafficpolicy.ResolveClient,
		bound:   trafficpolicy.CheckClientBounds,
	}
}

// underscoresActions are the IR's actions for the policy's withUnderscoresAction.
var underscoresActions = map[string]ir.UnderscoresAction{
	trafficpolicy.UnderscoresAllow:         ir.UnderscoresAllow,
	trafficpolicy.UnderscoresRejectRequest: ir.UnderscoresReject,
	trafficpolicy.UnderscoresDropHeader:    ir.UnderscoresDrop,
}

// clientTrafficFor is what the ClientTrafficPolicy of Gateway g asks of its HTTP and HTTPS
// Envoy listeners (those of its ListenerSets too: they share its ports; TLS listeners share
// the HTTPS ones, and get its connection settings), nil when it has none, when
// the policy asks for nothing, or when the hub cannot use it (reported on the Gateway's Route
// once; none of it applies).
func (t *l7) clientTrafficFor(g *gateway) *ir.ClientTraffic {
	ctx := sourceContext(g.route)
	if ctx == nil || ctx.ClientTraffic == nil {
		return nil
	}
	s, _ := t.client.check(t, ctx.ClientTraffic, "the Gateway's", t.ref(g.route, ""))
	if s == nil || *s == (trafficpolicy.ClientSettings{}) {
		return nil
	}
	return &ir.ClientTraffic{
		RequestReceivedTimeout:  ir.Duration(s.RequestReceivedTimeout),
		IdleTimeout:             ir.Duration(s.IdleTimeout),
		HeadersWithUnderscores:  underscoresActions[s.WithUnderscores],
		ConnectionLimit:         s.ConnectionLimit,
		ConnectionLimitDelay:    ir.Duration(s.CloseDelay),
		MaxAcceptPerSocketEvent: s.MaxAcceptPerSocketEvent,
	}
}
