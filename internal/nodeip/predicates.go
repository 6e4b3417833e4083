package nodeip

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// nodeSetChanged passes Node events that can change the selected addresses: creations,
// deletions, resyncs, and updates of readiness, addresses, the node-set and exclusion labels,
// the address annotations, or deletion.
var nodeSetChanged = predicate.TypedFuncs[client.Object]{
	UpdateFunc: func(e event.TypedUpdateEvent[client.Object]) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		if !ok1 || !ok2 || o.ResourceVersion == n.ResourceVersion {
			return true
		}
		ov, oHas := o.Labels[LabelUseAsLoadBalancer]
		nv, nHas := n.Labels[LabelUseAsLoadBalancer]
		_, oEx := o.Labels[corev1.LabelNodeExcludeBalancers]
		_, nEx := n.Labels[corev1.LabelNodeExcludeBalancers]
		return ov != nv || oHas != nHas || oEx != nEx || NodeReady(o) != NodeReady(n) ||
			!slices.Equal(o.Status.Addresses, n.Status.Addresses) ||
			(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
			o.Annotations[AnnotationPublicAddresses] != n.Annotations[AnnotationPublicAddresses] ||
			o.Annotations[AnnotationPrivateAddresses] != n.Annotations[AnnotationPrivateAddresses]
	},
}
