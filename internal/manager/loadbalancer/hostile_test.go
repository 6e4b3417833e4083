package loadbalancer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// nodePortsOf returns the NodePorts of a Service, in port order.
func nodePortsOf(svc *corev1.Service) []int32 {
	var out []int32
	for _, p := range svc.Spec.Ports {
		out = append(out, p.NodePort)
	}
	return out
}

// TestHostileTenantNodePorts (issue 26): on a hub whose NodePort range has 20 ports, the
// victim tenant A holds a NodePort LoadBalancer; attacker B (NodePorts allowed, limit 4)
// asks for 8 NodePort LoadBalancers of 2 ports each, attacker C (allocateNodePorts off)
// asks for spec.type NodePort. Today B took the whole range and C got NodePorts it is not
// allowed, and the platform team's own NodePort Service was refused. Asserted: B holds 4
// NodePorts (its 2 oldest LoadBalancers), the rest QuotaExceeded with an Event; C's hub
// Service is ClusterIP without NodePorts, NodePortsNotAllowed with an Event; A's NodePorts
// are the ones it had; the platform team's 4-port NodePort Service is created.
func TestHostileTenantNodePorts(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{ServiceNodePortRange: "30000-30019"})
	c := hub.Client
	ctx := context.Background()
	objects.Create(t, c, objects.Namespace(managerNS, nil))
	objects.Create(t, c, objects.Config(managerNS, kubelbv1alpha1.ConfigSpec{Limits: kubelbv1alpha1.Limits{NodePorts: ptr.To[int32](4)}}))
	for _, tn := range []*kubelbv1alpha1.Tenant{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: kubelbv1alpha1.TenantSpec{
			LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{AllocateNodePorts: ptr.To(false)}}},
	} {
		objects.CreateTenant(t, c, tn)
	}
	startController(t, hub, Options{Namespace: managerNS, PortRange: portalloc.Range{Min: 10000, Max: 10099}}, 200, 400)

	nodePortLB := func(ns, name string) *kubelbv1alpha1.LoadBalancer {
		lb := newLB(ns, name, tcp(80), tcp(443))
		lb.Spec.Type = corev1.ServiceTypeNodePort
		if err := c.Create(ctx, lb); err != nil {
			t.Fatal(err)
		}
		return lb
	}
	// The victim first.
	nodePortLB("tenant-a", "web")
	waitReady(t, c, "tenant-a", "web", metav1.ConditionTrue, ReasonNoExternalAddress)
	victim := nodePortsOf(waitService(t, c, "tenant-a", "web", nil))
	if slices.Contains(victim, 0) || len(victim) != 2 {
		t.Fatalf("victim's NodePorts %v", victim)
	}

	// Attacker B: 8 LoadBalancers, 16 NodePorts, 4 allowed. Created one by one, so that
	// their age order is their name order.
	for i := range 8 {
		nodePortLB("tenant-b", fmt.Sprintf("flood-%d", i))
	}
	// Attacker C: NodePorts are off for it; spec.type NodePort asks for them anyway.
	nodePortLB("tenant-c", "sneak")

	for i := range 2 {
		name := fmt.Sprintf("flood-%d", i)
		waitReady(t, c, "tenant-b", name, metav1.ConditionTrue, ReasonNoExternalAddress)
	}
	for i := 2; i < 8; i++ {
		name := fmt.Sprintf("flood-%d", i)
		lb := waitReady(t, c, "tenant-b", name, metav1.ConditionFalse, ReasonQuotaExceeded)
		if msg := meta.FindStatusCondition(lb.Status.Conditions, ConditionReady).Message; !strings.Contains(msg, "spec.limits.nodePorts") {
			t.Errorf("%s: message %q does not name the limit", name, msg)
		}
		objects.WaitEvent(t, c, waitTimeout, lbWarning("tenant-b", name, ReasonQuotaExceeded))
	}
	lb := waitReady(t, c, "tenant-c", "sneak", metav1.ConditionFalse, ReasonNodePortsNotAllowed)
	t.Logf("C's condition: %s", meta.FindStatusCondition(lb.Status.Conditions, ConditionReady).Message)
	objects.WaitEvent(t, c, waitTimeout, lbWarning("tenant-c", "sneak", ReasonNodePortsNotAllowed))
	sneak := waitService(t, c, "tenant-c", "sneak", func(s *corev1.Service) error {
		if s.Spec.Type != corev1.ServiceTypeClusterIP {
			return fmt.Errorf("type %s", s.Spec.Type)
		}
		return nil
	})
	if np := nodePortsOf(sneak); slices.ContainsFunc(np, func(p int32) bool { return p != 0 }) {
		t.Errorf("C's hub Service has NodePorts %v", np)
	}

	// What the tenants hold of the range, from the hub's Services.
	held := map[string]int{}
	svcs := &corev1.ServiceList{}
	if err := c.List(ctx, svcs); err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs.Items {
		for _, p := range s.Spec.Ports {
			if p.NodePort != 0 {
				held[s.Namespace]++
			}
		}
	}
	t.Logf("hub NodePorts held by namespace: %v (range of 20)", held)
	if held["tenant-a"] != 2 || held["tenant-b"] != 4 || held["tenant-c"] != 0 {
		t.Errorf("NodePorts held %v; want tenant-a 2, tenant-b 4, tenant-c 0", held)
	}
	if got := nodePortsOf(waitService(t, c, "tenant-a", "web", nil)); !slices.Equal(got, victim) {
		t.Errorf("victim's NodePorts %v, were %v", got, victim)
	}

	// The platform team's own Service takes 4 NodePorts of what is left.
	platform := objects.PlatformNodePortService(managerNS, 4)
	if err := c.Create(ctx, platform); err != nil {
		t.Fatalf("the platform team's NodePort Service was refused: %v", err)
	}

	// Raising B's limit admits the next ones in age order; the platform's ports stay.
	tb := objects.Get(t, c, types.NamespacedName{Name: "b"}, &kubelbv1alpha1.Tenant{})
	tb.Spec.Limits.NodePorts = ptr.To[int32](6)
	if err := c.Update(ctx, tb); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, "tenant-b", "flood-2", metav1.ConditionTrue, ReasonNoExternalAddress)
	waitReady(t, c, "tenant-b", "flood-3", metav1.ConditionFalse, ReasonQuotaExceeded)
	objects.Get(t, c, client.ObjectKeyFromObject(platform), platform)
}

