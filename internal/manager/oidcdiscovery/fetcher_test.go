package oidcdiscovery_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/event"

	"kubelb.dev/kubelb/internal/manager/oidcdiscovery"
	"kubelb.dev/kubelb/internal/pki"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
)

// fakeResolver answers from a map.
type fakeResolver map[string][]netip.Addr

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

// provider serves documents on ip over TLS with a certificate of a CA of its own for the
// names given; handler answers them. It returns the port, the CA's pool and a count of
// requests.
func provider(t *testing.T, ip string, names []string, handler http.HandlerFunc) (int, *x509.CertPool, func() int) {
	t.Helper()
	ca, err := pki.NewCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.IssueServer(names, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	port := testsupport.FreePort(t, ip)
	l, err := tls.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)), &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		handler(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return port, ca.Pool(), func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// TestFetch: the issuer's document is read from the addresses of its host the policy allows,
// over TLS verified against the host; an address the policy refuses is never dialled; a
// document naming another issuer, too large, a redirect, endpoints kubelb cannot use, an
// unknown host or a certificate not verified give a reason a tenant may read.
func TestFetch(t *testing.T) {
	const ip = "127.0.0.5"
	var body string
	var status int
	port, roots, requests := provider(t, ip, []string{"id.example.test"}, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/realms/shop/.well-known/openid-configuration" || r.Host != "id.example.test:"+strconv.Itoa(testPort) {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if status == http.StatusFound {
			w.Header().Set("Location", "https://elsewhere.example.test/")
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	})
	testPort = port
	issuer := "https://id.example.test:" + strconv.Itoa(port) + "/realms/shop"
	doc := func(iss, authz, token string) string {
		b, _ := json.Marshal(map[string]string{"issuer": iss, "authorization_endpoint": authz, "token_endpoint": token})
		return string(b)
	}
	f := oidcdiscovery.New(fakeResolver{"id.example.test": {netip.MustParseAddr(ip)}}, roots)
	allowAll := func(netip.Addr) bool { return true }
	good := doc(issuer, "https://id.example.test/auth", "https://id.example.test/token")
	for _, c := range []struct {
		name, body string
		status     int
		allowed    func(netip.Addr) bool
		want       translate.OIDCProvider
		wantErr    string
	}{
		{"read", good, 200, allowAll, translate.OIDCProvider{AuthorizationEndpoint: "https://id.example.test/auth", TokenEndpoint: "https://id.example.test/token"}, ""},
		{"denied", good, 200, func(netip.Addr) bool { return false }, translate.OIDCProvider{}, "none of its host's addresses may be reached: denied by the hub's endpoint policy"},
		{"another issuer", doc("https://evil.example.test", "https://id.example.test/auth", "https://id.example.test/token"), 200, allowAll, translate.OIDCProvider{}, `it names the issuer "https://evil.example.test"`},
		{"too large", `{"issuer":"` + strings.Repeat("a", 70<<10) + `"}`, 200, allowAll, translate.OIDCProvider{}, "it is over 64 KiB"},
		{"redirect", "", http.StatusFound, allowAll, translate.OIDCProvider{}, "answered 302"},
		{"http authorization endpoint", doc(issuer, "http://id.example.test/auth", "https://id.example.test/token"), 200, allowAll, translate.OIDCProvider{}, "its endpoints cannot be used"},
		{"not JSON", "<html>", 200, allowAll, translate.OIDCProvider{}, "it is not a JSON object"},
	} {
		body, status = c.body, c.status
		before := requests()
		got := f.Fetch(context.Background(), issuer, c.allowed)
		if c.wantErr == "" && got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
		if c.wantErr != "" && !strings.Contains(got.Error, c.wantErr) {
			t.Errorf("%s: %+v, want an error with %q", c.name, got, c.wantErr)
		}
		if c.name == "denied" && requests() != before {
			t.Errorf("denied: the provider was asked anyway")
		}
	}
	if got := f.Fetch(context.Background(), "https://unknown.example.test/", allowAll); !strings.Contains(got.Error, "could not be resolved") {
		t.Errorf("unknown host: %+v", got)
	}
	// The system's roots do not know the provider's CA.
	system := oidcdiscovery.New(fakeResolver{"id.example.test": {netip.MustParseAddr(ip)}}, nil)
	if got := system.Fetch(context.Background(), issuer, allowAll); !strings.Contains(got.Error, "certificate could not be verified") {
		t.Errorf("an unknown CA: %+v", got)
	}

	// Want: nothing known at first, the read runs in the background and tells the tenant;
	// then the document is there.
	body, status = good, 200
	events := make(chan event.GenericEvent, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Forward(ctx, events)
	if got := f.Want("tenant-a", []string{issuer}, allowAll); len(got) != 0 {
		t.Fatalf("first Want: %v, want nothing read yet", got)
	}
	select {
	case ev := <-events:
		if ev.Object.GetName() != "tenant-a" {
			t.Errorf("event for %q", ev.Object.GetName())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no event after the read")
	}
	if got := f.Want("tenant-a", []string{issuer}, allowAll)[issuer]; got.TokenEndpoint != "https://id.example.test/token" {
		t.Errorf("second Want: %+v", got)
	}
}

var testPort int
