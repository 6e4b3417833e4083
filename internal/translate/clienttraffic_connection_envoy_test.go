package translate_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1a2 "sigs.k8s.io/gateway-api/apis/v1alpha2"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
)

// proxyProtocolThroughEnvoy serves a Gateway carrying the ClientTrafficPolicy ct and a
// SecurityPolicy that allows clients in 192.0.2.0/24 only (default Deny), and its HTTPRoute,
// through a real Envoy, and waits until a request with a PROXY header from 192.0.2.7 is
// served; it returns the listener's address.
func proxyProtocolThroughEnvoy(t *testing.T, tenant string, ct *v1alpha1.ClientTraffic) string {
	t.Helper()
	in, httpPort := clientIPInput(t, tenant, ct, "192.0.2.0/24")
	addr := pushToEnvoy(t, tenant, in, httpPort)
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve a client behind a PROXY header", func() error {
		code, err := testsupport.ProxiedGet(addr, "web.example.com", testsupport.ProxyV2Header("192.0.2.7"))
		if err == nil && code != http.StatusOK {
			return fmt.Errorf("status %d", code)
		}
		return err
	})
	return addr
}

// TestClientTrafficProxyProtocolThroughEnvoy: a Gateway's ClientTrafficPolicy with
// enableProxyProtocol and a SecurityPolicy allowing 192.0.2.0/24 only, through a real Envoy,
// from loopback: a client whose connection starts with a PROXY v2 header naming 192.0.2.7
// (or a v1 header naming 192.0.2.8) is served: the authorization decides by the header's
// address; one naming 198.51.100.9 is answered 403; a connection without a header is closed
// without an answer.
func TestClientTrafficProxyProtocolThroughEnvoy(t *testing.T) {
	yes := true
	addr := proxyProtocolThroughEnvoy(t, "tenant-client-proxy", &v1alpha1.ClientTraffic{Namespace: "shop", Name: "behind-lb", EnableProxyProtocol: &yes})
	for _, tc := range []struct {
		name   string
		header []byte
		want   int // 0: closed without an answer
	}{
		{"v2 from 192.0.2.7", testsupport.ProxyV2Header("192.0.2.7"), http.StatusOK},
		{"v1 from 192.0.2.8", []byte("PROXY TCP4 192.0.2.8 127.0.0.1 40000 80\r\n"), http.StatusOK},
		{"v2 from 198.51.100.9", testsupport.ProxyV2Header("198.51.100.9"), http.StatusForbidden},
		{"no header", nil, 0},
	} {
		code, err := testsupport.ProxiedGet(addr, "web.example.com", tc.header)
		switch {
		case tc.want == 0 && err == nil:
			t.Errorf("%s: status %d, want the connection closed without an answer", tc.name, code)
		case tc.want == 0:
			t.Logf("%s: %v", tc.name, err)
		case err != nil || code != tc.want:
			t.Errorf("%s: status %d, %v; want %d", tc.name, code, err, tc.want)
		}
	}
}

// TestClientTrafficProxyProtocolOptionalThroughEnvoy: proxyProtocol.optional: a connection
// with a PROXY v2 header naming 192.0.2.7 is served as that client, one without a header is
// served as its peer (127.0.0.1, outside 192.0.2.0/24: 403), not closed.
func TestClientTrafficProxyProtocolOptionalThroughEnvoy(t *testing.T) {
	yes := true
	addr := proxyProtocolThroughEnvoy(t, "tenant-client-proxy-optional", &v1alpha1.ClientTraffic{Namespace: "shop", Name: "maybe-lb",
		ProxyProtocol: &v1alpha1.ClientTrafficProxyProtocol{Optional: &yes}})
	if code, err := testsupport.ProxiedGet(addr, "web.example.com", nil); err != nil || code != http.StatusForbidden {
		t.Errorf("no header: status %d, %v; want 403 (the peer's address decides)", code, err)
	}
	if code, err := testsupport.ProxiedGet(addr, "web.example.com", testsupport.ProxyV2Header("192.0.2.7")); err != nil || code != http.StatusOK {
		t.Errorf("a header from 192.0.2.7: status %d, %v; want 200", code, err)
	}
}

// rawExchange sends request (raw bytes) on its own connection and returns the response.
func rawExchange(addr, request string) (*http.Response, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", request, err)
	}
	resp.Body.Close()
	return resp, nil
}

