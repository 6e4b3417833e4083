package xds

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// proxyV2Signature starts every PROXY protocol v2 header.
var proxyV2Signature = []byte("\r\n\r\n\x00\r\nQUIT\n")

// tcpBackend plays a tenant node's NodePort: it answers each request line with
// "<id> <line>", and records the PROXY v2 header (source address) of each connection.
type tcpBackend struct {
	id string
	ln net.Listener

	mu       sync.Mutex
	requests int
	proxied  []string // source addresses from PROXY v2 headers, one per request
	plain    int      // requests without a PROXY header
}

func startTCPBackend(t *testing.T, id, addr string) *tcpBackend {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("backend %s: %v", id, err)
	}
	b := &tcpBackend{id: id, ln: ln}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go b.handle(c)
		}
	}()
	return b
}

func (b *tcpBackend) handle(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
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
	line, err := r.ReadString('\n')
	if err != nil {
		return
	}
	b.mu.Lock()
	b.requests++
	if source != "" {
		b.proxied = append(b.proxied, source)
	} else {
		b.plain++
	}
	b.mu.Unlock()
	_, _ = fmt.Fprintf(c, "%s %s", b.id, line)
}

// readProxyV2 reads a PROXY v2 header and returns the source address it carries.
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

func (b *tcpBackend) stats() (requests int, proxied []string, plain int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.requests, append([]string(nil), b.proxied...), b.plain
}

// udpBackend answers each datagram with "<id> <payload>".
type udpBackend struct {
	id   string
	conn net.PacketConn
}

func startUDPBackend(t *testing.T, id, addr string) *udpBackend {
	t.Helper()
	conn, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatalf("backend %s: %v", id, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = conn.WriteTo([]byte(id+" "+string(buf[:n])), from)
		}
	}()
	return &udpBackend{id: id, conn: conn}
}

// tcpRequest connects to addr from localIP (any port), sends msg and a newline, and returns
// the backend id that answered and the client's local address.
func tcpRequest(addr, localIP, msg string) (backend, local string, err error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	if localIP != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(localIP)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return "", "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := fmt.Fprintf(c, "%s\n", msg); err != nil {
		return "", "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", "", fmt.Errorf("no answer: %w", err)
	}
	id, echoed, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	if !ok || echoed != msg {
		return "", "", fmt.Errorf("bad answer %q to %q", line, msg)
	}
	return id, c.LocalAddr().String(), nil
}

// udpRequest sends one datagram from a fresh socket (a new UDP session) and returns the
// backend id that answered.
func udpRequest(addr, msg string) (string, error) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	if err != nil {
		return "", fmt.Errorf("no answer: %w", err)
	}
	id, echoed, ok := strings.Cut(string(buf[:n]), " ")
	if !ok || echoed != msg {
		return "", fmt.Errorf("bad answer %q to %q", buf[:n], msg)
	}
	return id, nil
}
