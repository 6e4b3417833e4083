package install_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelb.dev/kubelb/e2e/realcluster"
	"kubelb.dev/kubelb/internal/testsupport"
)

// pluginTimeout bounds each run of the plugin.
const pluginTimeout = 2 * time.Minute

// plugin runs the built kubectl-kubelb against the installation.
type plugin struct {
	t          *testing.T
	bin        string
	kubeconfig string
	home       string
}

// run runs the plugin with args; it returns its stdout and stderr together, and its exit code.
func (p *plugin) run(args ...string) (string, int) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pluginTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.bin, append([]string{"--kubeconfig", p.kubeconfig}, args...)...)
	cmd.Env = []string{"HOME=" + p.home, "PATH=" + os.Getenv("PATH")}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		p.t.Fatalf("kubectl kubelb %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	p.t.Logf("kubectl kubelb %s (exit %d, %s):\n%s", strings.Join(args, " "), code, time.Since(start).Round(time.Millisecond), out.String())
	return out.String(), code
}

// expect runs the plugin and checks its exit code and that its output holds each of want.
func (p *plugin) expect(code int, args []string, want ...string) string {
	p.t.Helper()
	out, got := p.run(args...)
	if got != code {
		p.t.Errorf("kubectl kubelb %s: exit %d, want %d", strings.Join(args, " "), got, code)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			p.t.Errorf("kubectl kubelb %s: output lacks %q", strings.Join(args, " "), w)
		}
	}
	return out
}

// expectWithin is expect for a state the hub reaches on its own after the traffic checks: the
// BackendsReachable verdict follows the Envoy replicas' health reports, which lag their
// first failed checks (made before the backend Pods were Ready). It runs the plugin until it
// exits with code and its output holds each of want, at most for within (then expect's
// errors), and logs how long that took.
func (p *plugin) expectWithin(within time.Duration, code int, args []string, want ...string) string {
	p.t.Helper()
	start := time.Now()
	for {
		out, got := p.run(args...)
		ok := got == code
		for _, w := range want {
			ok = ok && strings.Contains(out, w)
		}
		if ok {
			p.t.Logf("kubectl kubelb %s: as wanted after %s", strings.Join(args, " "), time.Since(start).Round(time.Second))
			return out
		}
		if time.Since(start) > within {
			return p.expect(code, args, want...)
		}
		time.Sleep(3 * time.Second)
	}
}