// TestClientTrafficHTTPOptionsThroughEnvoy: a Gateway's ClientTrafficPolicy with path
// (escapedSlashesAction RejectRequest; slashes merged), headers.preserveXRequestID and
// http1.http10.useDefaultHost on its listener of hostname web.example.com, through a real
// Envoy: //a///b reaches the backend as /a/b; /a%2Fb is answered 400; the client's
// X-Request-ID reaches the backend unchanged; an HTTP/1.0 request without a Host header is
// served (as web.example.com), where Envoy's default answers it 426.
func TestClientTrafficHTTPOptionsThroughEnvoy(t *testing.T) {
	const tenant = "tenant-client-http"
	nodePort := serveOnNodes(t, func(int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Saw-Path", r.URL.EscapedPath())
			w.Header().Set("X-Saw-Request-Id", r.Header.Get("X-Request-Id"))
			w.WriteHeader(http.StatusOK)
		})
	})
	httpPort := testsupport.FreePort(t)
	port := gwv1.PortNumber(80)
	host := gwv1.Hostname("web.example.com")
	in := oneGateway(t, tenant, gwv1.Listener{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, Hostname: &host}, httpPort,
		[]gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: &port}}}}}}, nodePort)
	var addrs []v1alpha1.EndpointAddress
	for _, ip := range trafficNodes {
		addrs = append(addrs, v1alpha1.EndpointAddress{IP: ip})
	}
	in.Addresses = map[string]v1alpha1.Addresses{"default": {ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1alpha1.AddressesSpec{Addresses: addrs}}}
	yes := true
	in.Routes[0].Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{ClientTraffic: &v1alpha1.ClientTraffic{Namespace: "shop", Name: "paths",
		Path:    &v1alpha1.ClientTrafficPath{EscapedSlashesAction: "RejectRequest"},
		Headers: &v1alpha1.ClientTrafficHeaders{PreserveXRequestID: &yes},
		HTTP1:   &v1alpha1.ClientTrafficHTTP1{HTTP10: &v1alpha1.ClientTrafficHTTP10{UseDefaultHost: &yes}}}}
	addr := pushToEnvoy(t, tenant, in, httpPort)
	get := func(path string, headers string) string {
		return "GET " + path + " HTTP/1.1\r\nHost: web.example.com\r\n" + headers + "Connection: close\r\n\r\n"
	}
	exchange := func(request string) *http.Response {
		t.Helper()
		resp, err := rawExchange(addr, request)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve the route", func() error {
		resp, err := rawExchange(addr, get("/", ""))
		if err == nil && resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return err
	})

	if resp := exchange(get("//a///b", "")); resp.StatusCode != http.StatusOK || resp.Header.Get("X-Saw-Path") != "/a/b" {
		t.Errorf("//a///b: status %d, the backend saw %q; want 200 and /a/b", resp.StatusCode, resp.Header.Get("X-Saw-Path"))
	}
	if resp := exchange(get("/a%2Fb", "")); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("/a%%2Fb: status %d (the backend saw %q), want 400", resp.StatusCode, resp.Header.Get("X-Saw-Path"))
	}
	if resp := exchange(get("/", "X-Request-ID: order-42\r\n")); resp.StatusCode != http.StatusOK || resp.Header.Get("X-Saw-Request-Id") != "order-42" {
		t.Errorf("X-Request-ID order-42: status %d, the backend saw %q; want it kept", resp.StatusCode, resp.Header.Get("X-Saw-Request-Id"))
	}
	if resp := exchange("GET / HTTP/1.0\r\n\r\n"); resp.StatusCode != http.StatusOK {
		t.Errorf("an HTTP/1.0 request without Host: status %d, want 200", resp.StatusCode)
	}
}

