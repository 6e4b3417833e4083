package envoydrain

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"kubelb.dev/kubelb/internal/testsupport"
)

// echoConn is an open downstream connection through the echo listener.
type echoConn struct {
	net.Conn
	r *bufio.Reader
}

// dialEcho opens a connection to the echo listener and proves Envoy serves it with one
// round trip.
func dialEcho(addr string) (*echoConn, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	e := &echoConn{Conn: c, r: bufio.NewReader(c)}
	if err := e.roundTrip("hello"); err != nil {
		c.Close()
		return nil, err
	}
	return e, nil
}

func (e *echoConn) roundTrip(msg string) error {
	if err := e.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(e, msg); err != nil {
		return err
	}
	line, err := e.r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading the echo: %w", err)
	}
	if strings.TrimSpace(line) != msg {
		return fmt.Errorf("echo %q, want %q", line, msg)
	}
	return nil
}

// activeOn waits until Envoy counts n downstream connections on its listeners.
func activeOn(t *testing.T, envoy *testsupport.Envoy, n int64) {
	t.Helper()
	a := admin{base: "http://" + envoy.AdminAddr, client: &http.Client{Timeout: adminTimeout}}
	testsupport.Eventually(t, 10*time.Second, fmt.Sprintf("Envoy to count %d connections", n), func() error {
		got, err := a.activeConnections(context.Background())
		if err == nil && got != n {
			err = fmt.Errorf("%d active", got)
		}
		return err
	})
}

// TestDrainRealEnvoy runs the shutdown manager against a real Envoy with an open downstream
// connection, as in an Envoy pod: the Envoy container's hook (GET /drained) and the sidecar's
// hook (the drain request) are sent together. During Envoy's drain time a new connection is
// still accepted and served (Envoy's graceful drain); after it the listener is closed. The
// drain and the Envoy hook end only once every connection closed.
func TestDrainRealEnvoy(t *testing.T) {
	t.Parallel()
	envoy, adminAddr, listener := testsupport.StartEchoEnvoy(t, 3*time.Second)
	first, err := dialEcho(listener)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	activeOn(t, envoy, 1)

	// The drain logs once Envoy accepted the drain request.
	accepted := make(chan struct{})
	log := funcr.New(func(prefix, args string) {
		if strings.Contains(args, "draining Envoy's listeners") {
			close(accepted)
		}
	}, funcr.Options{})
	m, _, _, _ := startManager(t, ManagerOptions{Drain: Options{AdminAddress: adminAddr, MinDuration: time.Second, Timeout: time.Minute, Log: log}})
	envoyHook := startWaiter(m)
	drain := make(chan string, 1)
	go func() {
		answer, err := RequestDrain(context.Background(), m.o.ControlSocket)
		if err != nil {
			answer = err.Error()
		}
		drain <- answer
	}()
	select {
	case <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("Envoy did not accept the drain request within 10s")
	}

	// Within the drain time Envoy still accepts and serves new connections.
	second, err := dialEcho(listener)
	if err != nil {
		t.Fatalf("a new connection during Envoy's drain time: %v", err)
	}
	defer second.Close()
	testsupport.Eventually(t, 20*time.Second, "the drained listener to stop", func() error {
		v, err := envoy.Stat("listener_manager.listener_stopped")
		if err == nil && v != 1 {
			err = fmt.Errorf("listener_stopped %d", v)
		}
		return err
	})
	if c, err := net.DialTimeout("tcp", listener, time.Second); err == nil {
		c.Close()
		t.Error("the drained listener still accepts connections")
	}
	// The open connections are still served; nothing returned while they are open.
	for i, c := range []*echoConn{first, second} {
		if err := c.roundTrip("still here"); err != nil {
			t.Errorf("connection %d after the listener stopped: %v", i+1, err)
		}
	}
	activeOn(t, envoy, 2)
	first.Close()
	activeOn(t, envoy, 1)
	select {
	case answer := <-drain:
		t.Fatalf("the drain returned with a connection open: %s", answer)
	default:
	}
	if envoyHook.answered() {
		t.Fatalf("the Envoy hook was answered with a connection open: %d %q", envoyHook.status, envoyHook.body)
	}
	closed := time.Now()
	second.Close()
	var answer string
	select {
	case answer = <-drain:
	case <-time.After(10 * time.Second):
		t.Fatal("the drain did not return within 10s of the last connection closing")
	}
	if !strings.HasPrefix(answer, "drained: ") {
		t.Errorf("drain answer %q", answer)
	}
	envoyHook.wait(t, 5*time.Second)
	if envoyHook.status != http.StatusOK || envoyHook.at.Before(closed) {
		t.Errorf("Envoy hook: %d %q at %s, the last connection closed at %s", envoyHook.status, envoyHook.body, envoyHook.at, closed)
	}
	t.Logf("the drain returned %s after the last connection closed", time.Since(closed).Round(10*time.Millisecond))
}

