package translate

import (
	"fmt"
	"time"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/textcut"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// ReasonInvalidBackendTraffic: the BackendTrafficPolicy a Route carries cannot be used as
// written; none of it applies (the route is served as if it had none).
const ReasonInvalidBackendTraffic = "InvalidBackendTraffic"

// backendTraffic is the BackendTrafficPolicy that applies to a route's rules under a Gateway:
// its name ("namespace/name") and checked settings.
type backendTraffic struct {
	policy   string
	settings *trafficpolicy.Settings
	// rateLimit and compression are the settings' route parts as the IR's, made once: every
	// route under the policy shares them (the back end builds each once per virtual host).
	rateLimit       *ir.RateLimit
	globalRateLimit *ir.GlobalRateLimit
	compression     []ir.Compressor
}

// trafficChecks checks the BackendTrafficPolicies of Route contexts (policies.go);
// rateLimitService: the hub has a rate-limit service for the tenant (else a global rate limit
// is over the platform team's bounds: checkRateLimitStore).
func trafficChecks(rateLimitService bool) policyChecks[v1alpha1.BackendTraffic, trafficpolicy.Settings] {
	return policyChecks[v1alpha1.BackendTraffic, trafficpolicy.Settings]{
		kind: "BackendTrafficPolicy", reason: ReasonInvalidBackendTraffic,
		of:        func(c *v1alpha1.SourceContext) *v1alpha1.BackendTraffic { return c.BackendTraffic },
		ofSection: func(s *v1alpha1.PolicySection) *v1alpha1.BackendTraffic { return s.BackendTraffic },
		name:      func(b *v1alpha1.BackendTraffic) (string, string) { return b.Namespace, b.Name },
		resolve:   trafficpolicy.Resolve,
		bound: func(b *trafficpolicy.Bounds, s *trafficpolicy.Settings) error {
			return checkRateLimitStore(trafficpolicy.CheckBounds(b, s), s, rateLimitService)
		},
	}
}

// trafficFor is the BackendTrafficPolicy that applies to rule (its name) of Route r served
// by listener l of its Gateway (policyChecks.forRoute: the rule's, the route's, the
// listener's, the Gateway's), nil when none does. A policy the hub cannot use is reported on
// owner and applies not at all (never half-applied).
func (t *l7) trafficFor(r *v1alpha1.Route, rule string, l *gwListener, owner ir.ObjectRef) *backendTraffic {
	return t.trafficForFit(r, rule, l, owner, nil)
}

// trafficForFit is trafficFor for a route that takes only the settings fit lets through
// (policyChecks.forRouteFit: a TCPRoute's).
func (t *l7) trafficForFit(r *v1alpha1.Route, rule string, l *gwListener, owner ir.ObjectRef, fit func(*trafficpolicy.Settings, bool) (*trafficpolicy.Settings, string)) *backendTraffic {
	s, name, _ := t.traffic.forRouteFit(t, r, rule, l, owner, fit)
	if s == nil {
		return nil
	}
	t.warnRateLimitAddresses(l.gw, s, name)
	if b, ok := t.trafficIR[s]; ok {
		return b
	}
	b := &backendTraffic{policy: name, settings: s, rateLimit: rateLimitIR(s.RateLimit), globalRateLimit: globalRateLimitIR(s.GlobalRateLimit),
		compression: compressionIR(s.Compression)}
	if t.trafficIR == nil {
		t.trafficIR = map[*trafficpolicy.Settings]*backendTraffic{}
	}
	t.trafficIR[s] = b
	return b
}

// truncateMessage bounds a message made of a tenant's fields.
func truncateMessage(s string) string {
	return textcut.Cut(s, 1024+len(textcut.Ellipsis), textcut.Ellipsis)
}

// clusterSettings tells whether the policy changes the clusters of its backends (then each
// backend gets a cluster of its own for the policy: "<cluster>/traffic/<ns>/<policy>").
func (b *backendTraffic) clusterSettings() bool {
	if b == nil {
		return false
	}
	s := b.settings
	return s.LoadBalancer != "" || s.CircuitBreaker != nil || s.Outlier != nil || s.ConnectTimeout > 0 || s.IdleTimeout > 0
}

// applyCluster puts the policy's cluster settings on a new cluster, within the hub's bounds
// (maxConnections: the tenant's connections per cluster; thresholds above it are lowered to
// it, with a warning on owner).
func (t *l7) applyCluster(c *ir.Cluster, b *backendTraffic, owner ir.ObjectRef) {
	s := b.settings
	tr := &ir.ClusterTraffic{MaglevTableSize: s.TableSize}
	switch s.LoadBalancer {
	case trafficpolicy.RoundRobin:
		tr.LB = ir.LBRoundRobin
	case trafficpolicy.LeastRequest:
		tr.LB = ir.LBLeastRequest
	case trafficpolicy.Random:
		tr.LB = ir.LBRandom
	case trafficpolicy.Maglev:
		tr.LB = ir.LBMaglev
	}
	if s.ConnectTimeout > 0 {
		c.ConnectTimeout = ir.Duration(s.ConnectTimeout)
	}
	tr.IdleTimeout = ir.Duration(s.IdleTimeout)
	limit := c.MaxConnections
	bound := func(field string, v *uint32) uint32 {
		if v == nil {
			return 0
		}
		if *v > limit {
			t.problems.Add(owner, ir.SeverityWarning, ReasonInvalidBackendTraffic, "BackendTrafficPolicy %s: circuitBreaker.%s %d is above the tenant's %d connections per backend; %d applies", b.policy, field, *v, limit, limit)
			return limit
		}
		return *v
	}
	if cb := s.CircuitBreaker; cb != nil {
		if n := bound("maxConnections", cb.MaxConnections); n > 0 {
			c.MaxConnections = n
		}
		tr.MaxPendingRequests = min(bound("maxPendingRequests", cb.MaxPendingRequests), c.MaxConnections)
		tr.MaxRequests = min(bound("maxParallelRequests", cb.MaxRequests), c.MaxConnections)
		tr.MaxRetries = min(bound("maxParallelRetries", cb.MaxRetries), c.MaxConnections)
		if cb.MaxRequestsPerConnection != nil {
			tr.MaxRequestsPerConnection = *cb.MaxRequestsPerConnection
		}
	}
	if o := s.Outlier; o != nil {
		tr.Outlier = &ir.OutlierDetection{
			SplitExternalLocalOriginErrors: o.SplitExternalLocalOriginErrors,
			AlwaysEjectOne:                 o.AlwaysEjectOne,
			Interval:                       ir.Duration(o.Interval),
			BaseEjectionTime:               ir.Duration(o.BaseEjectionTime),
			Consecutive5xx:                 o.Consecutive5xx,
			ConsecutiveGatewayErrors:       o.ConsecutiveGatewayErrors,
			ConsecutiveLocalOriginFailures: o.ConsecutiveLocalOriginFailures,
			MaxEjectionPercent:             o.MaxEjectionPercent,
		}
	}
	c.Traffic = tr
}

// applyRoute puts the policy's route settings on a route to backends: the hash of a
// consistent hash, the retry (replacing the rule's), the per-try timeout and the request
// timeout (replacing the rule's and the annotations'), the local or global rate limit and
// the compression of its responses.
func (b *backendTraffic) applyRoute(route *ir.Route) {
	if b == nil {
		return
	}
	s := b.settings
	if h := s.Hash; h != nil {
		route.Hash = &ir.HashPolicy{SourceIP: h.SourceIP, Header: h.Header, Cookie: h.Cookie, CookieTTL: ir.Duration(h.CookieTTL.Truncate(time.Second))}
	}
	if r := s.Retry; r != nil {
		route.Retry = &ir.RetryPolicy{Attempts: r.NumRetries, On: r.RetryOn, Codes: r.Codes, Backoff: ir.Duration(r.BaseInterval), MaxBackoff: ir.Duration(r.MaxInterval)}
		if r.PerTryTimeout > 0 {
			route.BackendTimeout = ir.Duration(r.PerTryTimeout)
		}
	}
	if s.RequestTimeoutSet {
		route.Timeout = ir.Duration(s.RequestTimeout)
	}
	route.RateLimit = b.rateLimit
	route.GlobalRateLimit = b.globalRateLimit
	route.Compression = b.compression
}

// compressionIR is a policy's compressors (Gzip, Brotli, checked) as the IR's.
func compressionIR(cs []string) []ir.Compressor {
	var out []ir.Compressor
	for _, c := range cs {
		switch c {
		case trafficpolicy.Gzip:
			out = append(out, ir.CompressorGzip)
		case trafficpolicy.Brotli:
			out = append(out, ir.CompressorBrotli)
		}
	}
	return out
}

// trafficClusterName is the cluster of a backend under a policy with cluster settings.
func trafficClusterName(cluster string, b *backendTraffic) string {
	return fmt.Sprintf("%s/traffic/%s", cluster, b.policy)
}
