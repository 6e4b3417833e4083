package testsupport

import (
	"bufio"
	"bytes"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Identity names who answers: the node a backend plays and the Pod on it. Both are
// Kubernetes names, so neither holds a space.
type Identity struct {
	Node string
	Pod  string
}

func (id Identity) String() string { return id.Node + "/" + id.Pod }

// check fails the test unless both names are set and free of white space (the wire formats
// separate them by spaces).
func (id Identity) check(t TB) {
	t.Helper()
	for _, s := range []string{id.Node, id.Pod} {
		if s == "" || strings.ContainsAny(s, " \t\r\n") {
			t.Fatalf("backend identity %q: node and pod must be set and free of white space", id)
		}
	}
}

// Reply is what a backend answered to a round trip.
type Reply struct {
	Identity
	// Message is what the backend echoed: the message sent (TCP, UDP) or the request path
	// (HTTP kinds); empty for gRPC.
	Message string
	// Proto is the HTTP protocol that carried it ("HTTP/1.1", "HTTP/2.0"); empty for TCP/UDP.
	Proto string
	// Local is the client's own address (TCP).
	Local string
}

// Backend plays a Pod behind a node port: a server on one address that says, in every answer,
// which node and Pod it is. TCP and UDP backends echo with the prefix "<node> <pod> "; HTTP
// kinds set the X-Backend-Node and X-Backend-Pod headers and answer "<node> <pod> <path>";
// gRPC serves the standard health service with the names in x-backend-node/x-backend-pod
// header metadata.
type Backend struct {
	Identity
	// Addr is the address it listens on (the real port when asked for port 0).
	Addr string
	// CA trusts the self-signed certificate of a TLS backend (nil for other kinds).
	CA *x509.CertPool

	connections atomic.Int64
	requests    atomic.Int64

	mu      sync.Mutex
	proxied []string // TCP: source addresses from PROXY v2 headers, one per request
	plain   int      // TCP: requests without a PROXY header

	stopOnce sync.Once
	stop     func()
}

// Connections counts connections accepted (for UDP: datagrams received).
func (b *Backend) Connections() int64 { return b.connections.Load() }

// Requests counts requests answered: lines (TCP), datagrams (UDP), HTTP requests or RPCs.
func (b *Backend) Requests() int64 { return b.requests.Load() }

// ProxySources returns the source address of every TCP request that came after a PROXY
// protocol v2 header, in order.
func (b *Backend) ProxySources() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.proxied...)
}

// Unproxied counts the TCP requests that came without a PROXY protocol header.
func (b *Backend) Unproxied() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.plain
}

// Close stops the backend and waits for its goroutines; it is safe to call twice.
func (b *Backend) Close() { b.stopOnce.Do(b.stop) }

// prefix starts every TCP and UDP answer.
func (b *Backend) prefix() string { return b.Node + " " + b.Pod + " " }

// backendTimeout bounds every connection a backend serves.
const backendTimeout = 30 * time.Second

// StartTCPBackend listens on addr (e.g. 127.0.0.2:30080, or 127.0.0.1:0) and answers each
// line with "<node> <pod> <line>". A connection may start with a PROXY protocol v2 header,
// whose source address is recorded (ProxySources). It stops when the test ends.
func StartTCPBackend(t TB, addr string, id Identity) *Backend {
	t.Helper()
	b, l := listen(t, "TCP", addr, id)
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	b.stop = func() {
		l.Close()
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				b.serveTCP(c)
				mu.Lock()
				delete(open, c)
				mu.Unlock()
			}()
		}
	}()
	t.Cleanup(b.Close)
	return b
}

func (b *Backend) serveTCP(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(backendTimeout))
	r := bufio.NewReader(c)
	first, err := r.Peek(1)
	if err != nil {
		return // a health check: connect and close
	}
	source := ""
	if first[0] == proxyV2Signature[0] {
		if source, err = readProxyV2(r); err != nil {
			return
		}
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		b.requests.Add(1)
		b.mu.Lock()
		if source != "" {
			b.proxied = append(b.proxied, source)
		} else {
			b.plain++
		}
		b.mu.Unlock()
		if _, err := io.WriteString(c, b.prefix()+line); err != nil {
			return
		}
	}
}

// proxyV2Signature starts every PROXY protocol v2 header.
var proxyV2Signature = []byte("\r\n\r\n\x00\r\nQUIT\n")

