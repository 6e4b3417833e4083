package translate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/jwttest"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
)

// oidcBrowser is a client that keeps the cookies Envoy sets (whatever their Secure flag: the
// test speaks plain HTTP) and never follows redirects, every request to Envoy's address.
type oidcBrowser struct {
	t       *testing.T
	client  *http.Client
	cookies map[string]string
}

func newOIDCBrowser(t *testing.T, addr string) *oidcBrowser {
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	return &oidcBrowser{t: t, cookies: map[string]string{}, client: &http.Client{
		Timeout:       10 * time.Second,
		Transport:     &http.Transport{DialContext: dial, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// get sends GET u with the cookies kept, keeps those set, and returns the status and Location.
func (b *oidcBrowser) get(u string) (int, string, http.Header) {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	for name, value := range b.cookies {
		req.AddCookie(&http.Cookie{Name: name, Value: value})
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatalf("GET %s: %v", u, err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.MaxAge < 0 || c.Value == "" || c.Value == "deleted" {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c.Value
		}
	}
	return resp.StatusCode, resp.Header.Get("Location"), resp.Header
}

// TestOIDCThroughEnvoy: an HTTPRoute (shop.example.com) whose SecurityPolicy has oidc makes a
// real Envoy redirect a request without a session (302) to the provider's authorization
// endpoint with the client's ID, the redirect URL and the scopes; a provider written here
// (its token endpoint the tenant Service idp on every node) exchanges the code it gave for
// tokens when the client secret of the mirrored Secret comes with it; the callback sets the
// session cookies, with which the request reaches the backend (200) with the access token
// (forwardAccessToken). Forged session cookies are redirected again; a route without the
// policy (open.example.com) is served without any login.
func TestOIDCThroughEnvoy(t *testing.T) {
	const tenant = "tenant-oidc"
	var mu sync.Mutex
	var sawAuthorization []string
	nodePort := serveOnNodes(t, func(int) http.Handler {
		return http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			mu.Lock()
			sawAuthorization = append(sawAuthorization, r.Header.Get("Authorization"))
			mu.Unlock()
		})
	})
	// The provider's token endpoint: the code "code-1" for client shop with its secret.
	idpPort, listeners := listenOnNodes(t)
	exchanges := 0
	for _, l := range listeners {
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = r.ParseForm()
			mu.Lock()
			exchanges++
			mu.Unlock()
			if r.URL.Path != "/token" || r.Host != "id.example.com" || r.PostForm.Get("grant_type") != "authorization_code" ||
				r.PostForm.Get("code") != "code-1" || r.PostForm.Get("client_id") != "shop" || r.PostForm.Get("client_secret") != "shop-client-secret" {
				t.Logf("token request refused: %s %s host %s form %v", r.Method, r.URL.Path, r.Host, r.PostForm)
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "access-1", "id_token": "id-1", "token_type": "Bearer", "expires_in": 3600})
		})}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { srv.Close() })
	}

	in, httpPort := trafficInput(t, tenant, nodePort, nil)
	open := *in.Routes[1].DeepCopy()
	open.Name, open.UID = "00000000-0000-0000-0000-0000000000a3", "uid-open"
	in.Routes[1].UID = "uid-shop"
	for host, r := range map[string]*v1alpha1.Route{"shop.example.com": &in.Routes[1], "open.example.com": &open} {
		obj := r.Spec.Source.Kubernetes.Route.Object
		obj["spec"].(map[string]any)["hostnames"] = []any{host}
		obj["metadata"].(map[string]any)["name"] = strings.TrimSuffix(host, ".example.com")
	}
	login := shopLogin(&in, idpPort)
	login.Scopes, login.ForwardAccessToken = []string{"email"}, ptr.To(true)
	in.Routes = append(in.Routes, open)
	addr := serveThroughEnvoy(t, tenant, in, httpPort)

	// A route without the policy: served, no login.
	if status, loc, _ := newOIDCBrowser(t, addr).get("http://open.example.com/"); status != http.StatusOK {
		t.Errorf("open.example.com: %d (Location %q), want 200", status, loc)
	}

	// Without a session: redirected to the provider.
	b := newOIDCBrowser(t, addr)
	status, loc, _ := b.get("http://shop.example.com/cart")
	if status != http.StatusFound {
		t.Fatalf("without a session: %d, want 302", status)
	}
	authz, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	q := authz.Query()
	if authz.Scheme+"://"+authz.Host+authz.Path != "https://id.example.com/authorize" || q.Get("client_id") != "shop" ||
		q.Get("redirect_uri") != "http://shop.example.com/oauth2/callback" || q.Get("response_type") != "code" ||
		q.Get("scope") != "openid email" || q.Get("state") == "" {
		t.Fatalf("redirected to %s, want the authorization endpoint with client_id, redirect_uri, scopes and state", loc)
	}

	// The provider sends the user back with a code: Envoy exchanges it and sets the session.
	status, loc, _ = b.get(q.Get("redirect_uri") + "?code=code-1&state=" + url.QueryEscape(q.Get("state")))
	if status != http.StatusFound || !strings.HasSuffix(loc, "/cart") {
		t.Fatalf("callback: %d to %q, want 302 back to /cart (cookies %v)", status, loc, b.cookies)
	}
	served := 0
	for range 3 {
		if status, loc, _ := b.get("http://shop.example.com/cart"); status != http.StatusOK {
			t.Errorf("with the session: %d (Location %q), want 200", status, loc)
		} else {
			served++
		}
	}
	// Forged session cookies (the names Envoy set, other values) change nothing.
	forged := newOIDCBrowser(t, addr)
	for name := range b.cookies {
		forged.cookies[name] = "forged"
	}
	if status, _, _ := forged.get("http://shop.example.com/cart"); status != http.StatusFound || len(b.cookies) < 3 {
		t.Errorf("forged cookies %v: %d, want 302", forged.cookies, status)
	}
	mu.Lock()
	defer mu.Unlock()
	if exchanges != 1 {
		t.Errorf("%d token requests, want 1", exchanges)
	}
	bearer := 0
	for _, a := range sawAuthorization {
		if a == "Bearer access-1" {
			bearer++
		}
	}
	t.Logf("open route served; shop: redirected without and with forged cookies, %d served after login", served)
	if served != 3 || bearer != 3 {
		t.Errorf("%d served after login, %d with the access token, want 3 and 3", served, bearer)
	}
}

