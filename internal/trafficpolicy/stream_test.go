package trafficpolicy

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestStreamUnfit: on a TCPRoute or a TLSRoute, a BackendTrafficPolicy may ask what acts on
// connections (load balancing, a consistent hash of the client address, maxConnections and
// maxPendingRequests, passive health checks, the connect timeout); on a UDPRoute the load
// balancer only. Everything else is named.
func TestStreamUnfit(t *testing.T) {
	connections := `
targetRefs: [{group: gateway.networking.k8s.io, kind: TCPRoute, name: r}]
loadBalancer: {type: ConsistentHash, consistentHash: {type: SourceIP}}
circuitBreaker: {maxConnections: 10, maxPendingRequests: 5, maxParallelRequests: 1024, maxParallelRetries: 1024}
healthCheck: {passive: {consecutiveLocalOriginFailures: 2, splitExternalLocalOriginErrors: true}}
timeout: {tcp: {connectTimeout: 2s}}
`
	for _, kind := range []string{"TCPRoute", "TLSRoute"} {
		if got := StreamUnfit(kind, resolved(t, connections)); len(got) > 0 {
			t.Errorf("%s: %v refused", kind, got)
		}
	}
	if got, want := StreamUnfit("UDPRoute", resolved(t, connections)), []string{"spec.circuitBreaker", "spec.healthCheck.passive", "spec.timeout.tcp.connectTimeout"}; !slices.Equal(got, want) {
		t.Errorf("UDPRoute: got %v, want %v", got, want)
	}
	if got := StreamUnfit("UDPRoute", resolved(t, `{loadBalancer: {type: Random}}`)); len(got) > 0 {
		t.Errorf("UDPRoute: the load balancer refused: %v", got)
	}
	http := resolved(t, `
loadBalancer: {type: ConsistentHash, consistentHash: {type: Header, header: {name: x-user}}}
circuitBreaker: {maxParallelRequests: 2, maxParallelRetries: 1, maxRequestsPerConnection: 3}
retry: {numRetries: 1}
timeout: {http: {requestTimeout: 1s, connectionIdleTimeout: 1m}}
rateLimit: {local: {rules: [{limit: {requests: 1, unit: Second}}]}}
compressor: [{type: Gzip}]
`)
	want := []string{"spec.loadBalancer.consistentHash.header", "spec.circuitBreaker.maxRequestsPerConnection", "spec.retry", "spec.timeout.http.requestTimeout", "spec.timeout.http.connectionIdleTimeout",
		"spec.rateLimit", "spec.compressor"}
	got := StreamUnfit("TCPRoute", http)
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	msg := StreamUnfitMessage("TCPRoute", got, false)
	if !strings.HasPrefix(msg, "spec.loadBalancer.consistentHash.header, spec.circuitBreaker.maxRequestsPerConnection") || !strings.Contains(msg, "not served on a TCPRoute") {
		t.Errorf("message %q", msg)
	}
	if StreamUnfitMessage("TCPRoute", nil, false) != "" {
		t.Error("a message without fields")
	}
}

// TestSecurityStreamUnfit: on a TCPRoute or a TLSRoute, a SecurityPolicy may ask for an
// authorization by client address only.
func TestSecurityStreamUnfit(t *testing.T) {
	if got := SecurityStreamUnfit(resolvedSecurity(t, `
authorization: {defaultAction: Deny, rules: [{action: Allow, principal: {clientCIDRs: [10.0.0.0/8]}}]}
`)); len(got) > 0 {
		t.Errorf("authorization refused: %v", got)
	}
	got := SecurityStreamUnfit(resolvedSecurity(t, `
authorization: {rules: [{action: Allow, principal: {clientCIDRs: [10.0.0.0/8]}}]}
basicAuth: {users: {name: users}}
apiKeyAuth: {credentialRefs: [{name: keys}], extractFrom: [{headers: [x-api-key]}]}
`))
	if want := []string{"spec.basicAuth", "spec.apiKeyAuth"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if msg := StreamUnfitMessage("TLSRoute", got, true); !strings.Contains(msg, "spec.basicAuth, spec.apiKeyAuth: not served on a TLSRoute") || !strings.Contains(msg, "clientCIDRs") {
		t.Errorf("message %q", msg)
	}
}

// TestStreamPart: of a Gateway's policy, a stream route takes what acts on its connections,
// nothing when that is nothing.
func TestStreamPart(t *testing.T) {
	s := resolved(t, `
loadBalancer: {type: ConsistentHash, consistentHash: {type: SourceIP}}
circuitBreaker: {maxConnections: 10, maxRequestsPerConnection: 3}
healthCheck: {passive: {consecutive5XxErrors: 2}}
retry: {numRetries: 1}
timeout: {tcp: {connectTimeout: 2s}, http: {requestTimeout: 1s}}
`)
	part := StreamPart("TCPRoute", s)
	if part == nil || part.LoadBalancer != Maglev || !part.Hash.SourceIP || *part.CircuitBreaker.MaxConnections != 10 || part.CircuitBreaker.MaxRequestsPerConnection != nil ||
		part.Outlier == nil || part.ConnectTimeout != 2*time.Second || part.Retry != nil || part.RequestTimeoutSet {
		t.Errorf("TCPRoute: %+v", part)
	}
	if len(StreamUnfit("TCPRoute", part)) > 0 || len(StreamUnfit("UDPRoute", StreamPart("UDPRoute", s))) > 0 {
		t.Error("a part with settings the route does not take")
	}
	if udp := StreamPart("UDPRoute", s); udp == nil || udp.LoadBalancer != Maglev || udp.CircuitBreaker != nil || udp.Outlier != nil || udp.ConnectTimeout != 0 {
		t.Errorf("UDPRoute: %+v", udp)
	}
	if p := StreamPart("TCPRoute", resolved(t, `{retry: {numRetries: 1}, loadBalancer: {type: ConsistentHash, consistentHash: {type: Cookie, cookie: {name: s}}}}`)); p != nil {
		t.Errorf("HTTP's settings only: %+v", p)
	}
}
