package requeue

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Waiters remembers the tenants whose plan waits for free listener ports and requeues every
// one of them, in the planner's queue, when ports are freed, whichever controller freed them:
// all tenants share one listener port range, so a deleted LoadBalancer's ports serve another
// tenant's waiting Route. The manager has one; register Source with the planner so it learns
// its queue; the controllers that free ports (the planner, and the LoadBalancer and Route
// controllers when an object is gone) call Wake.
//
// No free is missed: the planner reads Freed before it allocates and hands that count to
// Set, which requeues the tenant at once when ports were freed in between.
type Waiters struct {
	queue Queue

	mu      sync.Mutex
	freed   uint64
	waiting map[types.NamespacedName]struct{}
}

// NewWaiters returns an empty Waiters.
func NewWaiters() *Waiters {
	return &Waiters{waiting: map[types.NamespacedName]struct{}{}}
}

// Source captures the planner's queue.
func (w *Waiters) Source() source.Source { return w.queue.Source() }

// Freed is how many times ports were freed so far: read it before an allocation and hand it
// to Set after.
func (w *Waiters) Freed() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.freed
}

// Set records whether the tenant key waits for free ports after an allocation begun when
// Freed was seen; when ports were freed since, a waiting tenant is requeued at once.
func (w *Waiters) Set(key types.NamespacedName, waiting bool, seen uint64) {
	w.mu.Lock()
	if !waiting {
		delete(w.waiting, key)
		w.mu.Unlock()
		return
	}
	w.waiting[key] = struct{}{}
	missed := w.freed != seen
	w.mu.Unlock()
	if missed {
		w.queue.Add(key)
	}
}

// Wake requeues every tenant waiting for ports, now that some were freed.
func (w *Waiters) Wake() {
	w.mu.Lock()
	w.freed++
	keys := make([]types.NamespacedName, 0, len(w.waiting))
	for k := range w.waiting {
		keys = append(keys, k)
	}
	w.mu.Unlock()
	w.queue.Add(keys...)
}
