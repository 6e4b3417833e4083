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
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
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

// DeleteHubService deletes a hub Service the manager made, only if it is still the same
// object (its UID); nil, a Service already gone or replaced is nothing to do.
func DeleteHubService(ctx context.Context, c client.Client, svc *corev1.Service) error {
	if svc == nil {
		return nil
	}
	err := c.Delete(ctx, svc, client.Preconditions{UID: &svc.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting hub Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}
