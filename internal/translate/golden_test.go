package translate_test

import (
	"flag"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
)

var update = flag.Bool("update", false, "rewrite the golden testdata/*.ir.yaml and *.out.yaml files")

// TestGolden runs every testdata/*.in.yaml through the Layer 4 front end and compares the IR
// and problems with *.ir.yaml, then through the back end and compares the Envoy resources
// with *.out.yaml. Regenerate with: go test ./internal/translate -update
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
			r, err := translate.Run(in)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			cfg, problems := r.Config, r.Problems
			if diff := cmp.Diff(pristine, in, cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})); diff != "" {
				t.Fatalf("Translate modified its input (-before +after):\n%s", diff)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("the front end made an invalid IR: %v", err)
			}
			gotIR, err := translatetest.RenderIR(cfg, problems)
			if err != nil {
				t.Fatal(err)
			}
			// Translating twice gives the same IR: versions derived from it are stable.
			again, _ := translate.Run(in)
			if !cfg.Equal(again.Config) {
				t.Fatalf("Translate is not deterministic:\n%s", cmp.Diff(cfg, again))
			}

			_, all, res, err := translatetest.Pipeline(in)
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != len(problems) {
				t.Errorf("the back end reported problems on valid IR: %v", all[len(problems):])
			}
			translatetest.CheckResources(t, res)
			gotOut, err := translatetest.RenderResources(res, "listeners", "clusters", "endpoints")
			if err != nil {
				t.Fatal(err)
			}
			translatetest.Golden(t, filepath.Join("testdata", name+".ir.yaml"), gotIR, *update)
			translatetest.Golden(t, filepath.Join("testdata", name+".out.yaml"), gotOut, *update)
			// The status of every Route (Layer 7), as the ccm copies it back to the tenant.
			if gotStatus, err := translatetest.RenderStatuses(r.Routes); err != nil {
				t.Fatal(err)
			} else {
				translatetest.Golden(t, filepath.Join("testdata", name+".status.yaml"), gotStatus, *update)
			}
		})
	}
}

func TestTranslateRejectsBadListenerAddress(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"localhost", "0.0.0.0:80", "fe80::1%eth0", "300.1.1.1"} {
		if _, _, err := translate.Translate(translate.Input{Options: translate.Options{ListenerAddress: addr}}); err == nil {
			t.Errorf("listener address %q: no error", addr)
		}
	}
}
