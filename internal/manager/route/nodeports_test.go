package route

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// TestRouteHubNodePorts: spec.loadBalancer.allocateNodePorts for the Route controller's hub
// Services, as for LoadBalancers' (TestHubNodePorts in internal/manager/loadbalancer). On a
// hub whose NodePort range has 5 ports, with the switch off in the Config, 3 Gateways of 2
// ports each and the shared Ingress Service (8 hub ports) all get their hub Services of type
// LoadBalancer without NodePorts. A Tenant turning the switch on changes its Services in
// place: NodePorts come (a Gateway they do not fit is told ServiceFailed, "range is full");
// turning it off again gives them back, on the same Services, and the range is free.
func TestRouteHubNodePorts(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{ServiceNodePortRange: "30000-30004"})
	c := hub.Client
	ctx := context.Background()
	objects.Create(t, c, objects.Namespace(managerNS, nil))
	objects.Create(t, c, objects.Config(managerNS, kubelbv1alpha1.ConfigSpec{LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{AllocateNodePorts: ptr.To(false)}}))
	ns := "tenant-np"
	tenant := objects.CreateTenant(t, c, objects.Tenant("np", kubelbv1alpha1.TenantSpec{}))
	startManager(t, hub, portalloc.Range{Min: 22000, Max: 22099})

	gateways := []string{"gw-0", "gw-1", "gw-2"}
	for _, name := range gateways {
		if err := c.Create(ctx, gatewayRoute(ns, name, listener("http", 80, "HTTP"), listener("dns", 53, "UDP"))); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Create(ctx, ingressRoute(ns, "ing")); err != nil {
		t.Fatal(err)
	}
	withoutNodePorts := func(s *corev1.Service) error {
		if s.Spec.Type != corev1.ServiceTypeLoadBalancer || ptr.Deref(s.Spec.AllocateLoadBalancerNodePorts, true) {
			return fmt.Errorf("type %s allocateLoadBalancerNodePorts %s", s.Spec.Type, allocateField(s))
		}
		if len(s.Spec.Ports) != 2 {
			return fmt.Errorf("ports %v", targets(s))
		}
		for _, p := range s.Spec.Ports {
			if p.NodePort != 0 {
				return fmt.Errorf("port %s has NodePort %d", p.Name, p.NodePort)
			}
		}
		return nil
	}
	withNodePorts := func(s *corev1.Service) error {
		if !ptr.Deref(s.Spec.AllocateLoadBalancerNodePorts, false) {
			return fmt.Errorf("allocateLoadBalancerNodePorts %s", allocateField(s))
		}
		for _, p := range s.Spec.Ports {
			if p.NodePort == 0 {
				return fmt.Errorf("port %s has no NodePort", p.Name)
			}
		}
		return nil
	}
	for _, name := range gateways {
		waitService(t, c, ns, hubnames.GatewayServiceName(name), withoutNodePorts)
		waitCondition(t, c, ns, name, metav1.ConditionTrue, ReasonApplied)
	}
	waitService(t, c, ns, kubelbv1alpha1.IngressServiceName, withoutNodePorts)
	waitCondition(t, c, ns, "ing", metav1.ConditionTrue, ReasonApplied)

	// The Tenant turns NodePorts on for itself: room for 2 Services of 2 ports. Keep gw-0 and
	// the Ingress Service.
	for _, name := range gateways[1:] {
		if err := c.Delete(ctx, getRoute(t, c, ns, name)); err != nil {
			t.Fatal(err)
		}
		waitGone(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hubnames.GatewayServiceName(name)}})
	}
	kept := []string{hubnames.GatewayServiceName("gw-0"), kubelbv1alpha1.IngressServiceName}
	uids := map[string]types.UID{}
	for _, name := range kept {
		uids[name] = waitService(t, c, ns, name, nil).UID
	}
	setTenant := func(v string) {
		if err := c.Patch(ctx, tenant, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"loadBalancer":{"allocateNodePorts":`+v+`}}}`))); err != nil {
			t.Fatal(err)
		}
	}
	setTenant("true")
	for _, name := range kept {
		if on := waitService(t, c, ns, name, withNodePorts); on.UID != uids[name] {
			t.Errorf("hub Service %s was recreated", name)
		}
	}
	// One NodePort is left: a Gateway of 2 ports is refused by the API server, and its Route
	// says why.
	if err := c.Create(ctx, gatewayRoute(ns, "full", listener("http", 80, "HTTP"), listener("dns", 53, "UDP"))); err != nil {
		t.Fatal(err)
	}
	full := waitCondition(t, c, ns, "full", metav1.ConditionFalse, ReasonServiceFailed)
	if msg := meta.FindStatusCondition(full.Status.Resources.Route.Conditions, ConditionApplied).Message; !strings.Contains(msg, "range is full") {
		t.Errorf("%s message %q does not say the NodePort range is full", ConditionApplied, msg)
	}
	waitEvent(t, c, ns, "full", ReasonServiceFailed)

	// Off again (the Tenant's value unset: the Config's false): the NodePorts are given back
	// (the API server keeps them unless asked), on the same Services, the refused Gateway is
	// served, and the whole range is free for others.
	setTenant("null")
	for _, name := range kept {
		if off := waitService(t, c, ns, name, withoutNodePorts); off.UID != uids[name] {
			t.Errorf("hub Service %s was recreated", name)
		}
	}
	waitService(t, c, ns, hubnames.GatewayServiceName("full"), withoutNodePorts)
	waitCondition(t, c, ns, "full", metav1.ConditionTrue, ReasonApplied)
	testsupport.Eventually(t, waitTimeout, "all 5 NodePorts free again", func() error {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: "every-nodeport"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "x"}}}
		for i := range int32(5) {
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: 80 + i, Protocol: corev1.ProtocolTCP})
		}
		return c.Create(ctx, svc)
	})
	deleteRoutes(t, c, ns)
}

// allocateField shows a Service's allocateLoadBalancerNodePorts ("unset" when nil).
func allocateField(s *corev1.Service) string {
	if s.Spec.AllocateLoadBalancerNodePorts == nil {
		return "unset"
	}
	return fmt.Sprint(*s.Spec.AllocateLoadBalancerNodePorts)
}