// TestOIDCSessionFieldsThroughEnvoy: an HTTPRoute's SecurityPolicy with oidc and a jwt, its
// login's cookies SameSite=Strict, requests of scripts (X-Requested-With: XMLHttpRequest)
// denied the redirect and passThroughAuthHeader set, makes a real Envoy redirect a browser
// without a session (302, its cookies SameSite=Strict), answer a script 401 instead, serve a
// request with a token the jwt verifies without any login (200), refuse one with a token of
// another key (401: it skipped the login, not the token check), and redirect one with
// another kind of Authorization (302).
func TestOIDCSessionFieldsThroughEnvoy(t *testing.T) {
	const tenant = "tenant-oidc-session"
	key, impostor := jwttest.NewKey(t, "corp-1"), jwttest.NewKey(t, "corp-1")
	jwks := jwttest.JWKS(key)
	nodePort := serveOnNodes(t, func(int) http.Handler { return http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}) })
	idpPort := serveOnNodes(t, func(int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadRequest) })
	})
	in, httpPort := trafficInput(t, tenant, nodePort, nil)
	// Only shop.example.com: Envoy's readiness probe (GET / by address) is not redirected.
	in.Routes[1].Spec.Source.Kubernetes.Route.Object["spec"].(map[string]any)["hostnames"] = []any{"shop.example.com"}
	login := shopLogin(&in, idpPort)
	login.CookieConfig = &v1alpha1.SecurityOIDCCookieConfig{SameSite: ptr.To("Strict")}
	login.DenyRedirect = &v1alpha1.SecurityOIDCDenyRedirect{Headers: []v1alpha1.SecurityOIDCHeaderMatch{{Name: "X-Requested-With", Value: "XMLHttpRequest"}}}
	login.PassThroughAuthHeader = ptr.To(true)
	in.Routes[1].Spec.Source.Kubernetes.Context.Security.JWT = &v1alpha1.SecurityJWT{Providers: []v1alpha1.SecurityJWTProvider{{
		Name: "corp", Issuer: idp, LocalJWKS: &v1alpha1.SecurityLocalJWKS{Type: "Inline", Inline: &jwks},
	}}}
	addr := serveThroughEnvoy(t, tenant, in, httpPort)

	client := newOIDCBrowser(t, addr).client
	send := func(headers ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://shop.example.com/cart", nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	good := key.Sign(t, claims(idp, "shop", time.Hour))
	for _, c := range []struct {
		name    string
		headers []string
		want    int
	}{
		{"a browser without a session", nil, http.StatusFound},
		{"a script", []string{"X-Requested-With", "XMLHttpRequest"}, http.StatusUnauthorized},
		{"a token the jwt verifies", []string{"Authorization", "Bearer " + good}, http.StatusOK},
		{"a token of another key", []string{"Authorization", "Bearer " + impostor.Sign(t, claims(idp, "shop", time.Hour))}, http.StatusUnauthorized},
		{"basic credentials", []string{"Authorization", "Basic YWxpY2U6c2VjcmV0"}, http.StatusFound},
	} {
		for range 2 {
			resp := send(c.headers...)
			if resp.StatusCode != c.want {
				t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
			}
			if resp.StatusCode != http.StatusFound {
				continue
			}
			cookies := resp.Header.Values("Set-Cookie")
			if len(cookies) == 0 {
				t.Errorf("%s: redirected without cookies", c.name)
			}
			for _, sc := range cookies {
				if !strings.Contains(sc, "SameSite=Strict") {
					t.Errorf("%s: cookie %q without SameSite=Strict", c.name, sc)
				}
			}
		}
	}
}

