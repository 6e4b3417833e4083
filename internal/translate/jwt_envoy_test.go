package translate_test

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/jwttest"
	"kubelb.dev/kubelb/internal/pki"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
)

// jwtPolicy is a route's SecurityPolicy with one JWT provider, corp, verifying tokens with the
// public keys of keys: issuer https://idp.example.com, audience shop, claims sub and org.team
// copied to X-User and X-Team.
func jwtPolicy(optional bool, keys ...*jwttest.Key) *v1alpha1.Security {
	jwks := jwttest.JWKS(keys...)
	return &v1alpha1.Security{Namespace: "shop", Name: "route", JWT: &v1alpha1.SecurityJWT{
		Optional: &optional,
		Providers: []v1alpha1.SecurityJWTProvider{{
			Name: "corp", Issuer: "https://idp.example.com", Audiences: []string{"shop"},
			LocalJWKS:      &v1alpha1.SecurityLocalJWKS{Type: "Inline", Inline: &jwks},
			ClaimToHeaders: []v1alpha1.SecurityClaimToHeader{{Claim: "sub", Header: "X-User"}, {Claim: "org.team", Header: "X-Team"}},
		}},
	}}
}

// claims are a token's claims for audience aud, expiring in d (past when negative), with
// more (name, value pairs).
func claims(iss, aud string, d time.Duration, more ...any) map[string]any {
	c := map[string]any{"iss": iss, "aud": aud, "sub": "alice", "iat": time.Now().Add(-time.Minute).Unix(), "exp": time.Now().Add(d).Unix()}
	for i := 0; i+1 < len(more); i += 2 {
		c[more[i].(string)] = more[i+1]
	}
	return c
}

const idp = "https://idp.example.com"

// TestJWTThroughEnvoy: an HTTPRoute's SecurityPolicy with jwt (the provider's public key set
// inline) makes a real Envoy answer 401 with a Bearer challenge to requests without a token,
// with a token signed by another key, one expired 10 minutes ago (Envoy allows 60 seconds of
// clock skew), one of another issuer or one that is no token; 403 to a token for another audience; and serve a token of the key (200), the
// backend seeing its claims sub and org.team in X-User and X-Team — never what the client
// wrote in those headers, even when the token lacks the claim.
func TestJWTThroughEnvoy(t *testing.T) {
	key, impostor := jwttest.NewKey(t, "corp-1"), jwttest.NewKey(t, "corp-1")
	addr := throughEnvoyWithSecurity(t, "tenant-jwt", nil, jwtPolicy(false, key))
	good := key.Sign(t, claims(idp, "shop", time.Hour, "org", map[string]any{"team": "payments"}))
	counts := map[int]int{}
	for _, c := range []struct {
		name, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"signed by another key", impostor.Sign(t, claims(idp, "shop", time.Hour)), http.StatusUnauthorized},
		{"expired", key.Sign(t, claims(idp, "shop", -10*time.Minute)), http.StatusUnauthorized},
		{"another issuer", key.Sign(t, claims("https://evil.example.com", "shop", time.Hour)), http.StatusUnauthorized},
		{"not a token", "not.a.token", http.StatusUnauthorized},
		{"another audience", key.Sign(t, claims(idp, "admin", time.Hour)), http.StatusForbidden},
		{"good", good, http.StatusOK},
	} {
		for range 3 {
			headers := []string{}
			if c.token != "" {
				headers = append(headers, "Authorization", "Bearer "+c.token)
			}
			resp, err := trafficGet(addr, headers...)
			if err != nil {
				t.Fatal(err)
			}
			counts[resp.StatusCode]++
			if resp.StatusCode != c.want {
				t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
			}
			if resp.StatusCode == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s: 401 with WWW-Authenticate %q, want a Bearer challenge", c.name, resp.Header.Get("WWW-Authenticate"))
			}
			if resp.StatusCode == http.StatusOK && (resp.Header.Get("X-Seen-User") != "alice" || resp.Header.Get("X-Seen-Team") != "payments") {
				t.Errorf("%s: the backend saw X-User %q and X-Team %q, want alice and payments", c.name, resp.Header.Get("X-Seen-User"), resp.Header.Get("X-Seen-Team"))
			}
		}
	}
	t.Logf("answers by status: %v", counts)
	if counts[http.StatusUnauthorized] != 15 || counts[http.StatusForbidden] != 3 || counts[http.StatusOK] != 3 {
		t.Errorf("got %v, want 15 answered 401, 3 answered 403 and 3 served", counts)
	}
	// Headers a client writes under the claims' names never reach the backend.
	noTeam := key.Sign(t, claims(idp, "shop", time.Hour))
	resp, err := trafficGet(addr, "Authorization", "Bearer "+noTeam, "X-User", "mallory", "X-Team", "admins")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Seen-User") != "alice" || resp.Header.Get("X-Seen-Team") != "" {
		t.Errorf("a token without org.team, with the client's X-User mallory and X-Team admins: %d, the backend saw X-User %q and X-Team %q; want 200, alice and nothing",
			resp.StatusCode, resp.Header.Get("X-Seen-User"), resp.Header.Get("X-Seen-Team"))
	}
}

