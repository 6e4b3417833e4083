// The LoadBalancer controller's watch predicates (see setup in controller.go).

package loadbalancer

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

// dnsAnnotationChanged passes the tenant's Ingress Service when it comes, goes or its DNS
// annotation changes.
func dnsAnnotationChanged() predicate.Predicate {
	is := func(o client.Object) bool { return o.GetName() == kubelbv1alpha1.IngressServiceName }
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return is(e.Object) },
		DeleteFunc: func(e event.DeleteEvent) bool { return is(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return is(e.ObjectNew) && (e.ObjectOld.GetAnnotations()[AnnotationDNSHostname] != e.ObjectNew.GetAnnotations()[AnnotationDNSHostname] ||
				e.ObjectOld.GetLabels()[kubelbv1alpha1.LabelIngressService] != e.ObjectNew.GetLabels()[kubelbv1alpha1.LabelIngressService])
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