// checkPlugin runs the built kubectl-kubelb against the installation of the quick start, as
// each persona would (contexts hub and shop of one kubeconfig): check hub and check tenant
// pass; status follows the quick start's Service and Gateway with every step ok; envoy
// config|clusters|stats reach a real Envoy pod by a port-forward through the hub's API
// server and name the tenant objects behind Envoy's names; sysdump's archive holds the
// Envoy dumps and the manager pods' logs and no byte of a Secret's data.
func checkPlugin(t *testing.T, hub *realcluster.Cluster, kubeconfig, home string) {
	t.Helper()
	start := time.Now()
	p := &plugin{t: t, bin: testsupport.BuildBinary(t, "./cmd/kubectl-kubelb"), kubeconfig: kubeconfig, home: home}
	t.Logf("TIMING %-40s %s", "plugin build", time.Since(start).Round(time.Millisecond))

	p.expect(0, []string{"--context", "hub", "check", "hub"},
		"✓ manager: kubelb/kubelb-manager: 2 of 2 replicas ready", "✓ leader: ", "✓ tenant shop: Ready; Envoy fleet ")
	// The chart's ccm sends ExternalIP, falling back to InternalIP: these nodes have only the
	// latter.
	p.expect(0, []string{"--context", "shop", "check", "tenant"},
		"✓ ccm Deployment: kubelb/", "✓ hub reachable", "✓ hub permissions", "✓ ccm lease", "✓ node addresses: 1 of 1 serving node(s) without an ExternalIP address are sent by the ccm's fallback")
	p.expectWithin(time.Minute, 0, []string{"--context", "shop", "-n", "default", "status", "svc/backend"},
		"✓ hub accepted", "✓ hub address", "✓ Envoy accepted", "✓ tenant address", "every step is ok")
	p.expect(0, []string{"--context", "shop", "-n", "default", "status", "gateway/shop"},
		"✓ hub Route", "✓ hub address", "✓ Envoy accepted", "every step is ok")

	// Envoy's names mapped back to the tenant objects: the LoadBalancer of Service
	// default/backend and the Route of Gateway default/shop.
	p.expect(0, []string{"--context", "hub", "envoy", "config", "shop"}, "Envoy pod tenant-shop/", "(Service default/backend)",
		"(Gateway.gateway.networking.k8s.io default/shop)", "(HTTPRoute.gateway.networking.k8s.io default/web)", "(GRPCRoute.gateway.networking.k8s.io default/health)")
	// Every node healthy in every Envoy pod: a pod whose first check of the NodePort came
	// before the backend Pods were Ready checks again at the cluster's interval (5 s), idle
	// or not (TestEnvoyRechecksAnIdleClustersUnhealthyNodeAtItsInterval); the traffic checks
	// may have gone through the other pod.
	p.expectWithin(time.Minute, 0, []string{"--context", "hub", "envoy", "clusters", "shop"}, "(Service default/backend)")
	p.expect(0, []string{"--context", "hub", "envoy", "stats", "shop", "--filter", "downstream_cx_total"},
		"(Service default/backend)", "(Gateway.gateway.networking.k8s.io default/shop)")

	archive := filepath.Join(t.TempDir(), "sysdump.tar.gz")
	p.expect(0, []string{"--context", "hub", "sysdump", "--envoy", "-o", archive}, "wrote "+archive)
	checkSysdump(t, hub, archive)
	t.Logf("TIMING %-40s %s", "kubectl kubelb against the installation", time.Since(start).Round(time.Millisecond))
}

// checkSysdump checks the archive: the Envoy config dump, clusters and stats of the tenant's
// fleet, the logs of both manager pods (the leader named), and no Secret's data of the
// manager's and the tenant's namespaces (certificates aside), raw or in base64.
func checkSysdump(t *testing.T, hub *realcluster.Cluster, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	gz, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name[strings.Index(h.Name, "/")+1:]] = string(b)
	}
	has := func(prefix, suffix, holds string) {
		for name, content := range files {
			if strings.HasPrefix(name, prefix) && strings.HasSuffix(name, suffix) && strings.Contains(content, holds) {
				return
			}
		}
		t.Errorf("the archive has no %s…%s holding %q; it has %v", prefix, suffix, holds, keys(boolKeys(files)))
	}
	has("envoy/"+tenantNS+"/", "/config_dump.json", "dynamic_listeners")
	has("envoy/"+tenantNS+"/", "/clusters.json", "cluster_statuses")
	has("envoy/"+tenantNS+"/", "/stats.txt", "server.live")
	// The manager's logs: the leader's and the standby's (a manager logs at start-up).
	leader := leaderPod(t, hub)
	has("logs/"+leader+"-leader-", ".log", "starting")
	has("logs/", "-standby-manager.log", "starting")

	var all bytes.Buffer
	all.Write(raw)
	for _, content := range files {
		all.WriteString(content)
	}
	checked := 0
	for _, ns := range []string{"kubelb", tenantNS} {
		secrets, err := hub.Client.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets.Items {
			for key, value := range s.Data {
				// Certificates are public (Envoy's config dump shows them); too short a
				// value cannot be told from other text.
				if strings.HasSuffix(key, ".crt") || len(value) < 16 {
					continue
				}
				checked++
				for _, form := range [][]byte{value, []byte(base64.StdEncoding.EncodeToString(value))} {
					if bytes.Contains(all.Bytes(), form) {
						t.Errorf("the archive holds the data of Secret %s/%s key %s", ns, s.Name, key)
					}
				}
			}
		}
	}
	t.Logf("sysdump: %d files, %d bytes; none of %d Secret values of kubelb and %s in it", len(files), len(raw), checked, tenantNS)
}

func boolKeys(m map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}
