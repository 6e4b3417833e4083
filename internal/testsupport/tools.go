package testsupport

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// Versions of the real tools the tests run; the Makefile and hack/tools.sh build the same
// (TestVersionsMatchMakefile checks it).
const (
	EnvoyVersion = "1.40.0"
	HelmVersion  = "v3.22.0"
	// RegistryVersion is the CNCF distribution registry's (hack/tools.sh registry).
	RegistryVersion = "v3.1.2"
)

// RepoRoot is the root of the kubelb repository.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// FindTool returns the path of a tool: $env if set, else rel under the repository's bin/.
// It returns an error when nothing executable is there.
func FindTool(env, rel string) (string, error) {
	p := os.Getenv(env)
	if p == "" {
		p = filepath.Join(RepoRoot(), "bin", rel)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return p, err
	}
	if !fi.IsDir() && fi.Mode()&0o111 == 0 {
		return p, fmt.Errorf("%s is not executable", p)
	}
	return p, nil
}

// Tool is FindTool failing the test, with the command that builds the tool, when it is
// missing.
func Tool(t TB, env, rel, what string) string {
	t.Helper()
	p, err := FindTool(env, rel)
	if err != nil {
		t.Fatalf("%s not found at %s (%v): run `make tools` (or set %s)", what, p, err, env)
	}
	return p
}

// envoyRel is where `make tools` puts Envoy under bin/.
var envoyRel = filepath.Join("envoy", EnvoyVersion, "envoy")

// FindEnvoy returns the path of the Envoy binary ($KUBELB_ENVOY, else
// bin/envoy/<EnvoyVersion>/envoy), or an error when it is missing.
func FindEnvoy() (string, error) { return FindTool("KUBELB_ENVOY", envoyRel) }

// EnvoyBinary is the path of the real Envoy binary; the test fails when it is missing.
func EnvoyBinary(t TB) string {
	t.Helper()
	return Tool(t, "KUBELB_ENVOY", envoyRel, "envoy")
}

// HelmBinary is the path of the real Helm CLI ($KUBELB_HELM, else
// bin/helm/<HelmVersion>/helm); the test fails when it is missing.
func HelmBinary(t TB) string {
	t.Helper()
	return Tool(t, "KUBELB_HELM", filepath.Join("helm", HelmVersion, "helm"), "helm")
}
