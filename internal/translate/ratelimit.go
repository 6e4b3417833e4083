package translate

import (
	"slices"

	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// rateLimitIR is a BackendTrafficPolicy's checked local rate limit as a route carries it
// (nil: none).
func rateLimitIR(rules []trafficpolicy.RateLimitRule) *ir.RateLimit {
	if len(rules) == 0 {
		return nil
	}
	out := &ir.RateLimit{}
	for _, r := range rules {
		rule := ir.RateLimitRule{Requests: r.Requests, Interval: ir.Duration(r.Interval), ClientCIDR: r.ClientCIDR, PerClient: r.PerClient}
		for _, h := range r.Headers {
			rule.Headers = append(rule.Headers, ir.RateLimitHeader{Name: h.Name, Exact: h.Exact, Regex: h.Regex, Distinct: h.Distinct})
		}
		out.Rules = append(out.Rules, rule)
	}
	return out
}

// warnRateLimitAddresses warns once per Gateway when a policy's rate limit counts clients by
// address (sourceCIDR) but the Gateway's hub Service does not keep the clients' addresses.
func (t *l7) warnRateLimitAddresses(gw *gateway, s *trafficpolicy.Settings, policy string) {
	byAddress := slices.ContainsFunc(s.RateLimit, func(r trafficpolicy.RateLimitRule) bool { return r.ClientCIDR != "" || r.PerClient })
	if gw == nil || !byAddress || keepsClientAddress(gw.svc) || t.addressWarned[gw] || t.detectsClientAddress(gw) {
		return
	}
	if t.addressWarned == nil {
		t.addressWarned = map[*gateway]bool{}
	}
	t.addressWarned[gw] = true
	t.problems.Add(t.ref(gw.route, ""), ir.SeverityWarning, ReasonClientAddressUnknown,
		"BackendTrafficPolicy %s limits requests by client address (sourceCIDR), but the Gateway's hub Service does not keep the clients' addresses (externalTrafficPolicy Local on a Service of type LoadBalancer or NodePort): the hub's nodes may replace them by their own, so clients behind one node may share one limit",
		truncateMessage(policy))
}
