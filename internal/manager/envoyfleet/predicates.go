// The Envoy fleet controller's watch predicates (see setup in controller.go).

package envoyfleet

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// deletionChanged passes creates, deletes and updates that start a deletion.
func deletionChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
}

// existenceMatters passes the LoadBalancer and Route events that matter to a tenant's fleet:
// only whether a tenant has LoadBalancers or Routes matters, not what they say. A new one
// matters only to a tenant without its fleet yet: once the fleet is there, the events of
// its own objects keep it current (a burst of 10 000 creates would otherwise generate
// the bootstrap and compare the fleet 10 000 times). A deletion may leave the tenant
// without any: existenceHandler looks after a hold-off.
func (r *Reconciler) existenceMatters() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(event.UpdateEvent) bool { return false },
		CreateFunc: func(e event.CreateEvent) bool { return !r.hasFleet(e.Object.GetNamespace()) },
	}
}

// RemovalHoldOff is how long after a LoadBalancer or Route is deleted the fleet controller
// looks whether its tenant still needs a fleet. Deletions within it coalesce into one look: a
// tenant deleting 10 000 Services costs a look a second, not 10 000 bootstrap generations
// and fleet comparisons (a fifth of the manager's CPU while a 3000-Service tenant was
// deleted, 2026-11-30). The last deletion removes the fleet at most this much later.
const RemovalHoldOff = time.Second

// existenceHandler requests the tenant of a LoadBalancer or Route at once when it is
// created (the tenant may need its fleet), and RemovalHoldOff after it is deleted.
func existenceHandler() handler.EventHandler {
	add := func(ns string, q workqueue.TypedRateLimitingInterface[reconcile.Request], after time.Duration) {
		for _, req := range tenantRequest(ns) {
			if after > 0 {
				q.AddAfter(req, after) // the earliest pending time stays: a stream of deletions does not postpone it
			} else {
				q.Add(req)
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object.GetNamespace(), q, 0)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object.GetNamespace(), q, RemovalHoldOff)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object.GetNamespace(), q, 0)
		},
	}
}
