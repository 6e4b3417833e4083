package framework

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"kubelb.dev/kubelb/internal/testenv"
)

// Backend plays a pod behind a NodePort: a TCP or UDP echo server on one node address that
// prefixes every reply with its name, so a test can tell which node served it.
type Backend struct {
	Name        string
	Addr        string
	connections atomic.Int64
	stop        func()
}

// Connections counts TCP connections accepted, or UDP datagrams received.
func (b *Backend) Connections() int64 { return b.connections.Load() }

// Close stops the backend.
func (b *Backend) Close() { b.stop() }

// StartTCPBackend listens on addr (e.g. 127.0.0.2:30080) and answers each line with
// "<name>: <line>". It stops when the test ends.
func StartTCPBackend(t testenv.TB, name, addr string) *Backend {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("backend %s on %s: %v", name, addr, err)
	}
	b := &Backend{Name: name, Addr: addr}
	var wg sync.WaitGroup
	var once sync.Once
	b.stop = func() {
		once.Do(func() {
			l.Close()
			wg.Wait()
		})
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b.connections.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := fmt.Fprintf(c, "%s: %s", name, line); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(b.Close)
	return b
}

// StartUDPBackend listens on addr and answers each datagram with "<name>: <datagram>".
func StartUDPBackend(t testenv.TB, name, addr string) *Backend {
	t.Helper()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatalf("backend %s on udp %s: %v", name, addr, err)
	}
	b := &Backend{Name: name, Addr: addr}
	done := make(chan struct{})
	var once sync.Once
	b.stop = func() {
		once.Do(func() {
			pc.Close()
			<-done
		})
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
			_, _ = pc.WriteTo(append([]byte(name+": "), buf[:n]...), from)
		}
	}()
	t.Cleanup(b.Close)
	return b
}

// TCPRoundTrip opens a connection to addr, sends one line and returns the reply line.
func TCPRoundTrip(addr, msg string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := fmt.Fprintf(c, "%s\n", msg); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	return line[:len(line)-1], nil
}

// UDPRoundTrip sends one datagram to addr and returns the reply.
func UDPRoundTrip(addr, msg string) (string, error) {
	c, err := net.DialTimeout("udp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, 64*1024)
	n, err := c.Read(buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// ErrNoReply is returned by bounded loops that never got an answer.
var ErrNoReply = errors.New("no reply")
