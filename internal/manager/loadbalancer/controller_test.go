package loadbalancer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ir"
	statuspkg "kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
	"kubelb.dev/kubelb/internal/translate"
)

const managerNS = "kubelb-system"

// TestController runs the controller in-process against a real API server. The subtests
// share the API server and run one after another, each with a manager of its own.
func TestController(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	objects.Create(t, c, objects.Namespace(managerNS, nil))
	cfg := objects.Config(managerNS, kubelbv1alpha1.ConfigSpec{
		AnnotationSettings: objects.AnnotationSettings(kubelbv1alpha1.AnnotatedResourceService, kubelbv1alpha1.Annotations{"default.example.com/a": "b"}),
		LoadBalancer:       kubelbv1alpha1.LoadBalancerSettings{Class: ptr.To("config-class")},
	})
	objects.Create(t, c, cfg)
	opts := Options{Namespace: managerNS, PortRange: portalloc.Range{Min: 10000, Max: 10099}}

	t.Run("HubServiceStatusAndSettings", func(t *testing.T) {
		tenant := objects.CreateTenant(t, c, objects.Tenant("a", kubelbv1alpha1.TenantSpec{}))
		m := startController(t, hub, opts, 200, 400)

		lb := newLB("tenant-a", "1f0c5b2a-0000-4000-8000-000000000001",
			kubelbv1alpha1.LoadBalancerPort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80},
			kubelbv1alpha1.LoadBalancerPort{Protocol: corev1.ProtocolUDP, Port: 53})
		lb.Labels = map[string]string{kubelbv1alpha1.LabelOriginName: "web", kubelbv1alpha1.LabelOriginNamespace: "default", kubelbv1alpha1.LabelTenantName: "a"}
		lb.Annotations = map[string]string{"keep.example.com/x": "1", "drop.example.com/y": "2"}
		lb.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		if err := c.Create(ctx, lb); err != nil {
			t.Fatal(err)
		}

		got := waitReady(t, c, lb.Namespace, lb.Name, metav1.ConditionFalse, ReasonWaitingForAddress)
		// Nothing serves the hub's Services here: the condition says who should.
		if c := meta.FindStatusCondition(got.Status.Conditions, ConditionReady); !strings.Contains(c.Message, "hub Service tenant-a/"+hubnames.LoadBalancerServiceName(lb.Name)) ||
			!strings.Contains(c.Message, "load-balancer class") {
			t.Errorf("Ready %+v: want the hub Service and the class it waits for", c)
		}
		if len(got.Finalizers) != 0 {
			t.Errorf("finalizers %v: the manager needs none of its own", got.Finalizers)
		}
		ports := upstreamPorts(got)
		if len(ports) != 2 || ports[0] == ports[1] || !opts.PortRange.Contains(ports[0]) || !opts.PortRange.Contains(ports[1]) {
			t.Fatalf("allocated ports %v", ports)
		}
		if got.Status.Service.Ports[0].Name != "http" || got.Status.Service.Ports[1].Protocol != corev1.ProtocolUDP {
			t.Errorf("status ports %+v", got.Status.Service.Ports)
		}
		svc := waitService(t, c, lb.Namespace, lb.Name, nil)
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || ptr.Deref(svc.Spec.LoadBalancerClass, "") != "config-class" ||
			svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
			t.Errorf("hub Service spec %+v", svc.Spec)
		}
		if diff := cmp.Diff(hubnames.EnvoyPodLabels("tenant-a"), svc.Spec.Selector); diff != "" {
			t.Errorf("selector: %s", diff)
		}
		wantLabels := map[string]string{
			kubelbv1alpha1.LabelManagedBy: "kubelb", kubelbv1alpha1.LabelLoadBalancerName: lb.Name,
			kubelbv1alpha1.LabelLoadBalancerNS: "tenant-a", kubelbv1alpha1.LabelOriginName: "web",
			kubelbv1alpha1.LabelOriginNamespace: "default", kubelbv1alpha1.LabelTenantName: "a",
		}
		if diff := cmp.Diff(wantLabels, svc.Labels); diff != "" {
			t.Errorf("labels (-want +got):\n%s", diff)
		}
		wantAnn := map[string]string{"keep.example.com/x": "1", "default.example.com/a": "b"}
		if diff := cmp.Diff(wantAnn, svc.Annotations); diff != "" {
			t.Errorf("annotations (-want +got):\n%s", diff)
		}
		type port struct {
			Name         string
			Proto        corev1.Protocol
			Port, Target int32
		}
		var svcPorts []port
		for _, p := range svc.Spec.Ports {
			svcPorts = append(svcPorts, port{p.Name, p.Protocol, p.Port, p.TargetPort.IntVal})
		}
		if diff := cmp.Diff([]port{{"http", "TCP", 80, ports[0]}, {"udp-53", "UDP", 53, ports[1]}}, svcPorts); diff != "" {
			t.Errorf("hub Service ports (-want +got):\n%s", diff)
		}

		// The test plays MetalLB: the address shows up in the LoadBalancer status.
		playLoadBalancer(t, c, lb.Namespace, lb.Name, "127.0.0.10")
		got = waitReady(t, c, lb.Namespace, lb.Name, metav1.ConditionTrue, ReasonAddressAssigned)
		if ing := got.Status.LoadBalancer.Ingress; len(ing) != 1 || ing[0].IP != "127.0.0.10" {
			t.Errorf("status.loadBalancer %+v", got.Status.LoadBalancer)
		}

		// Nothing changed → nothing written: force reconciles with a Tenant change that does
		// not affect the hub Service, and a foreign annotation on the hub Service.
		svc = waitService(t, c, lb.Namespace, lb.Name, nil)
		t.Logf("writes for one LoadBalancer up to its address: %s", m.writes)
		writes, reconciles := m.writes.Total(), m.Reconciles(lb.Namespace, lb.Name)
		lbRV, svcRV := got.ResourceVersion, svc.ResourceVersion
		if err := c.Patch(ctx, tenant, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"envoyProxy":{"replicas":2}}}`))); err != nil {
			t.Fatal(err)
		}
		testsupport.Eventually(t, waitTimeout, "a reconcile after the Tenant change", func() error {
			if m.Reconciles(lb.Namespace, lb.Name) <= reconciles {
				return fmt.Errorf("not reconciled yet")
			}
			return nil
		})
		if m.writes.Total() != writes {
			t.Errorf("an unchanged reconcile wrote: %s (before: %d writes)", m.writes, writes)
		}
		if now := getLB(t, c, lb.Namespace, lb.Name); now.ResourceVersion != lbRV {
			t.Errorf("LoadBalancer resourceVersion %s → %s", lbRV, now.ResourceVersion)
		}
		if now := waitService(t, c, lb.Namespace, lb.Name, nil); now.ResourceVersion != svcRV {
			t.Errorf("hub Service resourceVersion %s → %s", svcRV, now.ResourceVersion)
		}

		// Tenant class overrides Config: the Service is recreated with the new (immutable) class.
		oldUID := svc.UID
		if err := c.Patch(ctx, tenant, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"loadBalancer":{"class":"tenant-class"}}}`))); err != nil {
			t.Fatal(err)
		}
		svc = waitService(t, c, lb.Namespace, lb.Name, func(s *corev1.Service) error {
			if ptr.Deref(s.Spec.LoadBalancerClass, "") != "tenant-class" || s.UID == oldUID {
				return fmt.Errorf("class %v", ptr.Deref(s.Spec.LoadBalancerClass, "<nil>"))
			}
			return nil
		})
		if diff := cmp.Diff(ports, []int32{svc.Spec.Ports[0].TargetPort.IntVal, svc.Spec.Ports[1].TargetPort.IntVal}); diff != "" {
			t.Errorf("ports changed with the class: %s", diff)
		}
		waitReady(t, c, lb.Namespace, lb.Name, metav1.ConditionFalse, ReasonWaitingForAddress)

		// Without a Tenant class the Config class applies, and Config changes are followed.
		if err := c.Patch(ctx, cfg, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"loadBalancer":{"class":"config-class-2"}}}`))); err != nil {
			t.Fatal(err)
		}
		if err := c.Patch(ctx, tenant, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"loadBalancer":{"class":null}}}`))); err != nil {
			t.Fatal(err)
		}
		waitService(t, c, lb.Namespace, lb.Name, func(s *corev1.Service) error {
			if ptr.Deref(s.Spec.LoadBalancerClass, "") != "config-class-2" {
				return fmt.Errorf("class %v", ptr.Deref(s.Spec.LoadBalancerClass, "<nil>"))
			}
			return nil
		})

		// An annotation the tenant stops setting leaves the hub Service.
		if err := c.Patch(ctx, getLB(t, c, lb.Namespace, lb.Name), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"keep.example.com/x":null}}}`))); err != nil {
			t.Fatal(err)
		}
		waitService(t, c, lb.Namespace, lb.Name, func(s *corev1.Service) error {
			if _, ok := s.Annotations["keep.example.com/x"]; ok {
				return fmt.Errorf("annotations %v", s.Annotations)
			}
			return nil
		})

		// Deletion removes the hub Service (no garbage collector runs here).
		deleteAll(t, c, "tenant-a")
		// The ports are freed just after the hub Service is deleted, which the test may see first.
		testsupport.Eventually(t, waitTimeout, "the ports to be freed after deletion", func() error {
			if n := m.r.ports.Allocator().Allocated(); n != 0 {
				return fmt.Errorf("%d ports still allocated", n)
			}
			return nil
		})
	})

	t.Run("PortsStableAcrossRestartAndReused", func(t *testing.T) {
		ns := "tenant-b"
		objects.Create(t, c, objects.ManagedNamespace(ns))
		m1 := startController(t, hub, opts, 200, 400)
		names := []string{"lb-0", "lb-1", "lb-2", "lb-3", "lb-4"}
		for i, name := range names {
			lb := newLB(ns, name, tcp(80))
			if i == 3 {
				lb = newLB(ns, name, tcp(80), tcp(443))
			}
			if err := c.Create(ctx, lb); err != nil {
				t.Fatal(err)
			}
		}
		before := map[string][]int32{}
		for i, name := range names {
			n := 1
			if i == 3 {
				n = 2
			}
			before[name] = upstreamPorts(waitPorts(t, c, ns, name, n))
			waitService(t, c, ns, name, nil)
		}
		// Delete lb-1 and remember its port: the next LoadBalancer gets it.
		freed := before["lb-1"][0]
		lb1 := getLB(t, c, ns, "lb-1")
		if err := c.Delete(ctx, lb1); err != nil {
			t.Fatal(err)
		}
		objects.WaitGone(t, c, waitTimeout, lb1)
		objects.WaitGone(t, c, waitTimeout, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hubnames.LoadBalancerServiceName("lb-1")}})
		delete(before, "lb-1")
		names = slices.DeleteFunc(names, func(n string) bool { return n == "lb-1" })
		m1.stop()

		// A new manager rebuilds the same allocations and, finding nothing to change,
		// writes nothing.
		m2 := startController(t, hub, opts, 200, 400)
		testsupport.Eventually(t, waitTimeout, "every LoadBalancer reconciled by the new manager", func() error {
			for _, name := range names {
				if m2.Reconciles(ns, name) == 0 {
					return fmt.Errorf("%s not reconciled yet", name)
				}
			}
			return nil
		})
		if m2.writes.Total() != 0 {
			t.Errorf("the restarted manager wrote: %s", m2.writes)
		}
		for _, name := range names {
			if got := upstreamPorts(getLB(t, c, ns, name)); !slices.Equal(got, before[name]) {
				t.Errorf("%s: ports %v after restart, were %v", name, got, before[name])
			}
		}
		if err := c.Create(ctx, newLB(ns, "lb-5", tcp(8080))); err != nil {
			t.Fatal(err)
		}
		if got := upstreamPorts(waitPorts(t, c, ns, "lb-5", 1)); got[0] != freed {
			t.Errorf("new LoadBalancer got port %d, want the freed %d", got[0], freed)
		}
		deleteAll(t, c, ns)
	})

	// A new LoadBalancer's status is written once: the allocated ports wait (a bounded
	// while) for the hub Service's address, and the address for the Programmed verdict of
	// the translation (the test plays the Envoy control plane's Report).
	t.Run("NewLoadBalancerStatusWrittenOnce", func(t *testing.T) {
		ns := "tenant-once"
		objects.Create(t, c, objects.ManagedNamespace(ns))
		store := statuspkg.NewStore()
		o := opts
		o.Status, o.AddressWait = store, 15*time.Second
		m := startController(t, hub, o, 200, 400)
		lb := newLB(ns, "web", tcp(80))
		if err := c.Create(ctx, lb); err != nil {
			t.Fatal(err)
		}
		waitService(t, c, ns, lb.Name, nil)
		store.Publish(ns, &statuspkg.Report{Objects: map[ir.ObjectRef]int64{{Kind: translate.KindLoadBalancer, Namespace: ns, Name: lb.Name}: 1}})
		stale := getLB(t, c, ns, lb.Name)
		if len(stale.Status.Conditions) != 0 {
			t.Errorf("status written before the address: %+v", stale.Status)
		}
		playLoadBalancer(t, c, ns, lb.Name, "127.0.0.11")
		got := waitReady(t, c, ns, lb.Name, metav1.ConditionTrue, ReasonAddressAssigned)
		if p := meta.FindStatusCondition(got.Status.Conditions, statuspkg.ConditionProgrammed); p == nil || p.Status != metav1.ConditionTrue || p.Reason != statuspkg.ReasonProgrammed {
			t.Errorf("Programmed %+v, want True/Programmed in the same write", p)
		}
		if len(upstreamPorts(got)) != 1 || len(got.Status.LoadBalancer.Ingress) != 1 {
			t.Errorf("status %+v", got.Status)
		}
		if n := m.writes.Count("PATCH loadbalancers/status"); n != 1 {
			t.Errorf("LoadBalancer status writes: %d (%s), want 1", n, m.writes)
		}
		// A reconcile whose cache has not caught up with that write yet (played here with
		// the copy from before it) writes nothing again.
		ports, err := m.r.ports.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.r.reconcile(ctx, ports, stale); err != nil {
			t.Fatal(err)
		}
		if n := m.writes.Count("PATCH loadbalancers/status"); n != 1 {
			t.Errorf("LoadBalancer status writes after a reconcile from a stale cache: %d (%s), want 1", n, m.writes)
		}

		// The address before the verdict (a burst: the translation comes after the hub
		// Service's address): the first write waits for the Report, which requeues the
		// LoadBalancer, and ports, address, Ready and Programmed are one write.
		late := newLB(ns, "late-verdict", tcp(80))
		if err := c.Create(ctx, late); err != nil {
			t.Fatal(err)
		}
		waitService(t, c, ns, late.Name, nil)
		playLoadBalancer(t, c, ns, late.Name, "127.0.0.12")
		testsupport.Eventually(t, waitTimeout, "the LoadBalancer awaiting its verdict", func() error {
			if n := store.Awaiting(); n != 1 {
				return fmt.Errorf("%d LoadBalancers await a verdict", n)
			}
			return nil
		})
		if got := getLB(t, c, ns, late.Name); len(got.Status.Conditions) != 0 {
			t.Errorf("status written before the verdict: %+v", got.Status)
		}
		store.Publish(ns, &statuspkg.Report{Objects: map[ir.ObjectRef]int64{
			{Kind: translate.KindLoadBalancer, Namespace: ns, Name: lb.Name}:   1,
			{Kind: translate.KindLoadBalancer, Namespace: ns, Name: late.Name}: 1,
		}})
		got = waitReady(t, c, ns, late.Name, metav1.ConditionTrue, ReasonAddressAssigned)
		if p := meta.FindStatusCondition(got.Status.Conditions, statuspkg.ConditionProgrammed); p == nil || p.Status != metav1.ConditionTrue {
			t.Errorf("Programmed %+v, want True in the same write as the address", p)
		}
		if n := m.writes.Count("PATCH loadbalancers/status"); n != 2 {
			t.Errorf("LoadBalancer status writes: %d (%s), want 2 (one per LoadBalancer)", n, m.writes)
		}

		// Without an address, the ports are written once the wait is over; with an address
		// but no verdict, the address is (without Programmed) once the wait is over.
		slow := newLB(ns, "no-address", tcp(80))
		unseen := newLB(ns, "no-verdict", tcp(80))
		for _, lb := range []*kubelbv1alpha1.LoadBalancer{slow, unseen} {
			if err := c.Create(ctx, lb); err != nil {
				t.Fatal(err)
			}
		}
		waitService(t, c, ns, unseen.Name, nil)
		playLoadBalancer(t, c, ns, unseen.Name, "127.0.0.13")
		waitReady(t, c, ns, slow.Name, metav1.ConditionFalse, ReasonWaitingForAddress)
		waitPorts(t, c, ns, slow.Name, 1)
		got = waitReady(t, c, ns, unseen.Name, metav1.ConditionTrue, ReasonAddressAssigned)
		if p := meta.FindStatusCondition(got.Status.Conditions, statuspkg.ConditionProgrammed); p != nil {
			t.Errorf("Programmed %+v without a Report describing the LoadBalancer", p)
		}
		if n := store.Awaiting(); n != 0 {
			t.Errorf("%d LoadBalancers still await a verdict after their wait", n)
		}
		deleteAll(t, c, ns)
	})

	// The manager has no finalizer on LoadBalancers: deleting one is the tenant's one write,
	// and the manager's is the hub Service's delete. No reconcile error is logged.
	t.Run("DeleteIsOneWriteOfTheManager", func(t *testing.T) {
		ns := "tenant-del"
		objects.Create(t, c, objects.ManagedNamespace(ns))
		m := startController(t, hub, opts, 200, 400)
		for _, name := range []string{"lb-0", "lb-1", "lb-2"} {
			if err := c.Create(ctx, newLB(ns, name, tcp(80))); err != nil {
				t.Fatal(err)
			}
			waitPorts(t, c, ns, name, 1)
			waitService(t, c, ns, name, nil)
		}
		before := m.writes.Total()
		allocated := m.r.ports.Allocator().Allocated()
		deleteAll(t, c, ns) // the LoadBalancers are gone at once: nothing holds them
		testsupport.Eventually(t, waitTimeout, "the ports to be freed", func() error {
			if n := m.r.ports.Allocator().Allocated(); n != allocated-3 {
				return fmt.Errorf("%d ports allocated, want %d", n, allocated-3)
			}
			return nil
		})
		if w := m.writes.Total() - before; w != 3 {
			t.Errorf("writes by the manager for deleting 3 LoadBalancers: %d (%s), want 3 (the hub Services' deletes)", w, m.writes)
		}
		if errs := m.Errors(); len(errs) != 0 {
			t.Errorf("reconcile errors: %v", errs)
		}
	})

	// A LoadBalancer made anew under the name of one whose hub Service is still there (the
	// old one controlled by a UID that no longer exists) is not stuck behind it as "foreign":
	// the stale hub Service is replaced.
	t.Run("RecreatedLoadBalancerReplacesStaleHubService", func(t *testing.T) {
		ns := "tenant-stale"
		objects.Create(t, c, objects.ManagedNamespace(ns))
		m := startController(t, hub, opts, 200, 400)
		stale := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hubnames.LoadBalancerServiceName("x"),
				Labels: map[string]string{kubelbv1alpha1.LabelLoadBalancerName: "x", kubelbv1alpha1.LabelLoadBalancerNS: ns,
					kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: kubelbv1alpha1.GroupVersion.String(), Kind: "LoadBalancer", Name: "x",
					UID: "00000000-0000-4000-8000-00000000dead", Controller: ptr.To(true)}}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(10099)}}},
		}
		if err := c.Create(ctx, stale); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, newLB(ns, "x", tcp(80))); err != nil {
			t.Fatal(err)
		}
		lb := getLB(t, c, ns, "x")
		svc := waitService(t, c, ns, "x", func(s *corev1.Service) error {
			if ref := metav1.GetControllerOf(s); ref == nil || ref.UID != lb.UID {
				return fmt.Errorf("controller %v, want the LoadBalancer %s", ref, lb.UID)
			}
			return nil
		})
		if svc.UID == stale.UID {
			t.Error("the stale hub Service was kept")
		}
		waitPorts(t, c, ns, "x", 1)
		if got := getLB(t, c, ns, "x"); meta.IsStatusConditionFalse(got.Status.Conditions, ConditionReady) &&
			meta.FindStatusCondition(got.Status.Conditions, ConditionReady).Reason == ReasonServiceFailed {
			t.Errorf("Ready %+v", got.Status.Conditions)
		}
		if errs := m.Errors(); len(errs) != 0 {
			t.Errorf("reconcile errors: %v", errs)
		}
		deleteAll(t, c, ns)
	})

	// A LoadBalancer an older ccm made with the cleanup finalizer is still cleaned up, and
	// the finalizer removed, so its deletion completes.
	t.Run("LegacyCleanupFinalizerStillRemoved", func(t *testing.T) {
		ns := "tenant-legacy"
		objects.Create(t, c, objects.ManagedNamespace(ns))
		m := startController(t, hub, opts, 200, 400)
		lb := newLB(ns, "old", tcp(80))
		lb.Finalizers = []string{kubelbv1alpha1.CleanupFinalizer}
		if err := c.Create(ctx, lb); err != nil {
			t.Fatal(err)
		}
		waitPorts(t, c, ns, lb.Name, 1)
		svc := waitService(t, c, ns, lb.Name, nil)
		allocated := m.r.ports.Allocator().Allocated()
		if err := c.Delete(ctx, lb); err != nil {
			t.Fatal(err)
		}
		objects.WaitGone(t, c, waitTimeout, lb)
		objects.WaitGone(t, c, waitTimeout, svc)
		testsupport.Eventually(t, waitTimeout, "the port to be freed", func() error {
			if n := m.r.ports.Allocator().Allocated(); n != allocated-1 {
				return fmt.Errorf("%d ports allocated, want %d", n, allocated-1)
			}
			return nil
		})
		if errs := m.Errors(); len(errs) != 0 {
			t.Errorf("reconcile errors: %v", errs)
		}
	})

	// A LoadBalancer deleted while no manager runs leaves its hub Service (owned, but no
	// garbage collector here, and none needed): the next manager's start-up sweep deletes it
	// and its port serves a new LoadBalancer. One deleted and made anew under the same name
	// meanwhile is not stuck behind the old hub Service ("foreign"): that one is stale and
	// is replaced.
	t.Run("OrphansSweptAtStartAndPortsReused", func(t *testing.T) {
		ns := "tenant-orphan"
		objects.Create(t, c, objects.ManagedNamespace(ns))
		m1 := startController(t, hub, opts, 200, 400)
		for _, name := range []string{"keep", "gone", "again"} {
			if err := c.Create(ctx, newLB(ns, name, tcp(80))); err != nil {
				t.Fatal(err)
			}
		}
		ports := map[string]int32{}
		svcs := map[string]*corev1.Service{}
		for _, name := range []string{"keep", "gone", "again"} {
			ports[name] = upstreamPorts(waitPorts(t, c, ns, name, 1))[0]
			svcs[name] = waitService(t, c, ns, name, nil)
		}
		m1.stop()

		gone, again := getLB(t, c, ns, "gone"), getLB(t, c, ns, "again")
		for _, lb := range []*kubelbv1alpha1.LoadBalancer{gone, again} {
			if err := c.Delete(ctx, lb); err != nil {
				t.Fatal(err)
			}
			objects.WaitGone(t, c, waitTimeout, lb)
		}
		if err := c.Create(ctx, newLB(ns, "again", tcp(80))); err != nil {
			t.Fatal(err)
		}
		newAgain := getLB(t, c, ns, "again")

		m2 := startController(t, hub, opts, 200, 400)
		objects.WaitGone(t, c, waitTimeout, svcs["gone"].DeepCopy())
		svc := waitService(t, c, ns, "again", func(s *corev1.Service) error {
			if ref := metav1.GetControllerOf(s); ref == nil || ref.UID != newAgain.UID {
				return fmt.Errorf("controller %v, want the new LoadBalancer %s", ref, newAgain.UID)
			}
			return nil
		})
		if svc.UID == svcs["again"].UID {
			t.Errorf("the stale hub Service was kept")
		}
		waitPorts(t, c, ns, "again", 1)
		if got := upstreamPorts(getLB(t, c, ns, "keep")); !slices.Equal(got, []int32{ports["keep"]}) {
			t.Errorf("keep: ports %v, were %d", got, ports["keep"])
		}
		if err := c.Create(ctx, newLB(ns, "new", tcp(80))); err != nil {
			t.Fatal(err)
		}
		got := upstreamPorts(waitPorts(t, c, ns, "new", 1))[0]
		if got == ports["keep"] || got == upstreamPorts(getLB(t, c, ns, "again"))[0] {
			t.Errorf("new LoadBalancer got port %d, held by another", got)
		}
		if got != ports["gone"] && got != ports["again"] {
			t.Errorf("new LoadBalancer got port %d, want one the sweep freed (%d or %d)", got, ports["gone"], ports["again"])
		}
		if errs := m2.Errors(); len(errs) != 0 {
			t.Errorf("reconcile errors: %v", errs)
		}
		deleteAll(t, c, ns)
	})

	// The allocations are rebuilt from the hub Services, which only the manager writes, not
	// from LoadBalancer status, which the tenant can write: a port a tenant forges into its
	// status does not take another tenant's port away after a restart.
	t.Run("ForgedStatusDoesNotStealAPortAfterRestart", func(t *testing.T) {
		thiefNS, victimNS := "tenant-f1", "tenant-f2"
		objects.Create(t, c, objects.ManagedNamespace(thiefNS))
		objects.Create(t, c, objects.ManagedNamespace(victimNS))
		m1 := startController(t, hub, opts, 200, 400)
		// The thief's LoadBalancer is the older one (and its namespace sorts first), so a
		// rebuild from status would have given it the port.
		if err := c.Create(ctx, newLB(thiefNS, "thief", tcp(80))); err != nil {
			t.Fatal(err)
		}
		thiefPort := upstreamPorts(waitPorts(t, c, thiefNS, "thief", 1))[0]
		if err := c.Create(ctx, newLB(victimNS, "victim", tcp(80))); err != nil {
			t.Fatal(err)
		}
		victimPort := upstreamPorts(waitPorts(t, c, victimNS, "victim", 1))[0]
		waitService(t, c, victimNS, "victim", nil)
		waitService(t, c, thiefNS, "thief", nil)
		m1.stop()

		thief := getLB(t, c, thiefNS, "thief")
		thief.Status.Service.Ports[0].UpstreamTargetPort = victimPort
		thief.Status.Service.Ports[0].TargetPort = intstr.FromInt32(victimPort)
		if err := c.Status().Update(ctx, thief); err != nil {
			t.Fatal(err)
		}

		m2 := startController(t, hub, opts, 200, 400)
		waitService(t, c, victimNS, "victim", func(s *corev1.Service) error {
			if m2.Reconciles(victimNS, "victim") == 0 {
				return fmt.Errorf("not reconciled by the new manager yet")
			}
			if got := s.Spec.Ports[0].TargetPort.IntVal; got != victimPort {
				return fmt.Errorf("victim's listener port %d, want %d", got, victimPort)
			}
			return nil
		})
		testsupport.Eventually(t, waitTimeout, "the thief's status corrected", func() error {
			if got := upstreamPorts(getLB(t, c, thiefNS, "thief")); !slices.Equal(got, []int32{thiefPort}) {
				return fmt.Errorf("thief's status ports %v, want [%d]", got, thiefPort)
			}
			return nil
		})
		if got := upstreamPorts(getLB(t, c, victimNS, "victim")); !slices.Equal(got, []int32{victimPort}) {
			t.Errorf("victim's status ports %v, want [%d]", got, victimPort)
		}
		if holder, _ := m2.r.ports.Allocator().Holder(victimPort); holder.Owner() != (types.NamespacedName{Namespace: victimNS, Name: "victim"}) {
			t.Errorf("port %d held by %s", victimPort, holder)
		}
		if svc := waitService(t, c, thiefNS, "thief", nil); svc.Spec.Ports[0].TargetPort.IntVal != thiefPort {
			t.Errorf("thief's hub Service moved to %v", svc.Spec.Ports[0].TargetPort)
		}
		deleteAll(t, c, thiefNS)
		deleteAll(t, c, victimNS)
	})

	// The tenant label of a hub Service names the tenant whose namespace the LoadBalancer is
	// in, whatever the LoadBalancer's own labels (which the tenant writes) claim.
	t.Run("TenantLabelComesFromTheNamespace", func(t *testing.T) {
		ns := "tenant-la"
		objects.Create(t, c, objects.ManagedNamespace(ns))
		startController(t, hub, opts, 200, 400)
		lb := newLB(ns, "claims-b", tcp(80))
		lb.Labels = map[string]string{kubelbv1alpha1.LabelTenantName: "b", kubelbv1alpha1.LabelOriginName: "web"}
		if err := c.Create(ctx, lb); err != nil {
			t.Fatal(err)
		}
		svc := waitService(t, c, ns, "claims-b", nil)
		if got := svc.Labels[kubelbv1alpha1.LabelTenantName]; got != "la" {
			t.Errorf("hub Service tenant label %q, want %q (from namespace %s)", got, "la", ns)
		}
		if got := svc.Labels[kubelbv1alpha1.LabelOriginName]; got != "web" {
			t.Errorf("hub Service origin-name label %q, want web", got)
		}
		// A LoadBalancer without the label gets it all the same.
		plain := newLB(ns, "plain", tcp(81))
		if err := c.Create(ctx, plain); err != nil {
			t.Fatal(err)
		}
		if got := waitService(t, c, ns, "plain", nil).Labels[kubelbv1alpha1.LabelTenantName]; got != "la" {
			t.Errorf("hub Service tenant label %q, want la", got)
		}
		deleteAll(t, c, ns)
	})

	t.Run("PortsExhaustedOnOneLoadBalancerOnly", func(t *testing.T) {
		ns := "tenant-c"
		objects.Create(t, c, objects.ManagedNamespace(ns))
		small := opts
		small.PortRange = portalloc.Range{Min: 11000, Max: 11001}
		startController(t, hub, small, 200, 400)

		if err := c.Create(ctx, newLB(ns, "first", tcp(80))); err != nil {
			t.Fatal(err)
		}
		if got := upstreamPorts(waitPorts(t, c, ns, "first", 1)); got[0] != 11000 {
			t.Fatalf("first got %v", got)
		}
		// Two ports asked, one free: none is allocated (all or nothing).
		if err := c.Create(ctx, newLB(ns, "greedy", tcp(80), tcp(443))); err != nil {
			t.Fatal(err)
		}
		got := waitReady(t, c, ns, "greedy", metav1.ConditionFalse, ReasonPortsExhausted)
		if len(got.Status.Service.Ports) != 0 {
			t.Errorf("exhausted LoadBalancer has ports %+v", got.Status.Service.Ports)
		}
		objects.WaitEvent(t, c, waitTimeout, lbWarning(ns, "greedy", ReasonPortsExhausted))
		// The others keep working: a third LoadBalancer gets the last port, the first its address.
		if err := c.Create(ctx, newLB(ns, "third", tcp(22))); err != nil {
			t.Fatal(err)
		}
		if got := upstreamPorts(waitPorts(t, c, ns, "third", 1)); got[0] != 11001 {
			t.Fatalf("third got %v", got)
		}
		playLoadBalancer(t, c, ns, "first", "127.0.0.11")
		waitReady(t, c, ns, "first", metav1.ConditionTrue, ReasonAddressAssigned)
		for _, name := range []string{"first", "third"} {
			if n := objects.CountEvents(t, c, lbWarning(ns, name, ReasonPortsExhausted)); n != 0 {
				t.Errorf("%s got %d PortsExhausted events", name, n)
			}
		}
		// A served LoadBalancer that asks for one more port keeps the ports it has, and its hub
		// Service names the one refused (the translation then reports PortNotAllocated for it,
		// not a port still pending).
		objects.Update(t, c, getLB(t, c, ns, "third"), func(lb *kubelbv1alpha1.LoadBalancer) {
			more := newLB(ns, "third", tcp(22), tcp(23))
			lb.Spec.Ports, lb.Spec.Endpoints = more.Spec.Ports, more.Spec.Endpoints
		})
		waitService(t, c, ns, "third", func(s *corev1.Service) error {
			if got := s.Annotations[kubelbv1alpha1.AnnotationPortsExhausted]; got != "TCP/23" || len(s.Spec.Ports) != 1 || s.Spec.Ports[0].TargetPort.IntVal != 11001 {
				return fmt.Errorf("annotation %q, ports %+v", got, s.Spec.Ports)
			}
			return nil
		})
		waitReady(t, c, ns, "third", metav1.ConditionFalse, ReasonPortsExhausted)
		// Freeing both ports wakes the waiting LoadBalancer.
		for _, name := range []string{"first", "third"} {
			lb := getLB(t, c, ns, name)
			if err := c.Delete(ctx, lb); err != nil {
				t.Fatal(err)
			}
			objects.WaitGone(t, c, waitTimeout, lb)
		}
		got = waitPorts(t, c, ns, "greedy", 2)
		if ports := upstreamPorts(got); !slices.Equal(ports, []int32{11000, 11001}) {
			t.Errorf("greedy got %v", ports)
		}
		waitService(t, c, ns, "greedy", nil)
		waitReady(t, c, ns, "greedy", metav1.ConditionFalse, ReasonWaitingForAddress)
		deleteAll(t, c, ns)
	})

	t.Run("DisabledTenant", func(t *testing.T) {
		ns := "tenant-d"
		tenant := objects.CreateTenant(t, c, objects.Tenant("d", kubelbv1alpha1.TenantSpec{}))
		m := startController(t, hub, opts, 200, 400)
		if err := c.Create(ctx, newLB(ns, "lb", tcp(80))); err != nil {
			t.Fatal(err)
		}
		port := upstreamPorts(waitPorts(t, c, ns, "lb", 1))[0]
		waitService(t, c, ns, "lb", nil)
		playLoadBalancer(t, c, ns, "lb", "127.0.0.12")
		waitReady(t, c, ns, "lb", metav1.ConditionTrue, ReasonAddressAssigned)

		if err := c.Patch(ctx, tenant, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"loadBalancer":{"disable":true}}}`))); err != nil {
			t.Fatal(err)
		}
		got := waitReady(t, c, ns, "lb", metav1.ConditionFalse, ReasonLoadBalancingDisabled)
		objects.WaitGone(t, c, waitTimeout, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hubnames.LoadBalancerServiceName("lb")}})
		// No hub Service, no ports: the Service is the one record of an allocation.
		if len(got.Status.LoadBalancer.Ingress) != 0 || len(got.Status.Service.Ports) != 0 {
			t.Errorf("disabled status %+v", got.Status)
		}
		if holder, ok := m.r.ports.Allocator().Holder(port); ok {
			t.Errorf("port %d still held by %s while load balancing is disabled", port, holder)
		}
		// A LoadBalancer created while disabled takes no port either.
		if err := c.Create(ctx, newLB(ns, "later", tcp(81))); err != nil {
			t.Fatal(err)
		}
		later := waitReady(t, c, ns, "later", metav1.ConditionFalse, ReasonLoadBalancingDisabled)
		if len(later.Status.Service.Ports) != 0 {
			t.Errorf("a LoadBalancer created while disabled has ports %+v", later.Status.Service.Ports)
		}
		for k := range m.r.ports.Allocator().Snapshot() {
			if k.Owner().Namespace == ns {
				t.Errorf("port of %s allocated while load balancing is disabled", k)
			}
		}
		if err := c.Patch(ctx, tenant, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"loadBalancer":{"disable":false}}}`))); err != nil {
			t.Fatal(err)
		}
		waitService(t, c, ns, "lb", func(s *corev1.Service) error {
			if !opts.PortRange.Contains(s.Spec.Ports[0].TargetPort.IntVal) {
				return fmt.Errorf("target port %v outside %s", s.Spec.Ports[0].TargetPort, opts.PortRange)
			}
			return nil
		})
		waitService(t, c, ns, "later", nil)
		deleteAll(t, c, ns)
	})

	// The leader-only status writer applies the Programmed condition under its own field
	// owner; the LoadBalancer controller's status writes (server-side apply of its own
	// fields) must keep it. A merge patch of the conditions list would have dropped it.
	t.Run("ProgrammedConditionOfAnotherOwnerSurvives", func(t *testing.T) {
		ns := "tenant-p"
		objects.Create(t, c, objects.ManagedNamespace(ns))
		startController(t, hub, opts, 200, 400)
		if err := c.Create(ctx, newLB(ns, "lb", tcp(80))); err != nil {
			t.Fatal(err)
		}
		waitReady(t, c, ns, "lb", metav1.ConditionFalse, ReasonWaitingForAddress)

		programmed := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{
			"conditions": []any{map[string]any{
				"type": "Programmed", "status": "True", "reason": "Programmed", "message": "in the Envoy snapshot",
				"lastTransitionTime": "2026-01-01T00:00:00Z",
			}},
		}}}
		programmed.SetGroupVersionKind(kubelbv1alpha1.GroupVersion.WithKind("LoadBalancer"))
		programmed.SetNamespace(ns)
		programmed.SetName("lb")
		if err := c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(programmed),
			client.FieldOwner("kubelb-status"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}

		// Changes that rewrite Ready and the ports.
		playLoadBalancer(t, c, ns, "lb", "127.0.0.13")
		waitReady(t, c, ns, "lb", metav1.ConditionTrue, ReasonAddressAssigned)
		if err := c.Patch(ctx, getLB(t, c, ns, "lb"), client.RawPatch(types.MergePatchType,
			[]byte(`{"spec":{"ports":[{"name":"a","port":80,"protocol":"TCP"},{"name":"b","port":81,"protocol":"TCP"}]}}`))); err != nil {
			t.Fatal(err)
		}
		got := waitPorts(t, c, ns, "lb", 2)
		got = waitReady(t, c, ns, "lb", metav1.ConditionTrue, ReasonAddressAssigned)
		if p := meta.FindStatusCondition(got.Status.Conditions, "Programmed"); p == nil || p.Status != metav1.ConditionTrue {
			t.Errorf("the Programmed condition was lost: %+v", got.Status.Conditions)
		}
		owners := map[string]bool{}
		for _, f := range got.ManagedFields {
			if f.Subresource == "status" && f.Operation == metav1.ManagedFieldsOperationApply {
				owners[f.Manager] = true
			}
		}
		if !owners[statuspkg.FieldOwner] || len(owners) != 1 {
			t.Errorf("status appliers %v, want only %s (the one status writer)", owners, statuspkg.FieldOwner)
		}
		deleteAll(t, c, ns)
	})

	t.Run("UnmanagedNamespaceAndForeignService", func(t *testing.T) {
		ns := "plain"
		objects.Create(t, c, objects.Namespace(ns, nil))
		m := startController(t, hub, opts, 200, 400)
		if err := c.Create(ctx, newLB(ns, "lb", tcp(80))); err != nil {
			t.Fatal(err)
		}
		// A Service with the hub Service's name that is not ours: never touched.
		foreign := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hubnames.LoadBalancerServiceName("lb")},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 1}}},
		}
		if err := c.Create(ctx, foreign); err != nil {
			t.Fatal(err)
		}
		testsupport.Eventually(t, waitTimeout, "a reconcile", func() error {
			if m.Reconciles(ns, "lb") == 0 {
				return fmt.Errorf("not reconciled")
			}
			return nil
		})
		if got := getLB(t, c, ns, "lb"); len(got.Finalizers) != 0 || len(got.Status.Conditions) != 0 {
			t.Errorf("LoadBalancer in an unmanaged namespace was touched: %+v", got)
		}
		if m.writes.Total() != 0 {
			t.Errorf("writes in an unmanaged namespace: %s", m.writes)
		}
		// Labelling the namespace brings it in.
		if err := c.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"kubelb.k8c.io/managed-by":"kubelb"}}}`))); err != nil {
			t.Fatal(err)
		}
		waitReady(t, c, ns, "lb", metav1.ConditionFalse, ReasonServiceFailed)
		objects.WaitEvent(t, c, waitTimeout, lbWarning(ns, "lb", ReasonServiceFailed))
		if svc := waitService(t, c, ns, "lb", nil); svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.Ports[0].Port != 1 {
			t.Errorf("foreign Service was changed: %+v", svc.Spec)
		}
		// Once it is gone, the hub Service is made; the LoadBalancer kept its port meanwhile.
		if err := c.Delete(ctx, foreign); err != nil {
			t.Fatal(err)
		}
		waitService(t, c, ns, "lb", func(s *corev1.Service) error {
			if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
				return fmt.Errorf("type %s", s.Spec.Type)
			}
			return nil
		})
		deleteAll(t, c, ns)
	})
}