// shopLogin gives the HTTPRoute of in (trafficInput) the SecurityPolicy shop/login with oidc:
// the provider id.example.com, its token endpoint through the tenant Service idp:8080 (its
// NodePort twin on idpPort, carried), client shop with the mirrored Secret shop-oidc. It
// returns the oidc for the test to add to.
func shopLogin(in *translate.Input, idpPort int) *v1alpha1.SecurityOIDC {
	login := &v1alpha1.SecurityOIDC{
		Provider: v1alpha1.SecurityOIDCProvider{
			Issuer: "https://id.example.com", AuthorizationEndpoint: ptr.To("https://id.example.com/authorize"),
			TokenEndpoint: ptr.To("https://id.example.com/token"),
			BackendRefs:   []v1alpha1.SecurityBackendRef{{Name: "idp", Port: ptr.To[int32](8080)}},
		},
		ClientID: "shop", ClientSecret: v1alpha1.SecurityBasicAuthUsers{Name: "shop-oidc"},
	}
	src := in.Routes[1].Spec.Source.Kubernetes
	src.Context = &v1alpha1.SourceContext{Security: &v1alpha1.Security{Namespace: "shop", Name: "login", OIDC: login}}
	src.Services = append(src.Services, nodePortTwin("shop", "idp", 8080, idpPort))
	in.Secrets = append(in.Secrets, corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hub-shop-oidc", Namespace: in.Tenant, Labels: map[string]string{v1alpha1.LabelOriginNamespace: "shop", v1alpha1.LabelOriginName: "shop-oidc"}},
		Data:       map[string][]byte{"client-secret": []byte("shop-client-secret")},
	})
	in.OIDCCookieKeys = translatetest.OIDCCookieKeys(in.Routes)
	return login
}

