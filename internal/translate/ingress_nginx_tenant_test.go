package translate_test

import (
	"net"
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
)

// nginxTenant is a tenant whose Ingresses (one host, path / each, to the Service web of
// namespace shop) are served by one real HTTP backend on loopback, through the tenant's
// Ingress Service on a free port, which keeps the clients' addresses (externalTrafficPolicy
// Local): the set-up of the ingress-nginx annotation tests that send real requests.
type nginxTenant struct {
	t        *testing.T
	in       translate.Input // without Routes
	httpPort int             // the Ingress Service's listener port for 80
	svc      v1alpha1.UpstreamService
	n        int
}

func newNginxTenant(t *testing.T, tenant string) *nginxTenant {
	web := testsupport.StartHTTPBackend(t, "127.0.0.1:0", testsupport.Identity{Node: "node-1", Pod: "web"})
	_, port, _ := net.SplitHostPort(web.Addr)
	webPort, _ := strconv.Atoi(port)
	nt := &nginxTenant{t: t, httpPort: testsupport.FreePort(t)}
	nt.svc = v1alpha1.UpstreamService{Service: corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web-nodeport", Namespace: "shop", Labels: map[string]string{v1alpha1.LabelOriginName: "web", v1alpha1.LabelOriginNamespace: "shop"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: int32(webPort)}}},
	}}
	nt.in = translate.Input{
		Tenant: tenant,
		Addresses: map[string]v1alpha1.Addresses{"default": {ObjectMeta: metav1.ObjectMeta{Name: "default"},
			Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "127.0.0.1"}}}}},
		Options: translate.Options{ListenerAddress: "127.0.0.1"},
		Policy:  translate.EndpointPolicy{Allow: []translate.PolicyRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8"), Source: translate.SourceConfigAllow}}},
		RouteServices: []corev1.Service{{
			ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.IngressServiceName, Namespace: tenant, Labels: map[string]string{v1alpha1.LabelIngressService: "true"}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt(nt.httpPort)}}},
		}},
	}
	return nt
}

// ingress is the Route of an Ingress of the tenant named name, for host, with annotations;
// each is one hour younger than the one before.
func (nt *nginxTenant) ingress(name, host string, annotations map[string]string) v1alpha1.Route {
	nt.n++
	prefix := networkingv1.PathTypePrefix
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Annotations: annotations},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
		}}}}},
	})
	if err != nil {
		nt.t.Fatal(err)
	}
	r := v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: "00000000-0000-0000-0000-0000000000" + strconv.Itoa(10+nt.n), Namespace: nt.in.Tenant,
		CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 1, nt.n, 0, 0, 0, time.UTC))}}
	r.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Services: []v1alpha1.UpstreamService{nt.svc}}
	r.Spec.Source.Kubernetes.Route.Object = obj
	return r
}
