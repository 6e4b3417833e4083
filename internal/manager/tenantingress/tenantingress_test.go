package tenantingress

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A tenant's problem is read back as set, and each change (not a repeat) requeues the
// tenant's LoadBalancers, which report it.
func TestProblems(t *testing.T) {
	p := New()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	lbs := func(_ context.Context, ns string) []types.NamespacedName {
		return []types.NamespacedName{{Namespace: ns, Name: "web"}}
	}
	if err := p.LoadBalancers(lbs).Start(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	requeued := func() int {
		n := q.Len()
		for q.Len() > 0 {
			r, _ := q.Get()
			q.Done(r)
		}
		return n
	}
	if got := p.Of("tenant-a"); got != "" {
		t.Fatalf("problem before any: %q", got)
	}
	p.Set(ctx, "tenant-a", "no port")
	if got, n := p.Of("tenant-a"), requeued(); got != "no port" || n != 1 {
		t.Errorf("after Set: %q, %d requeued; want the problem and one LoadBalancer", got, n)
	}
	p.Set(ctx, "tenant-a", "no port")
	if n := requeued(); n != 0 {
		t.Errorf("the same problem again requeued %d", n)
	}
	if got := p.Of("tenant-b"); got != "" {
		t.Errorf("another tenant's problem: %q", got)
	}
	p.Set(ctx, "tenant-a", "")
	if got, n := p.Of("tenant-a"), requeued(); got != "" || n != 1 {
		t.Errorf("after clearing: %q, %d requeued", got, n)
	}
}
