package translate_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdsenvoy"
)

// TestIngressThroughEnvoy serves two Ingresses and a LoadBalancer hostname through a real
// Envoy fed over xDS, and checks what a client sees: requests are routed by host and path with
// Kubernetes prefix semantics (/api matches /api and /api/x, not /apix), exact paths win, a
// wildcard host matches one DNS label, the
// older Ingress keeps a path a newer one asks for too, the default backend answers unknown
// hosts, HTTPS picks the certificate by SNI and serves only hosts with TLS, and the
// LoadBalancer's hostname reaches its NodePort over HTTPS.
func TestIngressThroughEnvoy(t *testing.T) {
	const tenant = "tenant-envoy"
	pod := func(name string) *testsupport.Backend {
		return testsupport.StartHTTPBackend(t, "127.0.0.1:0", testsupport.Identity{Node: "node-1", Pod: name})
	}
	web, api, other, lbweb := pod("web"), pod("api"), pod("other"), pod("lbweb")
	nodePort := func(b *testsupport.Backend) int32 {
		_, p, _ := net.SplitHostPort(b.Addr)
		n, _ := strconv.Atoi(p)
		return int32(n)
	}
	httpPort, httpsPort := testsupport.FreePort(t), testsupport.FreePort(t)
	appCert, appCA := testCert(t, "app.example.com")
	lbCert, lbCA := testCert(t, "lb.example.com")
	lateCert, lateCA := testCert(t, "late.example.com")
	anyCert, anyCA := testCert(t, "any.example.net")

	svc := func(name string, b *testsupport.Backend) v1alpha1.UpstreamService {
		return v1alpha1.UpstreamService{Service: corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-nodeport", Namespace: "shop", Labels: map[string]string{v1alpha1.LabelOriginName: name, v1alpha1.LabelOriginNamespace: "shop"}},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: nodePort(b)}}},
		}}
	}
	prefix, exact := networkingv1.PathTypePrefix, networkingv1.PathTypeExact
	path := func(p string, typ *networkingv1.PathType, svc string) networkingv1.HTTPIngressPath {
		return networkingv1.HTTPIngressPath{Path: p, PathType: typ, Backend: networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Name: "http"}}}}
	}
	route := func(uid, name string, created time.Time, annotations map[string]string, spec networkingv1.IngressSpec, svcs ...v1alpha1.UpstreamService) v1alpha1.Route {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&networkingv1.Ingress{
			TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Annotations: annotations},
			Spec:       spec,
		})
		if err != nil {
			t.Fatal(err)
		}
		r := v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: tenant, CreationTimestamp: metav1.NewTime(created)}}
		r.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Services: svcs}
		r.Spec.Source.Kubernetes.Route.Object = obj
		return r
	}
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	in := translate.Input{
		Tenant:    tenant,
		Addresses: map[string]v1alpha1.Addresses{"default": {ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "127.0.0.1"}}}}},
		Options:   translate.Options{ListenerAddress: "127.0.0.1"},
		Policy:    translate.EndpointPolicy{Allow: []translate.PolicyRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8"), Source: translate.SourceConfigAllow}}},
		RouteServices: []corev1.Service{{
			ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.IngressServiceName, Namespace: tenant, Labels: map[string]string{v1alpha1.LabelIngressService: "true"}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt(httpPort)},
				{Name: "https", Port: 443, TargetPort: intstr.FromInt(httpsPort)},
			}},
		}},
		Secrets: []corev1.Secret{{
			ObjectMeta: metav1.ObjectMeta{Name: "synced-app-tls", Namespace: tenant, Labels: map[string]string{v1alpha1.LabelOriginName: "app-tls", v1alpha1.LabelOriginNamespace: "shop"}},
			Data:       appCert,
		}, {
			ObjectMeta: metav1.ObjectMeta{Name: "synced-late-tls", Namespace: tenant, Labels: map[string]string{v1alpha1.LabelOriginName: "late-tls", v1alpha1.LabelOriginNamespace: "shop"}},
			Data:       lateCert,
		}, {
			ObjectMeta: metav1.ObjectMeta{Name: "synced-any-tls", Namespace: tenant, Labels: map[string]string{v1alpha1.LabelOriginName: "any-tls", v1alpha1.LabelOriginNamespace: "shop"}},
			Data:       anyCert,
		}},
		Routes: []v1alpha1.Route{
			route("00000000-0000-0000-0000-00000000000a", "web", t0, nil, networkingv1.IngressSpec{
				DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "other", Port: networkingv1.ServiceBackendPort{Number: 80}}},
				Rules: []networkingv1.IngressRule{{Host: "app.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{path("/", &prefix, "web"), path("/api", &prefix, "api"), path("/exact", &exact, "other")},
				}}}, {Host: "*.shop.example", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{path("/", &prefix, "api")},
				}}}},
				TLS: []networkingv1.IngressTLS{{Hosts: []string{"app.example.com"}, SecretName: "app-tls"}},
			}, svc("web", web), svc("api", api), svc("other", other)),
			// Newer: its /api on app.example.com loses to the older Ingress's; its own host
			// late.example.com has a certificate of its own, and HTTP redirects to it.
			route("00000000-0000-0000-0000-00000000000b", "late", t0.Add(time.Hour), map[string]string{v1alpha1.AnnotationSSLRedirect: "true"}, networkingv1.IngressSpec{
				Rules: []networkingv1.IngressRule{{Host: "app.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{path("/api", &prefix, "other")},
				}}}, {Host: "late.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{path("/", &prefix, "other")},
				}}}},
				TLS: []networkingv1.IngressTLS{{Hosts: []string{"late.example.com"}, SecretName: "late-tls"}},
			}, svc("other", other)),
			// No host anywhere: its TLS entry without hosts serves connections without a
			// matching server name with any-tls, routed by the host-less rules (its /any, and
			// the older Ingress's default backend).
			route("00000000-0000-0000-0000-00000000000d", "anyname", t0.Add(3*time.Hour), nil, networkingv1.IngressSpec{
				Rules: []networkingv1.IngressRule{{IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{path("/any", &prefix, "api")},
				}}}},
				TLS: []networkingv1.IngressTLS{{SecretName: "any-tls"}},
			}, svc("api", api)),
			// Too many paths: the first 100 of big.example.com are served, the 101st is not.
			route("00000000-0000-0000-0000-00000000000c", "big", t0.Add(2*time.Hour), nil, networkingv1.IngressSpec{
				Rules: []networkingv1.IngressRule{{Host: "big.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: manyPaths(101, func(j int) networkingv1.HTTPIngressPath { return path(fmt.Sprintf("/p%d", j), &prefix, "web") }),
				}}}},
			}, svc("web", web)),
		},
		DNS: translate.DNS{AllowExplicitHostnames: true},
		LoadBalancers: []v1alpha1.LoadBalancer{{
			ObjectMeta: metav1.ObjectMeta{Name: "lbweb", Namespace: tenant},
			Spec: v1alpha1.LoadBalancerSpec{
				Hostname: "lb.example.com",
				Ports:    []v1alpha1.LoadBalancerPort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
				Endpoints: []v1alpha1.LoadBalancerEndpoints{{
					AddressesReference: &corev1.ObjectReference{Name: "default"},
					Ports:              []v1alpha1.EndpointPort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: nodePort(lbweb)}},
				}},
			},
		}},
		HostnameSecrets: map[string]corev1.Secret{"lbweb": {Data: lbCert}},
	}

	_, problems, res, err := translatetest.Pipeline(in)
	if err != nil {
		t.Fatal(err)
	}
	// The only problems: the newer Ingress's /api, the big Ingress's 101st path, and the
	// LoadBalancer's port 80 has no listener port yet (no hub Service here; it is served on
	// its hostname only).
	if len(problems) != 3 || problems[0].Reason != translate.ReasonPortPending || problems[1].Reason != translate.ReasonPathConflict ||
		problems[2].Reason != translate.ReasonTooMany {
		t.Fatalf("problems: %v", problems)
	}

	xdsenvoy.Start(t, "ingress-proxy", tenant, res, bootstrap.Options{}, testsupport.EnvoyOptions{Concurrency: 1})

	plain := testsupport.Loopback(httpPort)
	secure := testsupport.Loopback(httpsPort)
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve the Ingress", func() error {
		_, err := get(plain, "", nil, "app.example.com", "/")
		return err
	})
	for _, c := range []struct {
		host, path, want string
	}{
		{"app.example.com", "/", "web"},
		{"app.example.com", "/api", "api"},
		{"app.example.com", "/api/", "api"},
		{"app.example.com", "/api/v1/users", "api"},
		{"app.example.com", "/api?x=1", "api"}, // the query is not part of the path
		{"app.example.com", "/exact?x=1", "other"},
		{"app.example.com", "/apix", "web"},    // not an element of /api
		{"app.example.com", "/exact", "other"}, // Exact
		{"app.example.com", "/exact/more", "web"},
		{"APP.example.com:80", "/api", "api"}, // hosts are case-insensitive, the port is ignored
		{"x.shop.example", "/", "api"},        // a wildcard host
		{"X.Shop.Example:8080", "/a", "api"},
		{"y.x.shop.example", "/", "other"},    // a wildcard matches one label: the default backend
		{"unknown.example.org", "/", "other"}, // the default backend
		{"unknown.example.org", "/api", "other"},
		{"big.example.com", "/p0", "web"},
		{"big.example.com", "/p99/x", "web"},
	} {
		if got, err := get(plain, "", nil, c.host, c.path); err != nil || got != c.want {
			t.Errorf("http://%s%s answered by %q (%v), want %q", c.host, c.path, got, err, c.want)
		}
	}
	// The Ingress annotated ssl-redirect answers its TLS host over HTTP with 301 to https, the
	// same host and path; its /api on app.example.com (whose TLS is another Ingress's, which
	// does not redirect) is not redirected: the older Ingress serves it.
	if a, err := send(plain, "", nil, "late.example.com", "/some/path?q=1"); err != nil || a.status != http.StatusMovedPermanently ||
		a.location != "https://late.example.com/some/path?q=1" {
		t.Errorf("http://late.example.com/some/path?q=1: %d to %q (%v), want 301 to https://late.example.com/some/path?q=1", a.status, a.location, err)
	}
	// The path beyond the bound is not served.
	if a, err := send(plain, "", nil, "big.example.com", "/p100"); err != nil || a.status != http.StatusNotFound {
		t.Errorf("http://big.example.com/p100: %d (%v), want 404 (beyond the bound of paths per rule)", a.status, err)
	}
	for _, c := range []struct {
		sni  string
		ca   *x509.CertPool
		path string
		want string
	}{
		{"app.example.com", appCA, "/api/x", "api"},
		{"app.example.com", appCA, "/", "web"},
		{"lb.example.com", lbCA, "/anything", "lbweb"},
		{"late.example.com", lateCA, "/", "other"}, // redirected on HTTP, served on HTTPS
	} {
		if got, err := get(secure, c.sni, c.ca, c.sni, c.path); err != nil || got != c.want {
			t.Errorf("https://%s%s answered by %q (%v), want %q", c.sni, c.path, got, err, c.want)
		}
	}
	// A request for a host served with another certificate than the connection's (HTTP/2
	// clients coalesce connections) is answered 421, on an Ingress's chain and on a
	// LoadBalancer hostname's alike; a host without TLS is not misdirected (404).
	for _, c := range []struct {
		sni    string
		ca     *x509.CertPool
		host   string
		status int
	}{
		{"app.example.com", appCA, "late.example.com", http.StatusMisdirectedRequest},
		{"app.example.com", appCA, "lb.example.com", http.StatusMisdirectedRequest},
		{"late.example.com", lateCA, "app.example.com", http.StatusMisdirectedRequest},
		{"lb.example.com", lbCA, "app.example.com", http.StatusMisdirectedRequest},
		{"app.example.com", appCA, "unknown.example.org", http.StatusNotFound},
	} {
		if got, err := send(secure, c.sni, c.ca, c.host, "/"); err != nil || got.status != c.status {
			t.Errorf("https://%s/ over a connection to %s: %d (%v), want %d", c.host, c.sni, got.status, err, c.status)
		}
	}
	// A server name no TLS entry names gets the certificate of the TLS entry without hosts
	// (not app.example.com's), and so does a client sending no SNI; the host-less rules
	// route its requests, and a host served with another certificate is misdirected.
	if got, err := get(secure, "unknown.example.org", appCA, "unknown.example.org", "/"); err == nil {
		t.Errorf("https://unknown.example.org answered by %q with app.example.com's certificate", got)
	}
	for _, c := range []struct {
		sni, host, path string
		status          int
		want            string
	}{
		{"unknown.example.org", "unknown.example.org", "/any/x", http.StatusOK, "api"},
		{"unknown.example.org", "unknown.example.org", "/", http.StatusOK, "other"}, // the default backend
		{"", "10.1.2.3", "/any", http.StatusOK, "api"},                              // no SNI
		{"unknown.example.org", "app.example.com", "/", http.StatusMisdirectedRequest, ""},
	} {
		// SNI c.sni (none when empty); the certificate must be any-tls's (any.example.net).
		cfg := &tls.Config{ServerName: c.sni, MinVersion: tls.VersionTLS12, InsecureSkipVerify: true,
			VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
				leaf, err := x509.ParseCertificate(raw[0])
				if err != nil {
					return err
				}
				_, err = leaf.Verify(x509.VerifyOptions{Roots: anyCA, DNSName: "any.example.net"})
				return err
			}}
		a, err := sendTLS(secure, cfg, c.host, c.path)
		if err != nil || a.status != c.status || a.pod != c.want {
			t.Errorf("https://%s%s over a connection with SNI %q: %d from %q (%v), want %d from %q", c.host, c.path, c.sni, a.status, a.pod, err, c.status, c.want)
		}
	}
	// The certificate chosen by SNI is the host's: app.example.com's CA does not trust lb's.
	if _, err := get(secure, "lb.example.com", appCA, "lb.example.com", "/"); err == nil {
		t.Error("lb.example.com was served with app.example.com's certificate")
	}
}

