package trafficpolicy

import (
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

func spec(t *testing.T, y string) map[string]any {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestReadNamesUnsupportedFields: a policy with fields kubelb does not serve is refused as a
// whole, naming each of them.
func TestReadNamesUnsupportedFields(t *testing.T) {
	_, err := Read("ns", "p", spec(t, `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]
bandwidthLimit: {}
loadBalancer: {type: RoundRobin, slowStart: {window: 1s}}
retry: {numRetries: 3}
`))
	if err == nil || !strings.Contains(err.Error(), "spec.bandwidthLimit, spec.loadBalancer.slowStart not yet supported") {
		t.Fatalf("got %v", err)
	}
}

// TestReadAndResolve: the served fields come through as Envoy Gateway means them.
func TestReadAndResolve(t *testing.T) {
	bt, err := Read("ns", "p", spec(t, `
targetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: g}
loadBalancer: {type: ConsistentHash, consistentHash: {type: Header, header: {name: X-User}, tableSize: 1021}}
circuitBreaker: {maxPendingRequests: 1, maxParallelRequests: 2}
healthCheck: {passive: {consecutive5XxErrors: 3, baseEjectionTime: 10s, maxEjectionPercent: 50}}
retry: {numRetries: 4, retryOn: {httpStatusCodes: [503, 502]}, perRetry: {timeout: 250ms, backOff: {baseInterval: 10ms, maxInterval: 100ms}}}
timeout: {tcp: {connectTimeout: 2s}, http: {requestTimeout: 0s, connectionIdleTimeout: 5m}}
`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Resolve(bt)
	if err != nil {
		t.Fatal(err)
	}
	if s.LoadBalancer != Maglev || s.TableSize != 1021 || s.Hash.Header != "x-user" {
		t.Errorf("load balancer %s %d %+v", s.LoadBalancer, s.TableSize, s.Hash)
	}
	if *s.CircuitBreaker.MaxPendingRequests != 1 || *s.CircuitBreaker.MaxRequests != 2 || s.CircuitBreaker.MaxConnections != nil {
		t.Errorf("circuit breaker %+v", s.CircuitBreaker)
	}
	if *s.Outlier.Consecutive5xx != 3 || s.Outlier.BaseEjectionTime != 10*time.Second || *s.Outlier.MaxEjectionPercent != 50 {
		t.Errorf("outlier %+v", s.Outlier)
	}
	r := s.Retry
	if r.NumRetries != 4 || strings.Join(r.RetryOn, ",") != "retriable-status-codes" || len(r.Codes) != 2 || r.Codes[0] != 502 ||
		r.PerTryTimeout != 250*time.Millisecond || r.BaseInterval != 10*time.Millisecond || r.MaxInterval != 100*time.Millisecond {
		t.Errorf("retry %+v", r)
	}
	if s.ConnectTimeout != 2*time.Second || !s.RequestTimeoutSet || s.RequestTimeout != 0 || s.IdleTimeout != 5*time.Minute {
		t.Errorf("timeouts %+v", s)
	}
}

// TestResolveRefusesOutOfBounds: values Envoy refuses or that exceed kubelb's bounds are
// each reported.
func TestResolveRefusesOutOfBounds(t *testing.T) {
	bt, err := Read("ns", "p", spec(t, `
loadBalancer: {type: ConsistentHash, consistentHash: {type: Cookie, cookie: {name: "a b"}, tableSize: 1000}}
circuitBreaker: {maxConnections: 0}
retry: {numRetries: 100, retryOn: {triggers: [5xx, teapot], httpStatusCodes: [200]}}
timeout: {tcp: {connectTimeout: 0s}, http: {connectionIdleTimeout: 99999h}}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Resolve(bt)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"cookie.name", "tableSize 1000", "maxConnections 0", "numRetries 100", `"teapot"`, "httpStatusCodes 200", "connectTimeout 0s", "connectionIdleTimeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q not in %v", want, err)
		}
	}
}

func TestTargets(t *testing.T) {
	got := Targets(spec(t, `
targetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: g}
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: rule-a}, {group: gateway.networking.k8s.io, kind: Gateway, name: g}]
`))
	if len(got) != 2 || got[1].Kind != "HTTPRoute" || got[1].SectionName != "rule-a" {
		t.Fatalf("got %+v", got)
	}
}
