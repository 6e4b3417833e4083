package translate_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdsenvoy"
)

// hostStatusesFrom sends n GETs for host to addr from a socket bound to src (each on a new
// connection) and counts the answers by status.
func hostStatusesFrom(t *testing.T, addr, src, host string, n int) map[int]int {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 3 * time.Second}
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	out := map[int]int{}
	for range n {
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("http://" + host + "/")
		if err != nil {
			t.Fatalf("%s from %s: %v", host, src, err)
		}
		resp.Body.Close()
		out[resp.StatusCode]++
	}
	return out
}

// TestIngressNginxRateLimitThroughEnvoy: Ingresses written for ingress-nginx with limit-rpm
// 2 (default limit-burst-multiplier 5: 11 requests at once) and limit-rps 1 with
// limit-burst-multiplier 3 (4 at once, then one a second) limit each client address: 15
// requests from 127.0.0.2 get 11 served and 4 answered 503 (ingress-nginx's status), and
// 127.0.0.3 gets its own 11; on the limit-rps Ingress 10 quick requests get 4 (5 if a second
// turned meanwhile) served, and a second later one more is. An Ingress without the
// annotations serves all. Clients bind their sockets to loopback addresses; a real Envoy fed
// over xDS serves the Ingresses.
func TestIngressNginxRateLimitThroughEnvoy(t *testing.T) {
	const tenant = "tenant-nginx-limit"
	const N = translate.NginxAnnotationPrefix
	nt := newNginxTenant(t, tenant)
	httpPort := nt.httpPort
	in := nt.in
	in.Routes = []v1alpha1.Route{
		nt.ingress("per-minute", "rpm.example.com", map[string]string{N + "limit-rpm": "2"}),
		nt.ingress("per-second", "rps.example.com", map[string]string{N + "limit-rps": "1", N + "limit-burst-multiplier": "3"}),
		nt.ingress("open", "open.example.com", nil),
	}
	_, problems, res, err := translatetest.Pipeline(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	xdsenvoy.Start(t, "ingress-nginx-limit-proxy", tenant, res, bootstrap.Options{}, testsupport.EnvoyOptions{Concurrency: 1})
	addr := testsupport.Loopback(httpPort)
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve the Ingresses", func() error {
		_, err := statusFrom("127.0.0.1", addr, "open.example.com")
		return err
	})
	for _, src := range []string{"127.0.0.2", "127.0.0.3"} {
		got := hostStatusesFrom(t, addr, src, "rpm.example.com", 15)
		t.Logf("limit-rpm 2 from %s: %v", src, got)
		if got[http.StatusOK] != 11 || got[http.StatusServiceUnavailable] != 4 {
			t.Errorf("limit-rpm 2 from %s: %v, want 11 served (the first request and a burst of 2×5) and 4 answered 503", src, got)
		}
	}
	if got := hostStatusesFrom(t, addr, "127.0.0.2", "open.example.com", 15); got[http.StatusOK] != 15 {
		t.Errorf("no limit from 127.0.0.2: %v, want 15 served", got)
	}
	got := hostStatusesFrom(t, addr, "127.0.0.4", "rps.example.com", 10)
	t.Logf("limit-rps 1 × 3 from 127.0.0.4: %v", got)
	if ok := got[http.StatusOK]; ok < 4 || ok > 5 || got[http.StatusServiceUnavailable] != 10-ok {
		t.Errorf("limit-rps 1 × 3: %v, want 4 (or 5) served and the rest answered 503", got)
	}
	time.Sleep(1100 * time.Millisecond)
	if got := hostStatusesFrom(t, addr, "127.0.0.4", "rps.example.com", 1); got[http.StatusOK] != 1 {
		t.Errorf("limit-rps 1, a second later: %v, want served", got)
	}
}
