package envoycp

// The predicates of the watches: each passes only the changes of what the translation reads,
// so that status writes, heartbeats and the other controllers' own fields rebuild nothing.

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/manager/loadbalancer"
)

// hubRangesChanged passes Node creates and deletes, and updates that change what HubRanges
// reads (Pod CIDRs, addresses); heartbeats and condition updates rebuild nothing.
func hubRangesChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		if !ok1 || !ok2 {
			return true
		}
		return !slices.Equal(o.Spec.PodCIDRs, n.Spec.PodCIDRs) || !slices.Equal(o.Status.Addresses, n.Status.Addresses)
	}}
}

// translationInputChanged passes LoadBalancer updates that can change the translation: the
// spec, annotations, origin labels and deletion. Translation does not read the status (the
// listener ports and IP families come from the hub Service, hubServiceChanged), so status
// writes rebuild nothing.
func translationInputChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*v1alpha1.LoadBalancer)
		n, ok2 := e.ObjectNew.(*v1alpha1.LoadBalancer)
		if !ok1 || !ok2 {
			return true
		}
		return o.Generation != n.Generation || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
			!maps.Equal(o.Annotations, n.Annotations) || !maps.Equal(o.Labels, n.Labels)
	}}
}

// hubServiceChanged passes the LoadBalancers' hub Services (HubServiceOf, before or after the
// event) when what translation reads of them changes: the listener ports (each port's
// protocol, number and targetPort), the IP families, deletion. The LoadBalancer controller's
// other writes and the hub's address rebuild nothing.
func hubServiceChanged() predicate.TypedPredicate[client.Object] {
	is := func(o client.Object) bool { return HubServiceOf(o) != "" }
	return predicate.TypedFuncs[client.Object]{
		CreateFunc:  func(e event.CreateEvent) bool { return is(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return is(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return is(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if !is(e.ObjectOld) && !is(e.ObjectNew) {
				return false
			}
			o, ok1 := e.ObjectOld.(*corev1.Service)
			n, ok2 := e.ObjectNew.(*corev1.Service)
			if !ok1 || !ok2 {
				return true
			}
			return is(o) != is(n) || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
				!slices.Equal(o.Spec.IPFamilies, n.Spec.IPFamilies) || !slices.EqualFunc(o.Spec.Ports, n.Spec.Ports, sameListenerPort)
		},
	}
}

// sameListenerPort reports whether two hub Service ports record the same listener port.
func sameListenerPort(a, b corev1.ServicePort) bool {
	return a.Protocol == b.Protocol && a.Port == b.Port && a.TargetPort == b.TargetPort
}

// routeChanged passes Route updates that can change the translation: the spec (generation),
// labels, annotations and deletion. The status writes of the Route controller and of the
// status writer rebuild nothing.
func routeChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return o.GetGeneration() != n.GetGeneration() || o.GetDeletionTimestamp().IsZero() != n.GetDeletionTimestamp().IsZero() ||
			!maps.Equal(o.GetAnnotations(), n.GetAnnotations()) || !maps.Equal(o.GetLabels(), n.GetLabels())
	}}
}

// routeServiceChanged passes the Route controller's hub Services (IsRouteService, before or
// after the event) when what translation reads of them changes: ports (the targetPorts are
// the listener ports), addresses, labels, deletion.
func routeServiceChanged() predicate.TypedPredicate[client.Object] {
	return predicate.TypedFuncs[client.Object]{
		CreateFunc:  func(e event.CreateEvent) bool { return IsRouteService(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return IsRouteService(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return IsRouteService(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if !IsRouteService(e.ObjectOld) && !IsRouteService(e.ObjectNew) {
				return false
			}
			o, ok1 := e.ObjectOld.(*corev1.Service)
			n, ok2 := e.ObjectNew.(*corev1.Service)
			if !ok1 || !ok2 {
				return true
			}
			return !maps.Equal(o.Labels, n.Labels) || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
				!equality.Semantic.DeepEqual(o.Spec.Ports, n.Spec.Ports) ||
				!equality.Semantic.DeepEqual(o.Status.LoadBalancer, n.Status.LoadBalancer)
		},
	}
}

// syncedSecretChanged passes Secrets made from SyncSecrets (before or after the event) when
// their data, labels or owners change.
func syncedSecretChanged() predicate.TypedPredicate[client.Object] {
	return predicate.TypedFuncs[client.Object]{
		CreateFunc:  func(e event.CreateEvent) bool { return IsSyncedSecret(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return IsSyncedSecret(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return IsSyncedSecret(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if !IsSyncedSecret(e.ObjectOld) && !IsSyncedSecret(e.ObjectNew) {
				return false
			}
			o, ok1 := e.ObjectOld.(*corev1.Secret)
			n, ok2 := e.ObjectNew.(*corev1.Secret)
			if !ok1 || !ok2 {
				return true
			}
			return !maps.Equal(o.Labels, n.Labels) || !equality.Semantic.DeepEqual(o.OwnerReferences, n.OwnerReferences) ||
				!equality.Semantic.DeepEqual(o.Data, n.Data) || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
		},
	}
}

// hostnameSecretChanged passes the Secrets cert-manager issued for LoadBalancer hostnames
// (loadbalancer.IsHostnameSecret, before or after the event) when their data, labels or
// annotations change.
func hostnameSecretChanged() predicate.TypedPredicate[client.Object] {
	return predicate.TypedFuncs[client.Object]{
		CreateFunc:  func(e event.CreateEvent) bool { return loadbalancer.IsHostnameSecret(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return loadbalancer.IsHostnameSecret(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return loadbalancer.IsHostnameSecret(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if !loadbalancer.IsHostnameSecret(e.ObjectOld) && !loadbalancer.IsHostnameSecret(e.ObjectNew) {
				return false
			}
			o, ok1 := e.ObjectOld.(*corev1.Secret)
			n, ok2 := e.ObjectNew.(*corev1.Secret)
			if !ok1 || !ok2 {
				return true
			}
			return !maps.Equal(o.Labels, n.Labels) || !maps.Equal(o.Annotations, n.Annotations) ||
				!equality.Semantic.DeepEqual(o.Data, n.Data) || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
		},
	}
}

// managedNamespaceChanged passes namespaces that are (or were) managed: creation, deletion,
// and label changes either way.
func managedNamespaceChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return managed(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool { return managed(e.ObjectOld) != managed(e.ObjectNew) },
		DeleteFunc: func(e event.DeleteEvent) bool { return managed(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool {
			return managed(e.Object)
		},
	}
}

func managed(o client.Object) bool {
	return o != nil && o.GetLabels()[v1alpha1.LabelManagedBy] == v1alpha1.LabelManagedByValue
}
