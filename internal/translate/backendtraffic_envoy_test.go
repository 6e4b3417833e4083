package translate_test

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdsenvoy"
)

// trafficNodes are the tenant nodes of the BackendTrafficPolicy tests (loopback addresses).
var trafficNodes = []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}

// throughEnvoyWithTraffic serves an HTTPRoute (one rule to Service web, on trafficNodes'
// nodePort) carrying the BackendTrafficPolicy bt through a real Envoy, and returns the
// listener's address once Envoy answers.
func throughEnvoyWithTraffic(t *testing.T, tenant string, nodePort int, bt *v1alpha1.BackendTraffic) string {
	t.Helper()
	in, httpPort := trafficInput(t, tenant, nodePort, bt)
	return serveThroughEnvoy(t, tenant, in, httpPort)
}

// trafficInput is the tenant of throughEnvoyWithTraffic, and its listener's port.
func trafficInput(t *testing.T, tenant string, nodePort int, bt *v1alpha1.BackendTraffic) (translate.Input, int) {
	t.Helper()
	httpPort := testsupport.FreePort(t)
	port := gwv1.PortNumber(80)
	rule := gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
		BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: &port}}}}}
	in := oneGateway(t, tenant, gwv1.Listener{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}, httpPort, []gwv1.HTTPRouteRule{rule}, nodePort)
	var addrs []v1alpha1.EndpointAddress
	for _, ip := range trafficNodes {
		addrs = append(addrs, v1alpha1.EndpointAddress{IP: ip})
	}
	in.Addresses = map[string]v1alpha1.Addresses{"default": {ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1alpha1.AddressesSpec{Addresses: addrs}}}
	in.Routes[1].Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{BackendTraffic: bt}
	return in, httpPort
}

// serveOnNodes serves handler(node index) on each of trafficNodes, on one free port, which it
// returns; the servers stop with the test.
func serveOnNodes(t *testing.T, handler func(node int) http.Handler) int {
	t.Helper()
	nodePort := testsupport.FreePort(t, trafficNodes...)
	for i, ip := range trafficNodes {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(nodePort)))
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: handler(i)}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { srv.Close() })
	}
	return nodePort
}

// slowWhenAsked answers 200, after a second when the request has header x-slow.
func slowWhenAsked(int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("x-slow") != "" {
			time.Sleep(time.Second)
		}
		w.WriteHeader(http.StatusOK)
	})
}

// serveThroughEnvoy translates in, which must give no problem, serves it through a real
// Envoy, and returns the address of the listener on httpPort once Envoy answers GET / there.
func serveThroughEnvoy(t *testing.T, tenant string, in translate.Input, httpPort int) string {
	t.Helper()
	addr := pushToEnvoy(t, tenant, in, httpPort)
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve the route", func() error {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	return addr
}