// TestHostileTenantSteeringAnnotations (issue 26): with propagateAllAnnotations on, the
// attacker tenant B annotates its LoadBalancer with the MetalLB, kube-vip, Cilium and
// external-dns annotations that would give its hub Service the victim A's address and DNS
// name. Today they reached B's hub Service. Asserted: B's hub Service carries none of them
// (an innocent annotation still passes), B gets one AnnotationsDropped Warning Event naming
// them, not one per reconcile; the victim's hub Service keeps the address annotation the
// platform team gave it (its Tenant allows MetalLB's annotations).
func TestHostileTenantSteeringAnnotations(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	objects.Create(t, c, objects.Namespace(managerNS, nil))
	objects.Create(t, c, objects.Config(managerNS, kubelbv1alpha1.ConfigSpec{AnnotationSettings: kubelbv1alpha1.AnnotationSettings{
		PropagateAllAnnotations: ptr.To(true)}}))
	for _, tn := range []*kubelbv1alpha1.Tenant{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: kubelbv1alpha1.TenantSpec{AnnotationSettings: kubelbv1alpha1.AnnotationSettings{
			AllowedSteeringAnnotations: []string{"metallb.universe.tf/loadBalancerIPs"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}},
	} {
		objects.CreateTenant(t, c, tn)
	}
	startController(t, hub, Options{Namespace: managerNS, PortRange: portalloc.Range{Min: 10000, Max: 10099}}, 200, 400)

	const victimIP = "192.0.2.10"
	victim := newLB("tenant-a", "web", tcp(80))
	victim.Annotations = map[string]string{"metallb.universe.tf/loadBalancerIPs": victimIP}
	if err := c.Create(ctx, victim); err != nil {
		t.Fatal(err)
	}
	waitService(t, c, "tenant-a", "web", objects.Annotated("metallb.universe.tf/loadBalancerIPs", victimIP))

	steering := map[string]string{
		"metallb.universe.tf/loadBalancerIPs":                          victimIP,
		"metallb.io/allow-shared-ip":                                   "web",
		"kube-vip.io/loadbalancerIPs":                                  victimIP,
		"lbipam.cilium.io/ips":                                         victimIP,
		"io.cilium/lb-ipam-ips":                                        victimIP,
		"external-dns.alpha.kubernetes.io/hostname":                    "web.a.example.com",
		"service.beta.kubernetes.io/aws-load-balancer-eip-allocations": "eipalloc-victim",
	}
	attack := newLB("tenant-b", "steal", tcp(80))
	attack.Annotations = map[string]string{"team": "b"}
	maps.Copy(attack.Annotations, steering)
	if err := c.Create(ctx, attack); err != nil {
		t.Fatal(err)
	}
	svc := waitService(t, c, "tenant-b", "steal", objects.Annotated("team", "b"))
	for k := range steering {
		if v, ok := svc.Annotations[k]; ok {
			t.Errorf("B's hub Service carries %s=%s", k, v)
		}
	}
	objects.WaitEvent(t, c, waitTimeout, lbWarning("tenant-b", "steal", ReasonAnnotationsDropped))

	// Another change of the LoadBalancer reconciles it again: no second Event for the
	// same keys.
	if err := c.Get(ctx, client.ObjectKeyFromObject(attack), attack); err != nil {
		t.Fatal(err)
	}
	attack.Annotations["team"] = "b2"
	if err := c.Update(ctx, attack); err != nil {
		t.Fatal(err)
	}
	waitService(t, c, "tenant-b", "steal", objects.Annotated("team", "b2"))
	if n := objects.CountEvents(t, c, lbWarning("tenant-b", "steal", ReasonAnnotationsDropped)); n != 1 {
		t.Errorf("%d AnnotationsDropped Events, want 1", n)
	}
	list, err := objects.Events(context.Background(), c, lbWarning("tenant-b", "steal", ReasonAnnotationsDropped))
	if err != nil {
		t.Fatal(err)
	}
	for k := range steering {
		if !slices.ContainsFunc(list, func(e eventsv1.Event) bool { return strings.Contains(e.Note, k) }) {
			t.Errorf("the Event does not name %s: %v", k, list)
		}
	}
	// The victim's hub Service is as the platform team allowed it.
	waitService(t, c, "tenant-a", "web", objects.Annotated("metallb.universe.tf/loadBalancerIPs", victimIP))
}
