package realcluster_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/e2e/realcluster"
)

// registryVersion is the CNCF distribution registry `hack/tools.sh registry` builds.
const registryVersion = "v3.1.2"

// TestRealClusterPullsFromLabRegistry proves the nodes' registry configuration: a real
// distribution registry serves plain HTTP on the lab address (Options.Registry); node 0's
// containerd pushes the test image to it, and a Pod pinned to node 1, which never had the
// image, pulls it through containerd (imagePullPolicy Always) and answers on its Pod IP.
func TestRealClusterPullsFromLabRegistry(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("real clusters need real root (kubelet and runc need real cgroups and namespaces): run the tests as root")
	}
	registryAddr := realcluster.LabAddress + ":5000"
	storage := startRegistry(t, registryAddr)
	c := realcluster.Start(t, realcluster.Options{Name: "pull", Nodes: 2, Registry: registryAddr})
	tars, err := realcluster.ImageTars()
	if err != nil {
		t.Fatal(err)
	}
	ref := registryAddr + "/realcluster/hello:v1"
	for _, args := range [][]string{
		{"-n", "k8s.io", "images", "import", tars[realcluster.HelloImage]},
		{"-n", "k8s.io", "images", "tag", realcluster.HelloImage, ref},
		{"-n", "k8s.io", "images", "push", "--plain-http", ref},
	} {
		if _, err := c.Ctr(0, args...); err != nil {
			t.Fatal(err)
		}
	}
	if out, _ := c.Ctr(1, "-n", "k8s.io", "images", "ls", "-q"); strings.Contains(out, "hello") {
		t.Fatalf("node 1 already has the test image:\n%s", out)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pulled", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:                      c.NodeNames[1],
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			Containers: []corev1.Container{{
				Name: "hello", Image: ref, ImagePullPolicy: corev1.PullAlways,
				Env: []corev1.EnvVar{{Name: "POD_NAME", Value: "pulled"}},
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	var podIP string
	for podIP == "" {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, "pulled", metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			podIP = p.Status.PodIP
			break
		}
		if time.Now().After(deadline) {
			out, _ := c.Kubectl("describe", "pod", "pulled")
			t.Fatalf("the Pod pulling %s is not running after a minute (%v):\n%s", ref, err, out)
		}
		time.Sleep(250 * time.Millisecond)
	}
	// The lab routes every node's Pod range: the Pod answers on its own IP.
	url := fmt.Sprintf("http://%s:8080/", podIP)
	client := &http.Client{Timeout: 2 * time.Second}
	var answer string
	for i := 0; i < 40 && answer == ""; i++ {
		resp, err := client.Get(url)
		if err != nil {
			time.Sleep(250 * time.Millisecond)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answer = strings.TrimSpace(string(body))
	}
	if answer != "pod=pulled" {
		t.Errorf("GET %s: %q, want pod=pulled", url, answer)
	}
	out, err := c.Ctr(1, "-n", "k8s.io", "images", "ls", "-q")
	if err != nil || !strings.Contains(out, ref) {
		t.Errorf("node 1's images do not list %s (%v):\n%s", ref, err, out)
	}
	if _, err := os.Stat(filepath.Join(storage, "docker", "registry", "v2", "repositories", "realcluster", "hello")); err != nil {
		t.Errorf("the registry does not hold the pushed repository: %v", err)
	}
}

// startRegistry runs the distribution registry (plain HTTP, no authentication) on addr in
// the lab until the test ends and returns its storage folder.
func startRegistry(t *testing.T, addr string) string {
	t.Helper()
	bin := os.Getenv("KUBELB_REGISTRY")
	if bin == "" {
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(wd, "..", "..", "bin", "registry", registryVersion, "registry")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the distribution registry is missing (%v): run `make tools` (hack/tools.sh registry)", err)
	}
	dir := t.TempDir()
	storage := filepath.Join(dir, "storage")
	config := filepath.Join(dir, "config.yml")
	content := fmt.Sprintf("version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %q\nhttp:\n  addr: %q\n  secret: realcluster-test\n", storage, addr)
	if err := os.WriteFile(config, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", config)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = []string{"PATH=/usr/bin:/bin", "OTEL_TRACES_EXPORTER=none", "OTEL_SDK_DISABLED=true"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the registry: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); log.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return storage
			}
		}
		select {
		case err := <-done:
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("the registry exited (%v):\n%s", err, b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the registry at %s does not answer GET /v2/ after 30 s (last: %v)", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
