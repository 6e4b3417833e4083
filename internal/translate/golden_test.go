package translate_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
)

var update = flag.Bool("update", false, "rewrite the golden testdata/*.out.yaml files")

// TestGolden translates every testdata/*.in.yaml and compares the result with the matching
// *.out.yaml. Regenerate with: go test ./internal/translate -update
func TestGolden(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata/*.in.yaml")
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in, err := translatetest.LoadInput(file)
			if err != nil {
				t.Fatal(err)
			}
			// The manager hands Translate the informer cache's objects without a copy: it
			// must never modify its input.
			pristine, err := translatetest.LoadInput(file)
			if err != nil {
				t.Fatal(err)
			}
			out, err := translate.Translate(in)
			if err != nil {
				t.Fatalf("Translate: %v", err)
			}
			if diff := cmp.Diff(pristine, in); diff != "" {
				t.Fatalf("Translate modified its input (-before +after):\n%s", diff)
			}
			translatetest.CheckOutput(t, out)
			got, err := translatetest.Render(out)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			// Translating twice gives the same bytes: versions derived from the output are stable.
			again, err := translate.Translate(in)
			if err != nil {
				t.Fatal(err)
			}
			if got2, _ := translatetest.Render(again); string(got2) != string(got) {
				t.Fatalf("Translate is not deterministic:\n%s", cmp.Diff(string(got), string(got2)))
			}

			golden := filepath.Join("testdata", name+".out.yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/translate -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s differs from the golden file (-want +got); run with -update if intended:\n%s", golden, diff)
			}
		})
	}
}

func TestTranslateRejectsBadListenerAddress(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"localhost", "0.0.0.0:80", "fe80::1%eth0", "300.1.1.1"} {
		if _, err := translate.Translate(translate.Input{Options: translate.Options{ListenerAddress: addr}}); err == nil {
			t.Errorf("listener address %q: no error", addr)
		}
	}
}