// pushToEnvoy translates in, which must give no problem, starts a real Envoy with it and
// returns the loopback address of its listener on port (not waiting for it).
func pushToEnvoy(t *testing.T, tenant string, in translate.Input, port int) string {
	t.Helper()
	_, problems, res, err := translatetest.Pipeline(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	xdsenvoy.Start(t, tenant, tenant, res, bootstrap.Options{}, testsupport.EnvoyOptions{Concurrency: 1})
	return testsupport.Loopback(port)
}

// trafficGet sends GET / with headers (name, value pairs) on a new connection.
func trafficGet(addr string, headers ...string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	return resp, nil
}

// TestConsistentHashThroughEnvoy: an HTTPRoute's BackendTrafficPolicy asks for a consistent
// hash on header X-User (Maglev): every request of one user reaches one node, while users
// spread over the nodes.
func TestConsistentHashThroughEnvoy(t *testing.T) {
	nodePort := testsupport.FreePort(t, trafficNodes...)
	for i, ip := range trafficNodes {
		testsupport.StartHTTPBackend(t, net.JoinHostPort(ip, strconv.Itoa(nodePort)), testsupport.Identity{Node: fmt.Sprintf("node-%d", i), Pod: "web"})
	}
	addr := throughEnvoyWithTraffic(t, "tenant-hash", nodePort, &v1alpha1.BackendTraffic{Namespace: "shop", Name: "by-user",
		LoadBalancer: &v1alpha1.TrafficLoadBalancer{Type: "ConsistentHash", ConsistentHash: &v1alpha1.TrafficConsistentHash{
			Type: "Header", Header: &v1alpha1.TrafficHashHeader{Name: "X-User"}, TableSize: ptr.To[uint64](1021)}}})
	// Envoy's hosts become healthy one by one at start: wait until users reach every node.
	users := map[string]string{} // user → node
	testsupport.Eventually(t, 30*time.Second, "users to spread over the nodes", func() error {
		nodes := map[string]bool{}
		for i := range 30 {
			user := fmt.Sprintf("user-%d", i)
			resp, err := trafficGet(addr, "X-User", user)
			if err != nil {
				return err
			}
			users[user] = resp.Header.Get(testsupport.HeaderNode)
			nodes[users[user]] = true
		}
		if len(nodes) < len(trafficNodes) {
			return fmt.Errorf("30 users reached %d nodes", len(nodes))
		}
		return nil
	})
	for user, node := range users {
		count := map[string]int{}
		for range 5 {
			resp, err := trafficGet(addr, "X-User", user)
			if err != nil {
				t.Fatal(err)
			}
			count[resp.Header.Get(testsupport.HeaderNode)]++
		}
		if count[node] != 5 {
			t.Errorf("user %s: 5 requests reached %v, want all on %s", user, count, node)
		}
	}
}

// TestTrafficRetryThroughEnvoy: a BackendTrafficPolicy retries 503 twice (numRetries 2,
// httpStatusCodes [503], a 10ms back-off): a backend that answers 503 to the first two tries
// of each request gets three tries, and the client 200; without the policy's retry a
// request would get the first 503.
func TestTrafficRetryThroughEnvoy(t *testing.T) {
	var mu sync.Mutex
	tries := map[string]int{}
	nodePort := serveOnNodes(t, func(int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := r.Header.Get("x-request-key")
			mu.Lock()
			tries[key]++
			n := tries[key]
			mu.Unlock()
			if key != "" && n <= 2 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
	})
	addr := throughEnvoyWithTraffic(t, "tenant-traffic-retry", nodePort, &v1alpha1.BackendTraffic{Namespace: "shop", Name: "retry-503",
		Retry: &v1alpha1.TrafficRetry{NumRetries: ptr.To[int32](2), RetryOn: &v1alpha1.TrafficRetryOn{HTTPStatusCodes: []int32{503}},
			PerRetry: &v1alpha1.TrafficPerRetry{BackOff: &v1alpha1.TrafficBackOff{BaseInterval: "10ms", MaxInterval: "50ms"}}}})
	for i := range 5 {
		key := fmt.Sprintf("request-%d", i)
		resp, err := trafficGet(addr, "x-request-key", key)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		n := tries[key]
		mu.Unlock()
		if resp.StatusCode != http.StatusOK || n != 3 {
			t.Errorf("%s: status %d after %d tries, want 200 after 3", key, resp.StatusCode, n)
		}
	}
}

// TestCircuitBreakerThroughEnvoy: a BackendTrafficPolicy bounds the backend to 1 parallel
// and 1 pending request: of 6 requests sent at once to a backend that answers after a
// second, at most 2 are served (200) and Envoy refuses the others at once (503 with
// x-envoy-overloaded).
func TestCircuitBreakerThroughEnvoy(t *testing.T) {
	nodePort := serveOnNodes(t, slowWhenAsked)
	addr := throughEnvoyWithTraffic(t, "tenant-breaker", nodePort, &v1alpha1.BackendTraffic{Namespace: "shop", Name: "one-at-a-time",
		CircuitBreaker: &v1alpha1.TrafficCircuitBreaker{MaxParallelRequests: ptr.To[int64](1), MaxPendingRequests: ptr.To[int64](1)}})
	const n = 6
	type result struct {
		status     int
		overloaded bool
	}
	results := make(chan result, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := trafficGet(addr, "x-slow", "1")
			if err != nil {
				t.Error(err)
				return
			}
			results <- result{resp.StatusCode, resp.Header.Get("x-envoy-overloaded") == "true"}
		}()
	}
	wg.Wait()
	close(results)
	served, refused := 0, 0
	for r := range results {
		switch {
		case r.status == http.StatusOK:
			served++
		case r.status == http.StatusServiceUnavailable && r.overloaded:
			refused++
		default:
			t.Errorf("status %d (overloaded %v)", r.status, r.overloaded)
		}
	}
	if served < 1 || served > 2 || refused != n-served {
		t.Errorf("%d served, %d refused by the circuit breaker; want 1 or 2 served and the rest refused", served, refused)
	}
}

