package helm

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/internal/testsupport"
)

// opaque values are documented as a whole: their content is Kubernetes' own (resources,
// affinity, ...), free-form (labels, annotations) or the Config spec.
var opaque = []string{"resources", "podSecurityContext", "securityContext", "nodeSelector", "tolerations",
	"affinity", "annotations", "labels", "podAnnotations", "podLabels", "imagePullSecrets", "extraArgs",
	"extraEnv", "config.envoyProxy", "config.loadBalancer", "config.ingress", "config.gatewayAPI", "config.dns",
	"config.certificates", "kubeAPI"}

// valuePaths flattens a values file into the dotted paths a user sets.
func valuePaths(prefix string, v any, out *[]string) {
	m, ok := v.(map[string]any)
	leaf := func(p string) bool {
		last := p[strings.LastIndex(p, ".")+1:]
		return slices.Contains(opaque, p) || slices.Contains(opaque, last)
	}
	if !ok || len(m) == 0 || (prefix != "" && leaf(prefix)) {
		*out = append(*out, prefix)
		return
	}
	for k, sub := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		valuePaths(p, sub, out)
	}
}

// TestInstallGuideListsEveryValue: docs/install.md documents every value of both charts.
func TestInstallGuideListsEveryValue(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join(testsupport.RepoRoot(), "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, chart := range []string{ManagerChart, CCMChart} {
		b, err := os.ReadFile(filepath.Join(ChartDir(chart), "values.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var values map[string]any
		if err := yaml.Unmarshal(b, &values); err != nil {
			t.Fatal(err)
		}
		var paths []string
		valuePaths("", values, &paths)
		slices.Sort(paths)
		for _, p := range paths {
			if !strings.Contains(string(doc), "`"+p+"`") {
				t.Errorf("docs/install.md does not document %s value `%s`", chart, p)
			}
		}
	}
}
