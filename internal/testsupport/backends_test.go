package testsupport

import (
	"fmt"
	"net"
	"strings"
	"testing"
)

// TestBackendsAnswerRoundTrips starts one backend of every kind on 127.0.0.1 and checks its
// client helper gets an answer naming the node and Pod, that the backend counts it, and that
// it closes cleanly.
func TestBackendsAnswerRoundTrips(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind      string
		start     func(TB, string, Identity) *Backend
		roundTrip func(b *Backend) (Reply, error)
		message   string
		proto     string
	}{
		{"tcp", StartTCPBackend, func(b *Backend) (Reply, error) { return TCPRoundTrip(b.Addr, "hello tcp") }, "hello tcp", ""},
		{"udp", StartUDPBackend, func(b *Backend) (Reply, error) { return UDPRoundTrip(b.Addr, "hello udp") }, "hello udp", ""},
		{"http1", StartHTTPBackend, func(b *Backend) (Reply, error) { return HTTPRoundTrip(b.Addr, "/one") }, "/one", "HTTP/1.1"},
		{"h2c", StartH2CBackend, func(b *Backend) (Reply, error) { return H2CRoundTrip(b.Addr, "/two") }, "/two", "HTTP/2.0"},
		{"grpc", StartGRPCBackend, func(b *Backend) (Reply, error) { return GRPCRoundTrip(b.Addr) }, "", "HTTP/2.0"},
		{"tls",
			func(t TB, addr string, id Identity) *Backend { return StartTLSBackend(t, addr, id, "web.example.com") },
			func(b *Backend) (Reply, error) { return TLSRoundTrip(b.Addr, "web.example.com", b.CA, "/three") },
			"/three", "HTTP/2.0"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			id := Identity{Node: "node-" + tc.kind, Pod: "pod-" + tc.kind}
			b := tc.start(t, "127.0.0.1:0", id)
			if strings.HasSuffix(b.Addr, ":0") {
				t.Fatalf("Addr %s is not the real address", b.Addr)
			}
			for i := range 3 {
				r, err := tc.roundTrip(b)
				if err != nil {
					t.Fatalf("round trip %d: %v", i, err)
				}
				if r.Identity != id || r.Message != tc.message || r.Proto != tc.proto {
					t.Fatalf("reply %+v, want %s, message %q over %q", r, id, tc.message, tc.proto)
				}
			}
			if n := b.Requests(); n != 3 {
				t.Errorf("%d requests counted, want 3", n)
			}
			if n := b.Connections(); n < 1 || n > 3 {
				t.Errorf("%d connections counted, want 1 to 3", n)
			}
			b.Close()
			b.Close()
			if _, err := tc.roundTrip(b); err == nil {
				t.Error("a closed backend still answers")
			}
		})
	}
}

func TestTCPBackendReadsProxyProtocolV2(t *testing.T) {
	t.Parallel()
	b := StartTCPBackend(t, "127.0.0.1:0", Identity{Node: "n", Pod: "p"})
	if _, err := TCPRoundTripFrom("127.0.0.1", b.Addr, "plain"); err != nil {
		t.Fatal(err)
	}
	// A PROXY v2 header for TCP over IPv4 from 10.1.2.3:4567 to 10.9.9.9:80, then a line.
	hdr := append([]byte(nil), proxyV2Signature...)
	hdr = append(hdr, 0x21, 0x11, 0, 12, 10, 1, 2, 3, 10, 9, 9, 9, 0x11, 0xd7, 0, 80)
	c, err := net.DialTimeout("tcp", b.Addr, RoundTripTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(append(hdr, "proxied\n"...)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "n p proxied\n" {
		t.Fatalf("answer %q, %v", buf[:n], err)
	}
	if got := b.ProxySources(); len(got) != 1 || got[0] != "10.1.2.3:4567" {
		t.Errorf("ProxySources = %v", got)
	}
	if b.Unproxied() != 1 {
		t.Errorf("Unproxied = %d, want 1", b.Unproxied())
	}
}

func TestRoundTripsRejectStrangeAnswers(t *testing.T) {
	t.Parallel()
	for _, answer := range []string{"", "node-only", "n p other", " p hello"} {
		if r, err := parseEcho(answer, "hello"); err == nil {
			t.Errorf("parseEcho(%q) = %+v, want an error", answer, r)
		}
	}
	if _, err := HTTPRoundTrip("127.0.0.1:1", "no-slash"); err == nil {
		t.Error("a relative path was accepted")
	}
	if !strings.Contains(fmt.Sprint(Identity{Node: "a", Pod: "b"}), "a/b") {
		t.Error("Identity does not print as node/pod")
	}
}
