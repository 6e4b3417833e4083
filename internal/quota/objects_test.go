package quota

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/trafficpolicy"
	"kubelb.dev/kubelb/internal/translate"
)

func hubLB(name string, created time.Time, ports ...kubelbv1alpha1.LoadBalancerPort) kubelbv1alpha1.LoadBalancer {
	return kubelbv1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec: kubelbv1alpha1.LoadBalancerSpec{Ports: ports}}
}

func hubRoute(name string, created time.Time, obj map[string]any) kubelbv1alpha1.Route {
	r := kubelbv1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: name, CreationTimestamp: metav1.NewTime(created)}}
	r.Spec.Source.Kubernetes = &kubelbv1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: obj}}
	return r
}

func gateway(listeners ...map[string]any) map[string]any {
	ls := make([]any, len(listeners))
	for i, l := range listeners {
		ls[i] = l
	}
	return map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "spec": map[string]any{"listeners": ls}}
}

// TestObjects checks what the limits count of real hub objects: a LoadBalancer's distinct
// ports, a Gateway's distinct listener ports, the Ingress Service shared by Ingresses and
// LoadBalancer hostnames, nothing of what is disabled or being deleted.
func TestObjects(t *testing.T) {
	t.Parallel()
	old, young := t0.Add(-time.Hour), t0
	deleting := hubLB("deleting", old, kubelbv1alpha1.LoadBalancerPort{Port: 1})
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	lbs := []kubelbv1alpha1.LoadBalancer{
		hubLB("web", old, kubelbv1alpha1.LoadBalancerPort{Name: "http", Port: 80}, kubelbv1alpha1.LoadBalancerPort{Name: "https", Port: 443},
			kubelbv1alpha1.LoadBalancerPort{Name: "again", Port: 80}, // repeats port 80/TCP: not allocated, not counted
			kubelbv1alpha1.LoadBalancerPort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}),
		deleting,
	}
	routes := []kubelbv1alpha1.Route{
		hubRoute("gw", young, gateway(
			map[string]any{"name": "a", "port": int64(80), "protocol": "HTTP"},
			map[string]any{"name": "b", "port": int64(80), "protocol": "HTTP"}, // same port and protocol: one listener port
			map[string]any{"name": "c", "port": int64(443), "protocol": "HTTPS"},
			map[string]any{"name": "d", "port": int64(0), "protocol": "HTTP"})), // invalid: not counted
		hubRoute("ing", young, map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress"}),
		hubRoute("http", young, map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute"}),
	}
	want := []Object{
		{Kind: KindLoadBalancer, Name: "web", Created: old, Ports: 3},
		{Kind: KindRoute, Name: "gw", Created: young, Ports: 2},
		{Kind: KindRoute, Name: "ing", Created: young, Shared: sharedIngress, SharedPorts: 2},
		{Kind: KindRoute, Name: "http", Created: young},
	}
	for i, o := range []any{&lbs[0].Spec, &routes[0].Spec, &routes[1].Spec, &routes[2].Spec} {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		want[i].Bytes = int64(len(b))
	}
	got := Objects(lbs, routes, settings.Tenant{})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("-want +got:\n%s", diff)
	}

	t.Run("disabled", func(t *testing.T) {
		t.Parallel()
		got := Objects(lbs, routes, settings.Tenant{DisableLoadBalancer: true, DisableGatewayAPI: true, DisableIngress: true})
		for _, o := range got {
			if o.Ports != 0 || o.Shared != "" {
				t.Errorf("%s %s needs ports although disabled: %+v", o.Kind, o.Name, o)
			}
		}
		if len(got) != 4 {
			t.Errorf("disabled objects still count: got %d objects, want 4", len(got))
		}
	})
	t.Run("a LoadBalancer hostname shares the Ingress Service", func(t *testing.T) {
		t.Parallel()
		got := Objects(lbs[:1], nil, settings.Tenant{DNS: translate.DNS{WildcardDomain: "example.com"}})
		if len(got) != 1 || got[0].Shared != sharedIngress || got[0].SharedPorts != IngressServicePorts || got[0].Ports != 3 {
			t.Fatalf("got %+v", got)
		}
	})
}

// TestObjectsHTTP3: a Gateway whose ClientTrafficPolicy serves its HTTPS port over HTTP/3
// counts the UDP port of that number too (its hub Service carries both), its NodePorts too;
// not when the tenant's bounds refuse ClientTrafficPolicies.
func TestObjectsHTTP3(t *testing.T) {
	t.Parallel()
	rt := hubRoute("gw", t0, gateway(
		map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"},
		map[string]any{"name": "https", "port": int64(443), "protocol": "HTTPS"}))
	rt.Spec.Source.Kubernetes.Context = &kubelbv1alpha1.SourceContext{ClientTraffic: &kubelbv1alpha1.ClientTraffic{HTTP3: &kubelbv1alpha1.ClientTrafficHTTP3{}}}
	if got := Objects(nil, []kubelbv1alpha1.Route{rt}, settings.Tenant{AllocateNodePorts: true}); len(got) != 1 || got[0].Ports != 3 || got[0].NodePorts != 3 {
		t.Errorf("with http3: got %+v, want 3 ports (TCP 80, TCP 443, UDP 443) and 3 NodePorts", got)
	}
	refused := settings.Tenant{}
	refused.Upstream.TrafficPolicies = &trafficpolicy.Bounds{Features: []kubelbv1alpha1.TrafficPolicyFeature{}}
	if got := Objects(nil, []kubelbv1alpha1.Route{rt}, refused); len(got) != 1 || got[0].Ports != 2 {
		t.Errorf("ClientTrafficPolicies refused: got %+v, want 2 ports", got)
	}
}

// TestLoadBalancerPortsMany: beyond 16 ports, repeats are found the same way.
func TestLoadBalancerPortsMany(t *testing.T) {
	t.Parallel()
	var ports []kubelbv1alpha1.LoadBalancerPort
	for i := range 20 {
		ports = append(ports, kubelbv1alpha1.LoadBalancerPort{Name: fmt.Sprintf("p%d", i), Port: int32(1000 + i)})
	}
	ports = append(ports, kubelbv1alpha1.LoadBalancerPort{Name: "p3", Port: 2000}, kubelbv1alpha1.LoadBalancerPort{Name: "other", Port: 1004})
	for _, n := range []int{16, 22} {
		lb := hubLB("many", t0, ports[:n]...)
		got, problems := LoadBalancerPorts(&lb)
		want := min(n, 20)
		if len(got) != want || len(problems) != n-want {
			t.Errorf("%d ports: %d planned, problems %q", n, len(got), problems)
		}
	}
}
