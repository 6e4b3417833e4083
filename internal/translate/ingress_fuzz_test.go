package translate_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
)

var (
	fuzzCertOnce sync.Once
	fuzzCert     map[string][]byte
)

// ingressInput adds to a random tenant (input) the Ingress side: the kubelb-ingress Service
// with random listener ports (colliding with Layer 4 ones at times), synced Secrets (good,
// broken), up to 4 Ingress Routes with random hosts, paths, backends, TLS entries, default
// backends, ssl-redirect and ingress-nginx annotations (good and bad values, regex paths), the
// tenant's sslRedirect, DNS settings and hostname Secrets.
func (s *bytesource) ingressInput(cert map[string][]byte) translate.Input {
	in := s.input()
	if s.intn(5) != 0 {
		svc := corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.IngressServiceName, Labels: map[string]string{v1alpha1.LabelIngressService: "true"}}}
		for _, p := range []int32{80, 443} {
			if s.intn(5) != 0 {
				svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Port: p, TargetPort: intstr.FromInt32(s.port())})
			}
		}
		svc.Status.LoadBalancer.Ingress = pick(s, []corev1.LoadBalancerIngress(nil), []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}, {Hostname: "lb.example.net"}, {IP: "192.0.2.1"}})
		in.RouteServices = append(in.RouteServices, svc)
	}
	broken := map[string][]byte{corev1.TLSCertKey: cert[corev1.TLSCertKey], corev1.TLSPrivateKeyKey: []byte("no key")}
	for _, name := range []string{"tls-a", "tls-b", "tls-broken"} {
		if s.intn(4) == 0 {
			continue
		}
		data := cert
		if name == "tls-broken" {
			data = broken
		}
		in.Secrets = append(in.Secrets, corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "uid-" + name, Labels: map[string]string{v1alpha1.LabelOriginName: name, v1alpha1.LabelOriginNamespace: "shop"}},
			Data:       data,
		})
	}
	host := func() string {
		return pick(s, "", "a.example.com", "b.example.com", "*.example.com", "A.Example.com", "*", "bad_host", "x.*.com", "a.example.com.", "lb-0.example.com")
	}
	svcs := []v1alpha1.UpstreamService{
		{Service: corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web-nodeport", Namespace: "shop", Labels: map[string]string{v1alpha1.LabelOriginName: "web"}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080}, {Name: "grpc", Port: 9000, NodePort: 30090, AppProtocol: ptrTo("kubernetes.io/h2c")}}}}},
		{Service: corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "nonp", Namespace: "shop"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}},
	}
	backend := func() networkingv1.IngressBackend {
		switch s.intn(6) {
		case 0:
			return networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{Kind: "Bucket", Name: "b"}}
		case 1:
			return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: pick(s, "web", "nonp", "ghost"), Port: networkingv1.ServiceBackendPort{Name: pick(s, "http", "grpc", "nope")}}}
		default:
			return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: pick(s, "web", "web", "nonp", "ghost"), Port: networkingv1.ServiceBackendPort{Number: pick[int32](s, 80, 80, 9000, 1)}}}
		}
	}
	for i, n := 0, s.intn(5); i < n; i++ {
		var spec networkingv1.IngressSpec
		if s.intn(3) == 0 {
			b := backend()
			spec.DefaultBackend = &b
		}
		for j, m := 0, s.intn(4); j < m; j++ {
			rule := networkingv1.IngressRule{Host: host()}
			if s.intn(5) != 0 {
				rule.HTTP = &networkingv1.HTTPIngressRuleValue{}
				for k, o := 0, s.intn(4); k < o; k++ {
					typ := pick(s, networkingv1.PathTypePrefix, networkingv1.PathTypeExact, networkingv1.PathTypeImplementationSpecific, "Regex")
					rule.HTTP.Paths = append(rule.HTTP.Paths, networkingv1.HTTPIngressPath{
						Path: pick(s, "/", "/api", "/api/", "", "api", "/a?b", "/a b", "/é", "//x"), PathType: &typ, Backend: backend()})
				}
			}
			spec.Rules = append(spec.Rules, rule)
		}
		for j, m := 0, s.intn(3); j < m; j++ {
			tls := networkingv1.IngressTLS{SecretName: pick(s, "tls-a", "tls-b", "tls-broken", "missing", "")}
			for k, o := 0, s.intn(3); k < o; k++ {
				tls.Hosts = append(tls.Hosts, host())
			}
			spec.TLS = append(spec.TLS, tls)
		}
		annotations := map[string]string{}
		if v := pick(s, "", "", "true", "false", "maybe"); v != "" {
			annotations[v1alpha1.AnnotationSSLRedirect] = v
		}
		// ingress-nginx annotations, good and bad values, regex paths among them.
		const N = translate.NginxAnnotationPrefix
		for j, m := 0, s.intn(4); j < m; j++ {
			switch s.intn(15) {
			case 0:
				annotations[N+"rewrite-target"] = pick(s, "/$2", "/", "/$1$9", "bar", "/a b", `/\1`)
			case 1:
				annotations[N+"use-regex"] = pick(s, "true", "false", "x")
			case 2:
				annotations[N+pick(s, "permanent-redirect", "temporal-redirect")] = pick(s, "https://x.example.org/p", "http://y.example.org:8080", "x", "https://*.x/", "https://u@x.example.org")
				annotations[N+"permanent-redirect-code"] = pick(s, "308", "200", "")
			case 3:
				annotations[N+"app-root"] = pick(s, "/app", "app", "/a?b")
			case 4:
				annotations[N+pick(s, "proxy-read-timeout", "proxy-send-timeout", "proxy-connect-timeout")] = pick(s, "1", "60s", "0", "-1", "99999999")
			case 5:
				annotations[N+"backend-protocol"] = pick(s, "GRPC", "H2C", "HTTPS", "GRPCS", "FCGI")
			case 6:
				annotations[N+"enable-cors"] = "true"
				annotations[N+pick(s, "cors-allow-origin", "cors-allow-methods", "cors-allow-headers", "cors-max-age")] = pick(s, "*", "https://a.example.com, http://b:8080", "GET,PUT", "X-A, *", "bad origin", "0")
			case 7:
				annotations[N+"affinity"] = pick(s, "cookie", "balanced")
				annotations[N+pick(s, "session-cookie-name", "session-cookie-path", "session-cookie-max-age")] = pick(s, "route", "bad name", "/p", "3600", "x")
			case 8:
				annotations[N+"canary"] = pick(s, "true", "false")
				annotations[N+pick(s, "canary-weight", "canary-by-header", "canary-weight-total", "canary-by-header-pattern")] = pick(s, "20", "100", "101", "X-Canary", "bad header", "^(a|b)$", "(?<=x)", "")
			case 9:
				annotations[N+pick(s, "ssl-redirect", "force-ssl-redirect")] = pick(s, "true", "false", "x")
			case 10:
				annotations[N+pick(s, "configuration-snippet", "whitelist-source-range", "made-up")] = "x"
			case 11:
				annotations[N+pick(s, "limit-rps", "limit-rpm", "limit-burst-multiplier")] = pick(s, "5", "1", "0", "1000001", "many", "4294967295")
			case 12:
				annotations[N+pick(s, "upstream-vhost", "upstream-hash-by", "load-balance")] = pick(s, "internal.svc:8080", "$http_x_user", "$cookie_s", "$remote_addr", "ewma", "round_robin", "$host", "$http_", "a b", "x:99999")
			case 13:
				annotations[N+"mirror-target"] = pick(s, "http://web/$request_uri", "http://web.shop.svc:80$request_uri", "http://nonp/$request_uri", "http://ghost/$request_uri",
					"http://web.other/$request_uri", "https://web/$request_uri", "http://web/v2", "http://10.0.0.1/$request_uri")
				annotations[N+pick(s, "mirror-host", "mirror-request-body")] = pick(s, "copy.example.com", "off", "on", "a b", "x:99999")
				annotations[N+"auth-url"] = pick(s, "http://web/check", "http://web.shop:80/oauth2/auth", "http://ghost/", "https://web/", "http://web/$request_uri", "http://x.example.com/")
				annotations[N+"auth-response-headers"] = pick(s, "X-User", "X-A, X-B", "bad header", "")
			default:
				annotations[N+"rewrite-target"] = "/$2"
				if rule := len(spec.Rules); rule > 0 && spec.Rules[0].HTTP != nil {
					typ := networkingv1.PathTypeImplementationSpecific
					spec.Rules[0].HTTP.Paths = append(spec.Rules[0].HTTP.Paths, networkingv1.HTTPIngressPath{
						Path: pick(s, "/x(/|$)(.*)", "/a(b", "/(a|b)+", "/[0-9]{1,1000}"), PathType: &typ, Backend: backend()})
				}
			}
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&networkingv1.Ingress{
			TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("ing-", i), Namespace: "shop", Annotations: annotations}, Spec: spec})
		if err != nil {
			panic(err)
		}
		r := v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("route-", i), CreationTimestamp: metav1.NewTime(time.Unix(int64(s.intn(3)), 0))}}
		r.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Services: svcs}
		r.Spec.Source.Kubernetes.Route.Object = obj
		in.Routes = append(in.Routes, r)
	}
	in.Options.IngressSSLRedirect = s.intn(2) == 0
	in.DNS = translate.DNS{WildcardDomain: pick(s, "", "*.example.com", "bad_domain"), AllowExplicitHostnames: s.intn(2) == 0}
	in.HostnameSecrets = map[string]corev1.Secret{}
	for i := range in.LoadBalancers {
		lb := &in.LoadBalancers[i]
		lb.Spec.Hostname = pick(s, "", "", host())
		if s.intn(3) != 0 {
			in.HostnameSecrets[lb.Name] = corev1.Secret{Data: pick(s, cert, cert, broken)}
		}
	}
	return in
}

