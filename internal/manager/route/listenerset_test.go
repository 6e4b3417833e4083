package route

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/testenv"
)

// listenerSetRoute is a Route of a ListenerSet of namespace ns naming Gateway gw-<gateway> of
// namespace shop, with one listener.
func listenerSetRoute(hubNS, name, ns, gateway string, l map[string]any) *kubelbv1alpha1.Route {
	rt := &kubelbv1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: name}}
	rt.Spec.Endpoints = []kubelbv1alpha1.LoadBalancerEndpoints{{Name: "default", AddressesReference: &corev1.ObjectReference{Name: "default"}}}
	rt.Spec.Source.Kubernetes = &kubelbv1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "ListenerSet",
		"metadata": map[string]any{"name": "ls-" + name, "namespace": ns},
		"spec": map[string]any{"parentRef": map[string]any{"name": "gw-" + gateway, "namespace": "shop"},
			"listeners": []any{l}},
	}}, Context: &kubelbv1alpha1.SourceContext{}}
	return rt
}

// TestListenerSetPorts: the listeners of a ListenerSet the Gateway allows get ports on the
// Gateway's hub Service, from the same allocator as the Gateway's own; a ListenerSet the
// Gateway does not allow gets none; the port goes when the ListenerSet does.
func TestListenerSetPorts(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	createNamespace(t, c, managerNS)
	ns := "tenant-sets"
	createNamespace(t, c, ns)
	startManager(t, hub, portalloc.Range{Min: 21000, Max: 21099})

	gw := gatewayRoute(ns, "gw", listener("http", 80, "HTTP"))
	spec := gw.Spec.Source.Kubernetes.Route.Object["spec"].(map[string]any)
	spec["allowedListeners"] = map[string]any{"namespaces": map[string]any{"from": "Same"}}
	if err := c.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	same := listenerSetRoute(ns, "same", "shop", "gw", listener("https", 8443, "HTTPS"))
	other := listenerSetRoute(ns, "other", "elsewhere", "gw", listener("tcp", 9000, "TCP"))
	for _, rt := range []*kubelbv1alpha1.Route{same, other} {
		if err := c.Create(ctx, rt); err != nil {
			t.Fatal(err)
		}
	}
	name := hubnames.GatewayServiceName(gw.Name)
	ports := func(want ...string) func(*corev1.Service) error {
		return func(svc *corev1.Service) error {
			var got []string
			for _, p := range svc.Spec.Ports {
				if p.TargetPort.IntVal < 21000 || p.TargetPort.IntVal > 21099 {
					return fmt.Errorf("port %s has target %d, outside the listener port range", p.Name, p.TargetPort.IntVal)
				}
				got = append(got, p.Name)
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("ports %v, want %v", got, want)
			}
			return nil
		}
	}
	waitService(t, c, ns, name, ports("tcp-80", "tcp-8443"))

	if err := c.Delete(ctx, same); err != nil {
		t.Fatal(err)
	}
	waitService(t, c, ns, name, ports("tcp-80"))
}
