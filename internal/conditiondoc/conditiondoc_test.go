package conditiondoc

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/internal/testsupport"
)

var update = flag.Bool("update", false, "rewrite docs/conditions.md")

// TestReferenceUpToDate fails when docs/conditions.md differs from the table.
func TestReferenceUpToDate(t *testing.T) {
	testsupport.GeneratedFile(t, filepath.Join("docs", "conditions.md"), Render(), *update, "go test ./internal/conditiondoc -update")
}

// TestCRDsDescribeEveryCondition checks that the generated CRD schema describes, in the
// description of each kind's conditions field (what `kubectl explain` prints), every
// condition type and reason the manager writes there.
func TestCRDsDescribeEveryCondition(t *testing.T) {
	for _, k := range Kinds {
		t.Run(k.Kind, func(t *testing.T) {
			desc := conditionsDescription(t, k)
			for _, c := range k.Conditions {
				names := []string{c.Type}
				for _, r := range c.Reasons {
					names = append(names, r.Name)
				}
				if c.Problems {
					for _, r := range TranslationProblems {
						names = append(names, r.Name)
					}
				}
				for _, n := range names {
					if !regexp.MustCompile(`\b` + regexp.QuoteMeta(n) + `\b`).MatchString(desc) {
						t.Errorf("the CRD's %s description does not name %q (condition %s): describe it in the Go comment of the field in api/v1alpha1 and run make generate", k.Field, n, c.Type)
					}
				}
			}
		})
	}
}

// conditionsDescription reads the description of k's conditions field from its generated CRD.
func conditionsDescription(t *testing.T, k Kind) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testsupport.RepoRoot(), "config", "crd", "bases", "kubelb.k8c.io_"+k.Plural+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	s := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	for _, f := range strings.Split(k.Field, ".") {
		p, ok := s.Properties[f]
		if !ok {
			t.Fatalf("the CRD of %s has no field %s", k.Kind, k.Field)
		}
		s = &p
	}
	return s.Description
}
