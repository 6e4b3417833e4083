package prom

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
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

// TestDataPlaneDashboardOnRealEnvoy: a real Envoy, fed over xDS with a tenant's Ingress (HTTP)
// and LoadBalancer (TCP) and carrying bounded traffic on loopback (requests answered 200 and
// 500, TCP connections), is scraped by a real Prometheus on its stats listener (as the
// chart's PodMonitor does, with the tenant label); every query of the Envoy data plane
// dashboard returns data.
func TestDataPlaneDashboardOnRealEnvoy(t *testing.T) {
	const tenant, tenantNS = "shop", "tenant-shop"
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/fail") {
			w.WriteHeader(http.StatusInternalServerError)
		}
		_, _ = io.WriteString(w, "web")
	}))
	t.Cleanup(backend.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(backend.URL, "http://"))
	nodePort, _ := strconv.Atoi(port)
	httpPort, tcpPort, statsPort := testsupport.FreePort(t), testsupport.FreePort(t), testsupport.FreePort(t)

	prefix := networkingv1.PathTypePrefix
	ing, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "app.example.com", IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}},
		}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	route := v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: "00000000-0000-0000-0000-0000000000d1", Namespace: tenantNS}}
	route.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Services: []v1alpha1.UpstreamService{{Service: corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web-nodeport", Namespace: "shop", Labels: map[string]string{v1alpha1.LabelOriginName: "web", v1alpha1.LabelOriginNamespace: "shop"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80, NodePort: int32(nodePort)}}},
	}}}}
	route.Spec.Source.Kubernetes.Route.Object = ing
	in := translate.Input{
		Tenant:    tenantNS,
		Addresses: map[string]v1alpha1.Addresses{"default": {ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "127.0.0.1"}}}}},
		Options:   translate.Options{ListenerAddress: "127.0.0.1", HealthCheck: translate.HealthCheck{Interval: time.Second}},
		Policy:    translate.EndpointPolicy{Allow: []translate.PolicyRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8"), Source: translate.SourceConfigAllow}}},
		RouteServices: []corev1.Service{{
			ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.IngressServiceName, Namespace: tenantNS, Labels: map[string]string{v1alpha1.LabelIngressService: "true"}},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt(httpPort)}}},
		}},
		Routes: []v1alpha1.Route{route},
		LoadBalancers: []v1alpha1.LoadBalancer{{
			ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: tenantNS, Labels: map[string]string{v1alpha1.LabelOriginName: "db", v1alpha1.LabelOriginNamespace: "shop"}},
			Spec: v1alpha1.LoadBalancerSpec{
				Ports: []v1alpha1.LoadBalancerPort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 5432}},
				Endpoints: []v1alpha1.LoadBalancerEndpoints{{
					AddressesReference: &corev1.ObjectReference{Name: "default"},
					Ports:              []v1alpha1.EndpointPort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: int32(nodePort)}},
				}},
			},
		}},
		HubServices: map[string]*corev1.Service{"db": {
			ObjectMeta: metav1.ObjectMeta{Name: "envoy-db", Namespace: tenantNS, Labels: map[string]string{v1alpha1.LabelLoadBalancerName: "db"}},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 5432, TargetPort: intstr.FromInt(tcpPort)}}},
		}},
	}
	_, problems, res, err := translatetest.Pipeline(in)
	if err != nil || len(problems) > 0 {
		t.Fatalf("translation: %v %v", problems, err)
	}
	stats := testsupport.Loopback(statsPort)
	envoy := xdsenvoy.Start(t, "data-plane-proxy", tenantNS, res, bootstrap.Options{StatsAddress: stats}, testsupport.EnvoyOptions{Concurrency: 1})
	testsupport.Eventually(t, 30*time.Second, "Envoy to listen on the tenant's ports", func() error {
		ls, err := envoy.Listeners()
		if err == nil && len(ls) < 3 { // the stats listener, the Ingress's and the LoadBalancer's
			err = fmt.Errorf("%d listeners", len(ls))
		}
		return err
	})

	p := StartJobs(t, Job{Name: "envoy", Targets: []string{stats}, MetricsPath: bootstrap.StatsPath, Labels: map[string]string{"tenant": tenant}})
	p.WaitTargetsUp(t, 30*time.Second)

	// Bounded traffic, over a few scrapes: HTTP requests (one in five answered 500) and TCP
	// connections, one of them held open while the queries run (active connections).
	client := &http.Client{Timeout: 5 * time.Second}
	send := func(addr, path string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		req.Host = "app.example.com"
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s%s: %v", addr, path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	held, err := net.Dial("tcp", testsupport.Loopback(tcpPort))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() })
	for i := range 40 {
		path := "/ok"
		if i%5 == 0 {
			path = "/fail"
		}
		send(testsupport.Loopback(httpPort), path)
		send(testsupport.Loopback(tcpPort), "/tcp")
		time.Sleep(ScrapeInterval / 8)
	}
	CheckDashboards(t, testsupport.RepoRoot(), p.URL, CheckOptions{Timeout: time.Minute,
		Only: func(q Query) bool { return q.Dashboard == DataPlaneDashboard }})
}
