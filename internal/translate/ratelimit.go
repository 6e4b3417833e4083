package translate

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// Global rate limits (a BackendTrafficPolicy's rateLimit.global) are counted once for the
// tenant's whole fleet by the tenant's rate-limit service (Envoy's ratelimit, its counters in
// a store the platform team runs), at Options.RateLimitService. The routes under such a
// policy carry an ir.GlobalRateLimit; the Config gets the service (its domain: the tenant
// namespace) and its cluster, RateLimitCluster. Without a service, a policy with a global
// limit is over the platform team's bounds (checkRateLimitStore): none of it applies, and
// Envoy never gets a filter asking a service that is not there.

// RateLimitCluster is the cluster of the tenant's rate-limit service. No cluster of a
// tenant's objects has this name: theirs are "<lb>-<protocol>-<port>" and
// "<route>/<ns>/<svc>/<port>…".
const RateLimitCluster = "kubelb/ratelimit"

// checkRateLimitStore adds to err (CheckBounds') that a policy with a global rate limit
// cannot be served when the hub has no rate-limit service for the tenant (rateLimitService
// false): that is the platform team's to set up.
func checkRateLimitStore(err error, s *trafficpolicy.Settings, rateLimitService bool) error {
	if len(s.GlobalRateLimit) == 0 || rateLimitService {
		return err
	}
	const msg = "global rate limits (rateLimit.global) need the platform team to configure a rate-limit store for the hub, and it has none; a local limit (rateLimit.local) needs no store"
	if err == nil {
		return fmt.Errorf("%w: %s", trafficpolicy.ErrOverBound, msg)
	}
	return fmt.Errorf("%w; %s", err, msg)
}

// rateLimitRules is a policy's checked rules as the IR's.
func rateLimitRules(rules []trafficpolicy.RateLimitRule) []ir.RateLimitRule {
	var out []ir.RateLimitRule
	for _, r := range rules {
		rule := ir.RateLimitRule{Requests: r.Requests, Interval: ir.Duration(r.Interval), ClientCIDR: r.ClientCIDR, PerClient: r.PerClient}
		for _, h := range r.Headers {
			rule.Headers = append(rule.Headers, ir.RateLimitHeader{Name: h.Name, Exact: h.Exact, Regex: h.Regex, Distinct: h.Distinct})
		}
		out = append(out, rule)
	}
	return out
}

// rateLimitIR is a BackendTrafficPolicy's checked local rate limit as a route carries it
// (nil: none).
func rateLimitIR(rules []trafficpolicy.RateLimitRule) *ir.RateLimit {
	if len(rules) == 0 {
		return nil
	}
	return &ir.RateLimit{Rules: rateLimitRules(rules)}
}

// globalRateLimitIR is a BackendTrafficPolicy's checked global rate limit as a route
// carries it (nil: none).
func globalRateLimitIR(rules []trafficpolicy.RateLimitRule) *ir.GlobalRateLimit {
	if len(rules) == 0 {
		return nil
	}
	return &ir.GlobalRateLimit{Rules: rateLimitRules(rules)}
}

// validRateLimitService tells whether addr is the address of a rate-limit service
// ("IP:port").
func validRateLimitService(addr string) bool {
	ap, err := netip.ParseAddrPort(addr)
	return err == nil && ap.Port() != 0
}

// markGlobalRateLimit gives the routes with a global rate limit their key (each route of a
// policy counts apart), and, when a route has one, the Config the tenant's rate-limit service
// and its cluster, and the listeners serving those routes the filter.
func (t *l7) markGlobalRateLimit(cfg *ir.Config) {
	found := false
	for _, rc := range cfg.RouteConfigs {
		for _, vh := range rc.VirtualHosts {
			keys := map[string]bool{}
			for i, r := range vh.Routes {
				if g := r.GlobalRateLimit; g != nil {
					key := rc.Name + "/" + vh.Name + "/" + r.Name
					if keys[key] { // two routes of one name count apart all the same
						key += "#" + strconv.Itoa(i)
					}
					keys[key] = true
					r.GlobalRateLimit = &ir.GlobalRateLimit{Key: key, Rules: g.Rules}
					found = true
				}
			}
		}
	}
	if !found {
		return
	}
	ap, _ := netip.ParseAddrPort(t.opts.RateLimitService) // routes have global limits only with a service
	cfg.Clusters = append(cfg.Clusters, &ir.Cluster{
		Name: RateLimitCluster, StatName: "ratelimit", Protocol: ir.UpstreamHTTP2,
		Endpoints:      []ir.Endpoint{{Address: ap.Addr().Unmap().String(), Port: uint32(ap.Port())}},
		ConnectTimeout: ir.Duration(t.opts.ConnectTimeout), MaxConnections: t.opts.MaxConnectionsPerCluster,
	})
	svc := ir.RateLimitService{Domain: t.in.Tenant, Cluster: RateLimitCluster}
	cfg.RateLimitService = &svc
	markHTTPFilter(cfg, (*ir.RouteConfig).HasGlobalRateLimit, func(l *ir.Listener, on bool) {
		if l.GlobalRateLimit = nil; on {
			l.GlobalRateLimit = &svc
		}
	})
}

// warnRateLimitAddresses warns once per Gateway when a policy's rate limit counts clients by
// address (sourceCIDR) but the Gateway's hub Service does not keep the clients' addresses.
func (t *l7) warnRateLimitAddresses(gw *gateway, s *trafficpolicy.Settings, policy string) {
	byAddress := slices.ContainsFunc(append(slices.Clone(s.RateLimit), s.GlobalRateLimit...), func(r trafficpolicy.RateLimitRule) bool { return r.ClientCIDR != "" || r.PerClient })
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
