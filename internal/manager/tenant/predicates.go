// The Tenant controller's watch predicates (see setup in controller.go) and the owner
// references controllers' (owners.go).

package tenant

import (
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"kubelb.dev/kubelb/internal/hubnames"
)

// tenantChanged passes spec changes, deletion and finalizer changes, not status writes.
func tenantChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
			e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero() ||
			len(e.ObjectOld.GetFinalizers()) != len(e.ObjectNew.GetFinalizers())
	}}
}

// deletesOnly passes deletions only.
func deletesOnly() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// hasForeignOwner selects objects in a tenant namespace with a foreignOwner reference.
func hasForeignOwner(o client.Object) bool {
	return hubnames.IsTenantNamespace(o.GetNamespace()) && slices.ContainsFunc(o.GetOwnerReferences(), foreignOwner)
}
