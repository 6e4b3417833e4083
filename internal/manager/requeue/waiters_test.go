package requeue

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// queueOf registers a fake controller queue for name and returns it.
func queueOf(t *testing.T, w *Waiters, name string) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	t.Helper()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(q.ShutDown)
	if err := w.Source(name).Start(context.Background(), q); err != nil {
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

// A free by any controller requeues the waiters of every controller, each in its own queue;
// a free during an allocation is not missed; an object that no longer waits is not woken.
func TestWaiters(t *testing.T) {
	w := NewWaiters()
	lbs, routes, ingress := queueOf(t, w, LoadBalancers), queueOf(t, w, Routes), queueOf(t, w, IngressServices)
	lb := types.NamespacedName{Namespace: "tenant-a", Name: "lb"}
	gw := types.NamespacedName{Namespace: "tenant-a", Name: "gw"}
	tenant := types.NamespacedName{Name: "tenant-a"}

	seen := w.Freed()
	w.Set(LoadBalancers, lb, true, seen)
	w.Set(Routes, gw, true, seen)
	w.Set(IngressServices, tenant, true, seen)
	if n := lbs.Len() + routes.Len() + ingress.Len(); n != 0 {
		t.Fatalf("%d requests before any free", n)
	}
	w.Wake()
	if got := drain(lbs); !slices.Equal(got, []string{"tenant-a/lb"}) {
		t.Errorf("LoadBalancer queue after a free: %v", got)
	}
	if got := drain(routes); !slices.Equal(got, []string{"tenant-a/gw"}) {
		t.Errorf("Route queue after a free: %v", got)
	}
	if got := drain(ingress); !slices.Equal(got, []string{"/tenant-a"}) {
		t.Errorf("Ingress Service queue after a free: %v", got)
	}

	// The Route got its ports; the LoadBalancer started allocating before a free and found
	// the range still full: it is requeued at once instead of waiting for the next free.
	w.Set(Routes, gw, false, 0)
	seen = w.Freed()
	w.Wake() // another controller frees ports while the LoadBalancer allocates
	drain(lbs)
	drain(ingress)
	w.Set(LoadBalancers, lb, true, seen)
	if got := drain(lbs); !slices.Equal(got, []string{"tenant-a/lb"}) {
		t.Errorf("a LoadBalancer that missed a free: %v, want it requeued", got)
	}
	w.Wake()
	if got := drain(routes); len(got) != 0 {
		t.Errorf("a Route that no longer waits was woken: %v", got)
	}
}
