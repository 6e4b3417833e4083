// Package portwait holds the objects of a controller that wait for free listener ports, and
// requeues them when ports are freed.
package portwait

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Waiters remembers the objects of one controller that wait for free listener ports and
// requeues them when ports are freed (the LoadBalancer and Route controllers share the
// listener port range). Register Source with the controller so it learns the queue.
type Waiters struct {
	mu      sync.Mutex
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]
	waiting map[types.NamespacedName]struct{}
}

// Set records whether key waits for free ports.
func (w *Waiters) Set(key types.NamespacedName, waiting bool) {
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
func (w *Waiters) Wake() {
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
func (w *Waiters) Source() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.queue = q
		return nil
	})
}
