package routekind

import (
	"slices"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// DecidesByClientAddress tells whether the policies a Route carries (its context, for the
// whole object or one of its sections) decide by the client's address: a SecurityPolicy's
// authorization, or a rate limit (local or global) with a sourceCIDR selector. The hub Service that
// serves it must then keep the clients' addresses. Basic authentication, and rate limits by
// header or per route, do not need them.
func DecidesByClientAddress(r *v1alpha1.Route) bool {
	src := r.Spec.Source.Kubernetes
	if src == nil || src.Context == nil {
		return false
	}
	c := src.Context
	if decidesByClientAddress(c.Security, c.BackendTraffic) {
		return true
	}
	for i := range c.PolicySections {
		if decidesByClientAddress(c.PolicySections[i].Security, c.PolicySections[i].BackendTraffic) {
			return true
		}
	}
	return false
}

func decidesByClientAddress(s *v1alpha1.Security, bt *v1alpha1.BackendTraffic) bool {
	if s != nil && s.Authorization != nil {
		return true
	}
	if bt == nil || bt.RateLimit == nil {
		return false
	}
	var rules []v1alpha1.TrafficRateLimitRule
	if l := bt.RateLimit.Local; l != nil {
		rules = l.Rules
	}
	if g := bt.RateLimit.Global; g != nil {
		rules = append(slices.Clone(rules), g.Rules...)
	}
	for _, rule := range rules {
		for _, sel := range rule.ClientSelectors {
			if sel.SourceCIDR != nil {
				return true
			}
		}
	}
	return false
}