// TestPassiveHealthCheckThroughEnvoy: a BackendTrafficPolicy's passive health check ejects
// the node that answers 503 after 2 of them in a row (consecutive5XxErrors 2, up to 50 % of
// the nodes, for 30s): Envoy counts the ejection after at least 2 of its 503s, and the 20
// requests after it are all served by the two healthy nodes. (It asserted "at most 2 of 30
// failed", which a busy machine broke: the ejection reaches the worker a moment late.)
func TestPassiveHealthCheckThroughEnvoy(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	nodePort := serveOnNodes(t, func(i int) http.Handler {
		node := fmt.Sprintf("node-%d", i)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("x-count") != "" {
				mu.Lock()
				hits[node]++
				mu.Unlock()
			}
			if node == "node-0" && r.Header.Get("x-count") != "" {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
	})
	in, httpPort := trafficInput(t, "tenant-outlier", nodePort, &v1alpha1.BackendTraffic{Namespace: "shop", Name: "eject",
		HealthCheck: &v1alpha1.TrafficHealthCheck{Passive: &v1alpha1.TrafficPassiveHealthCheck{
			Consecutive5xxErrors: ptr.To[uint32](2), BaseEjectionTime: "30s", Interval: "1s", MaxEjectionPercent: ptr.To[int32](50)}}})
	_, problems, res, err := translatetest.Pipeline(in)
	if err != nil || len(problems) > 0 {
		t.Fatalf("translation: %v %v", problems, err)
	}
	envoy := xdsenvoy.Start(t, "tenant-outlier", "tenant-outlier", res, bootstrap.Options{}, testsupport.EnvoyOptions{Concurrency: 1})
	addr := testsupport.Loopback(httpPort)
	ejected := func() bool {
		st, err := envoy.Stats(`^cluster\..*\.outlier_detection\.ejections_enforced_total$`)
		for _, n := range st {
			if err == nil && n > 0 {
				return true
			}
		}
		return false
	}
	// Requests until Envoy ejected the failing node: the ejection reaches the worker that
	// picks the next node a moment after the second 503, so one more request may still go
	// there on a busy machine; what counts is that it goes, and that nothing reaches it after.
	failed := 0
	testsupport.Eventually(t, 30*time.Second, "the failing node to be ejected", func() error {
		resp, err := trafficGet(addr, "x-count", "1")
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			failed++
		}
		if !ejected() {
			return errNotYet
		}
		return nil
	})
	mu.Lock()
	before := hits["node-0"]
	mu.Unlock()
	for i := range 20 {
		resp, err := trafficGet(addr, "x-count", "1")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Errorf("request %d after the ejection: %d", i, resp.StatusCode)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d requests failed before the ejection; nodes reached %v", failed, hits)
	if failed < 2 || hits["node-0"] != before {
		t.Errorf("%d requests failed before the ejection (want at least the 2 that eject), and %d reached the failing node after it (want none)", failed, hits["node-0"]-before)
	}
}

// TestTrafficTimeoutThroughEnvoy: a BackendTrafficPolicy's timeout.http.requestTimeout of
// 300ms answers a request the backend takes a second over with 504, while a quick one is
// served.
func TestTrafficTimeoutThroughEnvoy(t *testing.T) {
	nodePort := serveOnNodes(t, slowWhenAsked)
	addr := throughEnvoyWithTraffic(t, "tenant-traffic-timeout", nodePort, &v1alpha1.BackendTraffic{Namespace: "shop", Name: "quick",
		Timeout: &v1alpha1.TrafficTimeout{HTTP: &v1alpha1.TrafficHTTPTimeout{RequestTimeout: "300ms"}}})
	start := time.Now()
	resp, err := trafficGet(addr, "x-slow", "1")
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); resp.StatusCode != http.StatusGatewayTimeout || took > 900*time.Millisecond {
		t.Errorf("a slow request: %d after %s, want 504 after about 300ms", resp.StatusCode, took)
	}
	if resp, err := trafficGet(addr); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("a quick request: %v %v", resp, err)
	}
}
