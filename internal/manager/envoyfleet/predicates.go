// The Envoy fleet controller's watch predicates (see setup in controller.go).

package envoyfleet

import (
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
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
// the bootstrap and compare the fleet 10 000 times).
func (r *Reconciler) existenceMatters() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(event.UpdateEvent) bool { return false },
		CreateFunc: func(e event.CreateEvent) bool { return !r.hasFleet(e.Object.GetNamespace()) },
	}
}
