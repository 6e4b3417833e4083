package planner

import (
	"context"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/hostnames"
)

// sameHostnameElsewhere maps a LoadBalancer with an explicit hostname to the tenants with a
// LoadBalancer of the same hostname (hostnames.SameHostnameElsewhere): which of them holds it
// (and gets its DNS record) may have changed.
func (c *Controller) sameHostnameElsewhere(ctx context.Context, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, k := range hostnames.SameHostnameElsewhere(ctx, c.client, o) {
		if req := tenantRequest(k.Namespace); !slices.Contains(out, req) {
			out = append(out, req)
		}
	}
	return out
}

// everyTenant requeues every namespace with Routes or LoadBalancers: Config applies to all.
func (c *Controller) everyTenant(ctx context.Context, _ client.Object) []reconcile.Request {
	seen := map[string]bool{}
	var out []reconcile.Request
	add := func(ns string) {
		if !seen[ns] {
			seen[ns] = true
			out = append(out, tenantRequest(ns))
		}
	}
	routes := &kubelbv1alpha1.RouteList{}
	lbs := &kubelbv1alpha1.LoadBalancerList{}
	for _, l := range []client.ObjectList{routes, lbs} {
		if err := c.client.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing objects to requeue the tenants' plans")
			return out
		}
	}
	for i := range routes.Items {
		add(routes.Items[i].Namespace)
	}
	for i := range lbs.Items {
		add(lbs.Items[i].Namespace)
	}
	return out
}

// tenantRequest is the request of a tenant namespace.
func tenantRequest(namespace string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Name: namespace}}
}

// namespaceKey maps an object to its namespace's request.
func namespaceKey(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{tenantRequest(o.GetNamespace())}
}

// namespaceSelf maps a Namespace to its own request.
func namespaceSelf(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{tenantRequest(o.GetName())}
}

// tenantToRequest maps a Tenant to its namespace's request.
func tenantToRequest(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{tenantRequest(hubnames.TenantNamespace(o.GetName()))}
}

// hubServiceChanged passes the Services standing where a plan's hub Services are
// ("envoy-…", "gateway-…", kubelb-ingress, or labelled so) when they are made or deleted,
// and updates of what the plan reads of them: their ports (the hints), owners, labels and
// deletion.
func hubServiceChanged() predicate.Predicate {
	looks := func(o client.Object) bool {
		return hubnames.LooksLikeLoadBalancerService(o) || hubnames.LooksLikeRouteService(o)
	}
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return looks(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return looks(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return looks(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, okOld := e.ObjectOld.(*corev1.Service)
			n, okNew := e.ObjectNew.(*corev1.Service)
			if !okOld || !okNew || !looks(n) {
				return false
			}
			return !equality.Semantic.DeepEqual(o.Spec.Ports, n.Spec.Ports) || !equality.Semantic.DeepEqual(o.OwnerReferences, n.OwnerReferences) ||
				!maps.Equal(o.Labels, n.Labels) || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
		},
	}
}
