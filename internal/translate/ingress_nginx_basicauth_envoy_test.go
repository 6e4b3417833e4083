package translate_test

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdsenvoy"
)

// TestIngressNginxBasicAuthThroughEnvoy: Ingresses with ingress-nginx's auth-type basic, their
// users in the hub Secrets made from their auth-secret — shop/staff-users (auth-file: key auth,
// alice and bob) and shop/mapped-users (auth-secret-type auth-map: key erin) — are served by a
// real Envoy: without credentials, with a wrong password or another Ingress's user, 401; with
// their own users, 200; an Ingress without the annotations is served to everyone.
func TestIngressNginxBasicAuthThroughEnvoy(t *testing.T) {
	const tenant = "tenant-nginx-basic-auth"
	const N = translate.NginxAnnotationPrefix
	web := testsupport.StartHTTPBackend(t, "127.0.0.1:0", testsupport.Identity{Node: "node-1", Pod: "web"})
	_, port, _ := net.SplitHostPort(web.Addr)
	webPort, _ := strconv.Atoi(port)
	httpPort := testsupport.FreePort(t)
	svc := v1alpha1.UpstreamService{Service: corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web-nodeport", Namespace: "shop", Labels: map[string]string{v1alpha1.LabelOriginName: "web", v1alpha1.LabelOriginNamespace: "shop"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: int32(webPort)}}},
	}}
	prefix := networkingv1.PathTypePrefix
	n := 0
	route := func(name, host string, annotations map[string]string) v1alpha1.Route {
		n++
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&networkingv1.Ingress{
			TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Annotations: annotations},
			Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
			}}}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		r := v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: "00000000-0000-0000-0000-0000000000" + strconv.Itoa(10+n), Namespace: tenant,
			CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 1, n, 0, 0, 0, time.UTC))}}
		r.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Services: []v1alpha1.UpstreamService{svc}}
		r.Spec.Source.Kubernetes.Route.Object = obj
		return r
	}
	erin := htpasswdSHA("erin", "pw")
	in := translate.Input{
		Tenant: tenant,
		Addresses: map[string]v1alpha1.Addresses{"default": {ObjectMeta: metav1.ObjectMeta{Name: "default"},
			Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "127.0.0.1"}}}}},
		Options: translate.Options{ListenerAddress: "127.0.0.1"},
		Policy:  translate.EndpointPolicy{Allow: []translate.PolicyRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8"), Source: translate.SourceConfigAllow}}},
		RouteServices: []corev1.Service{{
			ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.IngressServiceName, Namespace: tenant, Labels: map[string]string{v1alpha1.LabelIngressService: "true"}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt(httpPort)}}},
		}},
		Routes: []v1alpha1.Route{
			route("staff", "staff.example.com", map[string]string{N + "auth-type": "basic", N + "auth-secret": "staff-users"}),
			route("mapped", "mapped.example.com", map[string]string{N + "auth-type": "basic", N + "auth-secret": "shop/mapped-users", N + "auth-secret-type": "auth-map"}),
			route("open", "open.example.com", nil),
		},
		Secrets: []corev1.Secret{
			hubHtpasswdSecret(tenant, "staff-users", "auth", htpasswdSHA("alice", "wonderland")+"\n"+htpasswdSHA("bob", "builder")+"\n"),
			hubHtpasswdSecret(tenant, "mapped-users", "erin", erin[len("erin:"):]),
		},
	}
	_, problems, res, err := translatetest.Pipeline(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	xdsenvoy.Start(t, "ingress-nginx-basic-auth-proxy", tenant, res, bootstrap.Options{}, testsupport.EnvoyOptions{Concurrency: 1})
	addr := testsupport.Loopback(httpPort)
	get := func(host, user, password string) (int, error) {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		if err != nil {
			return 0, err
		}
		req.Host = host
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	testsupport.Eventually(t, 30*time.Second, "Envoy to serve the Ingresses", func() error {
		_, err := get("open.example.com", "", "")
		return err
	})
	refused, served := 0, 0
	for _, c := range []struct {
		host, user, password string
		want                 int
	}{
		{"staff.example.com", "", "", http.StatusUnauthorized},
		{"staff.example.com", "alice", "wrong", http.StatusUnauthorized},
		{"staff.example.com", "erin", "pw", http.StatusUnauthorized},
		{"staff.example.com", "alice", "wonderland", http.StatusOK},
		{"staff.example.com", "bob", "builder", http.StatusOK},
		{"mapped.example.com", "", "", http.StatusUnauthorized},
		{"mapped.example.com", "alice", "wonderland", http.StatusUnauthorized},
		{"mapped.example.com", "erin", "pw", http.StatusOK},
		{"open.example.com", "", "", http.StatusOK},
	} {
		for range 2 {
			got, err := get(c.host, c.user, c.password)
			switch {
			case err != nil || got != c.want:
				t.Errorf("%s as %q: %d (%v), want %d", c.host, c.user, got, err, c.want)
			case got == http.StatusUnauthorized:
				refused++
			default:
				served++
			}
		}
	}
	t.Logf("%d requests refused (401), %d served (200)", refused, served)
	if refused != 10 || served != 8 {
		t.Errorf("%d refused and %d served, want 10 and 8", refused, served)
	}
}
