package testsupport

import (
	"os"
	"path/filepath"

	"github.com/google/go-cmp/cmp"
)

// GeneratedFile checks a file the repository keeps generated (a reference under docs/): with
// update it writes got to rel (a path from the repository root); otherwise it fails when the
// file differs from got, saying to run regenerate.
func GeneratedFile(t TB, rel string, got []byte, update bool, regenerate string) {
	t.Helper()
	path := filepath.Join(RepoRoot(), rel)
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run `%s` (or make generate)", err, regenerate)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Fatalf("%s is stale: run `%s` (or make generate) (-file +generated):\n%s", rel, regenerate, d)
	}
}
