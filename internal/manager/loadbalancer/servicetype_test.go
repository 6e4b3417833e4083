package loadbalancer

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

// TestServiceType: a LoadBalancer's spec.type decides its hub Service's type, on a real API
// server: ClusterIP and NodePort get no address (Ready True, NoExternalAddress, saying why),
// NodePort shows its hub NodePorts, LoadBalancer its address; changing the type changes the
// hub Service in place (same Service, same listener port: the allocation is kept), dropping
// what the old type had (NodePorts, class, address); an unsupported type is told.
func TestServiceType(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	objects.Create(t, c, objects.Namespace(managerNS, nil))
	// A load balancer class, which only a Service of type LoadBalancer may carry.
	objects.Create(t, c, objects.Config(managerNS, kubelbv1alpha1.ConfigSpec{LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{Class: ptr.To("config-class")}}))
	ns := "tenant-types"
	objects.Create(t, c, objects.ManagedNamespace(ns))
	opts := Options{Namespace: managerNS, PortRange: portalloc.Range{Min: 10000, Max: 10099}}
	startController(t, hub, opts, 200, 400)

	withType := func(name string, typ corev1.ServiceType) *kubelbv1alpha1.LoadBalancer {
		lb := newLB(ns, name, kubelbv1alpha1.LoadBalancerPort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80},
			kubelbv1alpha1.LoadBalancerPort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53})
		lb.Spec.Type = typ
		lb.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		if err := c.Create(ctx, lb); err != nil {
			t.Fatal(err)
		}
		return lb
	}
	hubType := func(typ corev1.ServiceType) func(*corev1.Service) error {
		return func(s *corev1.Service) error {
			if s.Spec.Type != typ {
				return fmt.Errorf("type %s, want %s", s.Spec.Type, typ)
			}
			return nil
		}
	}
	noAddress := func(t *testing.T, lb *kubelbv1alpha1.LoadBalancer, typ corev1.ServiceType) {
		t.Helper()
		if len(lb.Status.LoadBalancer.Ingress) != 0 {
			t.Errorf("status.loadBalancer %+v: a %s LoadBalancer has no address", lb.Status.LoadBalancer, typ)
		}
		ready := meta.FindStatusCondition(lb.Status.Conditions, ConditionReady)
		if !strings.Contains(ready.Message, "No external address for spec.type "+string(typ)) {
			t.Errorf("Ready message %q does not say why there is no address", ready.Message)
		}
	}

	t.Run("ClusterIP", func(t *testing.T) {
		withType("cip", corev1.ServiceTypeClusterIP)
		svc := waitService(t, c, ns, "cip", hubType(corev1.ServiceTypeClusterIP))
		if svc.Spec.LoadBalancerClass != nil || svc.Spec.ExternalTrafficPolicy != "" || svc.Spec.AllocateLoadBalancerNodePorts != nil {
			t.Errorf("a ClusterIP hub Service with fields of another type: %+v", svc.Spec)
		}
		for _, p := range svc.Spec.Ports {
			if p.NodePort != 0 {
				t.Errorf("port %s has NodePort %d", p.Name, p.NodePort)
			}
		}
		lb := waitReady(t, c, ns, "cip", metav1.ConditionTrue, ReasonNoExternalAddress)
		noAddress(t, lb, corev1.ServiceTypeClusterIP)
		if len(upstreamPorts(lb)) != 2 {
			t.Errorf("allocated ports %v", upstreamPorts(lb))
		}
	})

	t.Run("NodePort", func(t *testing.T) {
		withType("np", corev1.ServiceTypeNodePort)
		svc := waitService(t, c, ns, "np", hubType(corev1.ServiceTypeNodePort))
		if svc.Spec.LoadBalancerClass != nil || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
			t.Errorf("NodePort hub Service spec %+v", svc.Spec)
		}
		lb := waitReady(t, c, ns, "np", metav1.ConditionTrue, ReasonNoExternalAddress)
		noAddress(t, lb, corev1.ServiceTypeNodePort)
		// The status tells the tenant the hub NodePorts its ports are reachable at.
		testsupport.Eventually(t, waitTimeout, "the hub NodePorts in the status", func() error {
			lb := getLB(t, c, ns, "np")
			for _, p := range lb.Status.Service.Ports {
				if want := nodePortOf(svc, p.Port, p.Protocol); p.NodePort == 0 || p.NodePort != want {
					return fmt.Errorf("port %s: nodePort %d, hub Service has %d", p.Name, p.NodePort, want)
				}
			}
			return nil
		})
	})

	t.Run("LoadBalancer", func(t *testing.T) {
		withType("lb", corev1.ServiceTypeLoadBalancer)
		svc := waitService(t, c, ns, "lb", hubType(corev1.ServiceTypeLoadBalancer))
		if ptr.Deref(svc.Spec.LoadBalancerClass, "") != "config-class" || !ptr.Deref(svc.Spec.AllocateLoadBalancerNodePorts, false) {
			t.Errorf("LoadBalancer hub Service spec %+v", svc.Spec)
		}
		waitReady(t, c, ns, "lb", metav1.ConditionFalse, ReasonWaitingForAddress)
		playLoadBalancer(t, c, ns, "lb", "127.0.0.20")
		lb := waitReady(t, c, ns, "lb", metav1.ConditionTrue, ReasonAddressAssigned)
		if ing := lb.Status.LoadBalancer.Ingress; len(ing) != 1 || ing[0].IP != "127.0.0.20" {
			t.Errorf("status.loadBalancer %+v", lb.Status.LoadBalancer)
		}
	})

	// LoadBalancer → ClusterIP → NodePort → LoadBalancer on the same LoadBalancer.
	t.Run("TypeChanges", func(t *testing.T) {
		before := waitService(t, c, ns, "lb", hubType(corev1.ServiceTypeLoadBalancer))
		targets := map[string]int32{}
		for _, p := range before.Spec.Ports {
			if p.NodePort == 0 {
				t.Fatalf("a LoadBalancer hub Service without NodePorts: %+v", before.Spec.Ports)
			}
			targets[p.Name] = p.TargetPort.IntVal
		}
		sameService := func(t *testing.T, svc *corev1.Service) {
			t.Helper()
			if svc.UID != before.UID {
				t.Errorf("the hub Service was recreated (uid %s, was %s)", svc.UID, before.UID)
			}
			for _, p := range svc.Spec.Ports {
				if p.TargetPort.IntVal != targets[p.Name] {
					t.Errorf("port %s: listener port %d, was %d", p.Name, p.TargetPort.IntVal, targets[p.Name])
				}
			}
		}
		setType := func(typ corev1.ServiceType) {
			if err := c.Patch(ctx, getLB(t, c, ns, "lb"), client.RawPatch(types.MergePatchType,
				[]byte(`{"spec":{"type":"`+string(typ)+`"}}`))); err != nil {
				t.Fatal(err)
			}
		}

		setType(corev1.ServiceTypeClusterIP)
		svc := waitService(t, c, ns, "lb", hubType(corev1.ServiceTypeClusterIP))
		sameService(t, svc)
		for _, p := range svc.Spec.Ports {
			if p.NodePort != 0 {
				t.Errorf("port %s kept NodePort %d as ClusterIP", p.Name, p.NodePort)
			}
		}
		if svc.Spec.LoadBalancerClass != nil || svc.Spec.ExternalTrafficPolicy != "" || svc.Spec.AllocateLoadBalancerNodePorts != nil {
			t.Errorf("the ClusterIP hub Service kept fields of type LoadBalancer: %+v", svc.Spec)
		}
		// The address the hub's load balancer gave the old type is not shown any more.
		lb := waitReady(t, c, ns, "lb", metav1.ConditionTrue, ReasonNoExternalAddress)
		noAddress(t, lb, corev1.ServiceTypeClusterIP)

		setType(corev1.ServiceTypeNodePort)
		svc = waitService(t, c, ns, "lb", func(s *corev1.Service) error {
			if err := hubType(corev1.ServiceTypeNodePort)(s); err != nil {
				return err
			}
			if s.Spec.Ports[0].NodePort == 0 {
				return fmt.Errorf("no NodePort yet")
			}
			return nil
		})
		sameService(t, svc)
		lb = waitReady(t, c, ns, "lb", metav1.ConditionTrue, ReasonNoExternalAddress)
		noAddress(t, lb, corev1.ServiceTypeNodePort)

		setType(corev1.ServiceTypeLoadBalancer)
		svc = waitService(t, c, ns, "lb", hubType(corev1.ServiceTypeLoadBalancer))
		sameService(t, svc)
		if ptr.Deref(svc.Spec.LoadBalancerClass, "") != "config-class" {
			t.Errorf("class %v, want config-class", svc.Spec.LoadBalancerClass)
		}
		playLoadBalancer(t, c, ns, "lb", "127.0.0.21")
		lb = waitReady(t, c, ns, "lb", metav1.ConditionTrue, ReasonAddressAssigned)
		if ing := lb.Status.LoadBalancer.Ingress; len(ing) != 1 || ing[0].IP != "127.0.0.21" {
			t.Errorf("status.loadBalancer %+v", lb.Status.LoadBalancer)
		}
	})

	t.Run("Unsupported", func(t *testing.T) {
		withType("ext", corev1.ServiceTypeExternalName)
		waitService(t, c, ns, "ext", hubType(corev1.ServiceTypeClusterIP))
		lb := waitReady(t, c, ns, "ext", metav1.ConditionFalse, ReasonUnsupportedType)
		if msg := meta.FindStatusCondition(lb.Status.Conditions, ConditionReady).Message; !strings.Contains(msg, "ExternalName") {
			t.Errorf("Ready message %q does not name the type", msg)
		}
		objects.WaitEvent(t, c, waitTimeout, lbWarning(ns, "ext", ReasonUnsupportedType))
	})
	deleteAll(t, c, ns)
}