// TestDrainRealEnvoyTimeout: a connection that stays open holds the drain until the timeout.
func TestDrainRealEnvoyTimeout(t *testing.T) {
	t.Parallel()
	envoy, adminAddr, listener := testsupport.StartEchoEnvoy(t, 3*time.Second)
	conn, err := dialEcho(listener)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	activeOn(t, envoy, 1)
	start := time.Now()
	res, err := Drain(context.Background(), Options{AdminAddress: adminAddr, MinDuration: time.Second, Timeout: 4 * time.Second})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != TimedOut || res.Active != 1 || elapsed < 4*time.Second || elapsed > 8*time.Second {
		t.Errorf("result %+v after %s, want a timeout after 4s with 1 connection open", res, elapsed)
	}
	if err := conn.roundTrip("still served"); err != nil {
		t.Errorf("the connection after the drain: %v", err)
	}
}

// TestDrainRealEnvoyHTTPKeepAlive: an idle HTTP/1.1 keep-alive connection is not closed by
// Envoy on its own, so it holds the drain. A request on it after Envoy's drain time (the
// listener closed) is still served, on the same connection, with "Connection: close": the
// client goes elsewhere for the next one, and the drain ends once the connection closed,
// before its timeout. No request fails.
func TestDrainRealEnvoyHTTPKeepAlive(t *testing.T) {
	t.Parallel()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }))
	defer backend.Close()
	_, backendPort, err := net.SplitHostPort(backend.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	admin, listener := testsupport.FreePort(t), testsupport.FreePort(t)
	bootstrap := fmt.Sprintf(`admin:
  address: {socket_address: {address: 127.0.0.1, port_value: %d}}
static_resources:
  listeners:
  - name: http
    address: {socket_address: {address: 127.0.0.1, port_value: %d}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: http
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes: [{match: {prefix: "/"}, route: {cluster: backend}}]
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
  clusters:
  - name: backend
    type: STATIC
    load_assignment:
      cluster_name: backend
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %s}}}}]}]
`, admin, listener, backendPort)
	envoy := testsupport.StartEnvoy(t, "envoy", []byte(bootstrap), testsupport.EnvoyOptions{LogLevel: "warning", DrainTime: 2 * time.Second, Args: []string{"--disable-hot-restart"}})
	envoy.WaitReady(t, 30*time.Second)

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	// get sends one request and reports whether it went over a reused connection and whether
	// Envoy asked to close it.
	get := func() (reused, closing bool, err error) {
		req, err := http.NewRequest(http.MethodGet, "http://"+testsupport.Loopback(listener)+"/", nil)
		if err != nil {
			return false, false, err
		}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
		}))
		resp, err := client.Do(req)
		if err != nil {
			return reused, false, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil && (resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok") {
			err = fmt.Errorf("%s %q", resp.Status, body)
		}
		return reused, resp.Close, err
	}
	if _, _, err := get(); err != nil {
		t.Fatal(err)
	}
	activeOn(t, envoy, 1)

	drain := make(chan Result, 1)
	start := time.Now()
	go func() {
		res, err := Drain(context.Background(), Options{AdminAddress: envoy.AdminAddr, MinDuration: time.Second, Timeout: time.Minute})
		if err != nil {
			t.Error(err)
		}
		drain <- res
	}()
	testsupport.Eventually(t, 20*time.Second, "the drained listener to stop", func() error {
		v, err := envoy.Stat("listener_manager.listener_stopped")
		if err == nil && v != 1 {
			err = fmt.Errorf("listener_stopped %d", v)
		}
		return err
	})
	// Idle, the connection stays open.
	activeOn(t, envoy, 1)
	select {
	case res := <-drain:
		t.Fatalf("the drain returned with an idle connection open: %s", res)
	default:
	}
	reused, closing, err := get()
	if err != nil || !reused || !closing {
		t.Fatalf("request after Envoy's drain time: reused %t, Connection: close %t, error %v; want served on the kept connection, closing it", reused, closing, err)
	}
	select {
	case res := <-drain:
		if res.Outcome != Drained {
			t.Errorf("drain %s", res)
		}
		t.Logf("drained after %s", time.Since(start).Round(10*time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("the drain did not return within 10s of the connection closing")
	}
	if v, err := envoy.Stat("listener.127.0.0.1_" + strconv.Itoa(listener) + ".downstream_cx_total"); err != nil || v != 1 {
		t.Errorf("downstream connections %d (%v), want the one", v, err)
	}
}