// TestJWTOptionalThroughEnvoy: with optional: true a request without a token is served (and
// an X-User header of the client's is removed), one with a bad token still answered 401, a
// good one served with its claim.
func TestJWTOptionalThroughEnvoy(t *testing.T) {
	key := jwttest.NewKey(t, "corp-1")
	addr := throughEnvoyWithSecurity(t, "tenant-jwt-optional", nil, jwtPolicy(true, key))
	for _, c := range []struct {
		name, token, user string
		want              int
	}{
		{"no token", "", "", http.StatusOK},
		{"expired", key.Sign(t, claims(idp, "shop", -10*time.Minute)), "", http.StatusUnauthorized},
		{"good", key.Sign(t, claims(idp, "shop", time.Hour)), "alice", http.StatusOK},
	} {
		headers := []string{"X-User", "mallory"}
		if c.token != "" {
			headers = append(headers, "Authorization", "Bearer "+c.token)
		}
		resp, err := trafficGet(addr, headers...)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != c.want || (c.want == http.StatusOK && resp.Header.Get("X-Seen-User") != c.user) {
			t.Errorf("%s: %d with X-User %q at the backend, want %d and %q", c.name, resp.StatusCode, resp.Header.Get("X-Seen-User"), c.want, c.user)
		}
	}
}

