package framework

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"kubelb.dev/kubelb/internal/testenv"
)

// APIProxy is a cuttable network path to an envtest API server: a loopback TCP forwarder
// (TLS passes through untouched; the API server's serving certificate names 127.0.0.1, so
// only the port differs) whose Cut makes the API server unreachable for the programs that
// reach it through the proxy, while the test's own clients still reach it directly.
//
// "Unreachable" is a black hole, the realistic partition: from Cut until Restore nothing is
// forwarded either way. Connections that were open stay open but frozen (what a client sends
// is accepted by the kernel and never delivered; nothing comes back), and new connections
// are accepted and held the same way: no refusal, no reset, so the clients see only their
// own timeouts (HTTP/2 health pings, TLS handshake and request timeouts, lease renew
// deadlines). Restore closes every connection that lived through the cut, as a partition
// that healed with the connection state lost would, and forwards new ones again; what was
// held is bounded by the cut. The proxy closes when the test ends.
type APIProxy struct {
	// Addr is the proxy's host:port on loopback.
	Addr string
	fwd  *tcpForwarder

	mu       sync.Mutex
	cut      bool
	restored chan struct{}       // closed by Restore; the frozen connections wait on it
	open     map[*gatedConn]bool // open connections: true when frozen by a cut
	stats    CutStats            // of the current or last cut
	since    time.Time           // when the current or last cut began
	closed   bool
	done     atomic.Bool
}

// CutStats is what reached the proxy during a cut: the traffic the programs behind it sent
// into the black hole.
type CutStats struct {
	// Connections accepted during the cut.
	Connections int64
	// Bytes received from clients during the cut (on any connection).
	Bytes int64
	// Frozen connections closed by Restore.
	Closed int64
	// Duration of the cut.
	Duration time.Duration
}

func (s CutStats) String() string {
	return fmt.Sprintf("%s cut: %d connections accepted, %d bytes sent into it, %d frozen connections closed on restore",
		s.Duration.Round(100*time.Millisecond), s.Connections, s.Bytes, s.Closed)
}

// StartAPIProxy starts a proxy in front of the cluster's API server.
func StartAPIProxy(t testenv.TB, cluster *testenv.Cluster) *APIProxy {
	t.Helper()
	u, err := url.Parse(cluster.Config.Host)
	if err != nil {
		t.Fatalf("parsing the API server address %q: %v", cluster.Config.Host, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := newAPIProxy(l, u.Host)
	t.Cleanup(p.Close)
	return p
}

// newAPIProxy forwards what l accepts to upstream (host:port); it owns l.
func newAPIProxy(l net.Listener, upstream string) *APIProxy {
	p := &APIProxy{Addr: l.Addr().String(), open: map[*gatedConn]bool{}, restored: make(chan struct{})}
	close(p.restored)
	p.fwd = forwardFrom(&gatedListener{Listener: l, p: p}, []string{upstream})
	return p
}

// URL is the https:// address of the API server through the proxy.
func (p *APIProxy) URL() string { return "https://" + p.Addr }

// Kubeconfig writes a copy of the kubeconfig file at path whose every cluster's server is
// the proxy, and returns the copy's path.
func (p *APIProxy) Kubeconfig(t testenv.TB, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out, err := RewriteKubeconfigServer(raw, p.URL())
	if err != nil {
		t.Fatalf("rewriting the kubeconfig %s: %v", path, err)
	}
	dst := filepath.Join(t.TempDir(), "via-proxy-"+filepath.Base(path))
	if err := os.WriteFile(dst, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}

// RewriteKubeconfigServer returns the kubeconfig with every cluster's server set to server.
func RewriteKubeconfigServer(kubeconfig []byte, server string) ([]byte, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, err
	}
	if len(cfg.Clusters) == 0 {
		return nil, errors.New("the kubeconfig names no cluster")
	}
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	return clientcmd.Write(*cfg)
}

// Cut makes the API server unreachable through the proxy (a black hole, see APIProxy).
func (p *APIProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return
	}
	p.cut, p.restored, p.since, p.stats = true, make(chan struct{}), time.Now(), CutStats{}
	for c := range p.open {
		p.open[c] = true
	}
}

// Restore ends a cut: the connections frozen by it are closed, and new ones are forwarded
// again. It returns what reached the proxy during the cut.
func (p *APIProxy) Restore() CutStats {
	p.mu.Lock()
	if !p.cut {
		defer p.mu.Unlock()
		return p.stats
	}
	p.cut = false
	p.stats.Duration = time.Since(p.since)
	var frozen []*gatedConn
	for c, f := range p.open {
		if f {
			frozen = append(frozen, c)
			delete(p.open, c)
		}
	}
	p.stats.Closed = int64(len(frozen))
	close(p.restored)
	stats := p.stats
	p.mu.Unlock()
	for _, c := range frozen {
		_ = c.Conn.Close()
	}
	return stats
}

// Stats is what reached the proxy during the current (or last) cut so far.
func (p *APIProxy) Stats() CutStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	if p.cut {
		s.Duration = time.Since(p.since)
	}
	return s
}

// Close restores the path and closes the proxy with every connection.
func (p *APIProxy) Close() {
	if p.done.Swap(true) {
		return
	}
	p.Restore()
	p.fwd.Close()
}

// gatedListener hands out connections that stop while the proxy is cut.
type gatedListener struct {
	net.Listener
	p *APIProxy
}

func (l *gatedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	g := &gatedConn{Conn: c, p: l.p}
	l.p.mu.Lock()
	l.p.open[g] = l.p.cut
	if l.p.cut {
		l.p.stats.Connections++
	}
	l.p.mu.Unlock()
	return g, nil
}

// gatedConn is the client side of one forwarded connection. The forwarder reads what the
// client sends and writes what the API server answers through it: while the proxy is cut,
// both wait, and a connection frozen by a cut ends (its data dropped) when the cut does.
type gatedConn struct {
	net.Conn
	p *APIProxy
}

// errCut ends a connection that lived through a cut.
var errCut = errors.New("the connection lived through an API server cut")

// pass waits while the proxy is cut; it fails when this connection was frozen by a cut.
func (c *gatedConn) pass(received int) error {
	c.p.mu.Lock()
	frozen, cut, restored := c.p.open[c], c.p.cut, c.p.restored
	if cut {
		c.p.stats.Bytes += int64(received)
	}
	_, tracked := c.p.open[c]
	c.p.mu.Unlock()
	if !tracked {
		return errCut // closed by Restore
	}
	if !frozen {
		return nil
	}
	<-restored
	return errCut
}

func (c *gatedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if perr := c.pass(n); perr != nil {
		return 0, perr
	}
	return n, err
}

func (c *gatedConn) Write(b []byte) (int, error) {
	if err := c.pass(0); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

func (c *gatedConn) Close() error {
	c.p.mu.Lock()
	delete(c.p.open, c)
	c.p.mu.Unlock()
	return c.Conn.Close()
}

// CloseWrite half-closes the client side (the forwarder does when the API server is done).
func (c *gatedConn) CloseWrite() error {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		return tc.CloseWrite()
	}
	return nil
}
