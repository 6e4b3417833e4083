package translate_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds/translator"
)

// benchRoute is a Route embedding a tenant object and its backend Services.
func benchRoute(name string, obj map[string]any, svcs ...corev1.Service) v1alpha1.Route {
	r := v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant-bench"}}
	r.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: obj}}
	for _, s := range svcs {
		r.Spec.Source.Kubernetes.Services = append(r.Spec.Source.Kubernetes.Services, v1alpha1.UpstreamService{Service: s})
	}
	return r
}

func benchService(ns, name string, nodePort int32) corev1.Service {
	return corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: nodePort, Protocol: corev1.ProtocolTCP}}}}
}

func benchSecret(b *testing.B, ns, name, host string) corev1.Secret {
	crt, key := testsupport.SelfSignedPEM(b, host)
	return corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sync-" + ns + "-" + name, Namespace: "tenant-bench",
			Labels: map[string]string{v1alpha1.LabelOriginNamespace: ns, v1alpha1.LabelOriginName: name}},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
	}
}

func benchAddresses() map[string]v1alpha1.Addresses {
	return map[string]v1alpha1.Addresses{"default": {
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec:       v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}, {IP: "10.0.0.3"}}},
	}}
}

// httpRoutesTenant is one tenant with a Gateway (HTTP on 80, HTTPS on 443 with a wildcard
// certificate) and n HTTPRoutes attached to both listeners, each with its own hostname, three
// rules (a path prefix with a header match, a method and exact path, a catch-all) and two
// weighted backend Services.
func httpRoutesTenant(b *testing.B, n int) translate.Input {
	in := translate.Input{
		Tenant:    "tenant-bench",
		Addresses: benchAddresses(),
		Secrets:   []corev1.Secret{benchSecret(b, "apps", "wildcard", "*.example.com")},
		RouteServices: []corev1.Service{{
			ObjectMeta: metav1.ObjectMeta{Name: "gateway-gw", Namespace: "tenant-bench", Labels: map[string]string{v1alpha1.LabelRouteName: "gw"}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
				{Name: "tcp-80", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(20080)},
				{Name: "tcp-443", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(20443)},
			}},
		}},
	}
	in.Routes = append(in.Routes, benchRoute("gw", map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": "gw", "namespace": "apps"},
		"spec": map[string]any{"gatewayClassName": "kubelb", "listeners": []any{
			map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"},
			map[string]any{"name": "https", "port": int64(443), "protocol": "HTTPS", "hostname": "*.example.com",
				"tls": map[string]any{"mode": "Terminate", "certificateRefs": []any{map[string]any{"name": "wildcard"}}}},
		}},
	}))
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
		in.Routes = append(in.Routes, benchRoute(fmt.Sprintf("route-%d", i), map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
			"metadata": map[string]any{"name": name, "namespace": "apps"}, "spec": spec,
		}, benchService("apps", stable, int32(30000+(2*i)%2000)), benchService("apps", canary, int32(30001+(2*i)%2000))))
	}
	return in
}

// ingressRulesTenant is one tenant with n Ingress rules: n/10 Ingresses of 10 hosts each
// (two paths per host, one backend Service per Ingress), each Ingress with TLS for its hosts
// by a Secret of its own.
func ingressRulesTenant(b *testing.B, n int) translate.Input {
	in := translate.Input{
		Tenant:    "tenant-bench",
		Addresses: benchAddresses(),
		RouteServices: []corev1.Service{{
			ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.IngressServiceName, Namespace: "tenant-bench", Labels: map[string]string{v1alpha1.LabelIngressService: "true"}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(20080)},
				{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(20443)},
			}},
		}},
	}
	// Certificates are slow to make: a few, reused across Secrets.
	var certs []corev1.Secret
	for i := range 4 {
		certs = append(certs, benchSecret(b, "apps", "c", fmt.Sprintf("*.ing-%d.example.com", i)))
	}
	const perIngress = 10
	for i := range n / perIngress {
		name := fmt.Sprintf("ing-%d", i)
		s := certs[i%len(certs)]
		s.Name, s.Labels = "sync-"+name, map[string]string{v1alpha1.LabelOriginNamespace: "apps", v1alpha1.LabelOriginName: name + "-tls"}
		in.Secrets = append(in.Secrets, s)
		var rules, hosts []any
		for j := range perIngress {
			host := fmt.Sprintf("h%d.ing-%d.example.com", j, i)
			hosts = append(hosts, host)
			path := func(p string) any {
				return map[string]any{"path": p, "pathType": "Prefix", "backend": map[string]any{
					"service": map[string]any{"name": name, "port": map[string]any{"number": int64(80)}}}}
			}
			rules = append(rules, map[string]any{"host": host, "http": map[string]any{"paths": []any{path("/"), path("/api")}}})
		}
		in.Routes = append(in.Routes, benchRoute(fmt.Sprintf("route-%d", i), map[string]any{
			"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
			"metadata": map[string]any{"name": name, "namespace": "apps"},
			"spec": map[string]any{
				"tls":   []any{map[string]any{"hosts": hosts, "secretName": name + "-tls"}},
				"rules": rules,
			},
		}, benchService("apps", name, int32(30000+i%2000))))
	}
	return in
}

// BenchmarkHTTPRoutes1000 is the front end (translate.Run) for one tenant with a Gateway
// (HTTP and HTTPS) and 1000 HTTPRoutes (see httpRoutesTenant).
func BenchmarkHTTPRoutes1000(b *testing.B) {
	in := httpRoutesTenant(b, 1000)
	b.ReportAllocs()
	for b.Loop() {
		r, err := translate.Run(in)
		if err != nil || len(r.Config.RouteConfigs) != 2 || len(r.Config.RouteConfigs[0].VirtualHosts) != 1000 || len(r.Config.Clusters) != 2000 {
			b.Fatalf("unexpected result (%v): %d problems, first %v", err, len(r.Problems), r.Problems)
		}
	}
}

// BenchmarkHTTPRoutes1000Envoy is the whole translation of that tenant: front end and back
// end (translator.Translate: validated Envoy resources), what a change of one HTTPRoute
// costs the manager before the xDS push.
func BenchmarkHTTPRoutes1000Envoy(b *testing.B) {
	benchEnvoy(b, httpRoutesTenant(b, 1000))
}

// BenchmarkIngressRules1000 is the front end for one tenant with 1000 Ingress rules (100
// Ingresses × 10 hosts, two paths each, TLS; see ingressRulesTenant).
func BenchmarkIngressRules1000(b *testing.B) {
	in := ingressRulesTenant(b, 1000)
	b.ReportAllocs()
	for b.Loop() {
		r, err := translate.Run(in)
		if err != nil || len(r.Problems) != 0 || len(r.Config.Listeners) != 2 {
			b.Fatalf("unexpected result (%v): %v", err, r.Problems)
		}
	}
}

// BenchmarkIngressRules1000Envoy is that tenant through front end and back end.
func BenchmarkIngressRules1000Envoy(b *testing.B) {
	benchEnvoy(b, ingressRulesTenant(b, 1000))
}

func benchEnvoy(b *testing.B, in translate.Input) {
	b.ReportAllocs()
	for b.Loop() {
		r, err := translate.Run(in)
		if err != nil {
			b.Fatal(err)
		}
		if _, problems, err := translator.Translate(r.Config); err != nil || len(problems) != 0 {
			b.Fatalf("back end: %v %v", err, problems)
		}
	}
}