// TestJWTExtractFromThroughEnvoy: a provider with extractFrom reads the token only where it
// says: header X-Token after "Token ", or query parameter access_token (200); a token in the
// Authorization header, or none, is answered 401.
func TestJWTExtractFromThroughEnvoy(t *testing.T) {
	key := jwttest.NewKey(t, "corp-1")
	sec := jwtPolicy(false, key)
	prefix := "Token "
	sec.JWT.Providers[0].ExtractFrom = &v1alpha1.SecurityJWTExtractFrom{
		Headers: []v1alpha1.SecurityJWTHeader{{Name: "X-Token", ValuePrefix: &prefix}},
		Params:  []string{"access_token"},
	}
	addr := throughEnvoyWithSecurity(t, "tenant-jwt-extract", nil, sec)
	tok := key.Sign(t, claims(idp, "shop", time.Hour))
	for _, c := range []struct {
		name, query string
		headers     []string
		want        int
	}{
		{"in X-Token", "", []string{"X-Token", "Token " + tok}, http.StatusOK},
		{"in access_token", "?access_token=" + tok, nil, http.StatusOK},
		{"in Authorization", "", []string{"Authorization", "Bearer " + tok}, http.StatusUnauthorized},
		{"none", "", nil, http.StatusUnauthorized},
	} {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/"+c.query, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(c.headers); i += 2 {
			req.Header.Set(c.headers[i], c.headers[i+1])
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("token %s: %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
}

// TestRemoteJWKSThroughEnvoy: an HTTPRoute's SecurityPolicy whose provider fetches its keys
// (remoteJWKS) makes a real Envoy fetch the key set from a key server written here, reached
// only through the tenant Service keys (its NodePort on every node; the URI's host,
// keys.example.com, is only the requests' Host); a token signed by the server's key is served
// (200, its sub in X-User), one signed by another key and none are refused (401). Stopped
// after its fetch, the key server is not needed: the key set is cached (cacheDuration 10m),
// the good token still served.
func TestRemoteJWKSThroughEnvoy(t *testing.T) {
	const tenant = "tenant-jwks"
	key, impostor := jwttest.NewKey(t, "corp-1"), jwttest.NewKey(t, "corp-1")
	nodePort := serveOnNodes(t, func(int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Seen-User", r.Header.Get("X-User"))
		})
	})
	// The key server: the key set for GET /.well-known/jwks.json with Host keys.example.com.
	var mu sync.Mutex
	fetches, refused := 0, 0
	keysPort, listeners := listenOnNodes(t)
	var servers []*http.Server
	for _, l := range listeners {
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if r.Method != http.MethodGet || r.Host != "keys.example.com" || r.URL.Path != "/.well-known/jwks.json" {
				refused++
				w.WriteHeader(http.StatusNotFound)
				return
			}
			fetches++
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(jwttest.JWKS(key)))
		})}
		servers = append(servers, srv)
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { srv.Close() })
	}

	in, httpPort := trafficInput(t, tenant, nodePort, nil)
	src := in.Routes[1].Spec.Source.Kubernetes
	src.Context = &v1alpha1.SourceContext{Security: &v1alpha1.Security{Namespace: "shop", Name: "remote", JWT: &v1alpha1.SecurityJWT{
		Providers: []v1alpha1.SecurityJWTProvider{{
			Name: "corp", Issuer: idp,
			RemoteJWKS: &v1alpha1.SecurityRemoteJWKS{
				URI: "https://keys.example.com/.well-known/jwks.json", CacheDuration: ptr.To("10m"),
				BackendRefs: []v1alpha1.SecurityBackendRef{{Name: "keys", Port: ptr.To[int32](8080)}},
			},
			ClaimToHeaders: []v1alpha1.SecurityClaimToHeader{{Claim: "sub", Header: "X-User"}},
		}},
	}}}
	src.Services = append(src.Services, nodePortTwin("shop", "keys", 8080, keysPort))
	addr := serveThroughEnvoy(t, tenant, in, httpPort)

	good := key.Sign(t, claims(idp, "shop", time.Hour))
	get := func(token string) *http.Response { return bearerGet(t, addr, token) }
	checkFetchedKeys(t, addr, key, impostor)
	// The key server stops: the cached key set still verifies tokens.
	for _, srv := range servers {
		srv.Close()
	}
	for range 3 {
		if resp := get(good); resp.StatusCode != http.StatusOK {
			t.Errorf("the key server stopped: %d, want 200 (the key set cached)", resp.StatusCode)
		}
		if resp := get(""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("the key server stopped, no token: %d, want 401", resp.StatusCode)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("key set fetched %d times; %d requests to the key server refused", fetches, refused)
	if fetches == 0 || refused != 0 {
		t.Errorf("%d fetches, %d refused requests (wrong Host or path), want at least 1 and 0", fetches, refused)
	}
}

// TestRemoteJWKSAtURLThroughEnvoy: a provider whose keys are fetched at an https URL without
// backendRefs (https://keys.example.test:<port>/.well-known/jwks.json) makes a real Envoy
// fetch them from the address the manager resolved the name to (Input.Resolved: 127.0.0.4,
// which the test's endpoint policy allows), over TLS with the name as SNI, the server's
// certificate (of the test's own CA, Options.KeyServerCAs) verified: a token of the key
// served with its sub in X-User, one of another key and none 401. The name is among those the
// manager resolves (EndpointHostnames).
func TestRemoteJWKSAtURLThroughEnvoy(t *testing.T) {
	const tenant, host, keysIP = "tenant-jwks-url", "keys.example.test", "127.0.0.4"
	key, impostor := jwttest.NewKey(t, "corp-1"), jwttest.NewKey(t, "corp-1")
	nodePort := serveOnNodes(t, func(int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Seen-User", r.Header.Get("X-User"))
		})
	})
	ca, err := pki.NewCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.IssueServer([]string{host}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	keysPort := testsupport.FreePort(t, keysIP)
	l, err := tls.Listen("tcp", net.JoinHostPort(keysIP, strconv.Itoa(keysPort)), &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	fetches, sni := 0, ""
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/.well-known/jwks.json" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		fetches, sni = fetches+1, r.TLS.ServerName
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(jwttest.JWKS(key)))
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })

	in, httpPort := trafficInput(t, tenant, nodePort, nil)
	in.Options.KeyServerCAs = string(ca.CertPEM)
	in.Routes[1].Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{Security: &v1alpha1.Security{Namespace: "shop", Name: "remote", JWT: &v1alpha1.SecurityJWT{
		Providers: []v1alpha1.SecurityJWTProvider{{
			Name: "corp", Issuer: idp,
			RemoteJWKS:     &v1alpha1.SecurityRemoteJWKS{URI: fmt.Sprintf("https://%s:%d/.well-known/jwks.json", host, keysPort)},
			ClaimToHeaders: []v1alpha1.SecurityClaimToHeader{{Claim: "sub", Header: "X-User"}},
		}},
	}}}
	if names := translate.EndpointHostnames(&in); !slices.Contains(names, host) {
		t.Fatalf("the names the manager resolves %v lack the key server's %s", names, host)
	}
	in.Resolved = map[string]translate.Resolved{host: {Addrs: []netip.Addr{netip.MustParseAddr(keysIP)}}}
	addr := serveThroughEnvoy(t, tenant, in, httpPort)

	answers := checkFetchedKeys(t, addr, key, impostor)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("answers %v; %d fetches from the key server, SNI %q", answers, fetches, sni)
	if fetches == 0 || sni != host {
		t.Errorf("%d fetches with SNI %q, want at least one with %s", fetches, sni, host)
	}
}