// readProxyV2 reads a PROXY v2 header and returns the source address it carries ("local"
// for a LOCAL command).
func readProxyV2(r *bufio.Reader) (string, error) {
	hdr := make([]byte, 16)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return "", err
	}
	if !bytes.Equal(hdr[:12], proxyV2Signature) {
		return "", errors.New("not a PROXY v2 header")
	}
	body := make([]byte, binary.BigEndian.Uint16(hdr[14:16]))
	if _, err := io.ReadFull(r, body); err != nil {
		return "", err
	}
	if hdr[12] != 0x21 { // version 2, command PROXY
		return "local", nil
	}
	if hdr[13] != 0x11 || len(body) < 12 { // TCP over IPv4
		return "", fmt.Errorf("unexpected family/protocol %#x", hdr[13])
	}
	src := net.IP(body[0:4])
	return fmt.Sprintf("%s:%d", src, binary.BigEndian.Uint16(body[8:10])), nil
}

// StartUDPBackend listens on addr and answers each datagram with "<node> <pod> <datagram>".
func StartUDPBackend(t TB, addr string, id Identity) *Backend {
	t.Helper()
	id.check(t)
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatalf("backend %s on udp %s: %v", id, addr, err)
	}
	b := &Backend{Identity: id, Addr: pc.LocalAddr().String()}
	done := make(chan struct{})
	b.stop = func() {
		pc.Close()
		<-done
	}
	go func() {
		defer close(done)
		buf := make([]byte, 64*1024)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			b.connections.Add(1)
			b.requests.Add(1)
			_, _ = pc.WriteTo(append([]byte(b.prefix()), buf[:n]...), from)
		}
	}()
	t.Cleanup(b.Close)
	return b
}

// RoundTripTimeout bounds every round trip of the client helpers, connecting included.
const RoundTripTimeout = 3 * time.Second

// parseEcho splits "<node> <pod> <message>" and checks the message is the one sent.
func parseEcho(answer, sent string) (Reply, error) {
	parts := strings.SplitN(answer, " ", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] != sent {
		return Reply{}, fmt.Errorf("bad answer %q to %q", answer, sent)
	}
	return Reply{Identity: Identity{Node: parts[0], Pod: parts[1]}, Message: parts[2]}, nil
}

// TCPRoundTrip opens a connection to addr, sends msg and a newline, and returns who echoed it.
func TCPRoundTrip(addr, msg string) (Reply, error) { return TCPRoundTripFrom("", addr, msg) }

// TCPRoundTripFrom is TCPRoundTrip from a given local IP (any port; "" for any); the reply
// carries the client's local address.
func TCPRoundTripFrom(localIP, addr, msg string) (Reply, error) {
	d := net.Dialer{Timeout: RoundTripTimeout}
	if localIP != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(localIP)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return Reply{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(RoundTripTimeout))
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		return Reply{}, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return Reply{}, fmt.Errorf("no answer from %s: %w", addr, err)
	}
	r, err := parseEcho(strings.TrimSuffix(line, "\n"), msg)
	r.Local = c.LocalAddr().String()
	return r, err
}

// UDPRoundTrip sends one datagram from a fresh socket (a new UDP session) and returns who
// echoed it.
func UDPRoundTrip(addr, msg string) (Reply, error) {
	return UDPRoundTripFrom("", addr, msg, RoundTripTimeout)
}

// UDPRoundTripFrom is UDPRoundTrip from a given local IP ("" for any), waiting at most wait
// for the echo: a datagram refused on its way gets no answer, so tests that expect refusals
// wait less than RoundTripTimeout.
func UDPRoundTripFrom(localIP, addr, msg string, wait time.Duration) (Reply, error) {
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return Reply{}, err
	}
	var laddr *net.UDPAddr
	if localIP != "" {
		laddr = &net.UDPAddr{IP: net.ParseIP(localIP)}
	}
	c, err := net.DialUDP("udp", laddr, raddr)
	if err != nil {
		return Reply{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte(msg)); err != nil {
		return Reply{}, err
	}
	buf := make([]byte, 64*1024)
	n, err := c.Read(buf)
	if err != nil {
		return Reply{}, fmt.Errorf("no answer from %s: %w", addr, err)
	}
	return parseEcho(string(buf[:n]), msg)
}
