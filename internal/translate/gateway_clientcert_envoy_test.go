package translate_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdsenvoy"
)

// TestGatewayClientCertificatesThroughEnvoy serves an HTTPS listener whose Gateway validates
// client certificates (spec.tls.frontend) and presents its own client certificate to the
// backend (spec.tls.backend, the backend reached over TLS by a BackendTLSPolicy), through a
// real Envoy, with real TLS clients. In mode AllowValidOnly a client with a certificate of the
// trusted CA is served, one with a certificate of another CA and one without any are refused
// in the handshake; in mode AllowInsecureFallback all three are served. In both modes the
// backend, which requires a client certificate of its CA, sees the Gateway's.
func TestGatewayClientCertificatesThroughEnvoy(t *testing.T) {
	clientCA := newTestCA(t, "kubelb test client CA")
	otherCA := newTestCA(t, "kubelb test other CA")
	backendCA := newTestCA(t, "kubelb test backend CA")
	trusted := clientCA.issue(t, "trusted-client", false)
	untrusted := otherCA.issue(t, "untrusted-client", false)
	gatewayCert := backendCA.issue(t, "gateway-client", false)
	serverData, serverPool := testCert(t, "www.example.com")

	// The backend requires a client certificate of backendCA and answers with its name.
	backendServer := backendCA.issue(t, "web.example.com", true)
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(testsupport.HeaderPod, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	backend.Listener = l
	backend.TLS = &tls.Config{Certificates: []tls.Certificate{backendServer.pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: backendCA.pool}
	backend.StartTLS()
	t.Cleanup(backend.Close)
	_, p, _ := net.SplitHostPort(l.Addr().String())
	nodePort, _ := strconv.Atoi(p)

	for _, c := range []struct {
		mode      gwv1.FrontendValidationModeType
		untrusted bool // a client of another CA, or without certificate, is served
	}{
		{gwv1.AllowValidOnly, false},
		{gwv1.AllowInsecureFallback, true},
	} {
		t.Run(string(c.mode), func(t *testing.T) {
			tenant := "tenant-mtls-" + map[bool]string{false: "strict", true: "fallback"}[c.untrusted]
			httpsPort := testsupport.FreePort(t)
			port := gwv1.PortNumber(80)
			in := oneGateway(t, tenant, gwv1.Listener{
				Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType,
				TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "server"}}},
			}, httpsPort, []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: &port}}}}}}, nodePort)
			gw, route := &in.Routes[0], &in.Routes[1]
			setGatewayTLS(t, gw, &gwv1.GatewayTLSConfig{
				Frontend: &gwv1.FrontendTLSConfig{Default: gwv1.TLSConfig{Validation: &gwv1.FrontendTLSValidation{
					Mode:              c.mode,
					CACertificateRefs: []gwv1.ObjectReference{{Group: "", Kind: "ConfigMap", Name: "client-ca"}},
				}}},
				Backend: &gwv1.GatewayBackendTLS{ClientCertificateRef: &gwv1.SecretObjectReference{Name: "gateway-client"}},
			})
			zero := int32(0)
			gw.Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{
				BackendCACertificates:  []string{string(clientCA.pem)},
				FrontendCACertificates: []v1alpha1.FrontendCACertificate{{Namespace: "shop", Name: "client-ca", CACertificates: &zero}},
			}
			route.Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{
				BackendCACertificates: []string{string(backendCA.pem)},
				BackendTLS:            []v1alpha1.BackendTLS{{Namespace: "shop", Name: "web", Port: 80, Policy: "web-tls", Hostname: "web.example.com", CACertificates: &zero}},
			}
			secret := func(name string, data map[string][]byte) corev1.Secret {
				return corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "synced-" + name, Namespace: tenant,
					Labels: map[string]string{v1alpha1.LabelOriginName: name, v1alpha1.LabelOriginNamespace: "shop"}}, Type: corev1.SecretTypeTLS, Data: data}
			}
			in.Secrets = []corev1.Secret{secret("server", serverData), secret("gateway-client", gatewayCert.data)}
			request := serveMTLS(t, "gateway-mtls", tenant, in, httpsPort, serverPool, trusted)
			checkClientCertificates(t, request, "gateway-client", []clientCase{
				{"a certificate of the trusted CA", trusted, true},
				{"a certificate of another CA", untrusted, c.untrusted},
				{"no certificate", nil, c.untrusted},
			})
		})
	}
}

