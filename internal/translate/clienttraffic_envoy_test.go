package translate_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
)

// clientTrafficThroughEnvoy serves an HTTPRoute (one rule to Service web, whose backends
// answer with the X-User and X_User headers they saw) under a Gateway carrying the
// ClientTrafficPolicy ct through a real Envoy, and returns the listener's address.
func clientTrafficThroughEnvoy(t *testing.T, tenant string, ct *v1alpha1.ClientTraffic) string {
	t.Helper()
	nodePort := serveOnNodes(t, func(int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Go's server keeps header names as sent when they are not canonical (x_user).
			w.Header().Set("X-Saw-Dash", r.Header.Get("X-User"))
			w.Header().Set("X-Saw-Underscore", r.Header.Get("X_user"))
			w.WriteHeader(http.StatusOK)
		})
	})
	in, httpPort := trafficInput(t, tenant, nodePort, nil)
	in.Routes[1].Spec.Source.Kubernetes.Context = nil
	in.Routes[0].Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{ClientTraffic: ct}
	return serveThroughEnvoy(t, tenant, in, httpPort)
}

// rawRequest sends GET / with one header line, name: value, on its own connection and returns
// the status and the headers the backend saw.
func rawRequest(t *testing.T, addr, name, value string) (int, http.Header) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	// Raw bytes: Go's client would canonicalise the name (X_user), and some clients refuse it.
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: web.example.com\r\n"+name+": "+value+"\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("header %s: %v", name, err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// TestClientTrafficThroughEnvoy: a Gateway's ClientTrafficPolicy through a real Envoy.
// withUnderscoresAction RejectRequest: a request with a header x_user is answered 400 and
// never reaches the backend, one with x-user is served. requestReceivedTimeout 2s: a client
// that sends the start of a request and never ends its headers is answered 408 and cut after
// about 2 seconds (not at once). idleTimeout 2s: a kept-alive connection without a request
// is closed once the idle timeout has run and Envoy's drain of the connection has ended
// (Envoy 1.40, measured: 6 s after the idle timeout, 8 s with 2 s and 10 s with 4 s: its
// drain_timeout of 5 s and delayed close of 1 s), where Envoy's default keeps it an hour.
func TestClientTrafficThroughEnvoy(t *testing.T) {
	addr := clientTrafficThroughEnvoy(t, "tenant-client-traffic", &v1alpha1.ClientTraffic{Namespace: "shop", Name: "clients",
		Timeout: &v1alpha1.ClientTrafficTimeout{HTTP: &v1alpha1.ClientTrafficHTTPTimeout{RequestReceivedTimeout: "2s", IdleTimeout: "2s"}},
		Headers: &v1alpha1.ClientTrafficHeaders{WithUnderscoresAction: "RejectRequest"}})

	if code, h := rawRequest(t, addr, "x_user", "alice"); code != http.StatusBadRequest || h.Get("X-Saw-Underscore") != "" {
		t.Errorf("a header x_user: status %d (backend saw %q), want 400 from Envoy", code, h.Get("X-Saw-Underscore"))
	}
	if code, h := rawRequest(t, addr, "x-user", "alice"); code != http.StatusOK || h.Get("X-Saw-Dash") != "alice" {
		t.Errorf("a header x-user: status %d, backend saw %q; want 200 and alice", code, h.Get("X-Saw-Dash"))
	}

	t.Run("requestReceivedTimeout", func(t *testing.T) {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		_ = conn.SetDeadline(start.Add(15 * time.Second))
		// The request begins; its headers never end.
		if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: web.example.com\r\nX-Slow: 1\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		elapsed := time.Since(start)
		if err != nil {
			t.Fatalf("after %s: %v (want Envoy's 408)", elapsed.Round(time.Millisecond), err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout || elapsed < 1500*time.Millisecond || elapsed > 6*time.Second {
			t.Errorf("an unfinished request: status %d after %s, want 408 after about 2s", resp.StatusCode, elapsed.Round(time.Millisecond))
		}
	})

	t.Run("idleTimeout", func(t *testing.T) {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		r := bufio.NewReader(conn)
		if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: web.example.com\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("status %d, close %v: want a kept-alive 200", resp.StatusCode, resp.Close)
		}
		start := time.Now()
		_, err = r.ReadByte() // nothing comes until Envoy closes the idle connection
		elapsed := time.Since(start)
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			t.Errorf("the idle connection was still open after %s", elapsed.Round(time.Millisecond))
		case err == nil:
			t.Errorf("a byte came on the idle connection")
		case elapsed < 1500*time.Millisecond || elapsed > 12*time.Second:
			t.Errorf("the idle connection was closed after %s (%v), want 2s of idle time and Envoy's drain (about 8s)", elapsed.Round(time.Millisecond), err)
		default:
			t.Logf("the idle connection was closed after %s", elapsed.Round(time.Millisecond))
		}
	})
}

// TestClientTrafficDropHeaderThroughEnvoy: withUnderscoresAction DropHeader: a request with a
// header x_user is served, and the backend never sees that header, while a header x-user
// reaches it.
func TestClientTrafficDropHeaderThroughEnvoy(t *testing.T) {
	addr := clientTrafficThroughEnvoy(t, "tenant-client-drop", &v1alpha1.ClientTraffic{Namespace: "shop", Name: "drop",
		Headers: &v1alpha1.ClientTrafficHeaders{WithUnderscoresAction: "DropHeader"}})
	for range 3 {
		if code, h := rawRequest(t, addr, "x_user", "mallory"); code != http.StatusOK || h.Get("X-Saw-Underscore") != "" {
			t.Errorf("a header x_user: status %d, backend saw %q; want 200 and no header", code, h.Get("X-Saw-Underscore"))
		}
		if code, h := rawRequest(t, addr, "x-user", "alice"); code != http.StatusOK || h.Get("X-Saw-Dash") != "alice" {
			t.Errorf("a header x-user: status %d, backend saw %q; want 200 and alice", code, h.Get("X-Saw-Dash"))
		}
	}
}

// TestClientTrafficConnectionLimitThroughEnvoy: connection.connectionLimit.value 2: with two
// kept-alive connections open and served, a third is closed by Envoy without an answer; once
// one of the two is closed, a new connection is served again.
func TestClientTrafficConnectionLimitThroughEnvoy(t *testing.T) {
	limit := int64(2)
	addr := clientTrafficThroughEnvoy(t, "tenant-client-limit", &v1alpha1.ClientTraffic{Namespace: "shop", Name: "limit",
		Connection: &v1alpha1.ClientTrafficConnection{ConnectionLimit: &v1alpha1.ClientTrafficConnectionLimit{Value: &limit}}})
	// The readiness check's kept-alive connection would hold one of the two.
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()

	// serve opens a connection and sends a request on it; it returns the connection, still
	// open, when answered 200, or the error.
	serve := func() (net.Conn, error) {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return nil, err
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: web.example.com\r\n\r\n"); err != nil {
			conn.Close()
			return nil, err
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			conn.Close()
			return nil, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			conn.Close()
			return nil, errors.New(resp.Status)
		}
		return conn, nil
	}
	var open []net.Conn
	t.Cleanup(func() {
		for _, c := range open {
			c.Close()
		}
	})
	for len(open) < int(limit) {
		testsupport.Eventually(t, 10*time.Second, "a connection under the limit served", func() error {
			c, err := serve()
			if err == nil {
				open = append(open, c)
			}
			return err
		})
	}
	if c, err := serve(); err == nil {
		c.Close()
		t.Fatalf("a third connection was served with %d open (limit %d)", len(open), limit)
	} else {
		t.Logf("the third connection: %v", err)
	}
	open[0].Close()
	open = open[1:]
	testsupport.Eventually(t, 10*time.Second, "a connection served once one of the two is closed", func() error {
		c, err := serve()
		if err == nil {
			open = append(open, c)
		}
		return err
	})
}

