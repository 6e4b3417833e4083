package status_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
)

// TestBurstGivesOneEventPerLoadBalancer: LoadBalancers created one after another in one
// tenant whose health-check budget they outgrow (1 probe/s; each asks 3 endpoints' worth:
// one endpoint, 3 proxies, every 5 s, 0.6 probes/s) each get one ProgrammedWithWarnings
// Event (HealthCheckThrottled; lb-00 when lb-01 takes the tenant over the budget), however
// often the stretch factor doubles as the tenant grows (at 2, 4 and 7 LoadBalancers); and a
// LoadBalancer whose problems did not change is not rewritten when others are added.
func TestBurstGivesOneEventPerLoadBalancer(t *testing.T) {
	const ns, n = "tenant-burst", 10
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}},
		&v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "burst"},
			Spec: v1alpha1.TenantSpec{EndpointPolicy: &v1alpha1.EndpointPolicy{Allow: []string{"127.3.0.0/24"}},
				Limits: v1alpha1.Limits{HealthCheckProbesPerSecond: ptrTo(int32(1))}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	tenantNamespaces(t, c, ns)
	startLeader(t, hub, "replica")

	name := func(i int) string { return fmt.Sprintf("lb-%02d", i) }
	resourceVersion := func(i int) string {
		t.Helper()
		o := &v1alpha1.LoadBalancer{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name(i)}, o); err != nil {
			t.Fatal(err)
		}
		return o.ResourceVersion
	}
	settled := map[int]string{} // resourceVersion of the LoadBalancers whose warning is written
	for i := range n {
		createLBWith(t, c, ns, name(i), 20000+i, nil, "127.3.0.1")
		if i == 0 {
			waitProgrammedIn(t, c, ns, name(0), metav1.ConditionTrue, status.ReasonProgrammed, "")
			continue
		}
		for j := 0; j <= i; j++ {
			waitProgrammedIn(t, c, ns, name(j), metav1.ConditionTrue, status.ReasonProgrammedWithWarnings, translate.ReasonHealthCheckThrottled)
		}
		for j, rv := range settled {
			if now := resourceVersion(j); now != rv {
				t.Errorf("%s was rewritten when %s was added (resourceVersion %s, then %s)", name(j), name(i), rv, now)
			}
		}
		// The ones before the previous one have had their verdict since (lb-00: since lb-01).
		for j := 0; j < i-1; j++ {
			settled[j] = resourceVersion(j)
		}
	}

	// Events are sent in the background: wait for one each, then a moment for any more.
	perObject := func() map[string]int {
		evs := &eventsv1.EventList{}
		if err := c.List(ctx, evs, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, e := range evs.Items {
			if e.Reason == status.ReasonProgrammedWithWarnings {
				out[e.Regarding.Name]++
			}
		}
		return out
	}
	testsupport.Eventually(t, timeout, "a ProgrammedWithWarnings Event on each LoadBalancer", func() error {
		if got := perObject(); len(got) != n {
			return fmt.Errorf("Events by LoadBalancer %v", got)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	for lb, k := range perObject() {
		if k != 1 {
			t.Errorf("%s got %d ProgrammedWithWarnings Events, want 1", lb, k)
		}
	}
}
