package translator_test

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/translator"
)

var update = flag.Bool("update", false, "rewrite the golden testdata/out files")

// TestGolden turns every testdata/in/<case>.yaml (IR) into Envoy resources and compares them
// with testdata/out/<case>.<type>.yaml, one file per xDS type (a type without resources has
// no file), the problems with <case>.problems.yaml, and the configuration of the tenant's
// rate-limit service (RateLimitConfig, in its file format) with <case>.ratelimit.yaml.
// Regenerate with:
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
				translatetest.Golden(t, filepath.Join("testdata", "out", name+"."+tf.Suffix+".yaml"), got, *update)
			}
			var p []byte
			if len(problems) > 0 {
				if p, err = yaml.Marshal(problems); err != nil {
					t.Fatal(err)
				}
			}
			translatetest.Golden(t, filepath.Join("testdata", "out", name+".problems.yaml"), p, *update)
			// The tenant's rate-limit service's configuration, in its file format.
			var rls []byte
			if c, err := translator.RateLimitConfig(cfg); err != nil {
				t.Fatal(err)
			} else if c != nil {
				rls = translator.RateLimitConfigYAML(c)
				if again, _ := translator.RateLimitConfig(cfg); string(translator.RateLimitConfigYAML(again)) != string(rls) {
					t.Fatal("RateLimitConfig is not deterministic")
				}
			}
			translatetest.Golden(t, filepath.Join("testdata", "out", name+".ratelimit.yaml"), rls, *update)
		})
	}
}

func TestTranslateRefusesInvalidIR(t *testing.T) {
	t.Parallel()
	cfg := &ir.Config{Listeners: []*ir.Listener{{Name: "l", Address: "0.0.0.0", Port: 80, Protocol: ir.ProtocolTCP, StatPrefix: "l", Cluster: "missing"}}}
	if _, _, err := translator.Translate(cfg); err == nil || !strings.Contains(err.Error(), `cluster "missing" does not exist`) {
		t.Fatalf("got %v, want an error naming the missing cluster", err)
	}
}
