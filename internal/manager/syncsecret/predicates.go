// The SyncSecret controller's watch predicates (see SetupWithManager).

package syncsecret

import (
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// quotaInputChanged passes the SyncSecret events that may change the verdict over the
// others of its namespace: its data changed (generation), it is being deleted, or it is gone
// from a namespace that refused some. A new SyncSecret is the newest: it refuses no other.
func (r *Reconciler) quotaInputChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
				e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			_, refusing := r.refusing.Load(e.Object.GetNamespace())
			return refusing
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// syncSecretChanged passes SyncSecret creates, deletes and updates of its data
// (generation), labels or deletion; not those of its status.
func syncSecretChanged() predicate.Predicate {
	return predicate.Or(
		predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{},
		predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
		}})
}