// nodePortOf is the NodePort of a Service's port.
func nodePortOf(svc *corev1.Service, port int32, proto corev1.Protocol) int32 {
	for _, p := range svc.Spec.Ports {
		if p.Port == port && p.Protocol == proto {
			return p.NodePort
		}
	}
	return 0
}

// TestHubNodePorts: spec.loadBalancer.allocateNodePorts. On a hub whose NodePort range has 5
// ports (--service-node-port-range), a Service needing more NodePorts is refused; with the
// switch off in the Config, 4 LoadBalancers of 3 ports each (12 hub ports) all get their
// hub Service of type LoadBalancer, without NodePorts, and their address. A Tenant turning the
// switch on and off again changes its hub Services in place: NodePorts come (a LoadBalancer
// they do not fit is told ServiceFailed, "range is full"), and go again (it is served).
func TestHubNodePorts(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{ServiceNodePortRange: "30000-30004"})
	c := hub.Client
	ctx := context.Background()
	objects.Create(t, c, objects.Namespace(managerNS, nil))

	// The range is really that small: 6 NodePorts do not fit.
	tooMany := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: "too-many-nodeports"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "x"}}}
	for i := range int32(6) {
		tooMany.Spec.Ports = append(tooMany.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: 80 + i, Protocol: corev1.ProtocolTCP})
	}
	if err := c.Create(ctx, tooMany); err == nil {
		t.Fatal("a Service with 6 NodePorts fits in a range of 5")
	} else if !strings.Contains(err.Error(), "range is full") {
		t.Fatalf("a Service with 6 NodePorts: %v, want the range to be full", err)
	}

	objects.Create(t, c, objects.Config(managerNS, kubelbv1alpha1.ConfigSpec{LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{AllocateNodePorts: ptr.To(false)}}))
	ns := "tenant-many"
	tenant := objects.CreateTenant(t, c, objects.Tenant("many", kubelbv1alpha1.TenantSpec{}))
	startController(t, hub, Options{Namespace: managerNS, PortRange: portalloc.Range{Min: 10000, Max: 10099}}, 200, 400)

	const lbs = 4
	for i := range lbs {
		if err := c.Create(ctx, newLB(ns, fmt.Sprintf("lb-%d", i), tcp(80), tcp(443), kubelbv1alpha1.LoadBalancerPort{Protocol: corev1.ProtocolUDP, Port: 53})); err != nil {
			t.Fatal(err)
		}
	}
	withoutNodePorts := func(s *corev1.Service) error {
		if s.Spec.Type != corev1.ServiceTypeLoadBalancer || ptr.Deref(s.Spec.AllocateLoadBalancerNodePorts, true) {
			return fmt.Errorf("type %s allocateLoadBalancerNodePorts %v", s.Spec.Type, s.Spec.AllocateLoadBalancerNodePorts)
		}
		for _, p := range s.Spec.Ports {
			if p.NodePort != 0 {
				return fmt.Errorf("port %s has NodePort %d", p.Name, p.NodePort)
			}
		}
		return nil
	}
	for i := range lbs {
		name := fmt.Sprintf("lb-%d", i)
		waitService(t, c, ns, name, withoutNodePorts)
		playLoadBalancer(t, c, ns, name, fmt.Sprintf("127.0.0.%d", 30+i))
		lb := waitReady(t, c, ns, name, metav1.ConditionTrue, ReasonAddressAssigned)
		if len(upstreamPorts(lb)) != 3 {
			t.Errorf("%s: allocated ports %v", name, upstreamPorts(lb))
		}
		for _, p := range lb.Status.Service.Ports {
			if p.NodePort != 0 {
				t.Errorf("%s: status port %s shows NodePort %d", name, p.Name, p.NodePort)
			}
		}
	}

	// The Tenant turns NodePorts on for itself: room for one LoadBalancer's 3 ports. Keep one.
	for i := 1; i < lbs; i++ {
		lb := &kubelbv1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("lb-%d", i)}}
		if err := c.Delete(ctx, lb); err != nil {
			t.Fatal(err)
		}
		objects.WaitGone(t, c, waitTimeout, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hubnames.LoadBalancerServiceName(lb.Name)}})
	}
	before := waitService(t, c, ns, "lb-0", nil)
	setTenant := func(v string) {
		if err := c.Patch(ctx, tenant, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"loadBalancer":{"allocateNodePorts":`+v+`}}}`))); err != nil {
			t.Fatal(err)
		}
	}
	setTenant("true")
	on := waitService(t, c, ns, "lb-0", func(s *corev1.Service) error {
		if !ptr.Deref(s.Spec.AllocateLoadBalancerNodePorts, false) {
			return fmt.Errorf("allocateLoadBalancerNodePorts %v", s.Spec.AllocateLoadBalancerNodePorts)
		}
		for _, p := range s.Spec.Ports {
			if p.NodePort == 0 {
				return fmt.Errorf("port %s has no NodePort", p.Name)
			}
		}
		return nil
	})
	if on.UID != before.UID {
		t.Errorf("the hub Service was recreated")
	}
	testsupport.Eventually(t, waitTimeout, "the NodePorts in the status", func() error {
		for _, p := range getLB(t, c, ns, "lb-0").Status.Service.Ports {
			if p.NodePort == 0 {
				return fmt.Errorf("port %d: no NodePort", p.Port)
			}
		}
		return nil
	})
	// The range (5) has no room for another 3: the hub Service is refused, and the
	// LoadBalancer says why.
	if err := c.Create(ctx, newLB(ns, "full", tcp(80), tcp(443), tcp(8080))); err != nil {
		t.Fatal(err)
	}
	full := waitReady(t, c, ns, "full", metav1.ConditionFalse, ReasonServiceFailed)
	if msg := meta.FindStatusCondition(full.Status.Conditions, ConditionReady).Message; !strings.Contains(msg, "range is full") {
		t.Errorf("Ready message %q does not say the NodePort range is full", msg)
	}
	// Off again: the NodePorts allocated meanwhile are given back (the API server keeps
	// them unless asked), and the range is free for others.
	setTenant("null")
	off := waitService(t, c, ns, "lb-0", withoutNodePorts)
	if off.UID != before.UID {
		t.Errorf("the hub Service was recreated")
	}
	waitService(t, c, ns, "full", withoutNodePorts)
	testsupport.Eventually(t, waitTimeout, "all 5 NodePorts free again", func() error {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: "every-nodeport"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "x"}}}
		for i := range int32(5) {
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: 80 + i, Protocol: corev1.ProtocolTCP})
		}
		return c.Create(ctx, svc)
	})
	deleteAll(t, c, ns)
}
