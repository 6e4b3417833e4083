package translate_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestClientTrafficClientCertificatesThroughEnvoy: a Gateway's ClientTrafficPolicy with
// tls.clientValidation, through a real Envoy, with real TLS clients on its HTTPS listener.
// Required (a ConfigMap of the CA): a client with a certificate of the CA is served, one
// with a certificate of another CA and one without any are refused in the handshake.
// Optional (a Secret of the CA, optional: true): the client without a certificate is served
// too, the one of another CA is still refused (a certificate given is verified). TLS session
// resumption: a client that comes back resumes its session under Envoy's default (the
// required case), not with tls.session {} (the optional case: Envoy Gateway's reading, none).
func TestClientTrafficClientCertificatesThroughEnvoy(t *testing.T) {
	clientCA := newTestCA(t, "kubelb test client CA")
	otherCA := newTestCA(t, "kubelb test other CA")
	trusted := clientCA.issue(t, "trusted-client", false)
	untrusted := otherCA.issue(t, "untrusted-client", false)
	serverData, serverPool := testCert(t, "www.example.com")
	nodePort := serveOnNodes(t, func(int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	})
	for _, c := range []struct {
		name     string
		kind     string // of the CA's object
		optional bool
		session  *v1alpha1.ClientTrafficTLSSession
	}{
		{"required", "ConfigMap", false, nil},
		{"optional", "Secret", true, &v1alpha1.ClientTrafficTLSSession{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tenant := "tenant-ctp-mtls-" + c.name
			httpsPort := testsupport.FreePort(t)
			port := gwv1.PortNumber(80)
			in := oneGateway(t, tenant, gwv1.Listener{
				Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType,
				TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "server"}}},
			}, httpsPort, []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: &port}}}}}}, nodePort)
			in.Routes[1].Spec.Source.Kubernetes.Context = nil
			zero := int32(0)
			entryKind := c.kind
			if entryKind == "ConfigMap" {
				entryKind = ""
			}
			optional := c.optional
			in.Routes[0].Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{
				BackendCACertificates:  []string{string(clientCA.pem)},
				FrontendCACertificates: []v1alpha1.FrontendCACertificate{{Namespace: "shop", Name: "client-ca", Kind: entryKind, CACertificates: &zero}},
				ClientTraffic: &v1alpha1.ClientTraffic{Namespace: "shop", Name: "clients", TLS: &v1alpha1.ClientTrafficTLS{Session: c.session,
					ClientValidation: &v1alpha1.ClientTrafficClientValidation{Optional: &optional,
						CACertificateRefs: []v1alpha1.ClientTrafficCARef{{Kind: c.kind, Name: "client-ca"}}}}},
			}
			in.Secrets = []corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "synced-server", Namespace: tenant,
				Labels: map[string]string{v1alpha1.LabelOriginName: "server", v1alpha1.LabelOriginNamespace: "shop"}}, Type: corev1.SecretTypeTLS, Data: serverData}}
			request := serveMTLS(t, "ctp-mtls", tenant, in, httpsPort, serverPool, trusted)
			checkClientCertificates(t, request, "", []clientCase{
				{"a certificate of the trusted CA", trusted, true},
				{"a certificate of another CA", untrusted, false},
				{"no certificate", nil, c.optional},
			})
			addr := testsupport.Loopback(httpsPort)
			cfg := &tls.Config{ServerName: "www.example.com", RootCAs: serverPool, MinVersion: tls.VersionTLS12, ClientSessionCache: tls.NewLRUClientSessionCache(4),
				GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &trusted.pair, nil }}
			if resumed, err := resumes(addr, cfg); err != nil || resumed != (c.session == nil) {
				t.Errorf("a client coming back resumed its TLS session: %v (%v), want %v", resumed, err, c.session == nil)
			}
		})
	}
}

