package status

import (
	"bytes"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// rejectionsChanged passes TenantStates whose rejections or backend health (the entries, or
// what the replicas left out of them) changed.
func rejectionsChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*v1alpha1.TenantState)
		n, ok2 := e.ObjectNew.(*v1alpha1.TenantState)
		return !ok1 || !ok2 || !equalRejections(o.Status.Rejections, n.Status.Rejections) ||
			!equality.Semantic.DeepEqual(o.Status.BackendHealth, n.Status.BackendHealth) ||
			!equality.Semantic.DeepEqual(o.Status.BackendHealthOmitted, n.Status.BackendHealthOmitted)
	}}
}

// programmedTouched passes new LoadBalancers and updates that change the generation or the
// Programmed condition (e.g. a tenant overwriting it, which the Writer then restores), or
// where the Ready condition appears (the LoadBalancer controller's first status write, before
// which the Writer leaves the LoadBalancer alone).
func programmedTouched() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*v1alpha1.LoadBalancer)
		n, ok2 := e.ObjectNew.(*v1alpha1.LoadBalancer)
		if !ok1 || !ok2 {
			return true
		}
		oc := meta.FindStatusCondition(o.Status.Conditions, ConditionProgrammed)
		nc := meta.FindStatusCondition(n.Status.Conditions, ConditionProgrammed)
		or, nr := meta.FindStatusCondition(o.Status.Conditions, ConditionReady), meta.FindStatusCondition(n.Status.Conditions, ConditionReady)
		return o.Generation != n.Generation || (oc == nil) != (nc == nil) || (oc != nil && *oc != *nc) || (or == nil) != (nr == nil)
	}}
}

// routeStatusTouched passes new Routes and updates that change the generation or what the
// Writer owns of status.resources.route (e.g. a tenant overwriting it, which the Writer then
// restores); the Route controller's writes pass only when they touch those fields.
func routeStatusTouched() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*v1alpha1.Route)
		n, ok2 := e.ObjectNew.(*v1alpha1.Route)
		if !ok1 || !ok2 {
			return true
		}
		or, nr := &o.Status.Resources.Route, &n.Status.Resources.Route
		oc := meta.FindStatusCondition(or.Conditions, ConditionProgrammed)
		nc := meta.FindStatusCondition(nr.Conditions, ConditionProgrammed)
		return o.Generation != n.Generation || (oc == nil) != (nc == nil) || (oc != nil && *oc != *nc) ||
			or.APIVersion != nr.APIVersion || or.Kind != nr.Kind || or.Name != nr.Name || or.Namespace != nr.Namespace ||
			!bytes.Equal(or.Status.Raw, nr.Status.Raw)
	}}
}
