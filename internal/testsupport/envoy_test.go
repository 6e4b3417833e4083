package testsupport

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// envoyOrSkip returns the Envoy binary, skipping the test when it is absent (CI has it).
func envoyOrSkip(t *testing.T) {
	t.Helper()
	if p, err := FindEnvoy(); err != nil {
		t.Skipf("the Envoy binary is absent (%s: %v): run `make tools` or set KUBELB_ENVOY", p, err)
	}
}

// TestEnvoyStartsWithStaticBootstrap validates and starts a real Envoy from a minimal static
// bootstrap (admin on port 0, one TCP proxy listener to a TCP backend) and uses the admin
// helpers: /ready, listeners, stats, config_dump.
func TestEnvoyStartsWithStaticBootstrap(t *testing.T) {
	t.Parallel()
	envoyOrSkip(t)
	backend := StartTCPBackend(t, "127.0.0.1:0", Identity{Node: "node-1", Pod: "echo-1"})
	listener := FreePort(t)
	bootstrap := fmt.Sprintf(`admin:
  address: {socket_address: {address: 127.0.0.1, port_value: 0}}
static_resources:
  listeners:
  - name: proxy
    address: {socket_address: {address: 127.0.0.1, port_value: %d}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
          stat_prefix: proxy
          cluster: backend
  clusters:
  - name: backend
    type: STATIC
    connect_timeout: 1s
    load_assignment:
      cluster_name: backend
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %s}}}
`, listener, portOf(t, backend.Addr))
	if err := ValidateEnvoy(t, []byte(bootstrap), "--service-node", "validate"); err != nil {
		t.Fatal(err)
	}
	if err := ValidateEnvoy(t, []byte("static_resources: {listeners: [{name: x}]}")); err == nil {
		t.Error("an invalid bootstrap passed validation")
	}

	e := StartEnvoy(t, "envoy", []byte(bootstrap), EnvoyOptions{Node: "proxy-1", Concurrency: 1})
	if regexp.MustCompile(`:0$`).MatchString(e.AdminAddr) {
		t.Fatalf("admin address %s is not the port Envoy picked", e.AdminAddr)
	}
	e.WaitReady(t, 30*time.Second)
	listeners, err := e.Listeners()
	if err != nil || len(listeners) != 1 || listeners[0] != (Listener{Name: "proxy", Address: Loopback(listener)}) {
		t.Fatalf("Listeners = %v, %v", listeners, err)
	}
	var reply Reply
	Eventually(t, 10*time.Second, "a TCP answer through Envoy", func() error {
		reply, err = TCPRoundTrip(Loopback(listener), "through envoy")
		return err
	})
	if reply.Node != "node-1" || reply.Pod != "echo-1" {
		t.Errorf("reply %+v, want node-1/echo-1", reply)
	}
	Eventually(t, 10*time.Second, "the connection in the stats", func() error {
		n, err := e.Stat("cluster.backend.upstream_cx_total")
		if err == nil && n < 1 {
			err = fmt.Errorf("upstream_cx_total %d", n)
		}
		return err
	})
	if _, err := e.Stat("no.such.stat"); err == nil {
		t.Error("Stat of a missing stat is no error")
	}
	var dump struct {
		Configs []map[string]any `json:"configs"`
	}
	if err := e.ConfigDump("", &dump); err != nil || len(dump.Configs) == 0 {
		t.Errorf("config_dump: %d configs, %v", len(dump.Configs), err)
	}
	e.Kill()
	if !e.Exited() {
		t.Error("Envoy still runs after Kill")
	}
}

func portOf(t *testing.T, addr string) string {
	t.Helper()
	m := regexp.MustCompile(`:(\d+)$`).FindStringSubmatch(addr)
	if m == nil {
		t.Fatalf("no port in %s", addr)
	}
	return m[1]
}

// TestVersionsMatchMakefile keeps the tool versions the tests look for equal to the ones the
// Makefile and hack/tools.sh build.
func TestVersionsMatchMakefile(t *testing.T) {
	t.Parallel()
	for _, f := range []struct{ file, pattern string }{
		{"Makefile", `(?m)^%s\s*\?=\s*(\S+)$`},
		{filepath.Join("hack", "tools.sh"), `(?m)^%s=\$\{%[1]s:-([^}]+)\}$`},
	} {
		b, err := os.ReadFile(filepath.Join(RepoRoot(), f.file))
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]string{"ENVOY_VERSION": EnvoyVersion, "HELM_VERSION": HelmVersion, "DISTRIBUTION_VERSION": RegistryVersion} {
			m := regexp.MustCompile(fmt.Sprintf(f.pattern, name)).FindSubmatch(b)
			if m == nil {
				t.Errorf("%s sets no %s", f.file, name)
				continue
			}
			if string(m[1]) != want {
				t.Errorf("%s has %s %s, the tests look for %s", f.file, name, m[1], want)
			}
		}
	}
}
