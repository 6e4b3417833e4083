package requeue

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// queueOf registers a fake planner queue and returns it.
func queueOf(t *testing.T, w *Waiters) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	t.Helper()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(q.ShutDown)
	if err := w.Source().Start(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	return q
}

func drain(q workqueue.TypedRateLimitingInterface[reconcile.Request]) []string {
	var out []string
	for q.Len() > 0 {
		r, _ := q.Get()
		out = append(out, r.String())
		q.Done(r)
		q.Forget(r)
	}
	slices.Sort(out)
	return out
}

// TestWaiters: a free requeues every waiting tenant; a free during an allocation is not
// missed; a tenant that no longer waits is not woken.
func TestWaiters(t *testing.T) {
	w := NewWaiters()
	q := queueOf(t, w)
	a, b := types.NamespacedName{Name: "tenant-a"}, types.NamespacedName{Name: "tenant-b"}

	seen := w.Freed()
	w.Set(a, true, seen)
	w.Set(b, true, seen)
	if n := q.Len(); n != 0 {
		t.Fatalf("%d requests before any free", n)
	}
	w.Wake()
	if got := drain(q); !slices.Equal(got, []string{"/tenant-a", "/tenant-b"}) {
		t.Errorf("queue after a free: %v", got)
	}

	// tenant-b got its ports; tenant-a started allocating before a free and found the range
	// still full: it is requeued at once instead of waiting for the next free.
	w.Set(b, false, 0)
	seen = w.Freed()
	w.Wake() // another controller frees ports while tenant-a's plan allocates
	drain(q)
	w.Set(a, true, seen)
	if got := drain(q); !slices.Equal(got, []string{"/tenant-a"}) {
		t.Errorf("a tenant that missed a free: %v, want it requeued", got)
	}
	w.Set(a, false, 0)
	w.Wake()
	if got := drain(q); len(got) != 0 {
		t.Errorf("tenants that no longer wait were woken: %v", got)
	}
}
