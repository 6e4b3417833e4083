package translate_test

import (
	"context"
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

// nginxTenant is a tenant whose Ingresses (one host, path / each, to the Service web of
// namespace shop) are served by one real HTTP backend on loopback, through the tenant's
// Ingress Service on a free port, which keeps the clients' addresses (externalTrafficPolicy
// Local): the set-up of the ingress-nginx annotation tests that send real requests.
type nginxTenant struct {
	t        *testing.T
	in       translate.Input // without Routes
	httpPort int             // the Ingress Service's listener port for 80
	svc      v1alpha1.UpstreamService
	web      *testsupport.Backend // the Service's endpoint on node-1 (127.0.0.1)
	n        int
}

func newNginxTenant(t *testing.T, tenant string) *nginxTenant {
	// Its port is free on the second node too (secondNode serves it there).
	web := testsupport.StartHTTPBackend(t, testsupport.Loopback(testsupport.FreePort(t, "127.0.0.1", "127.0.0.2")), testsupport.Identity{Node: "node-1", Pod: "web"})
	_, port, _ := net.SplitHostPort(web.Addr)
	webPort, _ := strconv.Atoi(port)
	nt := &nginxTenant{t: t, httpPort: testsupport.FreePort(t), web: web}
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

// serve translates in (the tenant's Ingresses; no problem may be raised), serves it with a
// real Envoy of one worker (name: its node id), and returns a client whose requests, each on
// a new connection, all go to the Ingress Service's HTTP listener, whatever their host.
func (nt *nginxTenant) serve(in translate.Input, name string) (*http.Client, *http.Transport) {
	t := nt.t
	t.Helper()
	_, problems, res, err := translatetest.Pipeline(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	xdsenvoy.Start(t, name, in.Tenant, res, bootstrap.Options{}, testsupport.EnvoyOptions{Concurrency: 1})
	addr := testsupport.Loopback(nt.httpPort)
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{Timeout: 3 * time.Second}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}, tr
}

// secondNode puts the Service's NodePort on a second node, 127.0.0.2 (node-2, pod web2), and
// returns its endpoint.
func (nt *nginxTenant) secondNode() *testsupport.Backend {
	port := strconv.Itoa(int(nt.svc.Spec.Ports[0].NodePort))
	web2 := testsupport.StartHTTPBackend(nt.t, net.JoinHostPort("127.0.0.2", port), testsupport.Identity{Node: "node-2", Pod: "web2"})
	nt.in.Addresses = map[string]v1alpha1.Addresses{"default": {ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "127.0.0.1"}, {IP: "127.0.0.2"}}}}}
	return web2
}

// otherService serves h on the node (127.0.0.1) as the NodePort of port of the ClusterIP
// Service name of namespace shop, and returns that Service's twin as a Route embeds it (a
// Service an annotation names beside the backends: mirror-target, auth-url).
func (nt *nginxTenant) otherService(name string, port int32, h http.Handler) v1alpha1.UpstreamService {
	t := nt.t
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	nodePort := l.Addr().(*net.TCPAddr).Port
	return v1alpha1.UpstreamService{Service: corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-nodeport", Namespace: "shop", Labels: map[string]string{v1alpha1.LabelOriginName: name, v1alpha1.LabelOriginNamespace: "shop"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Name: "http", Port: port, NodePort: int32(nodePort)}}},
	}}
}
