package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsRunDownTheLayers checks the layers of the module (non-test imports): the
// binaries and kubectl kubelb (cmd, internal/cli) use the controllers (internal/manager,
// internal/ccm), which use the shared packages (translation, naming, settings, quota…);
// nothing imports back up. The hub's controllers and the ccm's never import each other:
// what both sides share about hub objects is in internal/hubnames and internal/routekind.
// The generators of the condition and metric docs (conditiondoc, metricsdoc) read every
// controller's constants, like a command.
func TestImportsRunDownTheLayers(t *testing.T) {
	t.Parallel()
	const module = "kubelb.dev/kubelb/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	// layer of a package: 3 commands, 2 controllers (manager or ccm), 1 shared; "" outside
	// the module.
	layer := func(p string) (int, string) {
		rel, ok := strings.CutPrefix(p, module)
		if !ok {
			return 0, ""
		}
		for _, top := range []string{"cmd/", "e2e", "internal/cli/", "internal/conditiondoc", "internal/metricsdoc"} {
			if strings.HasPrefix(rel, top) {
				return 3, "command"
			}
		}
		for _, side := range []string{"internal/manager", "internal/ccm"} {
			if rel == side || strings.HasPrefix(rel, side+"/") {
				return 2, side
			}
		}
		return 1, "shared"
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 50 {
		t.Fatalf("go list listed %d packages", len(lines))
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		from, fromSide := layer(fields[0])
		for _, imp := range fields[1:] {
			to, toSide := layer(imp)
			switch {
			case to == 0:
			case to > from:
				t.Errorf("%s (%s) imports %s (%s): an import back up the layers", fields[0], fromSide, imp, toSide)
			case to == 2 && from == 2 && toSide != fromSide:
				t.Errorf("%s imports %s: the hub's controllers and the ccm's share only the shared packages", fields[0], imp)
			}
		}
	}
}
