package source

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
)

// readDocs reads the YAML documents of a testdata file as unstructured objects.
func readDocs(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// asMap is v through JSON.
func asMap(t *testing.T, v any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMirrorsLikeKubeLBCE creates the tenant objects KubeLB CE's fixtures were recorded from
// (an Ingress, a Gateway, an HTTPRoute and a GRPCRoute in namespace shop, with ClusterIP
// backends) and checks that every hub Route has the fixture's shape: the same labels (plus
// kubelb.k8c.io/tenant), endpoints, embedded object (plus metadata.generation) and embedded
// Services — the NodePort twins web-nodeport and grpc-nodeport, which exist in the tenant.
// UIDs and NodePorts are the cluster's own. The Gateway API kinds carry a source context
// with the namespace's labels.
func TestMirrorsLikeKubeLBCE(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "shop", nil)
	for _, obj := range readDocs(t, "testdata/kubelb-ce/tenant-objects.yaml") {
		if err := e.Tenant.Client.Create(e.ctx, obj); err != nil {
			t.Fatalf("creating %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	for _, want := range readDocs(t, "testdata/kubelb-ce/hub-routes.yaml") {
		labels := want.GetLabels()
		kind := labels[v1alpha1.LabelOriginResourceKind]
		t.Run(kind, func(t *testing.T) {
			wantSpec := want.Object["spec"].(map[string]any)
			res := wantSpec["source"].(map[string]any)["kubernetes"].(map[string]any)["resource"].(map[string]any)
			obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": res["apiVersion"], "kind": res["kind"]}}
			if err := e.Tenant.Client.Get(e.ctx, client.ObjectKey{Namespace: "shop", Name: labels[v1alpha1.LabelOriginName]}, obj); err != nil {
				t.Fatal(err)
			}
			wantServices, _ := wantSpec["source"].(map[string]any)["kubernetes"].(map[string]any)["services"].([]any)
			rt := e.routeOf(t, tenantNS, obj.GetUID(), func(rt *v1alpha1.Route) error {
				if n := len(rt.Spec.Source.Kubernetes.Services); n != len(wantServices) {
					return fmt.Errorf("%d Services embedded, want %d", n, len(wantServices))
				}
				return nil
			})

			wantLabels := map[string]string{v1alpha1.LabelTenantName: "a"}
			for k, v := range labels {
				wantLabels[k] = v
			}
			if d := cmp.Diff(wantLabels, rt.Labels); d != "" {
				t.Errorf("labels (-want +got):\n%s", d)
			}

			got := asMap(t, rt.Spec)
			src := got["source"].(map[string]any)["kubernetes"].(map[string]any)
			// What is the cluster's own: UIDs, the generation, NodePorts; and our context.
			gotRes := src["resource"].(map[string]any)
			meta := gotRes["metadata"].(map[string]any)
			if meta["uid"] != string(obj.GetUID()) || meta["generation"] != float64(obj.GetGeneration()) {
				t.Errorf("embedded metadata %v, want uid %s generation %d", meta, obj.GetUID(), obj.GetGeneration())
			}
			delete(meta, "uid")
			delete(meta, "generation")
			delete(res["metadata"].(map[string]any), "uid")
			for _, list := range [][]any{wantServices, anyList(src["services"])} {
				for _, s := range list {
					sm := s.(map[string]any)
					delete(sm["metadata"].(map[string]any), "uid")
					delete(sm["metadata"].(map[string]any), "creationTimestamp")
					for _, p := range anyList(sm["spec"].(map[string]any)["ports"]) {
						pm := p.(map[string]any)
						if pm["nodePort"] == nil || pm["nodePort"] == float64(0) {
							t.Errorf("Service %v: port without a NodePort", sm["metadata"])
						}
						delete(pm, "nodePort")
					}
				}
			}
			if ctx, ok := src["context"].(map[string]any); k8sGatewayAPI(kind) {
				nsLabels, _ := ctx["namespaceLabels"].(map[string]any)
				if !ok || nsLabels["kubernetes.io/metadata.name"] != "shop" {
					t.Errorf("context %v, want the namespace's labels", src["context"])
				}
				delete(src, "context")
			} else if ok {
				t.Errorf("an Ingress's Route has a context: %v", ctx)
			}
			if d := cmp.Diff(wantSpec, got); d != "" {
				t.Errorf("spec (-fixture +ours):\n%s", d)
			}

			// Settled: a change the Route does not depend on (an annotation) brings a
			// reconcile and no hub write.
			k := kindOf(t, kind)
			before := reconciles(k, "shop")
			testsupport.Eventually(t, timeout, "annotating "+obj.GetName(), func() error {
				if err := e.Tenant.Client.Get(e.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
					return err
				}
				obj.SetAnnotations(map[string]string{"example.com/note": "settled"})
				return e.Tenant.Client.Update(e.ctx, obj)
			})
			waitReconciles(t, k, "shop", before)
			if after := e.routeOf(t, tenantNS, obj.GetUID(), nil); after.ResourceVersion != rt.ResourceVersion {
				t.Errorf("Route rewritten by an annotation (resourceVersion %s → %s)", rt.ResourceVersion, after.ResourceVersion)
			}
		})
	}
}

// kindOf is the Kind of an origin-resource-kind label value.
func kindOf(t *testing.T, originKind string) Kind {
	t.Helper()
	for _, k := range Kinds {
		if k.OriginKind() == originKind {
			return k
		}
	}
	t.Fatalf("no Kind for %s", originKind)
	return Kind{}
}

// k8sGatewayAPI tells whether an origin-resource-kind is of Gateway API.
func k8sGatewayAPI(originKind string) bool { return originKind != Ingress.OriginKind() }

func anyList(v any) []any {
	l, _ := v.([]any)
	return l
}
