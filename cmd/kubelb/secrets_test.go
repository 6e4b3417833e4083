package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// auditPolicy records every request on Secrets, without bodies.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    resources: [{group: "", resources: ["secrets"]}]
  - level: None
`

// TestManagerWatchesOnlyKubelbSecrets runs the real binary against a real API server that
// writes an audit log of every request on Secrets: once the manager runs (leader, every
// controller started), each of its lists and watches of Secrets is selected by
// kubelb.k8c.io/managed-by=kubelb, so no cache of the manager holds another Secret.
func TestManagerWatchesOnlyKubelbSecrets(t *testing.T) {
	dir := t.TempDir()
	policy, auditLog := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: testenv.AssetsDir(t),
		ErrorIfCRDPathMissing: true,
		CRDDirectoryPaths:     []string{filepath.Join(testsupport.RepoRoot(), "config", "crd", "bases")},
	}
	env.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", policy).Set("audit-log-path", auditLog).Set("audit-log-mode", "blocking")
	if _, err := env.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	const user = "kubelb-manager-under-audit"
	u, err := env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	probePort, xdsPort := testsupport.FreePort(t), testsupport.FreePort(t)
	proc := testsupport.StartProcess(t, "kubelb", testsupport.BuildBinary(t, "./cmd/kubelb"),
		"--kubeconfig", kubeconfig, "--namespace", "default", "--metrics-addr", "0",
		"--health-probe-bind-address", testsupport.Loopback(probePort), "--listen-address", testsupport.Loopback(xdsPort))
	testsupport.WaitHTTP200(t, proc, "http://"+testsupport.Loopback(probePort)+"/readyz", time.Minute)

	managed := kubelbv1alpha1.LabelManagedBy + "=" + kubelbv1alpha1.LabelManagedByValue
	// The Secret caches of the Tenant, LoadBalancer, SyncSecret and Envoy control plane
	// controllers (the leader runs them all): four watches (streaming their initial list, or
	// after a list).
	const wantWatches = 4
	testsupport.Eventually(t, time.Minute, fmt.Sprintf("the manager's %d Secret caches to watch", wantWatches), func() error {
		b, err := os.ReadFile(auditLog)
		if err != nil {
			return err
		}
		watches := 0
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev struct {
				Verb       string `json:"verb"`
				RequestURI string `json:"requestURI"`
				User       struct {
					Username string `json:"username"`
				} `json:"user"`
			}
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				return fmt.Errorf("audit line %q: %w", sc.Text(), err)
			}
			if ev.User.Username != user || (ev.Verb != "list" && ev.Verb != "watch") {
				continue
			}
			uri, err := url.Parse(ev.RequestURI)
			if err != nil {
				return err
			}
			if !slices.Contains(strings.Split(uri.Query().Get("labelSelector"), ","), managed) {
				t.Fatalf("the manager %s Secrets without selecting kubelb.k8c.io/managed-by=kubelb: %s", ev.Verb, ev.RequestURI)
			}
			if ev.Verb == "watch" {
				watches++
			}
		}
		if watches < wantWatches {
			return fmt.Errorf("%d watches of Secrets so far", watches)
		}
		return nil
	})
}