func ptrTo[T any](v T) *T { return &v }

// FuzzIngress checks that any tenant with Ingresses and LoadBalancer hostnames translates
// without panicking into an IR that validates and into Envoy resources that pass every check,
// that the back end never leaves anything out, and that translation is deterministic.
func FuzzIngress(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("ingresses with hosts, paths, certificates and hostnames, all at once, twice"))
	f.Add([]byte{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4, 3, 3, 8, 3, 2, 7, 9, 5, 0, 2, 8, 8, 4, 1, 9, 7})
	// cors-allow-methods "X-A, *": a method that is none, beside "*" (found by the fuzzer, as
	// the next: the IR had them).
	f.Add([]byte("109000z0000000Z00000000000001200000100100002100B19"))
	// cors-allow-headers "X-A, *": "*" beside a header name.
	f.Add([]byte("109000z0000000Z0000000000000\x0e200000100100002100B29"))
	f.Add([]byte{255, 254, 253, 252, 251, 250, 249, 248, 247, 246, 245, 244, 243, 242, 241, 240, 239, 238, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzCertOnce.Do(func() { fuzzCert, _ = testCert(t, "a.example.com") })
		in := (&bytesource{b: data}).ingressInput(fuzzCert)
		r, err := translate.Run(in)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if err := r.Config.Validate(); err != nil {
			t.Fatalf("invalid IR: %v", err)
		}
		_, all, res, err := translatetest.Pipeline(in)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != len(r.Problems) {
			t.Fatalf("the back end left out resources: %v", all[len(r.Problems):])
		}
		if err := translatetest.Check(res); err != nil {
			t.Fatal(err)
		}
		again, err := translate.Run((&bytesource{b: data}).ingressInput(fuzzCert))
		if err != nil || !r.Config.Equal(again.Config) {
			t.Fatal("Run is not deterministic")
		}
	})
}
