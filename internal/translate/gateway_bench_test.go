package translate_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/translate"
)

// gatewayTenantOf builds one tenant with a Gateway (HTTP on 80, HTTPS-less to keep it about
// routing) and n HTTPRoutes, each with its own hostname, two rules and one backend Service,
// plus one catch-all HTTPRoute without hostnames.
func gatewayTenantOf(n int) translate.Input {
	in := translate.Input{
		Tenant: "tenant-bench",
		Addresses: map[string]v1alpha1.Addresses{"default": {
			ObjectMeta: metav1.ObjectMeta{Name: "default"},
			Spec:       v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}, {IP: "10.0.0.3"}}},
		}},
		RouteServices: []corev1.Service{{
			ObjectMeta: metav1.ObjectMeta{Name: "gateway-gw", Labels: map[string]string{v1alpha1.LabelRouteName: "gw"}},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(20080)}}},
		}},
	}
	route := func(name string, obj map[string]any, svc *corev1.Service) v1alpha1.Route {
		r := v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: name}}
		r.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: obj}}
		if svc != nil {
			r.Spec.Source.Kubernetes.Services = []v1alpha1.UpstreamService{{Service: *svc}}
		}
		return r
	}
	in.Routes = append(in.Routes, route("gw", map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": "gw", "namespace": "apps"},
		"spec":     map[string]any{"gatewayClassName": "kubelb", "listeners": []any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}}},
	}, nil))
	for i := range n + 1 {
		name := fmt.Sprintf("app-%d", i)
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, NodePort: int32(30000 + i%2000)}}}}
		spec := map[string]any{
			"parentRefs": []any{map[string]any{"name": "gw"}},
			"rules": []any{
				map[string]any{"matches": []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/api"}}},
					"backendRefs": []any{map[string]any{"name": name, "port": int64(80)}}},
				map[string]any{"backendRefs": []any{map[string]any{"name": name, "port": int64(80)}}},
			},
		}
		if i < n {
			spec["hostnames"] = []any{fmt.Sprintf("app-%d.example.com", i)}
		}
		in.Routes = append(in.Routes, route(fmt.Sprintf("route-%d", i), map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
			"metadata": map[string]any{"name": name, "namespace": "apps"}, "spec": spec,
		}, svc))
	}
	return in
}

// BenchmarkGateway1000: one Gateway, 1000 HTTPRoutes with a hostname each (and a catch-all
// route every virtual host carries), through the Gateway API front end.
func BenchmarkGateway1000(b *testing.B) {
	in := gatewayTenantOf(1000)
	b.ReportAllocs()
	for b.Loop() {
		r, err := translate.Run(in)
		if err != nil || len(r.Config.RouteConfigs) != 1 || len(r.Config.RouteConfigs[0].VirtualHosts) != 1001 {
			b.Fatalf("unexpected result: %v", err)
		}
	}
}
