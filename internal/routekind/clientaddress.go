package routekind

import "kubelb.dev/kubelb/api/v1alpha1"

// DecidesByClientAddress tells whether the policies a Route carries (its context) decide by
// the client's address: a SecurityPolicy's authorization, or a local rate limit with a
// sourceCIDR selector. The hub Service that serves it must then keep the clients' addresses.
// Basic authentication, and rate limits by header or per route, do not need them.
func DecidesByClientAddress(r *v1alpha1.Route) bool {
	src := r.Spec.Source.Kubernetes
	if src == nil || src.Context == nil {
		return false
	}
	if s := src.Context.Security; s != nil && s.Authorization != nil {
		return true
	}
	bt := src.Context.BackendTraffic
	if bt == nil || bt.RateLimit == nil || bt.RateLimit.Local == nil {
		return false
	}
	for _, rule := range bt.RateLimit.Local.Rules {
		for _, sel := range rule.ClientSelectors {
			if sel.SourceCIDR != nil {
				return true
			}
		}
	}
	return false
}
