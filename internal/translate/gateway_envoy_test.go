package translate_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdsenvoy"
)

// TestGatewayCertificatesThroughEnvoy serves one HTTPS listener (*.example.com) with four
// certificateRefs through a real Envoy: an ECDSA and an RSA certificate for a.example.com, an
// ECDSA one for b.example.com, and a Secret that never reached the hub. A client gets the
// certificate of the name it asks for, and for a.example.com the one of the key type it
// supports (Envoy reads the signature algorithms of the ClientHello: Go's client offers ECDSA,
// `openssl s_client -sigalgs` offers RSA only); the missing Secret is reported and the
// listener is served with the others.
func TestGatewayCertificatesThroughEnvoy(t *testing.T) {
	const tenant = "tenant-certs"
	web := testsupport.StartHTTPBackend(t, "127.0.0.1:0", testsupport.Identity{Node: "node-1", Pod: "web"})
	_, p, _ := net.SplitHostPort(web.Addr)
	nodePort, _ := strconv.Atoi(p)
	httpsPort := testsupport.FreePort(t)

	ecKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	aEC, aECPool := selfSigned(t, "a.example.com", ecKey())
	aRSA, aRSAPool := selfSigned(t, "a.example.com", rsaKey)
	bEC, bECPool := selfSigned(t, "b.example.com", ecKey())

	hostname := gwv1.Hostname("*.example.com")
	ref := func(name string) gwv1.SecretObjectReference {
		return gwv1.SecretObjectReference{Name: gwv1.ObjectName(name)}
	}
	port := gwv1.PortNumber(80)
	in := oneGateway(t, tenant, gwv1.Listener{
		Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: &hostname,
		TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{ref("a-ecdsa"), ref("a-rsa"), ref("b-ecdsa"), ref("never-synced")}},
	}, httpsPort, []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
		BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: &port}}}}}}, nodePort)
	secret := func(name string, data map[string][]byte) corev1.Secret {
		return corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "synced-" + name, Namespace: tenant,
			Labels: map[string]string{v1alpha1.LabelOriginName: name, v1alpha1.LabelOriginNamespace: "shop"}}, Type: corev1.SecretTypeTLS, Data: data}
	}
	in.Secrets = []corev1.Secret{secret("a-ecdsa", aEC), secret("a-rsa", aRSA), secret("b-ecdsa", bEC)}
	_, problems, res, err := translatetest.Pipeline(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || problems[0].Reason != string(gwv1.ListenerReasonInvalidCertificateRef) {
		t.Fatalf("problems: %v, want one InvalidCertificateRef for never-synced", problems)
	}

	xdsenvoy.Start(t, "gateway-certs", tenant, res, bootstrap.Options{}, testsupport.EnvoyOptions{Concurrency: 1})
	addr := testsupport.Loopback(httpsPort)
	ecdheECDSA := []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}
	// handshake connects with sni over TLS 1.2 with only suites (nil: any, TLS 1.3 allowed),
	// sends a request, and returns the key type of the certificate served.
	handshake := func(sni string, pool *x509.CertPool, suites []uint16) (string, error) {
		cfg := &tls.Config{ServerName: sni, RootCAs: pool, MinVersion: tls.VersionTLS12}
		if suites != nil {
			cfg.MaxVersion, cfg.CipherSuites = tls.VersionTLS12, suites
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		if err != nil {
			return "", err
		}
		defer conn.Close()
		switch conn.ConnectionState().PeerCertificates[0].PublicKey.(type) {
		case *rsa.PublicKey:
			return "RSA", nil
		case *ecdsa.PublicKey:
			return "ECDSA", nil
		}
		return "other", nil
	}
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve the listener", func() error {
		_, err := get(addr, "b.example.com", bECPool, "b.example.com", "/")
		return err
	})
	for _, c := range []struct {
		sni    string
		pool   *x509.CertPool
		suites []uint16
		want   string
	}{
		{"a.example.com", aECPool, ecdheECDSA, "ECDSA"},
		{"a.example.com", aECPool, nil, "ECDSA"}, // TLS 1.3: the first certificate the client can use
		{"b.example.com", bECPool, nil, "ECDSA"},
		{"b.example.com", bECPool, ecdheECDSA, "ECDSA"},
	} {
		if got, err := handshake(c.sni, c.pool, c.suites); err != nil || got != c.want {
			t.Errorf("SNI %s with suites %v: %s certificate (%v), want the %s certificate for that name", c.sni, c.suites, got, err, c.want)
		}
	}
	// A client that signs with RSA only (older clients) gets the RSA certificate of the same
	// name, over TLS 1.2 and 1.3; Go's client always offers ECDSA, so openssl stands in for it.
	for _, version := range []string{"-tls1_2", "-tls1_3"} {
		if got := opensslPeerKey(t, addr, "a.example.com", version, "RSA-PSS+SHA256:RSA+SHA256"); got != "RSA" {
			t.Errorf("SNI a.example.com, RSA signatures only (%s): %s certificate, want the RSA one", version, got)
		}
	}
	if _, err := handshake("a.example.com", aRSAPool, nil); err == nil {
		t.Error("a client offering ECDSA was served the RSA certificate of a.example.com")
	}
	// Each name is served with its own certificate: b's CA does not trust what a.example.com gets.
	if _, err := handshake("a.example.com", bECPool, nil); err == nil {
		t.Error("a.example.com was served with b.example.com's certificate")
	}
	for _, host := range []string{"a.example.com", "b.example.com"} {
		pool := aECPool
		if host == "b.example.com" {
			pool = bECPool
		}
		if got, err := get(addr, host, pool, host, "/"); err != nil || got != "web" {
			t.Errorf("https://%s/ answered by %q (%v), want web", host, got, err)
		}
	}
}

