package conformance

import (
	"context"
	"net"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/utils/http"
	"sigs.k8s.io/gateway-api/conformance/utils/kubernetes"
	"sigs.k8s.io/gateway-api/conformance/utils/roundtripper"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"

	"kubelb.dev/kubelb/internal/ccm/source"
)

// TrafficTest runs only trafficThroughStaticAddress (KUBELB_CONFORMANCE_RUN_TEST).
const TrafficTest = "KubelbStaticAddressTraffic"

// StaticTrafficAddress is the static address trafficThroughStaticAddress asks for: inside the
// tenant's grant, another than the suite's.
const StaticTrafficAddress = "10.245.2.2"

// trafficThroughStaticAddress is what the suite does not do for two features it checks by
// status alone: it sends requests. A Gateway asking for a static address the tenant is granted
// (GatewayStaticAddresses) is served there; its tenant Service (GatewayInfrastructure) carries
// its infrastructure labels and resolves, through its EndpointSlices, to an address that
// serves the Gateway's routes, as an in-cluster client would reach it. It runs on the
// suite's base resources (the infra backends), after the main run.
func trafficThroughStaticAddress(t *testing.T, c client.Client, opts suite.ConformanceOptions) {
	ctx := context.Background()
	ns := suite.InfrastructureNamespace
	gwNN := types.NamespacedName{Namespace: ns, Name: "kubelb-static-traffic"}
	routeNN := types.NamespacedName{Namespace: ns, Name: "kubelb-static-traffic"}
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: gwNN.Namespace, Name: gwNN.Name},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: gatewayv1.ObjectName(opts.GatewayClassName),
			Addresses:        []gatewayv1.GatewaySpecAddress{{Type: ptr.To(gatewayv1.IPAddressType), Value: StaticTrafficAddress}},
			Infrastructure:   &gatewayv1.GatewayInfrastructure{Labels: map[gatewayv1.LabelKey]gatewayv1.LabelValue{"team": "shop"}},
			Listeners:        []gatewayv1.Listener{{Name: "http", Port: 8080, Protocol: gatewayv1.HTTPProtocolType}},
		},
	}
	route := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: routeNN.Namespace, Name: routeNN.Name},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: gatewayv1.ObjectName(gw.Name)}}},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: "infra-backend-v1", Port: ptr.To(gatewayv1.PortNumber(8080))}}}}}},
		},
	}
	for _, o := range []client.Object{gw, route} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
	class := &gatewayv1.GatewayClass{}
	if err := c.Get(ctx, types.NamespacedName{Name: opts.GatewayClassName}, class); err != nil {
		t.Fatal(err)
	}
	gwAddr := kubernetes.GatewayAndHTTPRoutesMustBeAccepted(t, c, opts.TimeoutConfig, string(class.Spec.ControllerName), kubernetes.NewGatewayRef(gwNN), routeNN)
	if host, _, _ := net.SplitHostPort(gwAddr); host != StaticTrafficAddress {
		t.Fatalf("the Gateway is at %s, want the static address %s it asked for", gwAddr, StaticTrafficAddress)
	}
	rt := &roundtripper.DefaultRoundTripper{TimeoutConfig: opts.TimeoutConfig}
	expected := http.ExpectedResponse{Request: http.Request{Path: "/"}, Backend: "infra-backend-v1", Namespace: ns}
	http.MakeRequestAndExpectEventuallyConsistentResponse(t, rt, opts.TimeoutConfig, gwAddr, expected)

	// The tenant Service of the Gateway: its labels, and the address its EndpointSlices give.
	svcName, ok := source.GatewayServiceName(gw.Name)
	if !ok {
		t.Fatalf("no tenant Service name for Gateway %s", gw.Name)
	}
	var addr string
	err := wait.PollUntilContextTimeout(ctx, opts.TimeoutConfig.DefaultPollInterval, opts.TimeoutConfig.DefaultTestTimeout, true, func(ctx context.Context) (bool, error) {
		slices := &discoveryv1.EndpointSliceList{}
		if err := c.List(ctx, slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: svcName}); err != nil {
			return false, nil
		}
		for _, s := range slices.Items {
			if len(s.Endpoints) > 0 && len(s.Endpoints[0].Addresses) > 0 && len(s.Ports) > 0 && s.Ports[0].Port != nil {
				addr = net.JoinHostPort(s.Endpoints[0].Addresses[0], strconv.Itoa(int(*s.Ports[0].Port)))
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no EndpointSlice of the Gateway's tenant Service %s/%s with an address: %v", ns, svcName, err)
	}
	if addr != gwAddr {
		t.Fatalf("the tenant Service %s/%s resolves to %s, want the Gateway's %s", ns, svcName, addr, gwAddr)
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: svcName}, svc); err != nil {
		t.Fatal(err)
	}
	if svc.Labels["team"] != "shop" || svc.Labels[gatewayv1.GatewayNameLabelKey] != gw.Name {
		t.Errorf("the tenant Service's labels are %v, want the Gateway's infrastructure label team=shop and %s=%s", svc.Labels, gatewayv1.GatewayNameLabelKey, gw.Name)
	}
	http.MakeRequestAndExpectEventuallyConsistentResponse(t, rt, opts.TimeoutConfig, addr, expected)
}
