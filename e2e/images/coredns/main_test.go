package main

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/miekg/dns"
)

// corefile is the Corefile of the Gateway API conformance suite's coredns Deployment.
const corefile = `.:53 {
    forward . 8.8.8.8 9.9.9.9
    log
    errors
}
foo.bar.com:53 {
  whoami
}
`

// TestStandInAnswersTheSuitesQueries: a query for foo.bar.com is answered with the client's
// address and port (whoami), one for a name only `forward` would answer fails (SERVFAIL: the
// played cluster has no network to forward to), and the Corefile's port is read.
func TestStandInAnswersTheSuitesQueries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(path, []byte(corefile), 0o600); err != nil {
		t.Fatal(err)
	}
	blocks, err := readCorefile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 || blocks[1].zone != "foo.bar.com." || blocks[1].port != "53" {
		t.Fatalf("read %+v, want the zones . and foo.bar.com. on port 53", blocks)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: handler{blocks}}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })

	ask := func(name string) (*dns.Msg, *net.UDPAddr) {
		t.Helper()
		c, err := net.Dial("udp", pc.LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		conn := &dns.Conn{Conn: c}
		if err := conn.WriteMsg(q); err != nil {
			t.Fatal(err)
		}
		r, err := conn.ReadMsg()
		if err != nil {
			t.Fatal(err)
		}
		return r, c.LocalAddr().(*net.UDPAddr)
	}
	r, me := ask("foo.bar.com.")
	if r.Rcode != dns.RcodeSuccess || len(r.Extra) != 2 {
		t.Fatalf("whoami answered %v", r)
	}
	a, ok := r.Extra[0].(*dns.A)
	srvRR, ok2 := r.Extra[1].(*dns.SRV)
	if !ok || !ok2 || !a.A.Equal(me.IP) || int(srvRR.Port) != me.Port || srvRR.Hdr.Name != "_udp.foo.bar.com." {
		t.Errorf("whoami answered %v, want A %s and SRV _udp.foo.bar.com. port %d", r.Extra, me.IP, me.Port)
	}
	if r, _ := ask("example.org."); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("a name to forward got %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
}

func TestCorefileErrors(t *testing.T) {
	for name, text := range map[string]string{
		"plugin outside a block": "whoami\n",
		"block not closed":       "foo.bar.com:53 {\n whoami\n",
	} {
		path := filepath.Join(t.TempDir(), "Corefile")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := readCorefile(path); err == nil {
			t.Errorf("%s: read without an error", name)
		}
	}
}
