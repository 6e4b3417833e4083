package envoygatewaycrds

import (
	"os"
	"regexp"
	"testing"

	"kubelb.dev/kubelb/internal/testsupport"
)

func TestBackendTrafficPolicy(t *testing.T) {
	crd, err := BackendTrafficPolicy()
	if err != nil {
		t.Fatal(err)
	}
	if crd.Name != "backendtrafficpolicies.gateway.envoyproxy.io" || crd.Spec.Names.Kind != "BackendTrafficPolicy" {
		t.Fatalf("got CRD %s of kind %s", crd.Name, crd.Spec.Names.Kind)
	}
	served := false
	for _, v := range crd.Spec.Versions {
		served = served || (v.Name == "v1alpha1" && v.Served)
	}
	if !served {
		t.Fatal("gateway.envoyproxy.io/v1alpha1 is not served")
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
