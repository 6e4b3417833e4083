package envoycp

// The event handlers: which tenant an event rebuilds, and after what hold-off (holdoff.go).

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// tenantKey is the object whose event requests the rebuild of tenant (its namespace).
func tenantKey(tenant string) client.Object {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}
}

// enqueueTenantAfter enqueues the tenant of every event after delay.
func enqueueTenantAfter(delay time.Duration) handler.EventHandler {
	add := func(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range TenantOf(context.Background(), o) {
			q.AddAfter(req, delay)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object, q)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object, q)
		},
	}
}

// enqueueAllTenantsAfter enqueues every managed tenant namespace after delay, for a change
// of a hub-wide input (Config, ServiceCIDR, Node). It lists the namespaces from the cache.
func enqueueAllTenantsAfter(c client.Reader, delay time.Duration) handler.EventHandler {
	add := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		namespaces := &corev1.NamespaceList{}
		if err := c.List(ctx, namespaces, client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue},
			client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing tenant namespaces for a hub-wide change")
			return
		}
		for i := range namespaces.Items {
			q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Name: namespaces.Items[i].Name}}, delay)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, _ event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q)
		},
		UpdateFunc: func(ctx context.Context, _ event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q)
		},
		DeleteFunc: func(ctx context.Context, _ event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q)
		},
		GenericFunc: func(ctx context.Context, _ event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q)
		},
	}
}

// TenantOf maps an object to the request of its tenant: {Name: <its namespace>}.
func TenantOf(_ context.Context, o client.Object) []reconcile.Request {
	if o.GetNamespace() == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
}
