package status

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
)

// TestWriterLooksOnlyAtWhatChanged: in a tenant of many LoadBalancers, a Report in which one
// LoadBalancer's verdict changed costs a look at that one, not at the tenant (the cost of a
// change follows the change, issue 14); a rejection that names no resource, which concerns
// every LoadBalancer, reaches them all; and the verdicts are right throughout.
func TestWriterLooksOnlyAtWhatChanged(t *testing.T) {
	const ns, n = "tenant-incremental", 30
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	objects := map[ir.ObjectRef]int64{}
	owners := map[string][]ir.ObjectRef{}
	for i := range n {
		lb := &v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lb-%02d", i), Namespace: ns},
			Spec: v1alpha1.LoadBalancerSpec{Ports: []v1alpha1.LoadBalancerPort{{Port: 80, Protocol: corev1.ProtocolTCP}},
				Endpoints: []v1alpha1.LoadBalancerEndpoints{{Addresses: []v1alpha1.EndpointAddress{{IP: "10.0.0.1"}},
					Ports: []v1alpha1.EndpointPort{{Port: 31080}}}}}}
		if err := c.Create(ctx, lb); err != nil {
			t.Fatal(err)
		}
		// The LoadBalancer controller's first status write, after which the Writer takes over.
		sp := v1alpha1.ServicePort{UpstreamTargetPort: int32(10000 + i)}
		sp.Port, sp.Protocol = 80, corev1.ProtocolTCP
		lb.Status.Service.Ports = []v1alpha1.ServicePort{sp}
		meta.SetStatusCondition(&lb.Status.Conditions, metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "AddressAssigned",
			Message: "played", ObservedGeneration: lb.Generation})
		if err := c.Status().Update(ctx, lb); err != nil {
			t.Fatal(err)
		}
		ref := ir.ObjectRef{Kind: translate.KindLoadBalancer, Namespace: ns, Name: lb.Name}
		objects[ref] = lb.Generation
		owners[lb.Name+"-tcp-80"] = []ir.ObjectRef{ref}
	}
	const lds = "type.googleapis.com/envoy.config.listener.v3.Listener"
	store := NewStore()
	var w *Writer
	testenv.StartManager(t, hub.Config, func(mgr ctrl.Manager) (err error) { w, err = setupWriter(mgr, store); return err })
	version := 0
	publish := func(problems ...ir.Problem) {
		version++
		store.Publish(ns, &Report{Objects: objects, Problems: problems, Versions: map[string]string{lds: fmt.Sprint(version)},
			Owners: map[string]map[string][]ir.ObjectRef{lds: owners}})
	}
	visited := func() int {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.visited
	}
	// settled waits until the Writer has had nothing more to look at for a second (its own
	// writes come back as events), and returns how many LoadBalancers it looked at so far.
	settled := func() int {
		t.Helper()
		var v int
		testsupport.Eventually(t, 30*time.Second, "the Writer to settle", func() error {
			v = visited()
			time.Sleep(time.Second)
			if now := visited(); now != v {
				return fmt.Errorf("looked at %d LoadBalancers, then %d", v, now)
			}
			return nil
		})
		return v
	}
	programmed := func(name string, st metav1.ConditionStatus, reason string) {
		t.Helper()
		testsupport.Eventually(t, 30*time.Second, name+" Programmed="+string(st)+"/"+reason, func() error {
			lb := &v1alpha1.LoadBalancer{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, lb); err != nil {
				return err
			}
			if p := meta.FindStatusCondition(lb.Status.Conditions, ConditionProgrammed); p == nil || p.Status != st || p.Reason != reason {
				return fmt.Errorf("Programmed %+v", p)
			}
			return nil
		})
	}

	publish()
	for i := range n {
		programmed(fmt.Sprintf("lb-%02d", i), metav1.ConditionTrue, ReasonProgrammed)
	}
	before := settled()

	// One LoadBalancer loses its endpoints: it alone is looked at (once for the Report, once
	// for the event of the Writer's own write).
	broken := ir.ObjectRef{Kind: translate.KindLoadBalancer, Namespace: ns, Name: "lb-07", Section: "TCP/80"}
	publish(ir.Problem{Object: broken, Severity: ir.SeverityError, Reason: "NoEndpoints", Message: "no endpoints"})
	programmed("lb-07", metav1.ConditionFalse, "NoEndpoints")
	if looked := settled() - before; looked > 2 {
		t.Errorf("one changed verdict cost a look at %d LoadBalancers of %d, want at most 2", looked, n)
	}
	programmed("lb-08", metav1.ConditionTrue, ReasonProgrammed)

	// A proxy rejects the listeners without naming one: every LoadBalancer owns a listener of
	// the rejected version, so each is looked at and turns False (lb-07 already is).
	before = settled()
	ts := &v1alpha1.TenantState{ObjectMeta: metav1.ObjectMeta{Name: hubnames.TenantStateName, Namespace: ns}}
	if err := c.Create(ctx, ts); err != nil {
		t.Fatal(err)
	}
	ts.Status.Rejections = []v1alpha1.ConfigRejection{{Proxy: "envoy-0", TypeURL: lds, Version: fmt.Sprint(version),
		Message: "something went wrong", Time: metav1.Now()}}
	if err := c.Status().Update(ctx, ts); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if i != 7 { // lb-07 still has no endpoints, its first error
			programmed(fmt.Sprintf("lb-%02d", i), metav1.ConditionFalse, ReasonRejected)
		}
	}
	if looked := settled() - before; looked < n {
		t.Errorf("a rejection of every listener looked at %d LoadBalancers, want all %d", looked, n)
	}

	// The next version is accepted (a new Report; the rejection is of an older version): all
	// recover.
	publish()
	for i := range n {
		programmed(fmt.Sprintf("lb-%02d", i), metav1.ConditionTrue, ReasonProgrammed)
	}
}

