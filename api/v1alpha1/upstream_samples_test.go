package v1alpha1_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestUpstreamSamplesValidate: every Config, Tenant and LoadBalancer sample of KubeLB CE's
// documentation and repository (testdata/upstream-samples, copied shapes), and the Routes its
// ccm writes (internal/ccm/source/testdata/kubelb-ce), are accepted by kubelb's CRDs on a real
// API server, so a KubeLB CE user's objects apply unchanged.
func TestUpstreamSamplesValidate(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	ctx := context.Background()
	files, err := filepath.Glob("testdata/upstream-samples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples: %v", err)
	}
	files = append(files, filepath.Join(testsupport.RepoRoot(), "internal/ccm/source/testdata/kubelb-ce/hub-routes.yaml"))
	kinds := map[string]int{}
	for _, file := range files {
		for i, obj := range readObjects(t, file) {
			if ns := obj.GetNamespace(); ns != "" {
				err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					t.Fatal(err)
				}
			} else if obj.GetKind() != "Tenant" {
				obj.SetNamespace("default")
			}
			// Dry run: samples of one kind often share a name.
			if err := hub.Client.Create(ctx, obj, client.DryRunAll); err != nil {
				t.Errorf("%s #%d (%s %s): rejected: %v", filepath.Base(file), i+1, obj.GetKind(), obj.GetName(), err)
			}
			kinds[obj.GetKind()]++
		}
	}
	for _, kind := range []string{"Config", "Tenant", "LoadBalancer", "Route"} {
		if kinds[kind] == 0 {
			t.Errorf("no %s sample was checked", kind)
		}
	}
	t.Logf("samples checked: %v", kinds)
}

// readObjects decodes every YAML document of a file.
func readObjects(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("%s: %v", file, err)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}
