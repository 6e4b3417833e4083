package translate_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/translator"
)

// ingressRulesTenant is one tenant with n Ingress rules: n/10 Ingresses of 10 hosts each
// (two paths per host, one backend Service per Ingress), each Ingress with TLS for its hosts
// by a Secret of its own.
func ingressRulesTenant(b *testing.B, n int) translate.Input {
	in := translate.Input{
		Tenant:    "tenant-bench",
		Addresses: translatetest.BenchAddresses(),
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
		certs = append(certs, translatetest.BenchSecret(b, "apps", "c", fmt.Sprintf("*.ing-%d.example.com", i)))
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
		in.Routes = append(in.Routes, translatetest.BenchRoute(fmt.Sprintf("route-%d", i), map[string]any{
			"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
			"metadata": map[string]any{"name": name, "namespace": "apps"},
			"spec": map[string]any{
				"tls":   []any{map[string]any{"hosts": hosts, "secretName": name + "-tls"}},
				"rules": rules,
			},
		}, translatetest.BenchService("apps", name, int32(30000+i%2000))))
	}
	return in
}

// BenchmarkHTTPRoutes1000 is the front end (translate.Run) for one tenant with a Gateway
// (HTTP and HTTPS) and 1000 HTTPRoutes (see translatetest.HTTPRoutesTenant).
func BenchmarkHTTPRoutes1000(b *testing.B) {
	in := translatetest.HTTPRoutesTenant(b, 1000)
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
	benchEnvoy(b, translatetest.HTTPRoutesTenant(b, 1000))
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

// withPolicies gives each HTTPRoute of in (every Route but the Gateway's, the first) its own
// BackendTrafficPolicy (a retry, a request timeout, a local rate limit per client address,
// compression) and SecurityPolicy (authorization by client address): what a tenant whose
// every route has policies asks of a rebuild.
func withPolicies(in translate.Input) translate.Input {
	for i := 1; i < len(in.Routes); i++ {
		r := &in.Routes[i]
		name := fmt.Sprintf("policy-%d", i)
		r.Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{
			BackendTraffic: &v1alpha1.BackendTraffic{Namespace: "apps", Name: name,
				Retry:   &v1alpha1.TrafficRetry{NumRetries: ptr.To[int32](2)},
				Timeout: &v1alpha1.TrafficTimeout{HTTP: &v1alpha1.TrafficHTTPTimeout{RequestTimeout: "10s"}},
				RateLimit: &v1alpha1.TrafficRateLimit{Type: "Local", Local: &v1alpha1.TrafficLocalRateLimit{Rules: []v1alpha1.TrafficRateLimitRule{{
					ClientSelectors: []v1alpha1.TrafficRateLimitSelector{{SourceCIDR: &v1alpha1.TrafficRateLimitSourceCIDR{Type: "Distinct", Value: "0.0.0.0/0"}}},
					Limit:           v1alpha1.TrafficRateLimitValue{Requests: 100, Unit: "Second"},
				}}}},
				Compression: []v1alpha1.TrafficCompression{{Type: "Gzip"}},
			},
			Security: &v1alpha1.Security{Namespace: "apps", Name: name, Authorization: &v1alpha1.SecurityAuthorization{
				DefaultAction: "Deny",
				Rules:         []v1alpha1.SecurityRule{{Action: "Allow", Principal: v1alpha1.SecurityPrincipal{ClientCIDRs: []string{"10.0.0.0/8", "192.168.0.0/16"}}}},
			}},
		}
	}
	return in
}

// BenchmarkHTTPRoutes1000WithPolicies is BenchmarkHTTPRoutes1000Envoy with every HTTPRoute
// under policies of its own (withPolicies): the translation cost of 1000 routes each with a
// policy (issue 30), against the same tenant without.
func BenchmarkHTTPRoutes1000WithPolicies(b *testing.B) {
	benchEnvoy(b, withPolicies(translatetest.HTTPRoutesTenant(b, 1000)))
}
