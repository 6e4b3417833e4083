package loadbalancer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// createAged creates LoadBalancers one after another, each in a later second than the one
// before (creationTimestamp has a resolution of a second), so that their age, not their
// name, ranks them.
func createAged(t *testing.T, c client.Client, lbs ...*kubelbv1alpha1.LoadBalancer) {
	t.Helper()
	var last time.Time
	for _, lb := range lbs {
		testsupport.Eventually(t, waitTimeout, "a new second for "+lb.Name, func() error {
			if now := time.Now().Truncate(time.Second); !now.After(last) {
				return fmt.Errorf("still %s", now)
			}
			return nil
		})
		if err := c.Create(context.Background(), lb); err != nil {
			t.Fatal(err)
		}
		last = lb.CreationTimestamp.Time
	}
}

// waitNoService checks that a LoadBalancer has no hub Service, and keeps none.
func waitNoService(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	objects.WaitGone(t, c, waitTimeout, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hubnames.LoadBalancerServiceName(name)}})
}

// portsOf counts the listener ports the allocator holds for a LoadBalancer.
func portsOf(m *running, ns, name string) int {
	n := 0
	for k := range m.r.ports.Allocator().Snapshot() {
		if k.Owner() == (types.NamespacedName{Namespace: ns, Name: name}) {
			n++
		}
	}
	return n
}

func setLimits(t *testing.T, c client.Client, tenant *kubelbv1alpha1.Tenant, limits string) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"limits":`+limits+`}}`))
	if err := c.Patch(context.Background(), tenant, patch); err != nil {
		t.Fatal(err)
	}
}

// TestQuota checks that a tenant's limits hold (issue 11, "Exhaust"): the oldest
// LoadBalancers up to spec.limits.loadBalancers get hub Services and listener ports, the next
// ones Ready=False/QuotaExceeded, an Event and nothing else; deleting one or raising the
// limit admits the next, lowering it releases what the newest held; listener ports count
// over all of a tenant's LoadBalancers.
func TestQuota(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	objects.Create(t, c, objects.Namespace(managerNS, nil))
	opts := Options{Namespace: managerNS, PortRange: portalloc.Range{Min: 10000, Max: 10099}}

	t.Run("LoadBalancers", func(t *testing.T) {
		ns := "tenant-q"
		tenant := objects.CreateTenant(t, c, objects.Tenant("q", kubelbv1alpha1.TenantSpec{Limits: kubelbv1alpha1.Limits{LoadBalancers: ptr.To[int32](2)}}))
		m := startController(t, hub, opts, 200, 400)
		// Named against their age: the oldest has the last name.
		createAged(t, c, newLB(ns, "z-oldest", tcp(80)), newLB(ns, "y-middle", tcp(81)), newLB(ns, "a-newest", tcp(82)))

		for _, name := range []string{"z-oldest", "y-middle"} {
			waitService(t, c, ns, name, nil)
			waitPorts(t, c, ns, name, 1)
		}
		got := waitReady(t, c, ns, "a-newest", metav1.ConditionFalse, ReasonQuotaExceeded)
		msg := meta.FindStatusCondition(got.Status.Conditions, ConditionReady).Message
		for _, want := range []string{"tenant tenant-q may hold 2 LoadBalancers (spec.limits.loadBalancers)", "3rd oldest", "raise the limit"} {
			if !strings.Contains(msg, want) {
				t.Errorf("message %q does not say %q", msg, want)
			}
		}
		objects.WaitEvent(t, c, waitTimeout, lbWarning(ns, "a-newest", ReasonQuotaExceeded))
		if len(got.Status.Service.Ports) != 0 || portsOf(m, ns, "a-newest") != 0 {
			t.Errorf("the refused LoadBalancer holds ports: status %+v, allocator %d", got.Status.Service.Ports, portsOf(m, ns, "a-newest"))
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: hubnames.LoadBalancerServiceName("a-newest")}, &corev1.Service{}); !apierrors.IsNotFound(err) {
			t.Errorf("the refused LoadBalancer has a hub Service (get: %v)", err)
		}

		// Deleting one admits the next.
		if err := c.Delete(ctx, getLB(t, c, ns, "z-oldest")); err != nil {
			t.Fatal(err)
		}
		waitService(t, c, ns, "a-newest", nil)
		waitPorts(t, c, ns, "a-newest", 1)
		waitReady(t, c, ns, "a-newest", metav1.ConditionFalse, ReasonWaitingForAddress)

		// Lowering the limit refuses the newest again and releases its port.
		setLimits(t, c, tenant, `{"loadBalancers":1}`)
		waitReady(t, c, ns, "a-newest", metav1.ConditionFalse, ReasonQuotaExceeded)
		waitNoService(t, c, ns, "a-newest")
		testsupport.Eventually(t, waitTimeout, "the port of the refused LoadBalancer released", func() error {
			if n := portsOf(m, ns, "a-newest"); n != 0 {
				return fmt.Errorf("%d ports held", n)
			}
			return nil
		})
		waitReady(t, c, ns, "y-middle", metav1.ConditionFalse, ReasonWaitingForAddress)

		// Raising it admits it again.
		setLimits(t, c, tenant, `{"loadBalancers":5}`)
		waitService(t, c, ns, "a-newest", nil)
		waitReady(t, c, ns, "a-newest", metav1.ConditionFalse, ReasonWaitingForAddress)
		deleteAll(t, c, ns)
	})

	t.Run("ListenerPorts", func(t *testing.T) {
		ns := "tenant-p"
		tenant := objects.CreateTenant(t, c, objects.Tenant("p", kubelbv1alpha1.TenantSpec{Limits: kubelbv1alpha1.Limits{ListenerPorts: ptr.To[int32](3)}}))
		m := startController(t, hub, opts, 200, 400)
		createAged(t, c,
			newLB(ns, "two", kubelbv1alpha1.LoadBalancerPort{Name: "a", Port: 80}, kubelbv1alpha1.LoadBalancerPort{Name: "b", Port: 443}),
			newLB(ns, "big", kubelbv1alpha1.LoadBalancerPort{Name: "a", Port: 80}, kubelbv1alpha1.LoadBalancerPort{Name: "b", Port: 443}),
			newLB(ns, "one", tcp(53)))

		waitPorts(t, c, ns, "two", 2)
		waitPorts(t, c, ns, "one", 1) // newer, but it fits
		got := waitReady(t, c, ns, "big", metav1.ConditionFalse, ReasonQuotaExceeded)
		msg := meta.FindStatusCondition(got.Status.Conditions, ConditionReady).Message
		if !strings.Contains(msg, "may hold 3 listener ports (spec.limits.listenerPorts)") || !strings.Contains(msg, "needs 2 more") {
			t.Errorf("message %q", msg)
		}
		objects.WaitEvent(t, c, waitTimeout, lbWarning(ns, "big", ReasonQuotaExceeded))
		if n := portsOf(m, ns, "big"); n != 0 {
			t.Errorf("the refused LoadBalancer holds %d ports", n)
		}

		setLimits(t, c, tenant, `{"listenerPorts":5}`)
		waitPorts(t, c, ns, "big", 2)
		waitService(t, c, ns, "big", nil)
		deleteAll(t, c, ns)
	})
}
