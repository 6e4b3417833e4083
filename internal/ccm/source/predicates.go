// The watch predicates of the source controllers.

package source

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// objectPredicate passes events of the mirrored objects except updates of their status only
// (our own status writes among them). Resyncs (same resourceVersion) pass.
var objectPredicate = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return o.GetResourceVersion() == n.GetResourceVersion() || o.GetGeneration() != n.GetGeneration() ||
			!maps.Equal(o.GetLabels(), n.GetLabels()) || !maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
			!slices.Equal(o.GetFinalizers(), n.GetFinalizers()) ||
			(o.GetDeletionTimestamp() == nil) != (n.GetDeletionTimestamp() == nil)
	},
}

// serviceSpecOrLabelsChanged passes tenant Service events but updates of their status only.
// Resyncs (same resourceVersion) pass.
var serviceSpecOrLabelsChanged = predicate.TypedFuncs[*corev1.Service]{
	UpdateFunc: func(e event.TypedUpdateEvent[*corev1.Service]) bool {
		return !equality.Semantic.DeepEqual(e.ObjectOld.Spec, e.ObjectNew.Spec) ||
			!maps.Equal(e.ObjectOld.Labels, e.ObjectNew.Labels) || e.ObjectOld.ResourceVersion == e.ObjectNew.ResourceVersion
	},
}

// namespaceLabelsChanged passes only namespace updates that change its labels (what a
// Gateway's allowedRoutes selector reads).
var namespaceLabelsChanged = predicate.TypedFuncs[*corev1.Namespace]{
	CreateFunc: func(event.TypedCreateEvent[*corev1.Namespace]) bool { return false },
	DeleteFunc: func(event.TypedDeleteEvent[*corev1.Namespace]) bool { return false },
	UpdateFunc: func(e event.TypedUpdateEvent[*corev1.Namespace]) bool {
		return !maps.Equal(e.ObjectOld.Labels, e.ObjectNew.Labels)
	},
}

// twinInputChanged passes the Service events that may change a NodePort twin's slices: its
// selector, labels, owners or deletion changed. Resyncs (same resourceVersion) pass.
var twinInputChanged = predicate.TypedFuncs[*corev1.Service]{
	UpdateFunc: func(e event.TypedUpdateEvent[*corev1.Service]) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return o.ResourceVersion == n.ResourceVersion || !maps.Equal(o.Spec.Selector, n.Spec.Selector) ||
			!maps.Equal(o.Labels, n.Labels) || !equality.Semantic.DeepEqual(o.OwnerReferences, n.OwnerReferences) ||
			(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil)
	},
}

// onlyDeletes passes deletes (and generic events) only: the IngressClass controller makes
// the class kubelb at start and again when it is deleted.
var onlyDeletes = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	UpdateFunc: func(event.UpdateEvent) bool { return false },
}

// labelsChanged passes the events that change the labels an object of a namespace shows: its
// creation, deletion, and updates of its labels (what the policies' targetSelectors select).
var labelsChanged = predicate.Funcs{
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
	},
}

// specOrLabelsChanged passes the events of a policy's targets that change what it targets or
// its ancestors: their spec (listeners, rules, parentRefs) or labels (targetSelectors).
var specOrLabelsChanged = predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{})

// boundsChanged passes the TenantState events that change the bounds on policies (a
// TenantState changes often: rejections, backend health).
var boundsChanged = predicate.TypedFuncs[*v1alpha1.TenantState]{
	UpdateFunc: func(e event.TypedUpdateEvent[*v1alpha1.TenantState]) bool {
		return !equality.Semantic.DeepEqual(e.ObjectOld.Status.TrafficPolicies, e.ObjectNew.Status.TrafficPolicies)
	},
}
