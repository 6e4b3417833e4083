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

// TestGolden runs every testdata/*.in.yaml through what the tenant's settings hold back
// (Hold) and the front ends and compares the IR and problems (the held objects' among them)
// with *.ir.yaml, then through the back end and compares the Envoy resources with
// *.out.yaml, and the Routes' statuses (the held ones' among them) with *.status.yaml.
// Regenerate with: go test ./internal/translate -update
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
			gathered, holds, err := translatetest.LoadCase(file)
			if err != nil {
				t.Fatal(err)
			}
			// The manager hands Hold and Translate the informer cache's objects without a
			// copy: they must never modify their input.
			pristine, _, err := translatetest.LoadCase(file)
			if err != nil {
				t.Fatal(err)
			}
			in, held := translate.Hold(gathered, holds)
			r, err := translate.Run(in)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			cfg, problems := r.Config, r.Problems
			if diff := cmp.Diff(pristine, gathered, cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})); diff != "" {
				t.Fatalf("Hold or Translate modified its input (-before +after):\n%s", diff)
			}
			if want, _ := translate.Hold(pristine, holds); !cmp.Equal(want, in, cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})) {
				t.Fatalf("Translate modified its input (-before +after):\n%s", cmp.Diff(want, in, cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})))
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("the front end made an invalid IR: %v", err)
			}
			// What the tenant's settings and limits hold back is reported beside what the
			// front end found.
			withHeld := held.With(r)
			gotIR, err := translatetest.RenderIR(cfg, withHeld.Problems)
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
			if gotStatus, err := translatetest.RenderStatuses(withHeld.Routes); err != nil {
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
