package envoyfleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

// TestDeletionsCoalesce: a tenant deleting many LoadBalancers is looked at once per
// RemovalHoldOff, not once per deletion, and a first LoadBalancer of a tenant without a fleet
// is looked at at once.
func TestDeletionsCoalesce(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	h := existenceHandler()
	ctx := context.Background()
	for i := range 500 {
		lb := &kubelbv1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-shop", Name: fmt.Sprint("lb-", i)}}
		h.Delete(ctx, event.DeleteEvent{Object: lb}, q)
	}
	if n := q.Len(); n != 0 {
		t.Fatalf("%d requests ready at once after deletions, want none before the hold-off", n)
	}
	deadline := time.Now().Add(RemovalHoldOff + 5*time.Second)
	for q.Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := q.Len(); n != 1 {
		t.Fatalf("%d requests after the hold-off for 500 deletions in one tenant, want 1", n)
	}
	req, _ := q.Get()
	q.Done(req)
	if req.Name != "tenant-shop" {
		t.Fatalf("request %v, want the tenant namespace", req)
	}

	h.Create(ctx, event.CreateEvent{Object: &kubelbv1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-new", Name: "first"}}}, q)
	if n := q.Len(); n != 1 {
		t.Fatalf("%d requests right after a create, want 1 at once", n)
	}
}
