package translate

import (
	"slices"
	"strings"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// ReasonInvalidSecurity: the SecurityPolicy a Route carries cannot be used as written; none of
// it applies (the route is served as if it had none, or under its Gateway's).
const ReasonInvalidSecurity = "InvalidSecurity"

// securityChecks checks the SecurityPolicies of Route contexts (policies.go).
func securityChecks() policyChecks[v1alpha1.Security, trafficpolicy.SecuritySettings] {
	return policyChecks[v1alpha1.Security, trafficpolicy.SecuritySettings]{
		kind: "SecurityPolicy", reason: ReasonInvalidSecurity,
		of:      func(c *v1alpha1.SourceContext) *v1alpha1.Security { return c.Security },
		name:    func(s *v1alpha1.Security) (string, string) { return s.Namespace, s.Name },
		resolve: trafficpolicy.ResolveSecurity,
		bound:   trafficpolicy.CheckSecurityBounds,
	}
}

// routeSecurity is what the SecurityPolicy of a route's rules asks of its routes.
type routeSecurity struct {
	authorization *ir.Authorization
	basicAuth     *ir.BasicAuth
	jwt           *ir.JWT
	apiKeyAuth    *ir.APIKeyAuth
	extAuth       string
	// closed: the policy asks for basic authentication but its users cannot be used, for
	// JWT authentication that cannot be served, for API keys that cannot be used, or for an
	// external authorization that cannot be served; the routes answer 500 rather than serve
	// without it.
	closed bool
}

// securityFor is what the SecurityPolicy that applies to Route r's rules served by Gateway
// gw (GEP-713: the route's own overrides the Gateway's) asks of them, zero when none does:
// every route of the rules gets it, whatever it does (backends, redirect, direct response).
func (t *l7) securityFor(r *v1alpha1.Route, gw *gateway, owner ir.ObjectRef) routeSecurity {
	s, policy := t.security.forRoute(t, r, gw, owner)
	if s == nil {
		return routeSecurity{}
	}
	out := routeSecurity{}
	if s.BasicAuthSecret != "" {
		ns, _, _ := strings.Cut(policy, "/")
		out.basicAuth = t.basicAuth(owner, "SecurityPolicy "+truncateMessage(policy), ns, s.BasicAuthSecret, trafficpolicy.HtpasswdKey)
		out.closed = out.basicAuth == nil
	}
	if s.JWT != nil {
		out.jwt = t.jwtFor(policy, s.JWT, owner)
		out.closed = out.closed || out.jwt == nil
	}
	if s.APIKeyAuth != nil {
		out.apiKeyAuth = t.apiKeyAuth(owner, policy, s.APIKeyAuth)
		out.closed = out.closed || out.apiKeyAuth == nil
	}
	if s.ExtAuth != nil {
		out.extAuth = t.extAuthFor(t.securityCarrier(r, gw, policy), policy, s.ExtAuth, owner)
		out.closed = out.closed || out.extAuth == ""
	}
	a := s.Authorization
	if a == nil {
		return out
	}
	if gw != nil && !keepsClientAddress(gw.svc) && !t.addressWarned[gw] {
		if t.addressWarned == nil {
			t.addressWarned = map[*gateway]bool{}
		}
		t.addressWarned[gw] = true
		t.problems.Add(t.ref(gw.route, ""), ir.SeverityWarning, ReasonClientAddressUnknown,
			"SecurityPolicy %s decides by client address, but the Gateway's hub Service does not keep the clients' addresses (externalTrafficPolicy Local on a Service of type LoadBalancer or NodePort): the hub's nodes may replace them by their own, so the rules may see a node's address instead",
			truncateMessage(policy))
	}
	if made, ok := t.authorizationIR[a]; ok {
		out.authorization = made
		return out
	}
	out.authorization = &ir.Authorization{DefaultAllow: a.DefaultAllow, Rules: make([]ir.AuthorizationRule, 0, len(a.Rules))}
	for _, rule := range a.Rules {
		out.authorization.Rules = append(out.authorization.Rules, ir.AuthorizationRule{Allow: rule.Allow, SourceRanges: slices.Clone(rule.Ranges)})
	}
	if t.authorizationIR == nil {
		t.authorizationIR = map[*trafficpolicy.Authorization]*ir.Authorization{}
	}
	t.authorizationIR[a] = out.authorization
	return out
}

// securityCarrier is the Route carrying SecurityPolicy policy ("namespace/name") of Route r's
// rules served by Gateway gw: r when its own context carries it, else the Gateway's Route.
func (t *l7) securityCarrier(r *v1alpha1.Route, gw *gateway, policy string) *v1alpha1.Route {
	if ctx := sourceContext(r); ctx != nil && ctx.Security != nil && ctx.Security.Namespace+"/"+ctx.Security.Name == policy {
		return r
	}
	if gw != nil {
		return gw.route
	}
	return r
}
