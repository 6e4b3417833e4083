package requeue

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"kubelb.dev/kubelb/internal/quota"
	"kubelb.dev/kubelb/internal/settings"
)

// TestReadmit: only the objects whose verdict changed are requeued, each in its own
// controller's queue, whichever kind the verdict was computed for, and only in its namespace.
func TestReadmit(t *testing.T) {
	t.Parallel()
	newQueue := func() workqueue.TypedRateLimitingInterface[reconcile.Request] {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		t.Cleanup(q.ShutDown)
		return q
	}
	lbq, routeq := newQueue(), newQueue()
	rq := NewReadmit(nil) // Observe needs no store
	if err := rq.LoadBalancers().Start(context.Background(), lbq); err != nil {
		t.Fatal(err)
	}
	if err := rq.Routes().Start(context.Background(), routeq); err != nil {
		t.Fatal(err)
	}
	drain := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) []string {
		var out []string
		for q.Len() > 0 {
			req, _ := q.Get()
			out = append(out, req.Namespace+"/"+req.Name)
			q.Done(req)
			q.Forget(req)
		}
		slices.Sort(out)
		return out
	}
	objs := []quota.Object{lb("a", 3, 1), lb("b", 2, 1), lb("c", 1, 1), rt("r1", 3, 0), rt("r2", 2, 0)}

	rq.Observe("tenant-x", quota.Admit("tenant-x", objs, limits(1, 1, 10)))
	if got := drain(lbq); !slices.Equal(got, []string{"tenant-x/b", "tenant-x/c"}) {
		t.Fatalf("first verdict requeued LoadBalancers %v, want the refused ones", got)
	}
	if got := drain(routeq); !slices.Equal(got, []string{"tenant-x/r2"}) {
		t.Fatalf("first verdict requeued Routes %v, want the refused one", got)
	}
	// A deletion needs a recheck only where something is refused.
	if !rq.Refuses("tenant-x") || rq.Refuses("tenant-z") {
		t.Errorf("Refuses: tenant-x %v (want true), tenant-z %v (want false)", rq.Refuses("tenant-x"), rq.Refuses("tenant-z"))
	}
	rq.Observe("tenant-x", quota.Admit("tenant-x", objs, limits(1, 1, 10)))
	if got := append(drain(lbq), drain(routeq)...); len(got) != 0 {
		t.Fatalf("the same verdict requeued %v", got)
	}
	rq.Observe("tenant-x", quota.Admit("tenant-x", objs, limits(2, 2, 10)))
	if got := drain(lbq); !slices.Equal(got, []string{"tenant-x/b"}) {
		t.Fatalf("raised limits requeued LoadBalancers %v, want the one they admit", got)
	}
	if got := drain(routeq); !slices.Equal(got, []string{"tenant-x/r2"}) {
		t.Fatalf("raised limits requeued Routes %v, want the one they admit", got)
	}
	rq.Observe("tenant-x", quota.Admit("tenant-x", objs, limits(2, 2, 1)))
	if got := drain(lbq); !slices.Equal(got, []string{"tenant-x/b"}) {
		t.Fatalf("a lowered port limit requeued %v, want the LoadBalancer it refuses", got)
	}
	rq.Observe("tenant-y", quota.Admit("tenant-y", objs, limits(3, 3, 10)))
	if got := append(drain(lbq), drain(routeq)...); len(got) != 0 {
		t.Fatalf("another namespace's verdict requeued %v", got)
	}
	if rq.Refuses("tenant-y") {
		t.Errorf("Refuses(tenant-y) with every object admitted")
	}
	rq.Forget("tenant-x")
	rq.Observe("tenant-x", quota.Admit("tenant-x", objs, limits(10, 10, 10)))
	if got := append(drain(lbq), drain(routeq)...); len(got) != 0 {
		t.Fatalf("after Forget, requeued %v", got)
	}
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func lb(name string, age, ports int) quota.Object {
	return quota.Object{Kind: quota.KindLoadBalancer, Name: name, Created: t0.Add(time.Duration(-age) * time.Minute), Ports: ports}
}

func rt(name string, age, ports int) quota.Object {
	return quota.Object{Kind: quota.KindRoute, Name: name, Created: t0.Add(time.Duration(-age) * time.Minute), Ports: ports}
}

func limits(lbs, routes, ports int) settings.Limits {
	return settings.Limits{LoadBalancers: lbs, Routes: routes, ListenerPorts: ports, EndpointsPerCluster: 1000, ObjectBytes: 1 << 30}
}
