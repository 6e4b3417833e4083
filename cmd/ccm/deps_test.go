package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCCMDoesNotLinkTheHub: the ccm runs in tenant clusters and links none of the hub's
// translation (internal/translate, internal/ir, internal/xds) or controllers
// (internal/manager). What both binaries share about hub objects is in internal/hubnames.
func TestCCMDoesNotLinkTheHub(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 || !strings.HasSuffix(deps[len(deps)-1], "/cmd/ccm") {
		t.Fatalf("go list -deps listed no ccm: %q", deps)
	}
	for _, dep := range deps {
		for _, hub := range []string{"internal/translate", "internal/ir", "internal/xds", "internal/manager"} {
			if p := "kubelb.dev/kubelb/" + hub; dep == p || strings.HasPrefix(dep, p+"/") {
				t.Errorf("the ccm links %s", dep)
			}
		}
	}
}
