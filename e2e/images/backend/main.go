// Command backend is the test backend of the real-cluster tests, packed into an image by
// internal/ociimage.BackendImage: the backends of internal/testsupport (the same ones the
// in-process tests run) on the ports its flags give, each answering with the Pod's name
// (env POD_NAME) and node (env NODE_NAME): a TCP echo, a UDP echo, HTTP/1.1, h2c, gRPC (the
// standard health service) and HTTPS (a self-signed certificate made at start). A port of 0
// turns that backend off. Flags default to the environment variables named in their help.
// It runs until SIGTERM or SIGINT.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"kubelb.dev/kubelb/internal/testsupport"
)

func main() {
	tb := &procTB{}
	ports := map[string]*int{}
	port := func(name, env string, def int) {
		v := def
		if s := os.Getenv(env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				fmt.Fprintf(os.Stderr, "backend: %s=%q: not a port\n", env, s)
				os.Exit(2)
			}
			v = n
		}
		ports[name] = flag.Int(name+"-port", v, fmt.Sprintf("Port of the %s backend, 0 for none (env %s).", name, env))
	}
	port("tcp", "TCP_PORT", 9000)
	port("udp", "UDP_PORT", 0)
	port("http", "HTTP_PORT", 8080)
	port("h2c", "H2C_PORT", 0)
	port("grpc", "GRPC_PORT", 9090)
	port("https", "HTTPS_PORT", 8443)
	host, _ := os.Hostname()
	pod := flag.String("pod", envOr("POD_NAME", host), "Pod name every answer carries (env POD_NAME, else the host name).")
	node := flag.String("node", envOr("NODE_NAME", host), "Node name every answer carries (env NODE_NAME, else the host name).")
	bind := flag.String("address", os.Getenv("BIND_ADDRESS"), "IP the backends listen on; empty: every address (env BIND_ADDRESS).")
	names := flag.String("tls-server-names", envOr("TLS_SERVER_NAMES", "localhost"), "Comma-separated DNS names of the HTTPS certificate (env TLS_SERVER_NAMES).")
	flag.Parse()
	id := testsupport.Identity{Node: *node, Pod: *pod}
	start := map[string]func(addr string) *testsupport.Backend{
		"tcp":  func(a string) *testsupport.Backend { return testsupport.StartTCPBackend(tb, a, id) },
		"udp":  func(a string) *testsupport.Backend { return testsupport.StartUDPBackend(tb, a, id) },
		"http": func(a string) *testsupport.Backend { return testsupport.StartHTTPBackend(tb, a, id) },
		"h2c":  func(a string) *testsupport.Backend { return testsupport.StartH2CBackend(tb, a, id) },
		"grpc": func(a string) *testsupport.Backend { return testsupport.StartGRPCBackend(tb, a, id) },
		"https": func(a string) *testsupport.Backend {
			return testsupport.StartTLSBackend(tb, a, id, strings.Split(*names, ",")...)
		},
	}
	for _, kind := range []string{"tcp", "udp", "http", "h2c", "grpc", "https"} {
		if p := *ports[kind]; p != 0 {
			b := start[kind](net.JoinHostPort(*bind, strconv.Itoa(p)))
			fmt.Printf("backend: %s on %s as %s\n", kind, b.Addr, id)
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	s := <-sigs
	fmt.Printf("backend: stopping on %v\n", s)
	tb.teardown()
}

func envOr(env, def string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

// procTB lets the program run internal/testsupport's backends outside `go test`: cleanups
// run newest first at exit, and a fatal error exits 1.
type procTB struct {
	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

func (p *procTB) Helper() {}

func (p *procTB) Cleanup(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanups = append(p.cleanups, f)
}

func (p *procTB) TempDir() string {
	dir, err := os.MkdirTemp("", "backend-")
	if err != nil {
		p.Fatal(err)
	}
	p.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (p *procTB) Failed() bool { return p.failed }

func (p *procTB) Logf(format string, args ...any) { fmt.Printf(format+"\n", args...) }

func (p *procTB) Fatal(args ...any) { p.fail(fmt.Sprint(args...)) }

func (p *procTB) Fatalf(format string, args ...any) { p.fail(fmt.Sprintf(format, args...)) }

func (p *procTB) FailNow() { p.fail("failed") }

func (p *procTB) fail(msg string) {
	fmt.Fprintf(os.Stderr, "backend: %s\n", msg)
	p.mu.Lock()
	p.failed = true
	p.mu.Unlock()
	p.teardown()
	os.Exit(1)
}

func (p *procTB) teardown() {
	p.mu.Lock()
	cs := p.cleanups
	p.cleanups = nil
	p.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}