// clientIPThroughEnvoy serves a Gateway carrying the ClientTrafficPolicy ct and a
// SecurityPolicy that allows clients in 203.0.113.0/24 only (default Deny), and its HTTPRoute
// (one rule to Service web), through a real Envoy; it returns the listener's address.
func clientIPThroughEnvoy(t *testing.T, tenant string, ct *v1alpha1.ClientTraffic) string {
	t.Helper()
	in, httpPort := clientIPInput(t, tenant, ct, "203.0.113.0/24")
	return serveThroughEnvoy(t, tenant, in, httpPort)
}

// clientIPInput is a Gateway carrying the ClientTrafficPolicy ct and a SecurityPolicy that
// allows clients in cidr only (default Deny), and its HTTPRoute (one rule to Service web,
// served on loopback); it returns the input and the Envoy listener's port.
func clientIPInput(t *testing.T, tenant string, ct *v1alpha1.ClientTraffic, cidr string) (translate.Input, int) {
	t.Helper()
	nodePort := testsupport.FreePort(t)
	testsupport.StartHTTPBackend(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(nodePort)), testsupport.Identity{Node: "node-1", Pod: "web"})
	httpPort := testsupport.FreePort(t)
	port := gwv1.PortNumber(80)
	rule := gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
		BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: &port}}}}}
	in := oneGateway(t, tenant, gwv1.Listener{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}, httpPort, []gwv1.HTTPRouteRule{rule}, nodePort)
	in.Routes[0].Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{ClientTraffic: ct,
		Security: &v1alpha1.Security{Namespace: "shop", Name: "partners", Authorization: &v1alpha1.SecurityAuthorization{DefaultAction: "Deny",
			Rules: []v1alpha1.SecurityRule{{Action: "Allow", Principal: v1alpha1.SecurityPrincipal{ClientCIDRs: []string{cidr}}}}}}}
	return in, httpPort
}

