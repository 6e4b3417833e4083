package framework

import (
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// tcpForwarder plays the packet forwarding of kube-proxy, a load balancer or a Pod's network
// namespace: it accepts TCP connections on one address and pipes each one to an upstream the
// pick function chooses at accept time (round robin over the current upstreams).
type tcpForwarder struct {
	l         net.Listener
	upstreams atomic.Pointer[[]string]
	next      atomic.Uint64
	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup
}

// dialTimeout bounds a connection attempt to an upstream; a refused or silent upstream closes
// the client's connection, as a real proxy would.
const dialTimeout = 5 * time.Second

// forwardTCP listens on addr and forwards every connection to one of upstreams.
func forwardTCP(addr string, upstreams []string) (*tcpForwarder, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return forwardFrom(l, upstreams), nil
}

// forwardFrom forwards every connection l accepts to one of upstreams; it owns l.
func forwardFrom(l net.Listener, upstreams []string) *tcpForwarder {
	f := &tcpForwarder{l: l, conns: map[net.Conn]struct{}{}}
	f.setUpstreams(upstreams)
	f.wg.Add(1)
	go f.serve()
	return f
}

func (f *tcpForwarder) setUpstreams(u []string) {
	cp := append([]string(nil), u...)
	f.upstreams.Store(&cp)
}

func (f *tcpForwarder) pick() (string, bool) {
	u := *f.upstreams.Load()
	if len(u) == 0 {
		return "", false
	}
	return u[f.next.Add(1)%uint64(len(u))], true
}

func (f *tcpForwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.l.Accept()
		if err != nil {
			return
		}
		if !f.track(c, true) {
			c.Close()
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer f.track(c, false)
			f.pipe(c)
		}()
	}
}

// track adds or removes a connection; it refuses new ones once the forwarder is closed.
func (f *tcpForwarder) track(c net.Conn, add bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !add {
		delete(f.conns, c)
		return true
	}
	if f.conns == nil {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *tcpForwarder) pipe(c net.Conn) {
	defer c.Close()
	target, ok := f.pick()
	if !ok {
		return
	}
	u, err := net.DialTimeout("tcp", target, dialTimeout)
	if err != nil {
		return
	}
	defer u.Close()
	if !f.track(u, true) {
		return
	}
	defer f.track(u, false)
	done := make(chan struct{}, 2)
	copyHalf := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go copyHalf(u, c)
	go copyHalf(c, u)
	<-done
	<-done
}

// Close stops accepting, closes every open connection and waits for the forwarder's
// goroutines.
func (f *tcpForwarder) Close() {
	_ = f.l.Close()
	f.mu.Lock()
	for c := range f.conns {
		_ = c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
}

// forwarder is a tcpForwarder or a udpForwarder.
type forwarder interface {
	setUpstreams([]string)
	Close()
}

// udpPrefix marks the key of a UDP forwarder in forwarders (udpKey); a key without it is a
// TCP listen address.
const udpPrefix = "udp/"

// udpKey is the forwarders key of a UDP listen address.
func udpKey(addr string) string { return udpPrefix + addr }

// forwarders keeps one forwarder per listen address (udpKey for UDP) in line with a desired
// set.
type forwarders map[string]forwarder

// sync makes the running forwarders match want (listen address or udpKey → upstreams): new
// ones start, changed ones get their upstreams, gone ones close. It returns the listen errors.
func (fs forwarders) sync(want map[string][]string) []error {
	var errs []error
	for key, f := range fs {
		if _, ok := want[key]; !ok {
			f.Close()
			delete(fs, key)
		}
	}
	for key, ups := range want {
		if f, ok := fs[key]; ok {
			f.setUpstreams(ups)
			continue
		}
		var f forwarder
		var err error
		if addr, udp := strings.CutPrefix(key, udpPrefix); udp {
			f, err = forwardUDP(addr, ups)
		} else {
			f, err = forwardTCP(key, ups)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fs[key] = f
	}
	return errs
}

func (fs forwarders) closeAll() { fs.sync(nil) }
