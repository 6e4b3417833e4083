// The watch predicates of the Service controllers (see setupServiceControllers in setup.go).

package ccm

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/lbaddress"
)

// serviceRelevant tells whether the ccm may have work for a Service: it is of type
// LoadBalancer, or carries our finalizer (so must be released).
func serviceRelevant(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer || controllerutil.ContainsFinalizer(svc, v1alpha1.CleanupFinalizer)
}

// asService returns o as a Service.
func asService(o client.Object) (*corev1.Service, bool) {
	svc, ok := o.(*corev1.Service)
	return svc, ok
}

// relevantService reports whether o is a Service serviceRelevant selects.
func relevantService(o client.Object) bool {
	svc, ok := asService(o)
	return ok && serviceRelevant(svc)
}

// mirrorServicePredicate passes Service events the mirror controller must see: anything about
// relevant Services except updates that changed only their status (our own status writes
// among them). Resyncs (same resourceVersion) pass.
var mirrorServicePredicate = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return relevantService(e.Object) },
	DeleteFunc: func(e event.DeleteEvent) bool { return relevantService(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := asService(e.ObjectOld)
		n, ok2 := asService(e.ObjectNew)
		if !ok1 || !ok2 || !(serviceRelevant(o) || serviceRelevant(n)) {
			return false
		}
		return o.ResourceVersion == n.ResourceVersion || !sameMeta(o, n) || !equality.Semantic.DeepEqual(o.Spec, n.Spec)
	},
}

// mirrorPredicate is mirrorServicePredicate, and with external (--enable-cloud-provider=false)
// also passes updates of a Service's status.loadBalancer: the other implementation's
// addresses are the mirror's endpoints.
func mirrorPredicate(external bool) predicate.Predicate {
	if !external {
		return mirrorServicePredicate
	}
	return predicate.Or(mirrorServicePredicate, predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := asService(e.ObjectOld)
			n, ok2 := asService(e.ObjectNew)
			return ok1 && ok2 && serviceRelevant(n) && !equality.Semantic.DeepEqual(o.Status.LoadBalancer, n.Status.LoadBalancer)
		},
	})
}

// statusServicePredicate passes Service events the status controller must see: creations and
// resyncs of LoadBalancer Services, updates that change their status, finalizers, type or
// class (e.g. the finalizer that makes a Service ours), and deletions and type changes away
// from LoadBalancer of relevant Services (so that it forgets them).
var statusServicePredicate = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool {
		svc, ok := asService(e.Object)
		return ok && svc.Spec.Type == corev1.ServiceTypeLoadBalancer
	},
	DeleteFunc: func(e event.DeleteEvent) bool { return relevantService(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := asService(e.ObjectOld)
		n, ok2 := asService(e.ObjectNew)
		if !ok1 || !ok2 || (n.Spec.Type != corev1.ServiceTypeLoadBalancer && o.Spec.Type != corev1.ServiceTypeLoadBalancer) {
			return false
		}
		return o.ResourceVersion == n.ResourceVersion || o.Spec.Type != n.Spec.Type ||
			!equality.Semantic.DeepEqual(o.Status.LoadBalancer, n.Status.LoadBalancer) ||
			!sameMeta(o, n) || !equality.Semantic.DeepEqual(o.Spec.LoadBalancerClass, n.Spec.LoadBalancerClass) ||
			!equality.Semantic.DeepEqual(meta.FindStatusCondition(o.Status.Conditions, lbaddress.ConditionAddressAssigned),
				meta.FindStatusCondition(n.Status.Conditions, lbaddress.ConditionAddressAssigned))
	},
}

// hubLoadBalancerChanged passes the hub LoadBalancer events the mirror controller must see:
// creations, deletions, and updates of the spec, labels or annotations (not of the status the
// manager writes).
func hubLoadBalancerChanged() predicate.TypedPredicate[*v1alpha1.LoadBalancer] {
	return predicate.Or[*v1alpha1.LoadBalancer](
		predicate.TypedGenerationChangedPredicate[*v1alpha1.LoadBalancer]{},
		predicate.TypedLabelChangedPredicate[*v1alpha1.LoadBalancer]{},
		predicate.TypedAnnotationChangedPredicate[*v1alpha1.LoadBalancer]{})
}

// hubVerdictChanged passes TenantState updates that change the hub's verdict on
// LoadBalancers (status.loadBalancer.disable), and only those (the manager may refresh
// TenantState often).
var hubVerdictChanged = predicate.TypedFuncs[*v1alpha1.TenantState]{
	UpdateFunc: func(e event.TypedUpdateEvent[*v1alpha1.TenantState]) bool {
		return e.ObjectOld.Status.LoadBalancer.Disable != e.ObjectNew.Status.LoadBalancer.Disable
	},
}

// hubStatusChanged passes the hub LoadBalancer events the status controller must see:
// creations, and updates of the address or of the conditions it copies; not deletions.
var hubStatusChanged = predicate.TypedFuncs[*v1alpha1.LoadBalancer]{
	UpdateFunc: func(e event.TypedUpdateEvent[*v1alpha1.LoadBalancer]) bool {
		return !equality.Semantic.DeepEqual(e.ObjectOld.Status.LoadBalancer, e.ObjectNew.Status.LoadBalancer) ||
			hubConditionsChanged(e.ObjectOld, e.ObjectNew)
	},
	DeleteFunc: func(event.TypedDeleteEvent[*v1alpha1.LoadBalancer]) bool { return false },
}

// nodeChanged passes Node events that can change the published addresses: creations,
// deletions, resyncs, and updates of readiness, addresses, labels or deletion.
var nodeChanged = predicate.TypedFuncs[client.Object]{
	UpdateFunc: func(e event.TypedUpdateEvent[client.Object]) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		if !ok1 || !ok2 || o.ResourceVersion == n.ResourceVersion {
			return true
		}
		return NodeReady(o) != NodeReady(n) ||
			!slices.Equal(o.Status.Addresses, n.Status.Addresses) ||
			(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
			hasKey(o.Labels, LabelExcludeFromExternalLoadBalancers) != hasKey(n.Labels, LabelExcludeFromExternalLoadBalancers)
	},
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}
