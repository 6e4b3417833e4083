package envoycp

// Which hub Services and Secrets of a tenant namespace the controller reads: only those the
// manager made, never one a tenant could have written.

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/manager/loadbalancer"
)

// HubServiceOf returns the name of the LoadBalancer whose hub Service svc is, or "": a
// Service labelled managed-by: kubelb and kubelb.k8c.io/lb-namespace (its own namespace),
// named loadbalancer.HubServiceName of the LoadBalancer that kubelb.k8c.io/lb-name or its
// controller reference (kind LoadBalancer) names. Only the manager makes such Services; no
// other Service of a tenant namespace is read for a LoadBalancer.
func HubServiceOf(svc client.Object) string {
	l := svc.GetLabels()
	if l[v1alpha1.LabelManagedBy] != v1alpha1.LabelManagedByValue || l[v1alpha1.LabelLoadBalancerNS] != svc.GetNamespace() {
		return ""
	}
	lb := l[v1alpha1.LabelLoadBalancerName]
	if lb == "" {
		if ref := metav1.GetControllerOf(svc); ref != nil && ref.Kind == "LoadBalancer" && ref.APIVersion == v1alpha1.GroupVersion.String() {
			lb = ref.Name
		}
	}
	// A Service named "envoy-<lb>" exists, so that is a valid Service name and HubServiceName
	// gives it without the check (a regular expression, for every Service of the tenant).
	if name := svc.GetName(); lb == "" || (name != "envoy-"+lb && name != loadbalancer.HubServiceName(lb)) {
		return ""
	}
	return lb
}

// IsRouteService reports whether a hub Service is one the Route controller made: labelled
// managed-by: kubelb and either kubelb.k8c.io/route-name (a Gateway's) or
// kubelb.k8c.io/ingress=true (the tenant's Ingress Service). No other Service of a tenant
// namespace is read: a tenant could have written it.
func IsRouteService(o client.Object) bool {
	l := o.GetLabels()
	return l[v1alpha1.LabelManagedBy] == v1alpha1.LabelManagedByValue &&
		(l[v1alpha1.LabelRouteName] != "" || l[v1alpha1.LabelIngressService] == "true")
}

// IsSyncedSecret reports whether a hub Secret is one made from a SyncSecret: labelled
// managed-by: kubelb and controlled (ownerReference) by a SyncSecret of its namespace. No
// other Secret is read.
func IsSyncedSecret(o client.Object) bool {
	if o.GetLabels()[v1alpha1.LabelManagedBy] != v1alpha1.LabelManagedByValue {
		return false
	}
	for _, ref := range o.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller && ref.Kind == "SyncSecret" && ref.APIVersion == v1alpha1.GroupVersion.String() {
			return true
		}
	}
	return false
}
