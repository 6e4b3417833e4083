package framework

import (
	"io"
	"net"
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

// forwarders keeps one tcpForwarder per listen address in line with a desired set.
type forwarders map[string]*tcpForwarder

// sync makes the running forwarders match want (listen address → upstreams): new ones start,
// changed ones get their upstreams, gone ones close. It returns the listen errors.
func (fs forwarders) sync(want map[string][]string) []error {
	var errs []error
	for addr, f := range fs {
		if _, ok := want[addr]; !ok {
			f.Close()
			delete(fs, addr)
		}
	}
	for addr, ups := range want {
		if f, ok := fs[addr]; ok {
			f.setUpstreams(ups)
			continue
		}
		f, err := forwardTCP(addr, ups)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fs[addr] = f
	}
	return errs
}

func (fs forwarders) closeAll() { fs.sync(nil) }
