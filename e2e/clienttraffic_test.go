package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/ccm/source"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// egPolicy is an Envoy Gateway policy of kind in namespace ns with the spec written in YAML.
func egPolicy(t *testing.T, kind *source.PolicyKind, ns, name, spec string) *unstructured.Unstructured {
	t.Helper()
	p := kind.New()
	p.SetNamespace(ns)
	p.SetName(name)
	s := map[string]any{}
	if err := yaml.Unmarshal([]byte(spec), &s); err != nil {
		t.Fatal(err)
	}
	p.Object["spec"] = s
	return p
}

// serveWebGateway starts an Envoy of tenant a and backend web of namespace ns (port 80),
// waits until Gateway gw has its address and returns its port 80's loopback address.
func serveWebGateway(t *testing.T, a *framework.Tenant, tc client.Client, ns string, gw *gwv1.Gateway) string {
	t.Helper()
	a.StartEnvoy(framework.EnvoyBootstrap)
	a.ServeBackend(ns, "web", 80, testsupport.StartHTTPBackend)
	testsupport.Eventually(t, 2*time.Minute, "the Gateway's address", func() error {
		get(t, tc, gw)
		if len(gw.Status.Addresses) == 0 {
			return fmt.Errorf("status.addresses %v", gw.Status.Addresses)
		}
		return nil
	})
	return testsupport.Loopback(int(a.GatewayPorts(string(gw.UID), 80)[80]))
}

// webGateway is Gateway gw of namespace ns (one HTTP listener, port 80) and HTTPRoute web
// (web.example.com) to Service web, port 80.
func webGateway(ns string) (*gwv1.Gateway, *gwv1.HTTPRoute) {
	gw := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: ns},
		Spec: gwv1.GatewaySpec{GatewayClassName: kubelbv1alpha1.DefaultClass, Listeners: []gwv1.Listener{
			{Name: "http", Protocol: gwv1.HTTPProtocolType, Port: 80},
		}},
	}
	route := &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
			Hostnames:       []gwv1.Hostname{"web.example.com"},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{
				{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: ptr.To(gwv1.PortNumber(80))}}},
			}}},
		},
	}
	return gw, route
}

// TestProxyProtocolThroughEnvoy: a Gateway behind a load balancer that sends the PROXY
// protocol, with the real manager, the real ccm and a real Envoy. The app team's
// ClientTrafficPolicy says enableProxyProtocol and its SecurityPolicy allows clients in
// 192.0.2.0/24 only. From loopback, through the Gateway's hub port: a connection whose PROXY
// v2 header names 192.0.2.7 is served; one naming 198.51.100.9 is answered 403; one without
// a header is closed without an answer.
func TestProxyProtocolThroughEnvoy(t *testing.T) {
	pair := testenv.StartPair(t)
	tc := pair.Tenant.Client
	if _, err := source.InstallPolicyCRDs(context.Background(), tc, tc); err != nil {
		t.Fatal(err)
	}
	sys := framework.StartSystem(t, pair.Hub, framework.Options{})
	a := sys.AddTenant("a", pair.Tenant, 1, "--enable-gateway-api")

	const ns = "shop"
	a.CreateNamespace(ns, nil)
	a.CreateBackendService(ns, "web", corev1.ServicePort{Name: "http", Port: 80})
	gw, route := webGateway(ns)
	create(t, tc, gw, route,
		egPolicy(t, source.ClientTrafficPolicyKind, ns, "behind-lb", `
targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]
enableProxyProtocol: true
`),
		egPolicy(t, source.SecurityPolicyKind, ns, "partners", `
targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]
authorization: {defaultAction: Deny, rules: [{action: Allow, principal: {clientCIDRs: [192.0.2.0/24]}}]}
`))
	addr := serveWebGateway(t, a, tc, ns, gw)

	testsupport.Eventually(t, time.Minute, "a client behind a PROXY header from 192.0.2.7 served", func() error {
		code, err := testsupport.ProxiedGet(addr, "web.example.com", testsupport.ProxyV2Header("192.0.2.7"))
		if err == nil && code != http.StatusOK {
			return fmt.Errorf("status %d", code)
		}
		return err
	})
	if code, err := testsupport.ProxiedGet(addr, "web.example.com", testsupport.ProxyV2Header("198.51.100.9")); err != nil || code != http.StatusForbidden {
		t.Errorf("a PROXY header from 198.51.100.9: status %d, %v; want 403", code, err)
	}
	if code, err := testsupport.ProxiedGet(addr, "web.example.com", nil); err == nil {
		t.Errorf("no PROXY header: status %d, want the connection closed without an answer", code)
	} else {
		t.Logf("no PROXY header: %v", err)
	}
}
