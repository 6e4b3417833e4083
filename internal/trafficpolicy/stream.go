package trafficpolicy

import (
	"fmt"
	"strings"
)

// Policies on TLSRoutes, TCPRoutes and UDPRoutes (stream routes): their connections (TCP,
// TLS passed through or terminated) and sessions (UDP) carry no HTTP requests, so only the
// parts of a policy that act on connections apply to them, as in Envoy Gateway. A policy
// asking more of such a route is not served there at all (never half-applied): the ccm says
// Invalid, naming the fields, and the hub checks again.

// StreamRouteKinds are the kinds of stream routes.
var StreamRouteKinds = []string{"TLSRoute", "TCPRoute", "UDPRoute"}

// StreamUnfit lists the fields of settings s that do not apply to the routes of a stream
// kind (routeKind: TLSRoute, TCPRoute, UDPRoute), empty when all do. TCP and TLS connections
// take the load balancer (a consistent hash of the client address only), the circuit
// breaker but for maxRequestsPerConnection, the passive health check and the connect timeout;
// UDP sessions take the load balancer only.
func StreamUnfit(routeKind string, s *Settings) []string {
	if s == nil {
		return nil
	}
	var out []string
	udp := routeKind == "UDPRoute"
	if h := s.Hash; h != nil {
		if h.Header != "" {
			out = append(out, "spec.loadBalancer.consistentHash.header")
		}
		if h.Cookie != "" {
			out = append(out, "spec.loadBalancer.consistentHash.cookie")
		}
	}
	if cb := s.CircuitBreaker; udp && cb != nil {
		out = append(out, "spec.circuitBreaker")
	} else if cb != nil && cb.MaxRequestsPerConnection != nil {
		// The other thresholds are the cluster's, whatever it carries (the CRD defaults
		// them all to 1024): Envoy counts each proxied connection as a request.
		out = append(out, "spec.circuitBreaker.maxRequestsPerConnection")
	}
	if udp && s.Outlier != nil {
		out = append(out, "spec.healthCheck.passive")
	}
	if udp && s.ConnectTimeout > 0 {
		out = append(out, "spec.timeout.tcp.connectTimeout")
	}
	if s.Retry != nil {
		out = append(out, "spec.retry")
	}
	if s.RequestTimeoutSet {
		out = append(out, "spec.timeout.http.requestTimeout")
	}
	if s.IdleTimeout > 0 {
		out = append(out, "spec.timeout.http.connectionIdleTimeout")
	}
	if len(s.RateLimit) > 0 || len(s.GlobalRateLimit) > 0 {
		out = append(out, "spec.rateLimit")
	}
	if len(s.Compression) > 0 {
		out = append(out, "spec.compressor")
	}
	return out
}

// SecurityStreamUnfit lists the fields of settings s that do not apply to TCPRoutes and
// TLSRoutes, empty when all do: only authorization by client address does (Envoy's network
// RBAC filter); basic authentication, JWT, API keys, external authorization and OpenID
// Connect need HTTP requests.
func SecurityStreamUnfit(s *SecuritySettings) []string {
	if s == nil {
		return nil
	}
	var out []string
	if s.BasicAuthSecret != "" {
		out = append(out, "spec.basicAuth")
	}
	if s.JWT != nil {
		out = append(out, "spec.jwt")
	}
	if s.APIKeyAuth != nil {
		out = append(out, "spec.apiKeyAuth")
	}
	if s.ExtAuth != nil {
		out = append(out, "spec.extAuth")
	}
	if s.OIDC != nil {
		out = append(out, "spec.oidc")
	}
	return out
}

// StreamUnfitMessage says why a BackendTrafficPolicy (security: a SecurityPolicy) does not
// apply to a route of kind routeKind (TLSRoute, TCPRoute, UDPRoute), naming the fields
// (StreamUnfit, SecurityStreamUnfit); "" when none.
func StreamUnfitMessage(routeKind string, fields []string, security bool) string {
	if len(fields) == 0 {
		return ""
	}
	served := "loadBalancer (a consistentHash of sourceIP only), circuitBreaker (but maxRequestsPerConnection), healthCheck.passive and timeout.tcp.connectTimeout"
	switch {
	case security:
		served = "authorization by client address (principal.clientCIDRs)"
	case routeKind == "UDPRoute":
		served = "loadBalancer (a consistentHash of sourceIP only)"
	}
	return fmt.Sprintf("%s: not served on a %s, whose connections carry no HTTP requests (kubelb serves %s there)", strings.Join(fields, ", "), routeKind, served)
}

// StreamPart is what of settings s applies to a route of a stream kind (routeKind: TLSRoute,
// TCPRoute, UDPRoute) when the policy is its listener's or its Gateway's, whose other
// settings are for the Gateway's HTTP routes (as Envoy Gateway): a copy holding only what
// StreamUnfit lets through, nil when nothing is left. A load balancer hashing what
// connections do not carry (a header, a cookie) is left out with its hash.
func StreamPart(routeKind string, s *Settings) *Settings {
	if s == nil {
		return nil
	}
	out := &Settings{}
	if s.Hash == nil || s.Hash.SourceIP {
		out.LoadBalancer, out.TableSize = s.LoadBalancer, s.TableSize
		if s.Hash != nil {
			out.Hash = &Hash{SourceIP: true}
		}
	}
	if routeKind != "UDPRoute" {
		if cb := s.CircuitBreaker; cb != nil {
			c := *cb
			c.MaxRequestsPerConnection = nil
			out.CircuitBreaker = &c
		}
		out.Outlier, out.ConnectTimeout = s.Outlier, s.ConnectTimeout
	}
	if out.LoadBalancer == "" && out.CircuitBreaker == nil && out.Outlier == nil && out.ConnectTimeout == 0 {
		return nil
	}
	return out
}
