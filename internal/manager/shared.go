package manager

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
)

// PortWaiters remembers the objects of one controller that wait for free listener ports and
// requeues them when ports are freed (the LoadBalancer and Route controllers share the
// listener port range). Register Source with the controller so it learns the queue.
type PortWaiters struct {
	mu      sync.Mutex
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]
	waiting map[types.NamespacedName]struct{}
}

// Set records whether key waits for free ports.
func (w *PortWaiters) Set(key types.NamespacedName, waiting bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !waiting {
		delete(w.waiting, key)
		return
	}
	if w.waiting == nil {
		w.waiting = map[types.NamespacedName]struct{}{}
	}
	w.waiting[key] = struct{}{}
}

// Wake requeues every object waiting for ports, now that some were freed.
func (w *PortWaiters) Wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queue == nil {
		return
	}
	for key := range w.waiting {
		w.queue.Add(reconcile.Request{NamespacedName: key})
	}
}

// Source is a source that only captures the controller's queue, for Wake.
func (w *PortWaiters) Source() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.queue = q
		return nil
	})
}

// NamespaceManaged reports whether a hub namespace carries kubelb.k8c.io/managed-by=kubelb
// (a missing namespace is not managed): the manager's controllers act only in those.
func NamespaceManaged(ctx context.Context, c client.Reader, name string) (bool, error) {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("getting namespace %s: %w", name, err)
	}
	return hubnames.IsManaged(ns), nil
}

// ManagedLabelChanged passes namespaces that gain or lose the managed-by label (the
// LoadBalancer, Route and SyncSecret controllers revisit their objects then).
func ManagedLabelChanged() predicate.Predicate {
	managed := hubnames.IsManaged
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return managed(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return managed(e.ObjectOld) != managed(e.ObjectNew) },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// DefaultConfig passes only Config "default" in the manager's namespace, the one the
// controllers read (settings.Load).
func DefaultConfig(namespace string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == namespace && o.GetName() == kubelbv1alpha1.DefaultConfigName
	})
}

// SpecOrDeletionChanged passes creates and deletes, and updates that change the generation
// (the spec) or start the deletion: what a LoadBalancer's or Route's quota verdict and
// hostname read (the LoadBalancer and Route controllers watch them with it).
func SpecOrDeletionChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
			e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
}