// serveMTLS serves in (its problems none) through a real Envoy and returns a client of its
// HTTPS listener on httpsPort (www.example.com, server certificates of serverPool) that sends
// GET / presenting a client certificate (nil: none) whatever CAs Envoy names as acceptable
// (Go's client would otherwise send none of another CA's), once Envoy serves a client with
// trusted.
func serveMTLS(t *testing.T, envoyName, tenant string, in translate.Input, httpsPort int, serverPool *x509.CertPool, trusted *testCertificate) func(*testCertificate) (answer, error) {
	t.Helper()
	_, problems, res, err := translatetest.Pipeline(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	xdsenvoy.Start(t, envoyName, tenant, res, bootstrap.Options{}, testsupport.EnvoyOptions{Concurrency: 1})
	addr := testsupport.Loopback(httpsPort)
	request := func(cert *testCertificate) (answer, error) {
		cfg := &tls.Config{ServerName: "www.example.com", RootCAs: serverPool, MinVersion: tls.VersionTLS12}
		if cert != nil {
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert.pair, nil }
		}
		return sendTLS(addr, cfg, "www.example.com", "/")
	}
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve the listener", func() error {
		_, err := request(trusted)
		return err
	})
	return request
}

// clientCase is a TLS client presenting cert (nil: none), and whether it is served.
type clientCase struct {
	name   string
	cert   *testCertificate
	served bool
}

// checkClientCertificates sends each case's request: served (200, and when backendSaw is set
// the backend saw that client certificate of the Gateway's) or refused in the handshake.
func checkClientCertificates(t *testing.T, request func(*testCertificate) (answer, error), backendSaw string, cases []clientCase) {
	t.Helper()
	for _, cl := range cases {
		a, err := request(cl.cert)
		switch {
		case cl.served && (err != nil || a.status != http.StatusOK):
			t.Errorf("a client with %s: %d %s (%v), want it served", cl.name, a.status, a.body, err)
		case cl.served && backendSaw != "" && a.pod != backendSaw:
			t.Errorf("a client with %s was served, but the backend saw client certificate %q, want the Gateway's (%s)", cl.name, a.pod, backendSaw)
		case !cl.served && err == nil:
			t.Errorf("a client with %s was answered %d, want the TLS handshake refused", cl.name, a.status)
		}
	}
}

// setGatewayTLS sets spec.tls of the Gateway a Route embeds.
func setGatewayTLS(t *testing.T, r *v1alpha1.Route, tls *gwv1.GatewayTLSConfig) {
	t.Helper()
	var gw gwv1.Gateway
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.Spec.Source.Kubernetes.Route.Object, &gw); err != nil {
		t.Fatal(err)
	}
	gw.Spec.TLS = tls
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&gw)
	if err != nil {
		t.Fatal(err)
	}
	r.Spec.Source.Kubernetes.Route.Object = u
}

// testCA is a CA that issues test certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
	pool *x509.CertPool
}

// testCertificate is a certificate a testCA issued: as a TLS key pair, and as Secret data.
type testCertificate struct {
	pair tls.Certificate
	data map[string][]byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pool: pool}
}

// issue makes a certificate for name: a server certificate (the name as DNS name) or a client
// certificate.
func (ca *testCA) issue(t *testing.T, name string, server bool) *testCertificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.DNSNames, tmpl.ExtKeyUsage = []string{name}, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &testCertificate{pair: pair, data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}}
}
