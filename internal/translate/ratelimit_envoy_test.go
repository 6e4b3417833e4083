package translate_test

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
)

// throughEnvoyWithRateLimit serves an HTTPRoute carrying a BackendTrafficPolicy with the
// local rate-limit rules through a real Envoy, and returns the listener's address. Serving
// it spends one request of 127.0.0.1 (the readiness probe).
func throughEnvoyWithRateLimit(t *testing.T, tenant string, rules ...v1alpha1.TrafficRateLimitRule) string {
	t.Helper()
	nodePort := testsupport.FreePort(t, trafficNodes...)
	for _, ip := range trafficNodes {
		testsupport.StartHTTPBackend(t, net.JoinHostPort(ip, strconv.Itoa(nodePort)), testsupport.Identity{Node: ip, Pod: "web"})
	}
	in, httpPort := trafficInput(t, tenant, nodePort, &v1alpha1.BackendTraffic{Namespace: "shop", Name: "limits",
		RateLimit: &v1alpha1.TrafficRateLimit{Type: "Local", Local: &v1alpha1.TrafficLocalRateLimit{Rules: rules}}})
	// The Gateway's hub Service keeps the clients' addresses (externalTrafficPolicy Local).
	in.RouteServices[0].Spec.Type = corev1.ServiceTypeLoadBalancer
	in.RouteServices[0].Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	return serveThroughEnvoy(t, tenant, in, httpPort)
}

// sendFrom sends n requests (each on a new connection from source address src, with headers
// as name, value pairs) and counts those answered 200 and 429; any other answer fails.
func sendFrom(t *testing.T, addr, src string, n int, headers ...string) (ok, limited int) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 3 * time.Second}
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	for range n {
		req, _ := http.NewRequest(http.MethodGet, "http://example.com/", nil)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("from %s: %v", src, err)
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			limited++
		default:
			t.Fatalf("from %s: status %d, want 200 or 429", src, resp.StatusCode)
		}
	}
	return ok, limited
}

// TestRateLimitPerRouteThroughEnvoy: a rule without client selectors is one bucket for the
// route, whoever the client: 6 requests a minute, one spent by the readiness probe, then 5
// requests from 127.0.0.2 and 5 from 127.0.0.3: the first 5 are served, the other 5 answered
// 429.
func TestRateLimitPerRouteThroughEnvoy(t *testing.T) {
	addr := throughEnvoyWithRateLimit(t, "tenant-ratelimit-route",
		v1alpha1.TrafficRateLimitRule{Limit: v1alpha1.TrafficRateLimitValue{Requests: 6, Unit: "Minute"}})
	ok2, limited2 := sendFrom(t, addr, "127.0.0.2", 5)
	ok3, limited3 := sendFrom(t, addr, "127.0.0.3", 5)
	t.Logf("127.0.0.2: %d served, %d limited; 127.0.0.3: %d served, %d limited", ok2, limited2, ok3, limited3)
	if ok2 != 5 || limited2 != 0 || ok3 != 0 || limited3 != 5 {
		t.Errorf("served %d+%d, limited %d+%d; want the route's 5 remaining requests served, then 429", ok2, ok3, limited2, limited3)
	}
}

// TestRateLimitPerClientThroughEnvoy: sourceCIDR 127.0.0.0/24 Distinct gives each client
// address its own 5 requests a minute: 127.0.0.2 and 127.0.0.3 each get 5 of 8 served and 3
// answered 429, whatever X-Forwarded-For they send; 127.0.0.1, whose bucket the readiness
// probe spent from, gets 4. A second rule, 3 a minute per X-User value, limits alice (from
// 127.0.0.4) to 3 while bob (from 127.0.0.5) keeps his own 3. A third, 2 a minute for X-Tier
// free from 127.0.0.8/29 (one bucket for the range), serves 127.0.0.9 twice and then refuses
// 127.0.0.10's free requests, not its paid ones, nor free ones from outside the range.
func TestRateLimitPerClientThroughEnvoy(t *testing.T) {
	addr := throughEnvoyWithRateLimit(t, "tenant-ratelimit-client",
		v1alpha1.TrafficRateLimitRule{
			ClientSelectors: []v1alpha1.TrafficRateLimitSelector{{SourceCIDR: &v1alpha1.TrafficRateLimitSourceCIDR{Type: "Distinct", Value: "127.0.0.0/24"}}},
			Limit:           v1alpha1.TrafficRateLimitValue{Requests: 5, Unit: "Minute"},
		},
		v1alpha1.TrafficRateLimitRule{
			ClientSelectors: []v1alpha1.TrafficRateLimitSelector{{Headers: []v1alpha1.TrafficRateLimitHeader{{Name: "X-User", Type: "Distinct"}}}},
			Limit:           v1alpha1.TrafficRateLimitValue{Requests: 3, Unit: "Minute"},
		},
		v1alpha1.TrafficRateLimitRule{
			ClientSelectors: []v1alpha1.TrafficRateLimitSelector{
				{Headers: []v1alpha1.TrafficRateLimitHeader{{Name: "X-Tier", Value: ptr.To("free")}}},
				{SourceCIDR: &v1alpha1.TrafficRateLimitSourceCIDR{Value: "127.0.0.8/29"}},
			},
			Limit: v1alpha1.TrafficRateLimitValue{Requests: 2, Unit: "Minute"},
		})
	for _, c := range []struct {
		src         string
		n, ok       int
		headers     []string
		description string
	}{
		{"127.0.0.2", 8, 5, nil, "its own 5"},
		{"127.0.0.3", 8, 5, []string{"X-Forwarded-For", "127.0.0.9"}, "its own 5, X-Forwarded-For ignored"},
		{"127.0.0.1", 8, 4, nil, "its 5 less the probe's"},
		{"127.0.0.4", 5, 3, []string{"X-User", "alice"}, "alice's 3"},
		{"127.0.0.5", 5, 3, []string{"X-User", "bob"}, "bob's own 3"},
		{"127.0.0.9", 3, 2, []string{"X-Tier", "free"}, "the free tier's 2 in 127.0.0.8/29"},
		{"127.0.0.10", 3, 0, []string{"X-Tier", "free"}, "the free tier of 127.0.0.8/29 spent"},
		{"127.0.0.10", 3, 3, []string{"X-Tier", "paid"}, "not the free tier"},
		{"127.0.0.17", 3, 3, []string{"X-Tier", "free"}, "outside 127.0.0.8/29"},
	} {
		ok, limited := sendFrom(t, addr, c.src, c.n, c.headers...)
		t.Logf("%s %v: %d served, %d answered 429", c.src, c.headers, ok, limited)
		if ok != c.ok || limited != c.n-c.ok {
			t.Errorf("%s %v: %d served and %d limited, want %d served (%s) and %d limited", c.src, c.headers, ok, limited, c.ok, c.description, c.n-c.ok)
		}
	}
}
