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
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/envoyfleet"
)

// hubRangesChanged passes Node creates and deletes, and updates that change what HubRanges
// reads (Pod CIDRs, addresses); heartbeats and condition updates rebuild nothing.
func hubRangesChanged() predicate.Predicate {
	return updateChanged(func(o, n *corev1.Node) bool {
		return !slices.Equal(o.Spec.PodCIDRs, n.Spec.PodCIDRs) || !slices.Equal(o.Status.Addresses, n.Status.Addresses)
	})
}

// translationInputChanged passes LoadBalancer updates that can change the translation: the
// spec, annotations, origin labels and deletion. Translation does not read the status (the
// listener ports and IP families come from the hub Service, hubServiceChanged), so status
// writes rebuild nothing.
func translationInputChanged() predicate.Predicate {
	return updateChanged(func(o, n *v1alpha1.LoadBalancer) bool {
		return o.Generation != n.Generation || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
			!maps.Equal(o.Annotations, n.Annotations) || !maps.Equal(o.Labels, n.Labels)
	})
}

// hubServiceChanged passes the LoadBalancers' hub Services (hubnames.LoadBalancerOf, before or after the
// event) when what translation reads of them changes: the listener ports (each port's
// protocol, number and targetPort), the IP families, deletion. The LoadBalancer controller's
// other writes and the hub's address rebuild nothing.
func hubServiceChanged() predicate.TypedPredicate[client.Object] {
	return ownedChanged(func(o client.Object) bool { return hubnames.LoadBalancerOf(o) != "" }, func(o, n *corev1.Service) bool {
		return o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
			!slices.Equal(o.Spec.IPFamilies, n.Spec.IPFamilies) || !slices.EqualFunc(o.Spec.Ports, n.Spec.Ports, sameListenerPort)
	})
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

// routeServiceChanged passes the Route controller's hub Services (hubnames.IsRouteService, before or
// after the event) when what translation reads of them changes: ports (the targetPorts are
// the listener ports), addresses, labels, deletion.
func routeServiceChanged() predicate.TypedPredicate[client.Object] {
	return ownedChanged(hubnames.IsRouteService, func(o, n *corev1.Service) bool {
		return !maps.Equal(o.Labels, n.Labels) || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
			!equality.Semantic.DeepEqual(o.Spec.Ports, n.Spec.Ports) || o.Spec.LoadBalancerIP != n.Spec.LoadBalancerIP ||
			!equality.Semantic.DeepEqual(o.Status.LoadBalancer, n.Status.LoadBalancer)
	})
}

// syncedSecretChanged passes Secrets made from SyncSecrets (before or after the event) when
// their data, labels or owners change.
func syncedSecretChanged() predicate.TypedPredicate[client.Object] {
	return ownedChanged(hubnames.IsSyncedSecret, func(o, n *corev1.Secret) bool {
		return !maps.Equal(o.Labels, n.Labels) || !equality.Semantic.DeepEqual(o.OwnerReferences, n.OwnerReferences) ||
			!equality.Semantic.DeepEqual(o.Data, n.Data) || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
	})
}

// oidcCookieKeysChanged passes the manager's OIDC cookie keys of a tenant
// (hubnames.IsOIDCCookieKeys, before or after the event) when their data or labels change.
func oidcCookieKeysChanged() predicate.TypedPredicate[client.Object] {
	return ownedChanged(hubnames.IsOIDCCookieKeys, func(o, n *corev1.Secret) bool {
		return !maps.Equal(o.Labels, n.Labels) || !equality.Semantic.DeepEqual(o.Data, n.Data) ||
			o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
	})
}

// hostnameSecretChanged passes the Secrets cert-manager issued for LoadBalancer hostnames
// (hubnames.IsHostnameSecret, before or after the event) when their data, labels or
// annotations change.
func hostnameSecretChanged() predicate.TypedPredicate[client.Object] {
	return ownedChanged(hubnames.IsHostnameSecret, func(o, n *corev1.Secret) bool {
		return !maps.Equal(o.Labels, n.Labels) || !maps.Equal(o.Annotations, n.Annotations) ||
			!equality.Semantic.DeepEqual(o.Data, n.Data) || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
	})
}

// platformSecretChanged passes the labelled Secrets outside tenant namespaces, which a
// Config or Tenant may name as the default Ingress certificate, when their type, data or
// labels change.
func platformSecretChanged() predicate.TypedPredicate[client.Object] {
	return ownedChanged(func(s client.Object) bool { return !hubnames.IsTenantNamespace(s.GetNamespace()) }, func(o, n *corev1.Secret) bool {
		return o.Type != n.Type || !maps.Equal(o.Labels, n.Labels) ||
			!equality.Semantic.DeepEqual(o.Data, n.Data) || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
	})
}

// updateChanged passes creates, deletes and generic events, and the updates of objects of
// type T that changed reports (an update of another type passes).
func updateChanged[T client.Object](changed func(o, n T) bool) predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(T)
		n, ok2 := e.ObjectNew.(T)
		return !ok1 || !ok2 || changed(o, n)
	}}
}

// ownedChanged passes the events of the objects is picks (before or after an update): an
// update passes when is picks the object on one side only or changed reports a change of
// what translation reads (an update of another type than T passes).
func ownedChanged[T client.Object](is func(client.Object) bool, changed func(o, n T) bool) predicate.TypedPredicate[client.Object] {
	return predicate.TypedFuncs[client.Object]{
		CreateFunc:  func(e event.CreateEvent) bool { return is(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return is(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return is(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if !is(e.ObjectOld) && !is(e.ObjectNew) {
				return false
			}
			o, ok1 := e.ObjectOld.(T)
			n, ok2 := e.ObjectNew.(T)
			return !ok1 || !ok2 || is(o) != is(n) || changed(o, n)
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

// rateLimitServiceChanged passes the tenants' rate-limit Services (envoyfleet.IsRateLimitService)
// when they come, go or change their cluster IP: the address the tenant's Envoys reach.
func rateLimitServiceChanged() predicate.TypedPredicate[client.Object] {
	return ownedChanged(func(o client.Object) bool { return envoyfleet.IsRateLimitService(o) }, func(o, n *corev1.Service) bool {
		return o.Spec.ClusterIP != n.Spec.ClusterIP
	})
}
