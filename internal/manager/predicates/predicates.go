// Package predicates holds the watch predicates more than one manager controller uses.
package predicates

import (
	"maps"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

// DefaultConfig passes only Config "default" in the manager's namespace, the one the
// controllers read (settings.Load).
func DefaultConfig(namespace string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == namespace && o.GetName() == kubelbv1alpha1.DefaultConfigName
	})
}

// SpecOrDeletionChanged passes creates and deletes, and updates that change the generation
// (the spec) or start the deletion: what a LoadBalancer's or Route's quota verdict and
// hostname read (the LoadBalancer and Route controllers watch them with it).
func SpecOrDeletionChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
			e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
}

// SpecMetadataOrDeletionChanged passes creates and deletes, and updates that change the
// generation (the spec), the labels or the annotations, or start the deletion: what a hub
// Service is made from (the tenant's planner watches LoadBalancers and Routes with it).
func SpecMetadataOrDeletionChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
			e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero() ||
			!maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) ||
			!maps.Equal(e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations())
	}}
}
