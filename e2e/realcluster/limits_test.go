package realcluster_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"kubelb.dev/kubelb/e2e/realcluster"
)

// TestContainerDescriptorLimit boots a one-node cluster, runs the test image's Pods, and
// checks the open-files limit (RLIMIT_NOFILE) their processes got from containerd and runc:
// the CRI sets none, so every container has containerd's, soft and hard. The Envoy fleet's
// pods get the same; Envoy raises its soft limit to this hard one (docs/performance.md,
// "Descriptors of one Envoy").
func TestContainerDescriptorLimit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("real clusters need real root (kubelet and runc need real cgroups and namespaces): run the tests as root")
	}
	c := realcluster.Start(t, realcluster.Options{Name: "limits"})
	tars, err := realcluster.ImageTars()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ImportImage(tars[realcluster.HelloImage]); err != nil {
		t.Fatal(err)
	}
	deployHello(t, c)
	tasks, err := c.Ctr(0, "-n", "k8s.io", "tasks", "ls")
	if err != nil {
		t.Fatal(err)
	}
	containerd, err := c.NodeExec(0, "sh", "-c", "grep 'open files' /proc/$(pgrep -x containerd | head -1)/limits")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("containerd: %s", strings.TrimSpace(containerd))
	want, err := openFilesLimit(containerd)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, line := range strings.Split(tasks, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 3 || f[2] != "RUNNING" {
			continue
		}
		limits, err := c.NodeExec(0, "grep", "open files", "/proc/"+f[1]+"/limits")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("container task %s (pid %s): %s", f[0], f[1], strings.TrimSpace(limits))
		got, err := openFilesLimit(limits)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("container task %s: open files %s, want containerd's %s", f[0], got, want)
		}
		seen++
	}
	if seen == 0 {
		t.Fatalf("no running container:\n%s", tasks)
	}
}

// openFilesLimit reads "soft:hard" from the "Max open files" line of a /proc/<pid>/limits.
func openFilesLimit(limits string) (string, error) {
	for _, line := range strings.Split(limits, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "Max open files"); ok {
			if f := strings.Fields(rest); len(f) >= 2 {
				return f[0] + ":" + f[1], nil
			}
		}
	}
	return "", fmt.Errorf("no open files limit in %q", limits)
}
