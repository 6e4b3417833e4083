package requeue

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Waiters remembers the objects of one controller that wait for free listener ports and
// requeues them when ports are freed (the LoadBalancer and Route controllers share the
// listener port range). Register Source with the controller so it learns the queue.
type Waiters struct {
	Queue
	mu      sync.Mutex
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
	keys := make([]types.NamespacedName, 0, len(w.waiting))
	for key := range w.waiting {
		keys = append(keys, key)
	}
	w.mu.Unlock()
	w.Add(keys...)
}
