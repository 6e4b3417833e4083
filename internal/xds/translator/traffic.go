package translator

import (
	"slices"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"kubelb.dev/kubelb/internal/ir"
)

// clusterTraffic applies what a BackendTrafficPolicy asks of an HTTP cluster (ir.ClusterTraffic)
// to the cluster built so far: its load balancer, circuit-breaker thresholds, outlier
// detection and upstream HTTP connection options (opts, the cluster's HttpProtocolOptions).
func clusterTraffic(out *clusterv3.Cluster, c *ir.Cluster, opts *corev3.HttpProtocolOptions) *corev3.HttpProtocolOptions {
	t := c.Traffic
	if t == nil {
		return opts
	}
	switch t.LB {
	case ir.LBLeastRequest:
		out.LbPolicy = clusterv3.Cluster_LEAST_REQUEST
	case ir.LBRandom:
		out.LbPolicy = clusterv3.Cluster_RANDOM
	case ir.LBMaglev:
		// Maglev, as Envoy Gateway does for ConsistentHash: its table costs memory per
		// cluster (65537 entries by default), which tableSize bounds.
		out.LbPolicy = clusterv3.Cluster_MAGLEV
		if t.MaglevTableSize > 0 {
			out.LbConfig = &clusterv3.Cluster_MaglevLbConfig_{MaglevLbConfig: &clusterv3.Cluster_MaglevLbConfig{
				TableSize: wrapperspb.UInt64(t.MaglevTableSize),
			}}
		}
	}
	th := out.CircuitBreakers.Thresholds[0]
	if t.MaxPendingRequests > 0 {
		th.MaxPendingRequests = wrapperspb.UInt32(t.MaxPendingRequests)
	}
	if t.MaxRequests > 0 {
		th.MaxRequests = wrapperspb.UInt32(t.MaxRequests)
	}
	if t.MaxRetries > 0 {
		th.MaxRetries = wrapperspb.UInt32(t.MaxRetries)
	}
	if o := t.Outlier; o != nil {
		od := &clusterv3.OutlierDetection{SplitExternalLocalOriginErrors: o.SplitExternalLocalOriginErrors}
		if o.Interval > 0 {
			od.Interval = durationpb.New(o.Interval.D())
		}
		if o.BaseEjectionTime > 0 {
			od.BaseEjectionTime = durationpb.New(o.BaseEjectionTime.D())
		}
		if o.Consecutive5xx != nil {
			od.Consecutive_5Xx = wrapperspb.UInt32(*o.Consecutive5xx)
		}
		if o.ConsecutiveGatewayErrors != nil {
			// Envoy enforces gateway failures at 0 % by default: asked for, they eject.
			od.ConsecutiveGatewayFailure = wrapperspb.UInt32(*o.ConsecutiveGatewayErrors)
			od.EnforcingConsecutiveGatewayFailure = wrapperspb.UInt32(100)
		}
		if o.ConsecutiveLocalOriginFailures != nil {
			od.ConsecutiveLocalOriginFailure = wrapperspb.UInt32(*o.ConsecutiveLocalOriginFailures)
		}
		if o.AlwaysEjectOne {
			od.AlwaysEjectOneHost = wrapperspb.Bool(true)
		}
		if o.MaxEjectionPercent != nil {
			od.MaxEjectionPercent = wrapperspb.UInt32(*o.MaxEjectionPercent)
		}
		out.OutlierDetection = od
	}
	if t.IdleTimeout > 0 || t.MaxRequestsPerConnection > 0 {
		if opts == nil {
			opts = &corev3.HttpProtocolOptions{}
		}
		if t.IdleTimeout > 0 {
			opts.IdleTimeout = durationpb.New(t.IdleTimeout.D())
		}
		if t.MaxRequestsPerConnection > 0 {
			opts.MaxRequestsPerConnection = wrapperspb.UInt32(t.MaxRequestsPerConnection)
		}
	}
	return opts
}

// hashPolicy is what a route's requests are hashed on (nil: none).
func hashPolicy(h *ir.HashPolicy) []*routev3.RouteAction_HashPolicy {
	if h == nil {
		return nil
	}
	p := &routev3.RouteAction_HashPolicy{}
	switch {
	case h.SourceIP:
		p.PolicySpecifier = &routev3.RouteAction_HashPolicy_ConnectionProperties_{ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{SourceIp: true}}
	case h.Header != "":
		p.PolicySpecifier = &routev3.RouteAction_HashPolicy_Header_{Header: &routev3.RouteAction_HashPolicy_Header{HeaderName: h.Header}}
	default:
		c := &routev3.RouteAction_HashPolicy_Cookie{Name: h.Cookie}
		if h.CookieTTL > 0 {
			c.Ttl = durationpb.New(h.CookieTTL.D())
		}
		p.PolicySpecifier = &routev3.RouteAction_HashPolicy_Cookie_{Cookie: c}
	}
	return []*routev3.RouteAction_HashPolicy{p}
}

// retryOn is the retry_on of a retry policy: its own triggers (a BackendTrafficPolicy's),
// or connection failures, resets and, with codes, retriable-status-codes.
func retryOn(rt *ir.RetryPolicy) string {
	if len(rt.On) > 0 {
		return strings.Join(slices.Clone(rt.On), ",")
	}
	on := "connect-failure,refused-stream,reset"
	if len(rt.Codes) > 0 {
		on += ",retriable-status-codes"
	}
	return on
}
