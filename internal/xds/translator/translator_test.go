package translator_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/translator"
)

var update = flag.Bool("update", false, "rewrite the golden testdata/out files")

// TestGolden turns every testdata/in/<case>.yaml (IR) into Envoy resources and compares them
// with testdata/out/<case>.<type>.yaml, one file per xDS type (a type without resources has
// no file), and the problems with <case>.problems.yaml. Regenerate with:
// go test ./internal/xds/translator -update
func TestGolden(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/in/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/in/*.yaml (%v)", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg, err := translatetest.LoadIR(file)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Normalize()
			res, problems, err := translator.Translate(cfg)
			if err != nil {
				t.Fatal(err)
			}
			translatetest.CheckResources(t, res)
			again, _, _ := translator.Translate(cfg)
			for _, tf := range translatetest.TypeFiles {
				got, err := translatetest.RenderType(res, tf.TypeURL)
				if err != nil {
					t.Fatal(err)
				}
				if b, _ := translatetest.RenderType(again, tf.TypeURL); string(b) != string(got) {
					t.Fatalf("%s: Translate is not deterministic", tf.Suffix)
				}
				if len(res[tf.TypeURL]) == 0 {
					got = nil
				}
				compare(t, filepath.Join("testdata", "out", name+"."+tf.Suffix+".yaml"), got)
			}
			var p []byte
			if len(problems) > 0 {
				if p, err = yaml.Marshal(problems); err != nil {
					t.Fatal(err)
				}
			}
			compare(t, filepath.Join("testdata", "out", name+".problems.yaml"), p)
		})
	}
}

// compare checks got against a golden file; nil means the file must not exist.
func compare(t *testing.T, golden string, got []byte) {
	t.Helper()
	if *update {
		if got == nil {
			_ = os.Remove(golden)
			return
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if got == nil {
		if err == nil {
			t.Errorf("%s exists but the case produced nothing for it", golden)
		}
		return
	}
	if err != nil {
		t.Fatalf("%v (run go test ./internal/xds/translator -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got); run with -update if intended:\n%s", golden, diff)
	}
}

func TestTranslateRefusesInvalidIR(t *testing.T) {
	t.Parallel()
	cfg := &ir.Config{Listeners: []*ir.Listener{{Name: "l", Address: "0.0.0.0", Port: 80, Protocol: ir.ProtocolTCP, StatPrefix: "l", Cluster: "missing"}}}
	if _, _, err := translator.Translate(cfg); err == nil || !strings.Contains(err.Error(), `cluster "missing" does not exist`) {
		t.Fatalf("got %v, want an error naming the missing cluster", err)
	}
}
