package translate_test

import (
	"encoding/json"
	"net"
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

// TestAccessLogThroughEnvoy: with the tenant's access log on, a real Envoy fed over xDS
// writes exactly one JSON line to its stdout for one HTTP request through an Ingress (naming
// the Ingress listener, the tenant's route and the response code) and one for one TCP
// connection through a LoadBalancer's listener (naming the LoadBalancer's listener).
func TestAccessLogThroughEnvoy(t *testing.T) {
	const tenant = "tenant-log"
	web := testsupport.StartHTTPBackend(t, "127.0.0.1:0", testsupport.Identity{Node: "node-1", Pod: "web"})
	_, p, _ := net.SplitHostPort(web.Addr)
	nodePort, _ := strconv.Atoi(p)
	httpPort, tcpPort := testsupport.FreePort(t), testsupport.FreePort(t)

	prefix := networkingv1.PathTypePrefix
	ing, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "app.example.com", IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Name: "http"}}}}}},
		}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	route := v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: "00000000-0000-0000-0000-0000000000a1", Namespace: tenant}}
	route.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Services: []v1alpha1.UpstreamService{{Service: corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web-nodeport", Namespace: "shop", Labels: map[string]string{v1alpha1.LabelOriginName: "web", v1alpha1.LabelOriginNamespace: "shop"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: int32(nodePort)}}},
	}}}}
	route.Spec.Source.Kubernetes.Route.Object = ing
	in := translate.Input{
		Tenant:    tenant,
		Addresses: map[string]v1alpha1.Addresses{"default": {ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "127.0.0.1"}}}}},
		Options:   translate.Options{ListenerAddress: "127.0.0.1", AccessLog: true, HealthCheck: translate.HealthCheck{Disabled: true}},
		Policy:    translate.EndpointPolicy{Allow: []translate.PolicyRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8"), Source: translate.SourceConfigAllow}}},
		RouteServices: []corev1.Service{{
			ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.IngressServiceName, Namespace: tenant, Labels: map[string]string{v1alpha1.LabelIngressService: "true"}},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt(httpPort)}}},
		}},
		Routes: []v1alpha1.Route{route},
		LoadBalancers: []v1alpha1.LoadBalancer{{
			ObjectMeta: metav1.ObjectMeta{Name: "lbweb", Namespace: tenant, Labels: map[string]string{v1alpha1.LabelOriginName: "lbweb", v1alpha1.LabelOriginNamespace: "shop"}},
			Spec: v1alpha1.LoadBalancerSpec{
				Ports: []v1alpha1.LoadBalancerPort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 8080}},
				Endpoints: []v1alpha1.LoadBalancerEndpoints{{
					AddressesReference: &corev1.ObjectReference{Name: "default"},
					Ports:              []v1alpha1.EndpointPort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: int32(nodePort)}},
				}},
			},
		}},
	}
	in.HubServices = map[string]*corev1.Service{"lbweb": {
		ObjectMeta: metav1.ObjectMeta{Name: "envoy-lbweb", Namespace: tenant, Labels: map[string]string{v1alpha1.LabelLoadBalancerName: "lbweb"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 8080, TargetPort: intstr.FromInt(tcpPort)}}},
	}}
	_, problems, res, err := translatetest.Pipeline(in)
	if err != nil || len(problems) > 0 {
		t.Fatalf("translation: %v %v", problems, err)
	}

	envoy := xdsenvoy.Start(t, "log-proxy", tenant, res, bootstrap.Options{}, testsupport.EnvoyOptions{Concurrency: 1,
		// Envoy writes access logs out every 10s by default.
		Args: []string{"--file-flush-interval-msec", "100"}})
	testsupport.Eventually(t, 30*time.Second, "Envoy to listen on both ports", func() error {
		ls, err := envoy.Listeners()
		if err == nil && len(ls) < 2 {
			err = errNotYet
		}
		return err
	})
	if got, err := get(testsupport.Loopback(httpPort), "", nil, "app.example.com", "/hello"); err != nil || got != "web" {
		t.Fatalf("GET through the Ingress: %q %v", got, err)
	}
	if got, err := get(testsupport.Loopback(tcpPort), "", nil, "lb.example.com", "/tcp"); err != nil || got != "web" {
		t.Fatalf("GET through the LoadBalancer: %q %v", got, err)
	}

	var lines []map[string]any
	testsupport.Eventually(t, 30*time.Second, "two access log lines on Envoy's stdout", func() error {
		lines = accessLogLines(t, envoy.Output())
		if len(lines) < 2 {
			return errNotYet
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond) // no more lines follow
	lines = accessLogLines(t, envoy.Output())
	if len(lines) != 2 {
		t.Fatalf("%d access log lines, want 2 (one request, one connection):\n%v", len(lines), lines)
	}
	byListener := map[string]map[string]any{}
	for _, l := range lines {
		byListener[l["listener"].(string)] = l
	}
	httpLine, tcpLine := byListener[translate.IngressHTTPListener], byListener["shop/lbweb/tcp-8080"]
	if httpLine == nil || tcpLine == nil {
		t.Fatalf("access log lines by listener %v, want %s and shop/lbweb/tcp-8080", byListener, translate.IngressHTTPListener)
	}
	if r, _ := httpLine["route"].(string); !strings.HasPrefix(r, route.Name+"/") || httpLine["cluster"] != "shop/web/80" || httpLine["path"] != "/hello" ||
		httpLine["method"] != "GET" || httpLine["authority"] != "app.example.com" || jsonOf(httpLine["status"]) != "200" {
		t.Errorf("HTTP line %v, want the tenant's Route %s, backend shop/web/80, GET app.example.com/hello, 200", httpLine, route.Name)
	}
	if _, ok := tcpLine["route"]; ok || tcpLine["upstream_host"] != web.Addr {
		t.Errorf("TCP line %v, want no route and upstream_host %s", tcpLine, web.Addr)
	}
}

var errNotYet = errString("not yet")

type errString string

func (e errString) Error() string { return string(e) }

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

// accessLogLines are the JSON objects among Envoy's output lines.
func accessLogLines(t *testing.T, out string) []map[string]any {
	var lines []map[string]any
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("an access log line is not JSON: %v\n%s", err, line)
		}
		lines = append(lines, m)
	}
	return lines
}
