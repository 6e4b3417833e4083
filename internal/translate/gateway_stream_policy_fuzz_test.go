package translate_test

import (
	"kubelb.dev/kubelb/api/v1alpha1"
)

// fuzzPolicies gives a Route's context a SecurityPolicy and a BackendTrafficPolicy, of the
// whole object or of a rule or listener (names a route's rules and a Gateway's listeners
// may have), with what acts on connections and what needs HTTP requests, within kubelb's
// bounds and beyond them: the policies of HTTP and stream routes (TLSRoute, TCPRoute,
// UDPRoute) alike.
func (s *bytesource) fuzzPolicies(c *v1alpha1.SourceContext) {
	n := func(v int64) *int64 { return &v }
	traffic := func() *v1alpha1.BackendTraffic {
		bt := &v1alpha1.BackendTraffic{Namespace: "app", Name: pick(s, "conns", "http", "Bad_Name")}
		switch s.intn(4) {
		case 0:
			bt.LoadBalancer = &v1alpha1.TrafficLoadBalancer{Type: pick(s, "Random", "LeastRequest", "Bogus")}
		case 1:
			bt.LoadBalancer = &v1alpha1.TrafficLoadBalancer{Type: "ConsistentHash", ConsistentHash: &v1alpha1.TrafficConsistentHash{Type: pick(s, "SourceIP", "Header"),
				Header: &v1alpha1.TrafficHashHeader{Name: "x-user"}}}
		case 2:
			bt.CircuitBreaker = &v1alpha1.TrafficCircuitBreaker{MaxConnections: n(int64(pick(s, 1, 1024, 1<<40))), MaxPendingRequests: n(1),
				MaxRequestsPerConnection: pick(s, nil, n(2))}
			bt.Timeout = &v1alpha1.TrafficTimeout{TCP: &v1alpha1.TrafficTCPTimeout{ConnectTimeout: pick(s, "2s", "10m", "x")}}
		default:
			retries := int32(pick(s, 1, 11))
			bt.Retry = &v1alpha1.TrafficRetry{NumRetries: &retries}
		}
		return bt
	}
	security := func() *v1alpha1.Security {
		sec := &v1alpha1.Security{Namespace: "app", Name: pick(s, "office", "login"), Authorization: &v1alpha1.SecurityAuthorization{
			DefaultAction: pick(s, "", "Allow", "Deny"),
			Rules: []v1alpha1.SecurityRule{
				{Action: "Deny", Principal: v1alpha1.SecurityPrincipal{ClientCIDRs: []string{pick(s, "10.1.2.3/32", "10.0.0.0/8", "::/0", "bad")}}},
				{Action: "Allow", Principal: v1alpha1.SecurityPrincipal{ClientCIDRs: []string{pick(s, "10.0.0.0/8", "10.1.0.0/16", "0.0.0.0/0")}}},
			}}}
		if s.intn(3) == 0 {
			sec.BasicAuth = &v1alpha1.SecurityBasicAuth{Users: v1alpha1.SecurityBasicAuthUsers{Name: "users"}}
		}
		return sec
	}
	switch s.intn(3) {
	case 0:
		c.BackendTraffic, c.Security = traffic(), security()
	case 1:
		c.PolicySections = append(c.PolicySections, v1alpha1.PolicySection{Name: pick(s, "main", "tcp", "tls", "udp", "http"), BackendTraffic: traffic(), Security: security()})
	}
}