// bearerGet sends GET / to addr with the token as a Bearer credential ("" sends none).
func bearerGet(t *testing.T, addr, token string) *http.Response {
	t.Helper()
	var headers []string
	if token != "" {
		headers = append(headers, "Authorization", "Bearer "+token)
	}
	resp, err := trafficGet(addr, headers...)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// checkFetchedKeys waits until a real Envoy at addr, whose route requires a token of a key
// set fetched from a key server (key's), serves a token of key, then sends 3 requests of each:
// a token of impostor and none (401), a token of key (200, its sub alice in X-User at the
// backend). It returns the answers counted by case and status.
func checkFetchedKeys(t *testing.T, addr string, key, impostor *jwttest.Key) map[string]int {
	t.Helper()
	good := key.Sign(t, claims(idp, "shop", time.Hour))
	// The key set is fetched asynchronously: until it is, tokens are refused.
	testsupport.Eventually(t, 30*time.Second, "the key set to be fetched and the token served", func() error {
		if resp := bearerGet(t, addr, good); resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%d", resp.StatusCode)
		}
		return nil
	})
	answers := map[string]int{}
	for _, c := range []struct {
		name, token string
		want        int
	}{
		{"signed by another key", impostor.Sign(t, claims(idp, "shop", time.Hour)), http.StatusUnauthorized},
		{"no token", "", http.StatusUnauthorized},
		{"good", good, http.StatusOK},
	} {
		for range 3 {
			resp := bearerGet(t, addr, c.token)
			answers[c.name+" "+strconv.Itoa(resp.StatusCode)]++
			if resp.StatusCode != c.want {
				t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
			}
			if c.want == http.StatusOK && resp.Header.Get("X-Seen-User") != "alice" {
				t.Errorf("%s: the backend saw X-User %q, want alice", c.name, resp.Header.Get("X-Seen-User"))
			}
		}
	}
	return answers
}