// get sends GET path with Host host to addr (over TLS with sni when ca is set) and returns the
// pod that answered; any status but 200 is an error.
func get(addr, sni string, ca *x509.CertPool, host, path string) (string, error) {
	a, err := send(addr, sni, ca, host, path)
	if err != nil {
		return "", err
	}
	if a.status != http.StatusOK {
		return "", fmt.Errorf("%d: %s", a.status, a.body)
	}
	return a.pod, nil
}

// answer is what a request got: the status, the pod that answered, the Location header and
// the body.
type answer struct {
	status        int
	pod, location string
	body          []byte
}

// send sends GET path with Host host to addr (over TLS with sni when ca is set), without
// following redirects.
func send(addr, sni string, ca *x509.CertPool, host, path string) (answer, error) {
	var cfg *tls.Config
	if ca != nil {
		cfg = &tls.Config{ServerName: sni, RootCAs: ca, MinVersion: tls.VersionTLS12}
	}
	return sendTLS(addr, cfg, host, path)
}

// sendTLS sends GET path with Host host to addr (over TLS with cfg, plain text when nil),
// without following redirects.
func sendTLS(addr string, cfg *tls.Config, host, path string) (answer, error) {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	scheme := "http"
	if cfg != nil {
		scheme = "https"
		tr.TLSClientConfig = cfg
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, scheme+"://"+addr+path, nil)
	if err != nil {
		return answer{}, err
	}
	req.Host = host
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, pod: resp.Header.Get(testsupport.HeaderPod), location: resp.Header.Get("Location"), body: body}, nil
}

// testCert makes a self-signed ECDSA certificate for host: the Secret data (tls.crt,
// tls.key) and a pool trusting it.
func testCert(t *testing.T, host string) (map[string][]byte, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return selfSigned(t, host, key)
}

// selfSigned makes a self-signed certificate for host with key (ECDSA or RSA): the Secret
// data and a pool trusting it.
func selfSigned(t *testing.T, host string, key crypto.Signer) (map[string][]byte, *x509.CertPool) {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: host},
		DNSNames:              []string{host},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return map[string][]byte{
		corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, pool
}

// manyPaths makes n paths, path(j) for each j.
func manyPaths(n int, path func(j int) networkingv1.HTTPIngressPath) []networkingv1.HTTPIngressPath {
	out := make([]networkingv1.HTTPIngressPath, n)
	for j := range out {
		out[j] = path(j)
	}
	return out
}
