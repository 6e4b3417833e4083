package framework

import (
	"errors"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// udpForwarder plays the UDP forwarding of kube-proxy (its conntrack entries), a load
// balancer or a Pod's network namespace: it receives datagrams on one address and sends each
// flow (a client address) to the upstream picked when its first datagram came (round robin
// over the current upstreams), from a socket of its own; the upstream's answers go back to
// the client from the listen address. The table of flows is bounded (maxUDPFlows: a new flow
// then ends the least recently used one) and a flow ends after udpFlowIdle without a datagram
// either way, when its upstream answers with an error (ICMP unreachable), or when its
// upstream is no longer among the upstreams (as kube-proxy clears the conntrack entries of a
// removed endpoint).
type udpForwarder struct {
	pc        *net.UDPConn
	upstreams atomic.Pointer[[]string]
	next      atomic.Uint64
	idle      time.Duration
	max       int
	mu        sync.Mutex
	flows     map[string]*udpFlow // client address → flow; nil once closed
	wg        sync.WaitGroup
}

// udpFlow is one client's flow: the socket towards its upstream and when it was last used.
type udpFlow struct {
	client   *net.UDPAddr
	upstream string
	conn     *net.UDPConn
	last     atomic.Int64 // unix nanoseconds
}

const (
	// udpFlowIdle is how long a flow without datagrams lives (Linux's conntrack keeps an
	// unanswered UDP entry 30 s).
	udpFlowIdle = 30 * time.Second
	// maxUDPFlows bounds the flows of one forwarder.
	maxUDPFlows = 4096
	// maxDatagram is the largest datagram forwarded.
	maxDatagram = 64 * 1024
)

// forwardUDP listens on addr (UDP) and forwards every flow to one of upstreams.
func forwardUDP(addr string, upstreams []string) (*udpForwarder, error) {
	return forwardUDPWith(addr, upstreams, udpFlowIdle, maxUDPFlows)
}

func forwardUDPWith(addr string, upstreams []string, idle time.Duration, maxFlows int) (*udpForwarder, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	pc, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, err
	}
	f := &udpForwarder{pc: pc, idle: idle, max: maxFlows, flows: map[string]*udpFlow{}}
	f.setUpstreams(upstreams)
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

// Addr is the address the forwarder receives on.
func (f *udpForwarder) Addr() string { return f.pc.LocalAddr().String() }

// setUpstreams replaces the upstreams; flows to an upstream no longer among them end.
func (f *udpForwarder) setUpstreams(u []string) {
	cp := append([]string(nil), u...)
	f.upstreams.Store(&cp)
	f.mu.Lock()
	var gone []*udpFlow
	for _, fl := range f.flows {
		if !slices.Contains(cp, fl.upstream) {
			gone = append(gone, fl)
		}
	}
	f.mu.Unlock()
	for _, fl := range gone {
		f.end(fl)
	}
}

func (f *udpForwarder) pick() (string, bool) {
	u := *f.upstreams.Load()
	if len(u) == 0 {
		return "", false
	}
	return u[f.next.Add(1)%uint64(len(u))], true
}

// flows is the number of open flows.
func (f *udpForwarder) flowCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.flows)
}

func (f *udpForwarder) serve() {
	defer f.wg.Done()
	buf := make([]byte, maxDatagram)
	for {
		n, client, err := f.pc.ReadFromUDP(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		fl := f.flow(client)
		if fl == nil {
			continue // no upstream (kube-proxy drops it), or closed
		}
		fl.last.Store(time.Now().UnixNano())
		if _, err := fl.conn.Write(buf[:n]); err != nil {
			f.end(fl)
		}
	}
}

// flow returns the client's flow, opening one to a picked upstream on its first datagram.
func (f *udpForwarder) flow(client *net.UDPAddr) *udpFlow {
	key := client.String()
	f.mu.Lock()
	fl, ok := f.flows[key]
	closed := f.flows == nil
	f.mu.Unlock()
	if ok || closed {
		return fl
	}
	target, ok := f.pick()
	if !ok {
		return nil
	}
	ua, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		return nil
	}
	conn, err := net.DialUDP("udp", nil, ua)
	if err != nil {
		return nil
	}
	fl = &udpFlow{client: client, upstream: target, conn: conn}
	fl.last.Store(time.Now().UnixNano())
	var evict *udpFlow
	f.mu.Lock()
	if f.flows == nil {
		f.mu.Unlock()
		conn.Close()
		return nil
	}
	if len(f.flows) >= f.max {
		for _, o := range f.flows {
			if evict == nil || o.last.Load() < evict.last.Load() {
				evict = o
			}
		}
		delete(f.flows, evict.client.String())
	}
	f.flows[key] = fl
	f.wg.Add(1)
	f.mu.Unlock()
	if evict != nil {
		evict.conn.Close()
	}
	go f.answer(fl)
	return fl
}

// answer sends the upstream's datagrams of a flow back to its client until the flow ends.
func (f *udpForwarder) answer(fl *udpFlow) {
	defer f.wg.Done()
	defer f.end(fl)
	buf := make([]byte, maxDatagram)
	for {
		_ = fl.conn.SetReadDeadline(time.Unix(0, fl.last.Load()).Add(f.idle))
		n, err := fl.conn.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) && time.Since(time.Unix(0, fl.last.Load())) < f.idle {
			continue // the client sent more meanwhile
		}
		if err != nil {
			return
		}
		fl.last.Store(time.Now().UnixNano())
		if _, err := f.pc.WriteToUDP(buf[:n], fl.client); err != nil && errors.Is(err, net.ErrClosed) {
			return
		}
	}
}

// end forgets a flow (if it is still the client's) and closes its socket.
func (f *udpForwarder) end(fl *udpFlow) {
	f.mu.Lock()
	if cur, ok := f.flows[fl.client.String()]; ok && cur == fl {
		delete(f.flows, fl.client.String())
	}
	f.mu.Unlock()
	fl.conn.Close()
}

// Close stops receiving, ends every flow and waits for the forwarder's goroutines.
func (f *udpForwarder) Close() {
	_ = f.pc.Close()
	f.mu.Lock()
	flows := f.flows
	f.flows = nil
	f.mu.Unlock()
	for _, fl := range flows {
		fl.conn.Close()
	}
	f.wg.Wait()
}