// nodePortTwin is the NodePort twin of tenant Service ns/name as a Route carries it: port
// on nodePort.
func nodePortTwin(ns, name string, port int32, nodePort int) v1alpha1.UpstreamService {
	return v1alpha1.UpstreamService{Service: corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-nodeport", Namespace: ns, Labels: map[string]string{v1alpha1.LabelOriginName: name, v1alpha1.LabelOriginNamespace: ns}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Name: "http", Port: port, NodePort: int32(nodePort)}}},
	}}
}

// TestOIDCCookieKeyThroughEnvoy: the session cookies of a login are signed with the key the
// manager keeps for it on the hub. A user logged in through one real Envoy is served by a
// second Envoy built by a new translation from the same stored key (a manager restart, a
// rebuild: 3 requests served, no new login); a third Envoy whose login has another key
// (another login's, or one made anew after the key was lost) redirects the same cookies to
// the provider (3 requests, 302): a key the tenant never sees is what the session rests on.
func TestOIDCCookieKeyThroughEnvoy(t *testing.T) {
	const tenant = "tenant-oidc-key"
	nodePort := serveOnNodes(t, func(int) http.Handler { return http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}) })
	idpPort := serveOnNodes(t, func(int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = r.ParseForm()
			if r.PostForm.Get("code") != "code-1" || r.PostForm.Get("client_secret") != "shop-client-secret" {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "access-1", "id_token": "id-1", "token_type": "Bearer", "expires_in": 3600})
		})
	})
	// build serves the shop login through a new Envoy whose login's key is key (nil: the one
	// translatetest.OIDCCookieKeys gives, as the manager's Secret would hold it).
	build := func(key []byte) string {
		in, httpPort := trafficInput(t, tenant, nodePort, nil)
		in.Routes[1].Spec.Source.Kubernetes.Route.Object["spec"].(map[string]any)["hostnames"] = []any{"shop.example.com"}
		shopLogin(&in, idpPort)
		if key != nil {
			logins := translate.OIDCLogins(in.Routes)
			if len(logins) != 1 {
				t.Fatalf("logins %v, want one", logins)
			}
			in.OIDCCookieKeys = map[string][]byte{translate.OIDCCookieKeyName(logins[0]): key}
		}
		return serveThroughEnvoy(t, tenant, in, httpPort)
	}

	first := build(nil)
	b := newOIDCBrowser(t, first)
	status, loc, _ := b.get("http://shop.example.com/cart")
	authz, err := url.Parse(loc)
	if status != http.StatusFound || err != nil {
		t.Fatalf("without a session: %d to %q, want 302 to the provider", status, loc)
	}
	if status, loc, _ := b.get(authz.Query().Get("redirect_uri") + "?code=code-1&state=" + url.QueryEscape(authz.Query().Get("state"))); status != http.StatusFound || len(b.cookies) < 3 {
		t.Fatalf("callback: %d to %q with cookies %v, want 302 and the session cookies", status, loc, b.cookies)
	}
	if status, _, _ := b.get("http://shop.example.com/cart"); status != http.StatusOK {
		t.Fatalf("with the session on the first Envoy: %d, want 200", status)
	}
	session := maps.Clone(b.cookies)

	// The same stored key, a new translation and a new Envoy: the session holds.
	again := newOIDCBrowser(t, build(nil))
	again.cookies = maps.Clone(session)
	// Another key for the login: the same cookies are worth nothing.
	other := newOIDCBrowser(t, build(bytes.Repeat([]byte{7}, translate.OIDCCookieKeySize)))
	other.cookies = maps.Clone(session)
	served, redirected := 0, 0
	for range 3 {
		if status, loc, _ := again.get("http://shop.example.com/cart"); status == http.StatusOK {
			served++
		} else {
			t.Errorf("the same key, a new Envoy: %d (Location %q), want 200", status, loc)
		}
		other.cookies = maps.Clone(session) // a redirect clears them
		if status, _, _ := other.get("http://shop.example.com/cart"); status == http.StatusFound {
			redirected++
		} else {
			t.Errorf("another key: %d, want 302", status)
		}
	}
	t.Logf("the same key: %d of 3 served; another key: %d of 3 redirected", served, redirected)
}