// TestClientTrafficLifetimesThroughEnvoy: a Gateway's ClientTrafficPolicy's lifetimes through
// a real Envoy, each seen by a client where Envoy's defaults would let it wait; and
// enableEnvoyHeaders false: responses without x-envoy- headers (with them otherwise).
// requestHeadersReceivedTimeout 1s: a request whose headers never end is answered 408.
// maxRequestsPerConnection 2: the second response on a kept-alive connection closes it.
// streamIdleTimeout 1s: a request whose backend never answers is answered 504 (Envoy's
// "stream timeout"; the tenant's 5 minutes otherwise). maxStreamDuration 1s on another
// Gateway: such a request is answered 504 ("downstream duration timeout"), and
// maxConnectionDuration 2s closes a kept-alive connection without requests (Envoy's default:
// one hour of idle time). Nothing here measures time: each wait has a deadline far beyond.
func TestClientTrafficLifetimesThroughEnvoy(t *testing.T) {
	hang := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			select { // until Envoy gives up on the request (bounded)
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	// envoyTimeout: Envoy's answer to a request it gave up on (408, or 504 once the request
	// was received whole).
	envoyTimeout := func(code int) bool { return code == http.StatusRequestTimeout || code == http.StatusGatewayTimeout }
	get := func(t *testing.T, addr, path string) (int, string) {
		t.Helper()
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	dial := func(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
		t.Helper()
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		return conn, bufio.NewReader(conn)
	}
	// keptAlive sends GET / on conn and reads the response: whether Envoy closes after it.
	keptAlive := func(t *testing.T, conn net.Conn, r *bufio.Reader) bool {
		t.Helper()
		if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: web.example.com\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return !resp.Close
	}
	// envoyHeaders names the x-envoy- headers of a response to GET / ("" for none).
	envoyHeaders := func(t *testing.T, addr string) string {
		t.Helper()
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Get("http://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var out []string
		for name := range resp.Header {
			if strings.HasPrefix(strings.ToLower(name), "x-envoy-") {
				out = append(out, name)
			}
		}
		return strings.Join(out, ", ")
	}
	closedByEnvoy := func(r *bufio.Reader) error {
		_, err := r.ReadByte() // nothing comes until Envoy closes the connection
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			return errors.New("the connection was still open at the deadline")
		case err == nil:
			return errors.New("a byte came on the connection")
		}
		return nil
	}

	t.Run("headers, requests, stream idle", func(t *testing.T) {
		nodePort := serveOnNodes(t, func(int) http.Handler { return http.HandlerFunc(hang) })
		in, httpPort := trafficInput(t, "tenant-ctp-lifetimes", nodePort, nil)
		in.Routes[1].Spec.Source.Kubernetes.Context = nil
		two, no := int64(2), false
		in.Routes[0].Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{ClientTraffic: &v1alpha1.ClientTraffic{Namespace: "shop", Name: "clients",
			Headers:    &v1alpha1.ClientTrafficHeaders{EnableEnvoyHeaders: &no},
			Timeout:    &v1alpha1.ClientTrafficTimeout{HTTP: &v1alpha1.ClientTrafficHTTPTimeout{RequestHeadersReceivedTimeout: "1s", StreamIdleTimeout: "1s"}},
			Connection: &v1alpha1.ClientTrafficConnection{ConnectionLimit: &v1alpha1.ClientTrafficConnectionLimit{Value: &two, MaxRequestsPerConnection: &two}}}}
		addr := serveThroughEnvoy(t, "tenant-ctp-lifetimes", in, httpPort)
		if h := envoyHeaders(t, addr); h != "" {
			t.Errorf("enableEnvoyHeaders false: the response has %s", h)
		}

		conn, r := dial(t, addr)
		if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: web.example.com\r\nX-Slow: 1\r\n"); err != nil {
			t.Fatal(err)
		}
		if resp, err := http.ReadResponse(r, nil); err != nil || resp.StatusCode != http.StatusRequestTimeout {
			t.Errorf("a request whose headers never end: %v, %v; want Envoy's 408", resp, err)
		}

		conn, r = dial(t, addr)
		if !keptAlive(t, conn, r) {
			t.Error("the first response closed the connection")
		}
		if keptAlive(t, conn, r) {
			t.Error("the second response kept the connection open, want it closed (maxRequestsPerConnection 2)")
		}
		if err := closedByEnvoy(r); err != nil {
			t.Errorf("after two requests: %v", err)
		}

		if code, body := get(t, addr, "/hang"); !envoyTimeout(code) || !strings.Contains(body, "stream timeout") {
			t.Errorf("a backend that never answers: %d %q, want Envoy's stream timeout", code, body)
		} else {
			t.Logf("a backend that never answers: %d %q", code, body)
		}
	})

	t.Run("stream and connection durations", func(t *testing.T) {
		nodePort := serveOnNodes(t, func(int) http.Handler { return http.HandlerFunc(hang) })
		in, httpPort := trafficInput(t, "tenant-ctp-durations", nodePort, nil)
		in.Routes[1].Spec.Source.Kubernetes.Context = nil
		limit := int64(100)
		in.Routes[0].Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{ClientTraffic: &v1alpha1.ClientTraffic{Namespace: "shop", Name: "clients",
			Connection: &v1alpha1.ClientTrafficConnection{ConnectionLimit: &v1alpha1.ClientTrafficConnectionLimit{Value: &limit,
				MaxStreamDuration: "1s", MaxConnectionDuration: "2s"}}}}
		addr := serveThroughEnvoy(t, "tenant-ctp-durations", in, httpPort)
		if h := envoyHeaders(t, addr); h == "" {
			t.Error("without enableEnvoyHeaders: the response has no x-envoy- header, want Envoy's (x-envoy-upstream-service-time)")
		}

		if code, body := get(t, addr, "/hang"); !envoyTimeout(code) || !strings.Contains(body, "duration timeout") {
			t.Errorf("a backend that never answers: %d %q, want Envoy's downstream duration timeout", code, body)
		} else {
			t.Logf("a backend that never answers: %d %q", code, body)
		}
		conn, r := dial(t, addr)
		if !keptAlive(t, conn, r) {
			t.Fatal("the response closed the connection")
		}
		if err := closedByEnvoy(r); err != nil {
			t.Errorf("a kept-alive connection past maxConnectionDuration: %v", err)
		}
	})
}

// resumes connects twice to addr with cfg (its session cache), sending a request each time
// (a TLS 1.3 ticket comes after the handshake), and tells whether the second connection
// resumed the first one's session.
func resumes(addr string, cfg *tls.Config) (bool, error) {
	var resumed bool
	for range 2 {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		if err != nil {
			return false, err
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = io.WriteString(conn, "GET / HTTP/1.1\r\nHost: www.example.com\r\nConnection: close\r\n\r\n")
		if err == nil {
			var resp *http.Response
			if resp, err = http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
		resumed = conn.ConnectionState().DidResume
		conn.Close()
		if err != nil {
			return false, err
		}
	}
	return resumed, nil
}
