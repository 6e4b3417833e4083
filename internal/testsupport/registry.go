package testsupport

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// RegistryBinary is the path of the CNCF distribution registry ($KUBELB_REGISTRY, else
// bin/registry/<RegistryVersion>/registry, which `make tools` builds); the test fails when
// it is missing.
func RegistryBinary(t TB) string {
	t.Helper()
	return Tool(t, "KUBELB_REGISTRY", filepath.Join("registry", RegistryVersion, "registry"), "the distribution registry")
}

// Registry is a running OCI registry (the CNCF distribution registry) serving plain HTTP,
// without authentication, with its storage in the test's temporary folder.
type Registry struct {
	// Addr is host:port the registry serves on; images are pushed as Addr/<repository>.
	Addr string
	// Storage is the folder of the registry's blobs and manifests.
	Storage string
	// Process is the registry process.
	Process *Process
}

// registryConfig is the registry's configuration: filesystem storage, deletes allowed (tests
// clean up), access log off, HTTP on addr.
const registryConfig = `version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %q
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: %q
  secret: kubelb-test-registry
`

// StartRegistry starts the distribution registry on addr (e.g. Loopback(FreePort(t))), with
// its configuration file and storage in a temporary folder, and waits until GET /v2/
// answers 200. The registry is stopped when the test ends.
func StartRegistry(t TB, addr string) *Registry {
	t.Helper()
	bin := RegistryBinary(t)
	dir := t.TempDir()
	storage := filepath.Join(dir, "storage")
	cfg := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(registryConfig, storage, addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	// The registry reads OTEL_* and REGISTRY_* variables; the test's own must not leak in.
	proc := StartProcessWithEnv(t, "registry", bin, []string{"OTEL_TRACES_EXPORTER=none", "OTEL_SDK_DISABLED=true"}, "serve", cfg)
	r := &Registry{Addr: addr, Storage: storage, Process: proc}
	Eventually(t, time.Minute, "the registry at "+addr+" answering GET /v2/", func() error {
		if proc.Exited() {
			return fmt.Errorf("the registry exited:\n%s", proc.Tail(20))
		}
		_, err := HTTPGetOK("http://"+addr+"/v2/", 2*time.Second)
		return err
	})
	return r
}