// TestClientTrafficTCPIdleTimeoutThroughEnvoy: a Gateway's ClientTrafficPolicy with
// timeout.tcp.idleTimeout 2s on its TCP listener (a TCPRoute to an echo server), through a
// real Envoy: a line is echoed, then the connection, idle both ways, is closed by Envoy
// (Envoy's default keeps it an hour; the echo server's own limit is 30 s).
func TestClientTrafficTCPIdleTimeoutThroughEnvoy(t *testing.T) {
	const tenant = "tenant-client-tcp"
	nodePort := testsupport.FreePort(t)
	testsupport.StartTCPBackend(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(nodePort)), testsupport.Identity{Node: "node-1", Pod: "db"})
	tcpPort := testsupport.FreePort(t)
	in := oneTCPGateway(t, tenant, tcpPort, nodePort)
	in.Routes[0].Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{ClientTraffic: &v1alpha1.ClientTraffic{Namespace: "shop", Name: "idle",
		Timeout: &v1alpha1.ClientTrafficTimeout{TCP: &v1alpha1.ClientTrafficTCPTimeout{IdleTimeout: "2s"}}}}
	addr := pushToEnvoy(t, tenant, in, tcpPort)
	var conn net.Conn
	testsupport.Eventually(t, 30*time.Second, "Envoy to echo a line", func() error {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return err
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "hello\n"); err != nil {
			c.Close()
			return err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || line != "node-1 db hello\n" {
			c.Close()
			return fmt.Errorf("answer %q, %v", line, err)
		}
		conn = c
		return nil
	})
	defer conn.Close()
	start := time.Now()
	_ = conn.SetDeadline(start.Add(20 * time.Second))
	_, err := conn.Read(make([]byte, 1)) // nothing comes until Envoy closes the idle connection
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		t.Errorf("the idle connection was still open after %s", time.Since(start).Round(time.Millisecond))
	case err == nil:
		t.Errorf("a byte came on the idle connection")
	default:
		t.Logf("the idle connection was closed after %s: %v", time.Since(start).Round(time.Millisecond), err)
	}
}

// oneTCPGateway is oneGateway with one TCP listener (port 5432) and a TCPRoute to Service
// web (port 80, NodePort nodePort on 127.0.0.1) in place of the HTTPRoute.
func oneTCPGateway(t *testing.T, tenant string, envoyPort, nodePort int) translate.Input {
	t.Helper()
	in := oneGateway(t, tenant, gwv1.Listener{Name: "pg", Port: 5432, Protocol: gwv1.TCPProtocolType}, envoyPort, nil, nodePort)
	port := gwv1.PortNumber(80)
	route, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&gwv1a2.TCPRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1alpha2", Kind: "TCPRoute"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: gwv1a2.TCPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
			Rules: []gwv1a2.TCPRouteRule{{BackendRefs: []gwv1.BackendRef{{BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: &port}}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	in.Routes[1].Spec.Source.Kubernetes.Route.Object = route
	return in
}

// TestClientTrafficPreserveHeaderCaseThroughEnvoy: a Gateway's ClientTrafficPolicy with
// http1.preserveHeaderCase, through a real Envoy: a request header written X-MiXeD-Case
// reaches the HTTP/1 backend with that case (Envoy otherwise writes header names in lower
// case).
func TestClientTrafficPreserveHeaderCaseThroughEnvoy(t *testing.T) {
	const tenant = "tenant-client-case"
	// A backend that keeps the header block of each request as it came on the wire.
	nodePort := testsupport.FreePort(t)
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(nodePort)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	seen := make(chan string, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				r := bufio.NewReader(c)
				var head string
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if line == "\r\n" {
						break
					}
					head += line
				}
				if strings.Contains(strings.ToLower(head), "\r\nx-mixed-case:") { // ours, not a stray connection's
					select {
					case seen <- head:
					default:
					}
				}
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			}()
		}
	}()
	httpPort := testsupport.FreePort(t)
	port := gwv1.PortNumber(80)
	in := oneGateway(t, tenant, gwv1.Listener{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}, httpPort,
		[]gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: &port}}}}}}, nodePort)
	yes := true
	in.Routes[0].Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{ClientTraffic: &v1alpha1.ClientTraffic{Namespace: "shop", Name: "case",
		HTTP1: &v1alpha1.ClientTrafficHTTP1{PreserveHeaderCase: &yes}}}
	addr := pushToEnvoy(t, tenant, in, httpPort)
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve the route", func() error {
		resp, err := rawExchange(addr, "GET / HTTP/1.1\r\nHost: web.example.com\r\nX-MiXeD-Case: 1\r\nConnection: close\r\n\r\n")
		if err == nil && resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return err
	})
	select {
	case head := <-seen:
		if !strings.Contains(head, "X-MiXeD-Case: 1\r\n") {
			t.Errorf("the backend got the header block %q, want X-MiXeD-Case as the client wrote it", head)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the backend saw no request")
	}
}