// opensslPeerKey connects to addr with `openssl s_client` offering only sigalgs, and returns
// the key type of the certificate it was served ("RSA", "ECDSA" or what openssl said).
func opensslPeerKey(t *testing.T, addr, sni, version, sigalgs string) string {
	t.Helper()
	bin, err := exec.LookPath("openssl")
	if err != nil {
		t.Fatalf("openssl is needed to offer RSA signatures only: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "s_client", "-connect", addr, "-servername", sni, version, "-sigalgs", sigalgs)
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("none (%v: %s)", err, lastLines(string(out), 3))
	}
	i := bytes.Index(out, []byte("-----BEGIN CERTIFICATE-----"))
	if i < 0 {
		return "none (no certificate in the output)"
	}
	block, _ := pem.Decode(out[i:])
	if block == nil {
		return "none (no certificate in the output)"
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Sprintf("unparsable (%v)", err)
	}
	switch cert.PublicKey.(type) {
	case *rsa.PublicKey:
		return "RSA"
	case *ecdsa.PublicKey:
		return "ECDSA"
	}
	return fmt.Sprintf("%T", cert.PublicKey)
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], " / ")
}

// TestRetryThroughEnvoy sends requests through a real Envoy to a backend that answers 503 to
// the first two tries of every request: a rule retrying 503 up to 2 times answers 200 (three
// tries reached the backend), a rule retrying once answers 503 (two tries), a rule without
// retry answers 503 at once (one try), and a rule retrying only failures without an answer
// does not retry the 503. Under /reset the backend closes the connection of a request's
// first try without answering, under /slow it answers the first try after a second: a rule
// with retry answers 200 after two tries for both (HTTPRouteRetryConnectionError, and
// HTTPRouteRetryBackendTimeout with timeouts.backendRequest 200ms), and the slow rule
// without retry answers 504 after one.
func TestRetryThroughEnvoy(t *testing.T) {
	const tenant = "tenant-retry"
	var mu sync.Mutex
	tries := map[string]int{} // by the request's x-request-key
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		key := r.Header.Get("x-request-key")
		tries[key]++
		n := tries[key]
		mu.Unlock()
		switch {
		case strings.HasPrefix(r.URL.Path, "/reset") && n == 1:
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		case strings.HasPrefix(r.URL.Path, "/slow") && n == 1:
			time.Sleep(time.Second)
			w.WriteHeader(http.StatusOK)
			return
		case strings.HasPrefix(r.URL.Path, "/reset"), strings.HasPrefix(r.URL.Path, "/slow"):
			w.WriteHeader(http.StatusOK)
			return
		}
		if n <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	backend.Listener = l
	backend.Start()
	t.Cleanup(backend.Close)
	_, p, _ := net.SplitHostPort(l.Addr().String())
	nodePort, _ := strconv.Atoi(p)
	httpPort := testsupport.FreePort(t)

	port := gwv1.PortNumber(80)
	rule := func(path string, retry *gwv1.HTTPRouteRetry) gwv1.HTTPRouteRule {
		typ := gwv1.PathMatchPathPrefix
		return gwv1.HTTPRouteRule{
			Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: &typ, Value: &path}}},
			BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: &port}}}},
			Retry: retry,
		}
	}
	two, one := 2, 1
	backoff := gwv1.Duration("10ms")
	in := oneGateway(t, tenant, gwv1.Listener{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}, httpPort, []gwv1.HTTPRouteRule{
		rule("/twice", &gwv1.HTTPRouteRetry{Codes: []gwv1.HTTPRouteRetryStatusCode{503}, Attempts: &two, Backoff: &backoff}),
		rule("/once", &gwv1.HTTPRouteRetry{Codes: []gwv1.HTTPRouteRetryStatusCode{503}, Attempts: &one, Backoff: &backoff}),
		rule("/failures-only", &gwv1.HTTPRouteRetry{Attempts: &two}),
		rule("/never", nil),
		rule("/reset", &gwv1.HTTPRouteRetry{Attempts: &one}),
		withBackendTimeout(rule("/slow", &gwv1.HTTPRouteRetry{Attempts: &one}), "200ms"),
		withBackendTimeout(rule("/slow-never", nil), "200ms"),
	}, nodePort)
	_, problems, res, err := translatetest.Pipeline(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	xdsenvoy.Start(t, "gateway-retry", tenant, res, bootstrap.Options{}, testsupport.EnvoyOptions{Concurrency: 1})
	addr := testsupport.Loopback(httpPort)
	request := func(path, key string) (int, error) {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("x-request-key", key)
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve the route", func() error {
		_, err := request("/never", "warm-up")
		return err
	})
	for _, c := range []struct {
		path   string
		status int
		tries  int
	}{
		{"/twice", http.StatusOK, 3},
		{"/once", http.StatusServiceUnavailable, 2},
		{"/failures-only", http.StatusServiceUnavailable, 1},
		{"/never", http.StatusServiceUnavailable, 1},
		{"/reset", http.StatusOK, 2},
		{"/slow", http.StatusOK, 2},
		{"/slow-never", http.StatusGatewayTimeout, 1},
	} {
		status, err := request(c.path, c.path)
		mu.Lock()
		n := tries[c.path]
		mu.Unlock()
		if err != nil || status != c.status || n != c.tries {
			t.Errorf("GET %s: %d after %d tries (%v), want %d after %d", c.path, status, n, err, c.status, c.tries)
		}
	}
}

