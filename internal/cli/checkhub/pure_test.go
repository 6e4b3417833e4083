package checkhub

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"

	"kubelb.dev/kubelb/internal/cli"
)

func TestFlagValue(t *testing.T) {
	args := []string{"/kubelb", "--envoy-port-range=20000-20099", "--address-provider", "ipam", "--debug"}
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{
		{"envoy-port-range", "20000-20099", true},
		{"address-provider", "ipam", true},
		{"address-provider-class", "", false},
		{"debug", "", false},
	} {
		if got, ok := flagValue(args, tc.name); got != tc.want || ok != tc.ok {
			t.Errorf("flagValue(%s) = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// TestCRDDifference: a CRD that does not serve a version of the plugin's, or serves it with
// another schema, differs; the plugin's own CRD does not.
func TestCRDDifference(t *testing.T) {
	known, err := KnownCRDs()
	if err != nil || len(known) == 0 {
		t.Fatalf("KnownCRDs: %d, %v", len(known), err)
	}
	want := &known[0]
	if d := crdDifference(want, want.DeepCopy()); d != "" {
		t.Errorf("the plugin's own CRD differs: %s", d)
	}
	older := want.DeepCopy()
	for k := range older.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties {
		delete(older.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties, k)
		break
	}
	if d := crdDifference(want, older); d != "another schema of "+want.Spec.Versions[0].Name {
		t.Errorf("a CRD with a field less: %q", d)
	}
	unserved := want.DeepCopy()
	unserved.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{}
	if d := crdDifference(want, unserved); d != want.Spec.Versions[0].Name+" not served" {
		t.Errorf("a CRD serving nothing: %q", d)
	}
}

func TestPrint(t *testing.T) {
	var out bytes.Buffer
	failed := Print(&out, []Check{
		{Name: "a", Status: Pass, Detail: "fine", Hint: "never shown"},
		{Name: "b", Status: Fail, Detail: "broken", Hint: "fix it"},
		{Name: "c", Status: Warn, Detail: "odd", Hint: "look"},
		{Name: "d", Status: Skip, Detail: "not checked"},
	})
	want := "✓ a: fine\n✗ b: broken\n    → fix it\n! c: odd\n    → look\n- d: not checked\n"
	if out.String() != want || failed != 1 {
		t.Errorf("Print wrote %q (failed %d), want %q (1)", out.String(), failed, want)
	}
}

// TestUnreachableHub: a hub that does not answer is one failed check, not one per check.
func TestUnreachableHub(t *testing.T) {
	c, err := cli.NewClient(&rest.Config{Host: "https://127.0.0.1:1", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	checks := Run(context.Background(), c, Options{ManagerNamespace: "kubelb", Now: time.Now()})
	if len(checks) != 1 || checks[0].Name != "hub" || checks[0].Status != Fail || !strings.Contains(checks[0].Detail, "connection refused") {
		t.Errorf("checks of an unreachable hub: %+v", checks)
	}
}
