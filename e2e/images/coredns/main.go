// Command coredns stands in for CoreDNS (registry.k8s.io/coredns/coredns) in the played
// cluster of the e2e and conformance harness only: the played kubelet runs it for Pods of
// that image (e2e/framework.CoreDNSPorts), since no container runtime runs there. It is no
// DNS server for anything else.
//
// It reads the Corefile named by -conf (CoreDNS's flag) just enough for the Gateway API
// conformance suite's coredns Deployment: each server block's zones, and the plugin
// `whoami`, which answers any query in its zone with the client's address (an A or AAAA
// record of the query's name) and port (an SRV record _udp.<name> or _tcp.<name>), as
// CoreDNS's does. A zone served by other plugins (`forward` and the like, which would need a
// network the played cluster has not) answers SERVFAIL; a name outside every zone REFUSED.
// It serves DNS over UDP on the port of the blocks (53), or on the port in the environment
// variable DNS_PORT, which the played kubelet sets (the Pod's network namespace is played by
// forwarding PodIP:53 there). It runs until SIGTERM or SIGINT.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/miekg/dns"
)

func main() {
	conf := flag.String("conf", "Corefile", "the Corefile to read")
	flag.Parse()
	blocks, err := readCorefile(*conf)
	if err != nil {
		fmt.Fprintln(os.Stderr, "coredns (stand-in):", err)
		os.Exit(1)
	}
	port := ""
	for _, b := range blocks {
		port = b.port
	}
	if p := os.Getenv("DNS_PORT"); p != "" {
		port = p
	}
	if port == "" {
		port = "53"
	}
	srv := &dns.Server{Addr: ":" + port, Net: "udp", Handler: handler{blocks}}
	go func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
		<-sigs
		_ = srv.Shutdown()
	}()
	fmt.Printf("coredns (stand-in): serving %d zones on udp :%s\n", len(blocks), port)
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "coredns (stand-in):", err)
		os.Exit(1)
	}
}

// block is one server block of a Corefile: a zone, its port and the plugins it runs.
type block struct {
	zone    string // fully qualified, e.g. "foo.bar.com." or "."
	port    string
	plugins []string
}

// readCorefile reads the server blocks of a Corefile: `zone[:port] ... {`, one plugin per
// line (its arguments and any block of options ignored), `}`.
func readCorefile(path string) ([]block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var blocks []block
	var open []int // the blocks of the server block being read
	depth := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "#"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" {
			continue
		}
		opens, closes := strings.HasSuffix(line, "{"), line == "}"
		switch {
		case closes:
			depth--
			if depth == 0 {
				open = nil
			}
		case depth == 0 && opens:
			for _, key := range strings.FieldsFunc(strings.TrimSuffix(line, "{"), func(r rune) bool { return r == ' ' || r == ',' || r == '\t' }) {
				zone, port := key, ""
				if h, p, err := net.SplitHostPort(key); err == nil {
					zone, port = h, p
				}
				zone = strings.TrimPrefix(zone, "dns://")
				open = append(open, len(blocks))
				blocks = append(blocks, block{zone: dns.Fqdn(zone), port: port})
			}
			depth++
		case depth == 0:
			return nil, fmt.Errorf("%s: %q outside a server block", path, line)
		default:
			if depth == 1 {
				plugin := strings.Fields(strings.TrimSuffix(line, "{"))[0]
				for _, i := range open {
					blocks[i].plugins = append(blocks[i].plugins, plugin)
				}
			}
			if opens {
				depth++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if depth != 0 {
		return nil, fmt.Errorf("%s: a block is not closed", path)
	}
	return blocks, nil
}

type handler struct{ blocks []block }

// zoneOf is the block of the longest zone that holds name, or nil.
func (h handler) zoneOf(name string) *block {
	var best *block
	for i := range h.blocks {
		b := &h.blocks[i]
		if dns.IsSubDomain(b.zone, name) && (best == nil || dns.CountLabel(b.zone) > dns.CountLabel(best.zone)) {
			best = b
		}
	}
	return best
}

func (h handler) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	if len(r.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		_ = w.WriteMsg(m)
		return
	}
	q := r.Question[0]
	b := h.zoneOf(q.Name)
	switch {
	case b == nil:
		m.Rcode = dns.RcodeRefused
	case slices.Contains(b.plugins, "whoami"):
		whoami(m, q.Name, w.RemoteAddr())
	default:
		m.Rcode = dns.RcodeServerFailure
	}
	fmt.Printf("%s %s %s %s\n", w.RemoteAddr(), dns.TypeToString[q.Qtype], q.Name, dns.RcodeToString[m.Rcode])
	_ = w.WriteMsg(m)
}

// whoami answers with the client's address and port, as CoreDNS's whoami plugin does.
func whoami(m *dns.Msg, name string, remote net.Addr) {
	var ip net.IP
	var port int
	proto := "udp"
	switch a := remote.(type) {
	case *net.UDPAddr:
		ip, port = a.IP, a.Port
	case *net.TCPAddr:
		ip, port, proto = a.IP, a.Port, "tcp"
	}
	hdr := dns.RR_Header{Name: name, Class: dns.ClassINET}
	if v4 := ip.To4(); v4 != nil {
		hdr.Rrtype = dns.TypeA
		m.Extra = append(m.Extra, &dns.A{Hdr: hdr, A: v4})
	} else {
		hdr.Rrtype = dns.TypeAAAA
		m.Extra = append(m.Extra, &dns.AAAA{Hdr: hdr, AAAA: ip})
	}
	m.Extra = append(m.Extra, &dns.SRV{
		Hdr:  dns.RR_Header{Name: "_" + proto + "." + name, Rrtype: dns.TypeSRV, Class: dns.ClassINET},
		Port: uint16(port), Target: ".",
	})
}
