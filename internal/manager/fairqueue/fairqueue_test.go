package fairqueue

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func req(ns, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

// TestFairQueueRoundRobin: a tenant that queued a thousand requests first does not hold
// back another tenant's one: it is handed out second, and then the tenants take turns.
func TestFairQueueRoundRobin(t *testing.T) {
	t.Parallel()
	q := New("fairqueue-test", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	for i := range 1000 {
		q.Add(req("tenant-b", fmt.Sprintf("x%04d", i)))
	}
	q.Add(req("tenant-a", "web"))
	q.Add(req("tenant-c", "web"))
	if q.Len() != 1002 {
		t.Errorf("Len = %d, want 1002", q.Len())
	}
	var got []string
	for range 5 {
		r, shutdown := q.Get()
		if shutdown {
			t.Fatal("shut down")
		}
		got = append(got, r.String())
		q.Done(r)
	}
	want := []string{"tenant-b/x0000", "tenant-a/web", "tenant-c/web", "tenant-b/x0001", "tenant-b/x0002"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("handed out %v, want %v", got, want)
	}
}

// TestFairQueueSemantics: as client-go's workqueue, a request queued twice is handed out
// once, a request queued while being processed comes back after Done, AddAfter delays it,
// and the rate limiter counts retries.
func TestFairQueueSemantics(t *testing.T) {
	t.Parallel()
	q := New("fairqueue-test-2", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	a := req("tenant-a", "web")
	q.Add(a)
	q.Add(a)
	if q.Len() != 1 {
		t.Errorf("Len after adding twice = %d, want 1", q.Len())
	}
	r, _ := q.Get()
	q.Add(a) // while processing
	if q.Len() != 0 {
		t.Errorf("Len while processing = %d, want 0", q.Len())
	}
	q.Done(r)
	if q.Len() != 1 {
		t.Errorf("Len after Done = %d, want 1 (queued again while processing)", q.Len())
	}
	r, _ = q.Get()
	q.Done(r)

	q.AddAfter(a, 50*time.Millisecond)
	if q.Len() != 0 {
		t.Errorf("Len right after AddAfter = %d, want 0", q.Len())
	}
	r, _ = q.Get() // blocks until the delay has passed
	if r != a {
		t.Errorf("Get after AddAfter = %v", r)
	}
	q.Done(r)

	q.AddRateLimited(a)
	q.AddRateLimited(a)
	if n := q.NumRequeues(a); n != 2 {
		t.Errorf("NumRequeues = %d, want 2", n)
	}
	q.Forget(a)
	if n := q.NumRequeues(a); n != 0 {
		t.Errorf("NumRequeues after Forget = %d, want 0", n)
	}

	q.ShutDown()
	if _, shutdown := q.Get(); !shutdown {
		t.Error("Get after ShutDown did not say so")
	}
}
