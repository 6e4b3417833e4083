package translate_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdsenvoy"
)

// TestIngressNginxAllowlistThroughEnvoy: an Ingress written for ingress-nginx with
// allowlist-source-range "127.0.0.2/32, 127.0.0.5" (a single address is a /32) answers clients
// from those addresses and refuses others with 403; one with whitelist-source-range (the
// older name) too; one whose list cannot be read refuses everyone (a restriction is never
// dropped); an Ingress without the annotation serves everyone. denylist-source-range
// "127.0.0.3" refuses that client and serves the others; with allowlist-source-range
// "127.0.0.0/29" it refuses 127.0.0.3 (deny rules first, as ingress-nginx), serves 127.0.0.2
// and refuses 127.0.0.9 (outside the allow list). Clients bind their sockets to
// different loopback addresses; a real Envoy fed over xDS serves the Ingresses.
func TestIngressNginxAllowlistThroughEnvoy(t *testing.T) {
	const tenant = "tenant-nginx-allow"
	const N = translate.NginxAnnotationPrefix
	nt := newNginxTenant(t, tenant)
	httpPort := nt.httpPort
	in := nt.in
	in.Routes = []v1alpha1.Route{
		nt.ingress("office", "office.example.com", map[string]string{N + "allowlist-source-range": "127.0.0.2/32, 127.0.0.5"}),
		nt.ingress("legacy", "legacy.example.com", map[string]string{N + "whitelist-source-range": "127.0.0.3/32"}),
		nt.ingress("broken", "broken.example.com", map[string]string{N + "allowlist-source-range": "127.0.0.0/8, office"}),
		nt.ingress("open", "open.example.com", nil),
		nt.ingress("deny", "deny.example.com", map[string]string{N + "denylist-source-range": "127.0.0.3"}),
		nt.ingress("mixed", "mixed.example.com", map[string]string{N + "allowlist-source-range": "127.0.0.0/29", N + "denylist-source-range": "127.0.0.3"}),
	}
	_, problems, res, err := translatetest.Pipeline(in)
	if err != nil {
		t.Fatal(err)
	}
	// The only problem: the list that cannot be read, named with what is wrong.
	if len(problems) != 1 || problems[0].Reason != translate.ReasonInvalidAnnotation || !strings.Contains(problems[0].Message, `"office"`) ||
		!strings.Contains(problems[0].Message, "403") {
		t.Fatalf("problems: %v", problems)
	}
	xdsenvoy.Start(t, "ingress-nginx-allowlist-proxy", tenant, res, bootstrap.Options{}, testsupport.EnvoyOptions{Concurrency: 1})
	addr := testsupport.Loopback(httpPort)
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve the Ingresses", func() error {
		_, err := statusFrom("127.0.0.1", addr, "open.example.com")
		return err
	})
	want := map[string]map[string]int{
		"office.example.com": {"127.0.0.2": http.StatusOK, "127.0.0.5": http.StatusOK, "127.0.0.3": http.StatusForbidden, "127.0.0.6": http.StatusForbidden},
		"legacy.example.com": {"127.0.0.3": http.StatusOK, "127.0.0.2": http.StatusForbidden},
		"broken.example.com": {"127.0.0.2": http.StatusForbidden, "127.0.0.3": http.StatusForbidden},
		"open.example.com":   {"127.0.0.2": http.StatusOK, "127.0.0.3": http.StatusOK},
		"deny.example.com":   {"127.0.0.2": http.StatusOK, "127.0.0.9": http.StatusOK, "127.0.0.3": http.StatusForbidden},
		"mixed.example.com":  {"127.0.0.2": http.StatusOK, "127.0.0.3": http.StatusForbidden, "127.0.0.9": http.StatusForbidden},
	}
	allowed, refused := 0, 0
	for host, bySource := range want {
		a, r := countFrom(t, addr, host, bySource)
		allowed, refused = allowed+a, refused+r
	}
	t.Logf("%d requests allowed, %d refused (403)", allowed, refused)
	if allowed != 24 || refused != 24 {
		t.Errorf("%d allowed and %d refused, want 24 and 24", allowed, refused)
	}
}

// statusFrom GETs http://host/ at addr from a socket bound to src, and returns the status.
func statusFrom(src, addr, host string) (int, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 3 * time.Second}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("http://" + host + "/")
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
