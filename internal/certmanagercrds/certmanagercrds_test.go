package certmanagercrds

import (
	"os"
	"regexp"
	"testing"

	"kubelb.dev/kubelb/internal/testsupport"
)

func TestCertificate(t *testing.T) {
	crd, err := Certificate()
	if err != nil {
		t.Fatal(err)
	}
	if crd.Name != "certificates.cert-manager.io" || crd.Spec.Names.Kind != "Certificate" {
		t.Fatalf("got CRD %s of kind %s", crd.Name, crd.Spec.Names.Kind)
	}
	served := false
	for _, v := range crd.Spec.Versions {
		served = served || (v.Name == "v1" && v.Served)
	}
	if !served {
		t.Fatal("cert-manager.io/v1 is not served")
	}
}

// TestVersionMatchesMakefile keeps Version equal to the Makefile's CERT_MANAGER_VERSION, from
// which `make generate` copies the CRD.
func TestVersionMatchesMakefile(t *testing.T) {
	raw, err := os.ReadFile(testsupport.RepoRoot() + "/Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CERT_MANAGER_VERSION\s*[:?]?=\s*(\S+)`).FindSubmatch(raw)
	if m == nil || string(m[1]) != Version {
		t.Fatalf("Makefile CERT_MANAGER_VERSION %q, Version %q", m, Version)
	}
}