// TestClientTrafficKeepaliveThroughEnvoy: a Gateway's ClientTrafficPolicy with tcpKeepalive
// (idleTime 30s, interval 5s, 3 probes), through a real Envoy: the connection Envoy accepts
// from a client runs the kernel's keepalive timer (ss shows timer:(keepalive,…) on Envoy's
// side of the connection), so a client that vanishes without a word is found; without the
// policy Envoy's sockets have none.
func TestClientTrafficKeepaliveThroughEnvoy(t *testing.T) {
	ss, err := exec.LookPath("ss")
	if err != nil {
		t.Skip("ss (iproute2) is not installed")
	}
	probes := int64(3)
	addr := clientTrafficThroughEnvoy(t, "tenant-client-keepalive", &v1alpha1.ClientTraffic{Namespace: "shop", Name: "keepalive",
		TCPKeepalive: &v1alpha1.ClientTrafficTCPKeepalive{Probes: &probes, IdleTime: "30s", Interval: "5s"}})
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Envoy's side of this connection: source the listener's address, destination ours.
	filter := fmt.Sprintf("( src %s and dst %s )", addr, conn.LocalAddr())
	testsupport.Eventually(t, 10*time.Second, "Envoy's socket with a keepalive timer", func() error {
		out, err := exec.Command(ss, "-tnoH", "state", "established", filter).CombinedOutput()
		switch {
		case err != nil:
			return fmt.Errorf("ss: %v: %s", err, out)
		case !strings.Contains(string(out), "timer:(keepalive,"):
			return fmt.Errorf("ss shows %q", out)
		}
		t.Logf("%s", strings.TrimSpace(string(out)))
		return nil
	})
}

// TestClientTrafficHTTP2ThroughEnvoy: a Gateway's ClientTrafficPolicy with http2
// (initialStreamWindowSize 64Ki, initialConnectionWindowSize 1Mi, maxConcurrentStreams 10),
// through a real Envoy: an HTTP/2 client (prior knowledge, plain text) is told in Envoy's
// SETTINGS at most 10 streams and a stream window of 65536 bytes, and the connection's
// window is opened to 1 MiB (a WINDOW_UPDATE of 1 MiB - 65535); Envoy 1.40's defaults say
// 1024 streams, 16 MiB and 24 MiB.
func TestClientTrafficHTTP2ThroughEnvoy(t *testing.T) {
	streams := int64(10)
	stream, connection := intstr.FromString("64Ki"), intstr.FromString("1Mi")
	addr := clientTrafficThroughEnvoy(t, "tenant-client-h2", &v1alpha1.ClientTraffic{Namespace: "shop", Name: "h2",
		HTTP2: &v1alpha1.ClientTrafficHTTP2{InitialStreamWindowSize: &stream, InitialConnectionWindowSize: &connection, MaxConcurrentStreams: &streams}})
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	// The client preface and an empty SETTINGS frame (RFC 9113, 3.4 and 6.5).
	if _, err := io.WriteString(conn, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"); err != nil {
		t.Fatal(err)
	}
	const (
		frameSettings     = 4
		frameWindowUpdate = 8
		settingStreams    = 3 // SETTINGS_MAX_CONCURRENT_STREAMS
		settingWindow     = 4 // SETTINGS_INITIAL_WINDOW_SIZE
	)
	settings := map[uint16]uint32{}
	var connIncrement uint32
	r := bufio.NewReader(conn)
	for i := 0; i < 8 && (len(settings) == 0 || connIncrement == 0); i++ { // Envoy's first frames
		head := make([]byte, 9)
		if _, err := io.ReadFull(r, head); err != nil {
			t.Fatalf("reading Envoy's frames: %v (settings %v)", err, settings)
		}
		payload := make([]byte, int(head[0])<<16|int(head[1])<<8|int(head[2]))
		if _, err := io.ReadFull(r, payload); err != nil {
			t.Fatal(err)
		}
		streamID := binary.BigEndian.Uint32(head[5:9]) & 0x7fffffff
		switch {
		case head[3] == frameSettings && head[4]&1 == 0: // not an ACK
			for p := payload; len(p) >= 6; p = p[6:] {
				settings[binary.BigEndian.Uint16(p)] = binary.BigEndian.Uint32(p[2:])
			}
		case head[3] == frameWindowUpdate && streamID == 0 && len(payload) == 4:
			connIncrement = binary.BigEndian.Uint32(payload) & 0x7fffffff
		}
	}
	if settings[settingStreams] != 10 || settings[settingWindow] != 65536 {
		t.Errorf("Envoy's SETTINGS %v: want MAX_CONCURRENT_STREAMS (3) 10 and INITIAL_WINDOW_SIZE (4) 65536", settings)
	}
	if connIncrement != 1<<20-65535 {
		t.Errorf("the connection's WINDOW_UPDATE: %d, want %d (a window of 1 MiB)", connIncrement, 1<<20-65535)
	}
}