// statusWith sends GET / from loopback with headers (name, value pairs) and returns the status.
func statusWith(t *testing.T, addr string, headers ...string) int {
	t.Helper()
	resp, err := trafficGet(addr, headers...)
	if err != nil {
		t.Fatalf("GET with %q: %v", headers, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestClientTrafficXForwardedForThroughEnvoy: clientIPDetection.xForwardedFor.numTrustedHops
// 1: the client's address is the last one in X-Forwarded-For (the proxy before the hub adds
// it), and the Gateway's SecurityPolicy allowing 203.0.113.0/24 decides by it: a request
// from loopback whose X-Forwarded-For ends with 203.0.113.7 is served, one ending with
// 198.51.100.1 (even after 203.0.113.7) or without the header (its address is the peer's,
// 127.0.0.1) is answered 403.
func TestClientTrafficXForwardedForThroughEnvoy(t *testing.T) {
	hops := int32(1)
	addr := clientIPThroughEnvoy(t, "tenant-client-xff", &v1alpha1.ClientTraffic{Namespace: "shop", Name: "behind-lb",
		ClientIPDetection: &v1alpha1.ClientTrafficIPDetection{XForwardedFor: &v1alpha1.ClientTrafficXForwardedFor{NumTrustedHops: &hops}}})
	checkXFF(t, addr, []xffCase{
		{"203.0.113.7", http.StatusOK},
		{"198.51.100.1, 203.0.113.7", http.StatusOK},
		{"203.0.113.7, 198.51.100.1", http.StatusForbidden},
		{"", http.StatusForbidden},
	})
}

// xffCase is a request's X-Forwarded-For ("": none) and the status it must get.
type xffCase struct {
	xff  string
	want int
}

// checkXFF sends a request for each case to addr and checks its status.
func checkXFF(t *testing.T, addr string, cases []xffCase) {
	t.Helper()
	for _, tc := range cases {
		var h []string
		if tc.xff != "" {
			h = []string{"X-Forwarded-For", tc.xff}
		}
		if got := statusWith(t, addr, h...); got != tc.want {
			t.Errorf("X-Forwarded-For %q: %d, want %d", tc.xff, got, tc.want)
		}
	}
}

// TestClientTrafficTrustedCIDRsThroughEnvoy: clientIPDetection.xForwardedFor.trustedCIDRs
// (the loopback network, where the test's client stands for the proxy before the hub, and
// 10.0.0.0/8): the client's address is the rightmost address of X-Forwarded-For outside those
// networks, and the Gateway's SecurityPolicy allowing 203.0.113.0/24 decides by it — however
// many trusted proxies appended their addresses; without the header the client is the peer
// (127.0.0.1), refused.
func TestClientTrafficTrustedCIDRsThroughEnvoy(t *testing.T) {
	addr := clientIPThroughEnvoy(t, "tenant-client-xff-cidrs", &v1alpha1.ClientTraffic{Namespace: "shop", Name: "behind-lbs",
		ClientIPDetection: &v1alpha1.ClientTrafficIPDetection{XForwardedFor: &v1alpha1.ClientTrafficXForwardedFor{TrustedCIDRs: []string{"127.0.0.0/8", "10.0.0.0/8"}}}})
	checkXFF(t, addr, []xffCase{
		{"203.0.113.7", http.StatusOK},
		{"203.0.113.7, 10.1.2.3", http.StatusOK},
		{"198.51.100.1, 203.0.113.7, 10.1.2.3, 10.4.5.6", http.StatusOK},
		{"198.51.100.1, 10.1.2.3", http.StatusForbidden},
		{"203.0.113.7, 198.51.100.1", http.StatusForbidden},
		{"", http.StatusForbidden},
	})
}

// TestClientTrafficCustomHeaderThroughEnvoy: clientIPDetection.customHeader X-Real-IP with
// failClosed: the client's address is the header's, and the Gateway's SecurityPolicy
// allowing 203.0.113.0/24 decides by it: X-Real-IP 203.0.113.7 is served, 198.51.100.1 is
// answered 403, and a request without the header (or with one that is not an address) is
// answered 403 by the detection itself, whatever X-Forwarded-For says.
func TestClientTrafficCustomHeaderThroughEnvoy(t *testing.T) {
	yes := true
	addr := clientIPThroughEnvoy(t, "tenant-client-header", &v1alpha1.ClientTraffic{Namespace: "shop", Name: "real-ip",
		ClientIPDetection: &v1alpha1.ClientTrafficIPDetection{CustomHeader: &v1alpha1.ClientTrafficCustomHeader{Name: "X-Real-IP", FailClosed: &yes}}})
	for _, tc := range []struct {
		headers []string
		want    int
	}{
		{[]string{"X-Real-IP", "203.0.113.7"}, http.StatusOK},
		{[]string{"X-Real-IP", "198.51.100.1"}, http.StatusForbidden},
		{[]string{"X-Forwarded-For", "203.0.113.7"}, http.StatusForbidden},
		{[]string{"X-Real-IP", "not-an-address"}, http.StatusForbidden},
	} {
		if got := statusWith(t, addr, tc.headers...); got != tc.want {
			t.Errorf("%q: %d, want %d", tc.headers, got, tc.want)
		}
	}
}

// TestClientTrafficTLSThroughEnvoy: a Gateway's ClientTrafficPolicy with tls.minVersion 1.3
// and alpnProtocols [http/1.1] on its HTTPS listener, through a real Envoy: a client that
// speaks at most TLS 1.2 is refused in the handshake, a TLS 1.3 client is served; a client
// offering h2 and http/1.1 is given http/1.1 (Envoy's default would be h2).
func TestClientTrafficTLSThroughEnvoy(t *testing.T) {
	const tenant = "tenant-client-tls"
	nodePort := testsupport.FreePort(t)
	testsupport.StartHTTPBackend(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(nodePort)), testsupport.Identity{Node: "node-1", Pod: "web"})
	serverData, serverPool := testCert(t, "www.example.com")
	httpsPort := testsupport.FreePort(t)
	port := gwv1.PortNumber(80)
	in := oneGateway(t, tenant, gwv1.Listener{
		Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType,
		TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "server"}}},
	}, httpsPort, []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
		BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: &port}}}}}}, nodePort)
	in.Routes[0].Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{ClientTraffic: &v1alpha1.ClientTraffic{Namespace: "shop", Name: "modern",
		TLS: &v1alpha1.ClientTrafficTLS{MinVersion: "1.3", ALPNProtocols: []string{"http/1.1"}}}}
	in.Secrets = []corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "synced-server", Namespace: tenant,
		Labels: map[string]string{v1alpha1.LabelOriginName: "server", v1alpha1.LabelOriginNamespace: "shop"}}, Type: corev1.SecretTypeTLS, Data: serverData}}
	addr := pushToEnvoy(t, tenant, in, httpsPort)
	tls13 := &tls.Config{ServerName: "www.example.com", RootCAs: serverPool, MinVersion: tls.VersionTLS13}
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve the listener", func() error {
		a, err := sendTLS(addr, tls13, "www.example.com", "/")
		if err == nil && a.status != http.StatusOK {
			return fmt.Errorf("status %d", a.status)
		}
		return err
	})

	handshake := func(cfg *tls.Config) (tls.ConnectionState, error) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		if err != nil {
			return tls.ConnectionState{}, err
		}
		defer conn.Close()
		return conn.ConnectionState(), nil
	}
	if _, err := handshake(&tls.Config{ServerName: "www.example.com", RootCAs: serverPool, MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12}); err == nil {
		t.Errorf("a TLS 1.2 client was accepted, want the handshake refused (minVersion 1.3)")
	} else {
		t.Logf("a TLS 1.2 client: %v", err)
	}
	st, err := handshake(&tls.Config{ServerName: "www.example.com", RootCAs: serverPool, MinVersion: tls.VersionTLS13, NextProtos: []string{"h2", "http/1.1"}})
	switch {
	case err != nil:
		t.Errorf("a TLS 1.3 client: %v, want it served", err)
	case st.Version != tls.VersionTLS13 || st.NegotiatedProtocol != "http/1.1":
		t.Errorf("a TLS 1.3 client offering h2 and http/1.1: version %x, ALPN %q; want TLS 1.3 and http/1.1", st.Version, st.NegotiatedProtocol)
	}
}
