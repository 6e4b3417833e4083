package translate_test

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
)

// authCheck is an authorization request the auth-url Service got.
type authCheck struct{ method, uri, authorization, cookie string }

// authBackend is the auth-url Service's endpoint: it allows "Bearer alice" (answering
// X-Auth-Request-User: alice and X-Other: leak), forbids "Bearer mallory" (403) and asks
// everyone else to authenticate (401).
type authBackend struct {
	mu     sync.Mutex
	checks []authCheck
}

func (b *authBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.checks = append(b.checks, authCheck{method: r.Method, uri: r.RequestURI, authorization: r.Header.Get("Authorization"), cookie: r.Header.Get("Cookie")})
	b.mu.Unlock()
	switch r.Header.Get("Authorization") {
	case "Bearer alice":
		w.Header().Set("X-Auth-Request-User", "alice")
		w.Header().Set("X-Other", "leak")
		w.WriteHeader(http.StatusOK)
	case "Bearer mallory":
		w.WriteHeader(http.StatusForbidden)
	default:
		w.WriteHeader(http.StatusUnauthorized)
	}
}

func (b *authBackend) got() []authCheck {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.checks)
}

// TestIngressNginxAuthURLThroughEnvoy: auth-url through a real Envoy. The Service auth of the
// Ingresses' namespace has its NodePort on the node. Under auth-url
// http://auth.shop:9000/oauth2/auth with auth-response-headers X-Auth-Request-User, a request
// the service allows (200) reaches the backend with X-Auth-Request-User copied from the
// answer (X-Other, not listed, is not); one it answers 401 or 403 gets that status and never
// reaches the backend; every authorization request asks the path /oauth2/auth, whatever the
// request's, with the request's method, Authorization header and Cookie. An Ingress without auth-url
// is served without asking.
func TestIngressNginxAuthURLThroughEnvoy(t *testing.T) {
	const tenant = "tenant-nginx-auth-url"
	const N = translate.NginxAnnotationPrefix
	nt := newNginxTenant(t, tenant)
	auth := &authBackend{}
	authSvc := nt.otherService("auth", 9000, auth)
	protected := nt.ingress("protected", "app.example.com", map[string]string{
		N + "auth-url": "http://auth.shop:9000/oauth2/auth", N + "auth-response-headers": "X-Auth-Request-User"})
	protected.Spec.Source.Kubernetes.Services = append(protected.Spec.Source.Kubernetes.Services, authSvc)
	in := nt.in
	in.Routes = []v1alpha1.Route{protected, nt.ingress("open", "open.example.com", nil)}
	client, _ := nt.serve(in, "ingress-nginx-auth-url-proxy")
	// send sends one request with token (none when "") and returns the status and the
	// X-Auth-Request-User and X-Other headers the backend saw.
	send := func(method, host, uri, token string) (int, string, string, error) {
		req, err := http.NewRequest(method, "http://"+host+uri, nil)
		if err != nil {
			return 0, "", "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set("Cookie", "session=s1")
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", "", err
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get(testsupport.HeaderSeenPrefix + "Auth-Request-User"), resp.Header.Get(testsupport.HeaderSeenPrefix + "Other"), nil
	}
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve the Ingresses", func() error {
		if code, _, _, err := send(http.MethodGet, "open.example.com", "/", ""); err != nil || code != http.StatusOK {
			return fmt.Errorf("status %d: %v", code, err)
		}
		return nil
	})
	if n := len(auth.got()); n != 0 {
		t.Fatalf("an Ingress without auth-url asked the service %d times", n)
	}
	served := nt.web.Requests()
	for _, tc := range []struct {
		method, uri, token string
		want               int
	}{
		{http.MethodGet, "/app/1?q=1", "", http.StatusUnauthorized},
		{http.MethodGet, "/app/2", "mallory", http.StatusForbidden},
		{http.MethodPost, "/app/3", "mallory", http.StatusForbidden},
		{http.MethodGet, "/app/4?q=4", "alice", http.StatusOK},
		{http.MethodPost, "/orders", "alice", http.StatusOK},
	} {
		code, user, other, err := send(tc.method, "app.example.com", tc.uri, tc.token)
		if err != nil {
			t.Fatal(err)
		}
		if code != tc.want {
			t.Errorf("%s %s with %q: status %d, want %d", tc.method, tc.uri, tc.token, code, tc.want)
		}
		if code == http.StatusOK && (user != "alice" || other != "") {
			t.Errorf("%s %s: the backend saw X-Auth-Request-User %q and X-Other %q, want alice and none", tc.method, tc.uri, user, other)
		}
	}
	if got := nt.web.Requests() - served; got != 2 {
		t.Errorf("the backend got %d requests, want the 2 allowed", got)
	}
	checks := auth.got()
	t.Logf("authorization requests: %+v", checks)
	want := []authCheck{{"GET", "/oauth2/auth", "", "session=s1"}, {"GET", "/oauth2/auth", "Bearer mallory", "session=s1"}, {"POST", "/oauth2/auth", "Bearer mallory", "session=s1"},
		{"GET", "/oauth2/auth", "Bearer alice", "session=s1"}, {"POST", "/oauth2/auth", "Bearer alice", "session=s1"}}
	if len(checks) != len(want) {
		t.Fatalf("%d authorization requests, want %d", len(checks), len(want))
	}
	for i, c := range checks {
		if c != want[i] {
			t.Errorf("authorization request %d: %+v, want %+v", i, c, want[i])
		}
	}
}
