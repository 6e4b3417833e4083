package testsupport

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
)

// The ports FreePort hands out. They lie outside three ranges that something else binds
// while a test runs:
//   - Linux's ephemeral range (ip_local_port_range, 32768-60999 by default), where the
//     kernel picks the local port of every outgoing connection and of every listen on port
//     0. A port picked there and closed again can be taken by a client connection before
//     the process it was picked for binds it; CI saw Envoy fail with "Address already in
//     use" on its ready listener.
//   - The Envoy listener ports the e2e manager allocates (10000-19999, the default of
//     --envoy-port-range).
//   - The NodePorts the API servers allocate (30000-32767), which the played kube-proxy
//     binds.
const (
	freePortMin = 20000
	freePortMax = 29999
)

var (
	freePortMu     sync.Mutex
	freePortIssued = map[int]bool{}
)

// FreePort returns a port that is free for both TCP and UDP on every one of ips (default
// 127.0.0.1) at the time of the call, and that this test process has not handed out before.
// It is drawn at random from 20000-29999, so that test processes running side by side rarely
// draw the same one, and so that no outgoing connection takes it before it is bound (see
// above). If the machine's ephemeral range overlaps that range, it falls back to a port the
// kernel picks.
func FreePort(t TB, ips ...string) int {
	t.Helper()
	if len(ips) == 0 {
		ips = []string{"127.0.0.1"}
	}
	freePortMu.Lock()
	defer freePortMu.Unlock()
	overlap := ephemeralOverlaps(freePortMin, freePortMax)
	for range 1000 {
		port := freePortMin + rand.IntN(freePortMax-freePortMin+1)
		if overlap {
			l, err := net.Listen("tcp", net.JoinHostPort(ips[0], "0"))
			if err != nil {
				t.Fatal(err)
			}
			port = l.Addr().(*net.TCPAddr).Port
			_ = l.Close()
		}
		if !freePortIssued[port] && portFree(port, ips) {
			freePortIssued[port] = true
			return port
		}
	}
	t.Fatal("no port free on all of", ips)
	return 0
}

// ephemeralOverlaps reports whether the kernel's ephemeral port range overlaps [lo, hi].
func ephemeralOverlaps(lo, hi int) bool {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return false
	}
	var min, max int
	if _, err := fmt.Sscan(string(b), &min, &max); err != nil {
		return false
	}
	return min <= hi && max >= lo
}

func portFree(port int, ips []string) bool {
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			_ = c.Close()
		}
	}()
	for _, ip := range ips {
		addr := net.JoinHostPort(ip, fmt.Sprint(port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return false
		}
		closers = append(closers, l)
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			return false
		}
		closers = append(closers, u)
	}
	return true
}
