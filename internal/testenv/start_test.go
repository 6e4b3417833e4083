package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A control plane whose start fails after etcd and the API server run (here: a CRD the API
// server refuses) leaves no process behind: envtest itself does not stop them, and
// they outlived a CI run once.
func TestFailedStartLeavesNothingRunning(t *testing.T) {
	dir := t.TempDir()
	// Refused: a CRD's name must be <plural>.<group>.
	crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object}}
`
	if err := os.WriteFile(filepath.Join(dir, "widgets.yaml"), []byte(crd), 0o600); err != nil {
		t.Fatal(err)
	}
	before := children(t)
	if _, err := start(t, AssetsDir(t), "broken", Options{KubelbCRDsDir: dir}); err == nil {
		t.Fatal("a control plane whose CRD the API server refuses started")
	}
	for pid, cmd := range children(t) {
		if _, ok := before[pid]; !ok {
			t.Errorf("process %d (%s) still runs after the failed start", pid, cmd)
		}
	}
}

// children returns this process's child processes (pid → command name), from /proc.
func children(t *testing.T) map[int]string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	self := strconv.Itoa(os.Getpid())
	out := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after its closing ")".
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) > 2 && fields[1] == self && fields[0] != "Z" {
			out[pid] = s[strings.IndexByte(s, '(')+1 : i]
		}
	}
	return out
}