// withBackendTimeout is rule with timeouts.backendRequest d.
func withBackendTimeout(rule gwv1.HTTPRouteRule, d gwv1.Duration) gwv1.HTTPRouteRule {
	rule.Timeouts = &gwv1.HTTPRouteTimeouts{BackendRequest: &d}
	return rule
}

// toObject is o (a Gateway API object) as the unstructured content of a Route.
func toObject(t *testing.T, o any) map[string]any {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// oneGateway is a tenant with one Gateway (shop/gw) of one listener, served by Envoy on
// envoyPort of 127.0.0.1, and one HTTPRoute (shop/web) of rules attached to it whose backend
// Service web has its NodePort at nodePort of 127.0.0.1.
func oneGateway(t *testing.T, tenant string, listener gwv1.Listener, envoyPort int, rules []gwv1.HTTPRouteRule, nodePort int) translate.Input {
	t.Helper()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	gateway := v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: "00000000-0000-0000-0000-0000000000a1", Namespace: tenant, CreationTimestamp: metav1.NewTime(t0)}}
	gateway.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{}
	gateway.Spec.Source.Kubernetes.Route.Object = toObject(t, &gwv1.Gateway{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "Gateway"},
		ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "shop"},
		Spec:       gwv1.GatewaySpec{GatewayClassName: "kubelb", Listeners: []gwv1.Listener{listener}},
	})
	route := v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: "00000000-0000-0000-0000-0000000000a2", Namespace: tenant, CreationTimestamp: metav1.NewTime(t0.Add(time.Hour))}}
	route.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Services: []v1alpha1.UpstreamService{{Service: corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web-nodeport", Namespace: "shop", Labels: map[string]string{v1alpha1.LabelOriginName: "web", v1alpha1.LabelOriginNamespace: "shop"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: int32(nodePort)}}},
	}}}}
	route.Spec.Source.Kubernetes.Route.Object = toObject(t, &gwv1.HTTPRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "HTTPRoute"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec:       gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}}, Rules: rules},
	})
	return translate.Input{
		Tenant:    tenant,
		Addresses: map[string]v1alpha1.Addresses{"default": {ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "127.0.0.1"}}}}},
		Options:   translate.Options{ListenerAddress: "127.0.0.1"},
		Policy:    translate.EndpointPolicy{Allow: []translate.PolicyRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8"), Source: translate.SourceConfigAllow}}},
		Routes:    []v1alpha1.Route{gateway, route},
		RouteServices: []corev1.Service{{
			ObjectMeta: metav1.ObjectMeta{Name: "gateway-" + gateway.Name, Namespace: tenant, Labels: map[string]string{v1alpha1.LabelRouteName: gateway.Name}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: fmt.Sprintf("tcp-%d", listener.Port), Port: int32(listener.Port), Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromInt(envoyPort)}}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "127.0.0.1"}}}},
		}},
	}
}

