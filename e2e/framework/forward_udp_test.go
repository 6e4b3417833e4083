package framework

import (
	"fmt"
	"net"
	"testing"
	"time"

	"kubelb.dev/kubelb/internal/testsupport"
)

// TestUDPForwarderFlows: the played UDP forwarding (kube-proxy's NodePorts, the hub load
// balancer, a Pod's network namespace) answers each client from the address it sent to,
// keeps a client's datagrams on the upstream its first one went to, shares new clients
// among the upstreams, and drops datagrams while it has none.
func TestUDPForwarderFlows(t *testing.T) {
	a := testsupport.StartUDPBackend(t, "127.0.0.1:0", testsupport.Identity{Node: "n", Pod: "a"})
	b := testsupport.StartUDPBackend(t, "127.0.0.1:0", testsupport.Identity{Node: "n", Pod: "b"})
	f, err := forwardUDP("127.0.0.1:0", []string{a.Addr, b.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	seen := map[string]int{}
	for i := range 10 {
		r, err := testsupport.UDPRoundTrip(f.Addr(), fmt.Sprintf("hello %d", i))
		if err != nil {
			t.Fatal(err)
		}
		seen[r.Pod]++
	}
	if seen["a"] != 5 || seen["b"] != 5 {
		t.Errorf("10 clients reached %v, want 5 each", seen)
	}

	c, err := net.Dial("udp", f.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first := ""
	for i := range 4 {
		r := udpPodOf(t, c, fmt.Sprintf("again %d", i))
		if first == "" {
			first = r
		}
		if r != first {
			t.Fatalf("datagram %d of one client answered by %s, the first by %s", i, r, first)
		}
	}

	f.setUpstreams(nil)
	if n := f.flowCount(); n != 0 {
		t.Errorf("%d flows left after their upstreams went, want none", n)
	}
	_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := c.Write([]byte("nobody")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 100)); err == nil {
		t.Errorf("an answer without upstreams")
	}
}

// TestUDPForwarderBoundsFlows: the table of flows holds at most its bound (a new client
// ends the least recently used flow) and forgets idle flows.
func TestUDPForwarderBoundsFlows(t *testing.T) {
	a := testsupport.StartUDPBackend(t, "127.0.0.1:0", testsupport.Identity{Node: "n", Pod: "a"})
	f, err := forwardUDPWith("127.0.0.1:0", []string{a.Addr}, 500*time.Millisecond, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range 5 {
		if _, err := testsupport.UDPRoundTrip(f.Addr(), fmt.Sprintf("hello %d", i)); err != nil {
			t.Fatal(err)
		}
		if n := f.flowCount(); n > 3 {
			t.Fatalf("%d flows after %d clients, want at most 3", n, i+1)
		}
	}
	testsupport.Eventually(t, 5*time.Second, "idle flows to end", func() error {
		if n := f.flowCount(); n != 0 {
			return fmt.Errorf("%d flows", n)
		}
		return nil
	})
	f.Close()
	again, err := net.ListenPacket("udp", f.Addr())
	if err != nil {
		t.Fatalf("the address is still taken after Close: %v", err)
	}
	again.Close()
}

// udpPodOf sends msg on c and returns the pod that echoed it.
func udpPodOf(t *testing.T, c net.Conn, msg string) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(testsupport.RoundTripTimeout))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1024)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	var node, pod string
	if _, err := fmt.Sscan(string(buf[:n]), &node, &pod); err != nil {
		t.Fatalf("answer %q: %v", buf[:n], err)
	}
	return pod
}
