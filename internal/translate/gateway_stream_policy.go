package translate

import (
	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// Envoy Gateway's policies on TLSRoutes, TCPRoutes and UDPRoutes (stream routes), as Envoy
// Gateway applies them: per listener a route is served through, the policy of the route's
// rule, else the route's, else the listener's, else its Gateway's (policyChecks.forRoute), for
// what acts on connections: a BackendTrafficPolicy's load balancer, circuit breaker, passive
// health check and connect timeout on the route's clusters (applyCluster, the one cluster
// builder); a SecurityPolicy's authorization on the TCP listener or the TLS chain carrying
// the route. A route's (or its rule's) own policy asking more (retries, rate limits, basic
// authentication, …: trafficpolicy.StreamUnfit, SecurityStreamUnfit) is reported on the route
// and skipped for the next level: never half-applied. A listener's or Gateway's policy,
// whose other settings are for its HTTP routes, gives the route what acts on connections
// (trafficpolicy.StreamPart; a SecurityPolicy's authorization). UDPRoutes take the load
// balancer only; Envoy's UDP proxy has no authorization: a Gateway's SecurityPolicy does not
// restrict its UDP listeners, which the UDPRoute is told.

// streamPolicy is what the policies ask of a stream route served through one listener.
type streamPolicy struct {
	traffic *backendTraffic
	// authorization (TCPRoute, TLSRoute) decides which clients' connections are proxied;
	// hashSourceIP hashes them on the client address (a consistent hash of sourceIP).
	authorization *ir.Authorization
	hashSourceIP  bool
}

// streamPolicyFor is what the policies ask of rule (its name, "" for none) of stream route r
// of kind served by listener l, reported on owner.
func (t *l7) streamPolicyFor(r *v1alpha1.Route, kind, rule string, l *gwListener, owner ir.ObjectRef) streamPolicy {
	var out streamPolicy
	out.traffic = t.trafficForFit(r, rule, l, owner, func(s *trafficpolicy.Settings, inherited bool) (*trafficpolicy.Settings, string) {
		if inherited {
			return trafficpolicy.StreamPart(kind, s), ""
		}
		return s, trafficpolicy.StreamUnfitMessage(kind, trafficpolicy.StreamUnfit(kind, s), false)
	})
	if out.traffic != nil {
		out.hashSourceIP = out.traffic.settings.Hash != nil && out.traffic.settings.Hash.SourceIP
		if !out.traffic.clusterSettings() {
			out.traffic = nil
		}
	}
	if kind == KindUDPRoute {
		// Only a Gateway's (or its listener's) can reach a UDPRoute: the ccm refuses a
		// SecurityPolicy on a UDPRoute, as Envoy Gateway's CRD does.
		if s, policy, _ := t.security.forRoute(t, r, rule, l, owner); s != nil && s.Authorization != nil {
			t.problems.Add(owner, ir.SeverityWarning, ReasonInvalidSecurity,
				"SecurityPolicy %s's authorization does not apply to this UDPRoute: Envoy's UDP proxy has no authorization filter, so its datagrams are not restricted by client address", truncateMessage(policy))
		}
		return out
	}
	s, policy, _ := t.security.forRouteFit(t, r, rule, l, owner, func(s *trafficpolicy.SecuritySettings, inherited bool) (*trafficpolicy.SecuritySettings, string) {
		if inherited { // its authorization only (below)
			return s, ""
		}
		return s, trafficpolicy.StreamUnfitMessage(kind, trafficpolicy.SecurityStreamUnfit(s), true)
	})
	if s != nil && s.Authorization != nil {
		// The listener learns its clients' addresses without the hub Service keeping them
		// when its ClientTrafficPolicy reads PROXY protocol (X-Forwarded-For and headers
		// are HTTP's).
		proxied := func(g *gateway) bool {
			c := t.clientSettingsFor(g, []*gwListener{l})
			return c != nil && c.ProxyProtocol
		}
		out.authorization = t.authorizationOf(l.gw, policy, s.Authorization, proxied)
	}
	return out
}