// TestSessionPersistenceThroughEnvoy serves one HTTPRoute through a real Envoy to a Service on
// three tenant nodes (each node's NodePort answers with its name): /cookie keeps sessions by
// a Permanent cookie, /header by a header, /none keeps none. Without the cookie or header,
// requests spread over the nodes; the first answer names the session's node (a Set-Cookie
// with the cookie's Path, Max-Age and HttpOnly, or the header), and every request that sends
// it back goes to that node. /none sets no cookie: only the routes that ask keep sessions.
func TestSessionPersistenceThroughEnvoy(t *testing.T) {
	const tenant = "tenant-sessions"
	nodes := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	nodePort := testsupport.FreePort(t, nodes...)
	for i, ip := range nodes {
		testsupport.StartHTTPBackend(t, net.JoinHostPort(ip, strconv.Itoa(nodePort)), testsupport.Identity{Node: fmt.Sprintf("node-%d", i), Pod: "web"})
	}
	httpPort := testsupport.FreePort(t)
	port := gwv1.PortNumber(80)
	rule := func(path string, sp *gwv1.SessionPersistence) gwv1.HTTPRouteRule {
		typ := gwv1.PathMatchPathPrefix
		return gwv1.HTTPRouteRule{
			Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: &typ, Value: &path}}},
			BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: &port}}}},
			SessionPersistence: sp,
		}
	}
	cookieName, headerName := "shop-session", "X-Session"
	hour := gwv1.Duration("1h")
	cookie, header, permanent := gwv1.CookieBasedSessionPersistence, gwv1.HeaderBasedSessionPersistence, gwv1.PermanentCookieLifetimeType
	in := oneGateway(t, tenant, gwv1.Listener{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}, httpPort, []gwv1.HTTPRouteRule{
		rule("/cookie", &gwv1.SessionPersistence{SessionName: &cookieName, Type: &cookie, AbsoluteTimeout: &hour,
			CookieConfig: &gwv1.CookieConfig{LifetimeType: &permanent}}),
		rule("/header", &gwv1.SessionPersistence{SessionName: &headerName, Type: &header}),
		rule("/none", nil),
	}, nodePort)
	var addrs []v1alpha1.EndpointAddress
	for _, ip := range nodes {
		addrs = append(addrs, v1alpha1.EndpointAddress{IP: ip})
	}
	in.Addresses = map[string]v1alpha1.Addresses{"default": {ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1alpha1.AddressesSpec{Addresses: addrs}}}
	_, problems, res, err := translatetest.Pipeline(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	xdsenvoy.Start(t, "gateway-sessions", tenant, res, bootstrap.Options{}, testsupport.EnvoyOptions{Concurrency: 1})
	addr := testsupport.Loopback(httpPort)
	// get sends GET path, with the header h (name: value) when given, on a new connection.
	get := func(path string, h ...string) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			return nil, err
		}
		if len(h) == 2 {
			req.Header.Set(h[0], h[1])
		}
		resp, err := (&http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %d", path, resp.StatusCode)
		}
		return resp, nil
	}
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve the route on every node", func() error {
		seen := map[string]bool{}
		for range 12 {
			resp, err := get("/none")
			if err != nil {
				return err
			}
			seen[resp.Header.Get(testsupport.HeaderNode)] = true
		}
		if len(seen) < 2 {
			return fmt.Errorf("requests without a session reached only %v", seen)
		}
		return nil
	})
	const tries = 15
	// spread is how many nodes tries requests reach, each sending h.
	spread := func(path string, h ...string) map[string]int {
		t.Helper()
		seen := map[string]int{}
		for range tries {
			resp, err := get(path, h...)
			if err != nil {
				t.Fatal(err)
			}
			seen[resp.Header.Get(testsupport.HeaderNode)]++
		}
		return seen
	}

	first, err := get("/cookie/cart")
	if err != nil {
		t.Fatal(err)
	}
	setCookie := first.Header.Get("Set-Cookie")
	for _, want := range []string{cookieName + "=", "Max-Age=3600", "Path=/cookie", "HttpOnly"} {
		if !strings.Contains(setCookie, want) {
			t.Errorf("/cookie: Set-Cookie %q lacks %q", setCookie, want)
		}
	}
	c, err := http.ParseSetCookie(setCookie)
	if err != nil {
		t.Fatalf("/cookie: Set-Cookie %q: %v", setCookie, err)
	}
	node := first.Header.Get(testsupport.HeaderNode)
	if seen := spread("/cookie/cart", "Cookie", c.Name+"="+c.Value); len(seen) != 1 || seen[node] != tries {
		t.Errorf("/cookie with the session's cookie: %v, want all %d on %s", seen, tries, node)
	}
	if seen := spread("/cookie/cart"); len(seen) < 2 {
		t.Errorf("/cookie without the cookie: %v, want requests spread over the nodes", seen)
	}

	first, err = get("/header")
	if err != nil {
		t.Fatal(err)
	}
	session := first.Header.Get(headerName)
	if session == "" {
		t.Fatalf("/header: no %s header in the answer (%v)", headerName, first.Header)
	}
	node = first.Header.Get(testsupport.HeaderNode)
	if seen := spread("/header", headerName, session); len(seen) != 1 || seen[node] != tries {
		t.Errorf("/header with the session's header: %v, want all %d on %s", seen, tries, node)
	}
	if seen := spread("/header"); len(seen) < 2 {
		t.Errorf("/header without the header: %v, want requests spread over the nodes", seen)
	}

	resp, err := get("/none")
	if err != nil {
		t.Fatal(err)
	}
	if sc := resp.Header.Get("Set-Cookie"); sc != "" {
		t.Errorf("/none answered with Set-Cookie %q; only routes with session persistence keep sessions", sc)
	}
}
