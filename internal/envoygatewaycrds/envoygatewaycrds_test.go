package envoygatewaycrds

import (
	"os"
	"regexp"
	"testing"

	"kubelb.dev/kubelb/internal/testsupport"
)

func TestCRDs(t *testing.T) {
	crds, err := All()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"backendtrafficpolicies.gateway.envoyproxy.io": "BackendTrafficPolicy", "securitypolicies.gateway.envoyproxy.io": "SecurityPolicy",
		"clienttrafficpolicies.gateway.envoyproxy.io": "ClientTrafficPolicy"}
	if len(crds) != len(want) {
		t.Fatalf("got %d CRDs, want %d", len(crds), len(want))
	}
	for _, crd := range crds {
		if want[crd.Name] != crd.Spec.Names.Kind {
			t.Fatalf("got CRD %s of kind %s", crd.Name, crd.Spec.Names.Kind)
		}
		served := false
		for _, v := range crd.Spec.Versions {
			served = served || (v.Name == "v1alpha1" && v.Served)
		}
		if !served {
			t.Fatalf("%s: gateway.envoyproxy.io/v1alpha1 is not served", crd.Name)
		}
	}
}

// TestVersionMatchesMakefile keeps Version equal to the Makefile's ENVOY_GATEWAY_VERSION, from
// which `make generate` copies the CRD.
func TestVersionMatchesMakefile(t *testing.T) {
	raw, err := os.ReadFile(testsupport.RepoRoot() + "/Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ENVOY_GATEWAY_VERSION\s*[:?]?=\s*(\S+)`).FindSubmatch(raw)
	if m == nil || string(m[1]) != Version {
		t.Fatalf("Makefile ENVOY_GATEWAY_VERSION %q, Version %q", m, Version)
	}
}
