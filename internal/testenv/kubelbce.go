package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/internal/testsupport"
)

// EnvKubeLBCECRDs names a folder with KubeLB CE's own CRD files (its chart's crds/, e.g. of
// release v1.4.3): tests of a hub with KubeLB CE's CRDs then use those instead of
// KubeLBCEAdditions taken off kubelb's.
const EnvKubeLBCECRDs = "KUBELB_CE_CRDS"

// KubeLBCEAdditions are the fields kubelb's CRDs add to KubeLB CE's (release v1.4.3), by
// CRD file and schema path (properties joined by dots). kubelb's CRDs without them declare
// what KubeLB CE's declare, for the fields kubelb's ccm and manager write; docs/migration.md
// lists them for users. (KubeLB CE's own files cannot be kept in this repository: see
// docs/testing.md.)
var KubeLBCEAdditions = map[string][]string{
	"kubelb.k8c.io_loadbalancers.yaml": {
		"spec.healthCheckNodePort", "spec.ipFamilies", "spec.ipFamilyPolicy", "spec.persistence", "spec.sourceRanges",
		"status.conditions", "status.observedGeneration", "status.service.ipFamilies",
	},
	"kubelb.k8c.io_routes.yaml":       {"spec.source.kubernetes.context"},
	"kubelb.k8c.io_tenantstates.yaml": {"status.rejections"},
	"kubelb.k8c.io_configs.yaml":      append([]string{"spec.envoyProxy.image"}, ceTenantAdditions...),
	"kubelb.k8c.io_tenants.yaml":      ceTenantAdditions,
}

var ceTenantAdditions = []string{
	"spec.allowedSteeringAnnotations", "spec.deniedAnnotations", "spec.dns.reservedDomains",
	"spec.endpointPolicy", "spec.envoyProxy.headerLimits",
	"spec.limits", "spec.loadBalancer.addressPool", "spec.loadBalancer.allocateNodePorts",
	"spec.loadBalancer.ipMode", "spec.loadBalancer.nodeSet", "spec.upstream",
}

// KubeLBCECRDs returns a folder of CRDs that declare what a KubeLB CE hub declares: the files
// of $KUBELB_CE_CRDS when set, else those of ../shared/fixtures/kubelb-ce/crds beside the
// repository when it exists, otherwise kubelb's CRDs (config/crd/bases) without
// KubeLBCEAdditions and without kinds KubeLB CE does not have. The second value says which.
func KubeLBCECRDs(t TB) (dir, origin string) {
	t.Helper()
	if d := os.Getenv(EnvKubeLBCECRDs); d != "" {
		return d, "KubeLB CE's own CRDs from " + d
	}
	// The steering repository's shared fixtures, beside this repository, may hold them.
	if d := filepath.Join(testsupport.RepoRoot(), "..", "shared", "fixtures", "kubelb-ce", "crds"); hasYAML(d) {
		return d, "KubeLB CE's own CRDs from " + d
	}
	dir = t.TempDir()
	src := filepath.Join(testsupport.RepoRoot(), "config", "crd", "bases")
	for file, paths := range KubeLBCEAdditions {
		raw, err := os.ReadFile(filepath.Join(src, file))
		if err != nil {
			t.Fatal(err)
		}
		out, err := withoutFields(raw, paths)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, file := range []string{"kubelb.k8c.io_addresses.yaml", "kubelb.k8c.io_syncsecrets.yaml"} {
		raw, err := os.ReadFile(filepath.Join(src, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, "kubelb's CRDs without kubelb's additions (KubeLB CE v1.4.3's fields)"
}

// withoutFields removes the schema of each path from every version of a CRD file.
func withoutFields(raw []byte, paths []string) ([]byte, error) {
	var crd map[string]any
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		return nil, err
	}
	versions, _, _ := unstructured.NestedSlice(crd, "spec", "versions")
	for i := range versions {
		v, _ := versions[i].(map[string]any)
		for _, p := range paths {
			fields := []string{"schema", "openAPIV3Schema"}
			parts := strings.Split(p, ".")
			for _, part := range parts[:len(parts)-1] {
				fields = append(fields, "properties", part)
			}
			parent, ok, _ := unstructured.NestedMap(v, fields...)
			props, _ := parent["properties"].(map[string]any)
			last := parts[len(parts)-1]
			if _, has := props[last]; !ok || !has {
				return nil, fmt.Errorf("no %s in the schema of version %v", p, v["name"])
			}
			delete(props, last)
			if req, ok := parent["required"].([]any); ok {
				kept := req[:0]
				for _, r := range req {
					if r != last {
						kept = append(kept, r)
					}
				}
				parent["required"] = kept
			}
			if err := unstructured.SetNestedMap(v, parent, fields...); err != nil {
				return nil, err
			}
		}
	}
	if err := unstructured.SetNestedSlice(crd, versions, "spec", "versions"); err != nil {
		return nil, err
	}
	return yaml.Marshal(crd)
}

// hasYAML tells whether dir holds a .yaml file.
func hasYAML(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	return len(m) > 0
}
