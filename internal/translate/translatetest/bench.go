package translatetest

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
)

// Builders of large Layer 7 tenants for benchmarks (here to be shared by the front end's and
// the xDS server's).

// BenchRoute is a Route embedding a tenant object and its backend Services.
func BenchRoute(name string, obj map[string]any, svcs ...corev1.Service) v1alpha1.Route {
	r := v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant-bench"}}
	r.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: obj}}
	for _, s := range svcs {
		r.Spec.Source.Kubernetes.Services = append(r.Spec.Source.Kubernetes.Services, v1alpha1.UpstreamService{Service: s})
	}
	return r
}

// BenchService is a backend Service with port 80 on nodePort.
func BenchService(ns, name string, nodePort int32) corev1.Service {
	return corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: nodePort, Protocol: corev1.ProtocolTCP}}}}
}

// BenchSecret is a hub Secret synced from the tenant TLS Secret ns/name, with a
// self-signed certificate for host.
func BenchSecret(b testsupport.TB, ns, name, host string) corev1.Secret {
	crt, key := testsupport.SelfSignedPEM(b, host)
	return corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sync-" + ns + "-" + name, Namespace: "tenant-bench",
			Labels: map[string]string{v1alpha1.LabelOriginNamespace: ns, v1alpha1.LabelOriginName: name}},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
	}
}

// BenchAddresses are three node addresses (Addresses/default).
func BenchAddresses() map[string]v1alpha1.Addresses {
	return map[string]v1alpha1.Addresses{"default": {
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec:       v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}, {IP: "10.0.0.3"}}},
	}}
}

// benchGateway adds to in the Gateway "gw" of namespace apps (HTTP on 80, HTTPS on 443 with
// the wildcard certificate "wildcard", listener ports 20080 and 20443) with its Secret and hub
// Service; the Gateway's Route is the last of in.Routes.
func benchGateway(b testsupport.TB, in *translate.Input) {
	in.Secrets = append(in.Secrets, BenchSecret(b, "apps", "wildcard", "*.example.com"))
	in.RouteServices = append(in.RouteServices, corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "gateway-gw", Namespace: in.Tenant, Labels: map[string]string{v1alpha1.LabelRouteName: "gw"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "tcp-80", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(20080)},
			{Name: "tcp-443", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(20443)},
		}},
	})
	in.Routes = append(in.Routes, BenchRoute("gw", map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": "gw", "namespace": "apps"},
		"spec": map[string]any{"gatewayClassName": "kubelb", "listeners": []any{
			map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"},
			map[string]any{"name": "https", "port": int64(443), "protocol": "HTTPS", "hostname": "*.example.com",
				"tls": map[string]any{"mode": "Terminate", "certificateRefs": []any{map[string]any{"name": "wildcard"}}}},
		}},
	}))
}

// HTTPRoutesTenant is one tenant with a Gateway (HTTP on 80, HTTPS on 443 with a wildcard
// certificate) and n HTTPRoutes attached to both listeners, each with its own hostname, three
// rules (a path prefix with a header match, a method and exact path, a catch-all) and two
// weighted backend Services.
func HTTPRoutesTenant(b testsupport.TB, n int) translate.Input {
	in := translate.Input{Tenant: "tenant-bench", Addresses: BenchAddresses()}
	benchGateway(b, &in)
	for i := range n {
		name := fmt.Sprintf("app-%d", i)
		stable, canary := name+"-stable", name+"-canary"
		backends := []any{
			map[string]any{"name": stable, "port": int64(80), "weight": int64(90)},
			map[string]any{"name": canary, "port": int64(80), "weight": int64(10)},
		}
		spec := map[string]any{
			"parentRefs": []any{map[string]any{"name": "gw", "sectionName": "http"}, map[string]any{"name": "gw", "sectionName": "https"}},
			"hostnames":  []any{fmt.Sprintf("app-%d.example.com", i)},
			"rules": []any{
				map[string]any{"matches": []any{map[string]any{
					"path":    map[string]any{"type": "PathPrefix", "value": "/api"},
					"headers": []any{map[string]any{"name": "x-version", "value": "v2"}},
				}}, "backendRefs": backends},
				map[string]any{"matches": []any{map[string]any{
					"path": map[string]any{"type": "Exact", "value": "/login"}, "method": "POST",
				}}, "backendRefs": backends},
				map[string]any{"backendRefs": backends},
			},
		}
		in.Routes = append(in.Routes, BenchRoute(fmt.Sprintf("route-%d", i), map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
			"metadata": map[string]any{"name": name, "namespace": "apps"}, "spec": spec,
		}, BenchService("apps", stable, int32(30000+(2*i)%2000)), BenchService("apps", canary, int32(30001+(2*i)%2000))))
	}
	return in
}
