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
		of:        func(c *v1alpha1.SourceContext) *v1alpha1.Security { return c.Security },
		ofSection: func(s *v1alpha1.PolicySection) *v1alpha1.Security { return s.Security },
		name:      func(s *v1alpha1.Security) (string, string) { return s.Namespace, s.Name },
		resolve:   trafficpolicy.ResolveSecurity,
		bound:     trafficpolicy.CheckSecurityBounds,
	}
}

// routeSecurity is what the SecurityPolicy of a route's rules asks of its routes.
type routeSecurity struct {
	authorization *ir.Authorization
	basicAuth     *ir.BasicAuth
	jwt           *ir.JWT
	apiKeyAuth    *ir.APIKeyAuth
	extAuth       string
	oidc          string
	// closed: the policy asks for basic authentication but its users cannot be used, for
	// JWT authentication that cannot be served, for API keys that cannot be used, for an
	// external authorization or an OIDC login that cannot be served; the routes answer 500 rather than serve
	// without it.
	closed bool
}

// securityFor is what the SecurityPolicy that applies to rule (its name) of Route r served
// by listener l of its Gateway (policyChecks.forRoute: the rule's, the route's, the
// listener's, the Gateway's) asks of it, zero when none does: every route of the rule gets
// it, whatever it does (backends, redirect, direct response).
func (t *l7) securityFor(r *v1alpha1.Route, rule string, l *gwListener, owner ir.ObjectRef) routeSecurity {
	s, policy, carrier := t.security.forRoute(t, r, rule, l, owner)
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
		out.jwt = t.jwtFor(carrier, policy, s.JWT, owner)
		out.closed = out.closed || out.jwt == nil
	}
	if s.APIKeyAuth != nil {
		out.apiKeyAuth = t.apiKeyAuth(owner, policy, s.APIKeyAuth)
		out.closed = out.closed || out.apiKeyAuth == nil
	}
	if s.ExtAuth != nil {
		out.extAuth = t.extAuthFor(carrier, policy, s.ExtAuth, owner)
		out.closed = out.closed || out.extAuth == ""
	}
	if s.OIDC != nil {
		out.oidc = t.oidcFor(carrier, policy, s.OIDC, owner)
		out.closed = out.closed || out.oidc == ""
	}
	if s.Authorization != nil {
		out.authorization = t.authorizationOf(l.gw, policy, s.Authorization, t.detectsClientAddress)
	}
	return out
}

// authorizationOf is authorization a of SecurityPolicy policy as the IR's (made once per
// policy), for a route of Gateway gw (nil: none). The Gateway gets a ClientAddressUnknown
// Warning (once) when its hub Service does not keep the clients' addresses and detects does
// not say that its listeners learn them otherwise (X-Forwarded-For, PROXY protocol).
func (t *l7) authorizationOf(gw *gateway, policy string, a *trafficpolicy.Authorization, detects func(*gateway) bool) *ir.Authorization {
	if gw != nil && !keepsClientAddress(gw.svc) && !t.addressWarned[gw] && !detects(gw) {
		if t.addressWarned == nil {
			t.addressWarned = map[*gateway]bool{}
		}
		t.addressWarned[gw] = true
		t.problems.Add(t.ref(gw.route, ""), ir.SeverityWarning, ReasonClientAddressUnknown,
			"SecurityPolicy %s decides by client address, but the Gateway's hub Service does not keep the clients' addresses (externalTrafficPolicy Local on a Service of type LoadBalancer or NodePort): the hub's nodes may replace them by their own, so the rules may see a node's address instead",
			truncateMessage(policy))
	}
	if made, ok := t.authorizationIR[a]; ok {
		return made
	}
	out := &ir.Authorization{DefaultAllow: a.DefaultAllow, Rules: make([]ir.AuthorizationRule, 0, len(a.Rules))}
	for _, rule := range a.Rules {
		out.Rules = append(out.Rules, ir.AuthorizationRule{Allow: rule.Allow, SourceRanges: slices.Clone(rule.Ranges)})
	}
	if t.authorizationIR == nil {
		t.authorizationIR = map[*trafficpolicy.Authorization]*ir.Authorization{}
	}
	t.authorizationIR[a] = out
	return out
}
