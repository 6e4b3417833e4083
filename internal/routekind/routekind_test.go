package routekind

import (
	"bytes"
	"os"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// embedding is a Route embedding an object of apiVersion and kind.
func embedding(apiVersion, kind string) *v1alpha1.Route {
	rt := &v1alpha1.Route{}
	rt.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": kind,
	}}}
	return rt
}

// TestOf classifies every kind, at every version, and what is not served.
func TestOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		apiVersion, kind string
		want             Kind
		service          HubService
		gatewayAPI       bool
		attaches         bool
	}{
		{"networking.k8s.io/v1", "Ingress", Ingress, SharedIngressService, false, false},
		{"networking.k8s.io/v1beta1", "Ingress", Ingress, SharedIngressService, false, false},
		{"gateway.networking.k8s.io/v1", "Gateway", Gateway, OwnHubService, true, false},
		{"gateway.networking.k8s.io/v1beta1", "Gateway", Gateway, OwnHubService, true, false},
		{"gateway.networking.k8s.io/v1", "HTTPRoute", HTTPRoute, NoHubService, true, true},
		{"gateway.networking.k8s.io/v1", "GRPCRoute", GRPCRoute, NoHubService, true, true},
		{"gateway.networking.k8s.io/v1alpha2", "TLSRoute", TLSRoute, NoHubService, true, true},
		{"gateway.networking.k8s.io/v1", "TLSRoute", TLSRoute, NoHubService, true, true},
		{"gateway.networking.k8s.io/v1alpha2", "TCPRoute", TCPRoute, NoHubService, true, true},
		{"gateway.networking.k8s.io/v1alpha2", "UDPRoute", UDPRoute, NoHubService, true, true},
		{"gateway.networking.k8s.io/v1", "ListenerSet", ListenerSet, NoHubService, true, false},
		{"example.com/v1", "Ingress", Unsupported, NoHubService, false, false},
		{"extensions/v1beta1", "Ingress", Unsupported, NoHubService, false, false},
		{"networking.k8s.io/v1", "Gateway", Unsupported, NoHubService, false, false},
		{"gateway.networking.k8s.io/v1", "GatewayClass", Unsupported, NoHubService, false, false},
		{"gateway.networking.k8s.io/v1", "httproute", Unsupported, NoHubService, false, false},
		{"v1", "Service", Unsupported, NoHubService, false, false},
		{"a/b/c", "Gateway", Unsupported, NoHubService, false, false},
		{"", "", Unsupported, NoHubService, false, false},
	} {
		got, gvk := Of(embedding(tc.apiVersion, tc.kind))
		if got != tc.want || got.HubService() != tc.service || got.GatewayAPI() != tc.gatewayAPI || got.AttachesToGateway() != tc.attaches {
			t.Errorf("%s %s: %v (service %v, Gateway API %v, attaches %v), want %v (%v, %v, %v)", tc.apiVersion, tc.kind,
				got, got.HubService(), got.GatewayAPI(), got.AttachesToGateway(), tc.want, tc.service, tc.gatewayAPI, tc.attaches)
		}
		if gvk.Kind != tc.kind {
			t.Errorf("%s %s: GroupVersionKind %v", tc.apiVersion, tc.kind, gvk)
		}
	}
	if got, gvk := Of(&v1alpha1.Route{}); got != Unsupported || !gvk.Empty() {
		t.Errorf("no source: %v %v", got, gvk)
	}
}

// TestKinds: every served kind has a name, a group and its version-1 kind, and is what Of
// finds for that kind; Unsupported has none.
func TestKinds(t *testing.T) {
	t.Parallel()
	if Ingress.GroupVersionKind() != networkingv1.SchemeGroupVersion.WithKind("Ingress") {
		t.Errorf("Ingress: %v", Ingress.GroupVersionKind())
	}
	if Gateway.GroupVersionKind() != gwapiv1.SchemeGroupVersion.WithKind("Gateway") {
		t.Errorf("Gateway: %v", Gateway.GroupVersionKind())
	}
	for _, k := range Kinds {
		gvk := k.GroupVersionKind()
		if k.String() == "" || gvk.Kind != k.String() || gvk.Version != "v1" {
			t.Errorf("%d: %q %v", k, k, gvk)
		}
		if got, _ := Of(embedding(gvk.GroupVersion().String(), gvk.Kind)); got != k {
			t.Errorf("%v: Of says %v", k, got)
		}
	}
	if Unsupported.String() != "" || Unsupported.GroupVersionKind() != (schema.GroupVersionKind{}) || Unsupported.GatewayAPI() {
		t.Errorf("Unsupported: %q %v", Unsupported, Unsupported.GroupVersionKind())
	}
}

// TestKubeLBCEFixtures classifies the Routes a KubeLB CE ccm writes: each is the kind its
// origin-resource-kind label names, and the Gateway asks for its two listener ports.
func TestKubeLBCEFixtures(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../ccm/source/testdata/kubelb-ce/hub-routes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[Kind]bool{}
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		rt := &v1alpha1.Route{}
		if err := yaml.Unmarshal(doc, rt); err != nil {
			t.Fatal(err)
		}
		k, _ := Of(rt)
		gvk := k.GroupVersionKind()
		if want := rt.Labels[v1alpha1.LabelOriginResourceKind]; k == Unsupported || gvk.Kind+"."+gvk.Group != want {
			t.Errorf("Route %s: %v, labelled %s", rt.Name, gvk, want)
		}
		seen[k] = true
		if k.HubService() != OwnHubService {
			continue
		}
		ports, problems := GatewayPorts(&rt.Spec.Source.Kubernetes.Route)
		if want := []ListenerPort{{Protocol: "TCP", Port: 80}, {Protocol: "TCP", Port: 443}}; len(problems) > 0 || len(ports) != 2 || ports[0] != want[0] || ports[1] != want[1] {
			t.Errorf("Gateway %s: ports %v, problems %v", rt.Name, ports, problems)
		}
	}
	for _, k := range []Kind{Ingress, Gateway, HTTPRoute, GRPCRoute} {
		if !seen[k] {
			t.Errorf("no %v among the fixtures", k)
		}
	}
}
