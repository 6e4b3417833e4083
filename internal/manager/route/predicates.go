// The Route controller's watch predicates (see setup in controller.go).

package route

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

// hostnameInputChanged passes LoadBalancer creates, deletes and updates of what its hostname
// depends on (spec: generation; deletion).
func hostnameInputChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
			e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
}

// hasExplicitHostname selects LoadBalancers that ask for a hostname of their own.
func hasExplicitHostname(o client.Object) bool {
	lb, ok := o.(*kubelbv1alpha1.LoadBalancer)
	return ok && lb.Spec.Hostname != ""
}