// TestWaitingLoadBalancerGetsItsVerdict: a LoadBalancer the Report lists as waiting for a
// listener port gets no Programmed verdict; the next Report, which translated it with its port
// and says nothing else new of it (the same generation, no problem), gives it one. (A Report
// that only dropped the LoadBalancer from Waiting was not a change to the Writer: the
// LoadBalancer, whose controller had written Ready while it waited, stayed without Programmed,
// as a faults run in CI showed.)
func TestWaitingLoadBalancerGetsItsVerdict(t *testing.T) {
	const ns = "tenant-waiting"
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	lb := &v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: v1alpha1.LoadBalancerSpec{Ports: []v1alpha1.LoadBalancerPort{{Port: 80, Protocol: corev1.ProtocolTCP}},
			Endpoints: []v1alpha1.LoadBalancerEndpoints{{Addresses: []v1alpha1.EndpointAddress{{IP: "10.0.0.1"}},
				Ports: []v1alpha1.EndpointPort{{Port: 31080}}}}}}
	if err := c.Create(ctx, lb); err != nil {
		t.Fatal(err)
	}
	ref := ir.ObjectRef{Kind: translate.KindLoadBalancer, Namespace: ns, Name: lb.Name}
	store := NewStore()
	testenv.StartManager(t, hub.Config, func(mgr ctrl.Manager) error { _, err := setupWriter(mgr, store); return err })
	objects := map[ir.ObjectRef]int64{ref: lb.Generation}
	store.Publish(ns, &Report{Objects: objects, Waiting: map[ir.ObjectRef]bool{ref: true}, Versions: map[string]string{"v": "1"}})
	// The LoadBalancer controller's first status write, while the port waits: Ready, no verdict.
	meta.SetStatusCondition(&lb.Status.Conditions, metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "AddressAssigned",
		Message: "played", ObservedGeneration: lb.Generation})
	if err := c.Status().Update(ctx, lb); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the Writer hears of Ready and looks, while the Report still says waiting
	got := &v1alpha1.LoadBalancer{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: lb.Name}, got); err != nil {
		t.Fatal(err)
	}
	if p := meta.FindStatusCondition(got.Status.Conditions, ConditionProgrammed); p != nil {
		t.Fatalf("a verdict while the port waits: %+v", p)
	}
	store.Publish(ns, &Report{Objects: objects, Versions: map[string]string{"v": "2"}})
	testsupport.Eventually(t, 30*time.Second, "web Programmed=True", func() error {
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: lb.Name}, got); err != nil {
			return err
		}
		if p := meta.FindStatusCondition(got.Status.Conditions, ConditionProgrammed); p == nil || p.Status != metav1.ConditionTrue {
			return fmt.Errorf("Programmed %+v", p)
		}
		return nil
	})
}
