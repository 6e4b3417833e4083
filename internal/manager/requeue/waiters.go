package requeue

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// The queues of the controllers that allocate listener ports, by the names Waiters knows
// them.
const (
	LoadBalancers   = "LoadBalancer"
	Routes          = "Route"
	IngressServices = "IngressService" // keyed by tenant namespace (the key's Name)
)

// Waiters remembers the objects that wait for free listener ports — LoadBalancers, Routes
// and tenants' Ingress Services, each in its own controller's queue — and requeues every
// one of them when ports are freed, whichever controller freed them: the three share one
// listener port range, so a deleted LoadBalancer's ports serve a waiting Route. The manager
// has one, shared by the LoadBalancer and Route controllers; register Source(name) with
// each controller so it learns their queues.
//
// No free is missed: a controller reads Freed before it allocates and hands that count to
// Set, which requeues the object at once when ports were freed in between.
type Waiters struct {
	mu      sync.Mutex
	queues  map[string]*Queue
	freed   uint64
	waiting map[waiter]struct{}
}

type waiter struct {
	queue string
	key   types.NamespacedName
}

// NewWaiters returns an empty Waiters.
func NewWaiters() *Waiters {
	return &Waiters{queues: map[string]*Queue{}, waiting: map[waiter]struct{}{}}
}

// Source captures the queue of the controller that handles the objects of queue name.
func (w *Waiters) Source(name string) source.Source {
	return w.queue(name).Source()
}

func (w *Waiters) queue(name string) *Queue {
	w.mu.Lock()
	defer w.mu.Unlock()
	q, ok := w.queues[name]
	if !ok {
		q = &Queue{}
		w.queues[name] = q
	}
	return q
}

// Freed is how many times ports were freed so far: read it before an allocation and hand it
// to Set after.
func (w *Waiters) Freed() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.freed
}

// Set records whether key (of queue name) waits for free ports after an allocation begun
// when Freed was seen; when ports were freed since, a waiting key is requeued at once.
func (w *Waiters) Set(name string, key types.NamespacedName, waiting bool, seen uint64) {
	w.mu.Lock()
	k := waiter{name, key}
	if !waiting {
		delete(w.waiting, k)
		w.mu.Unlock()
		return
	}
	w.waiting[k] = struct{}{}
	missed := w.freed != seen
	w.mu.Unlock()
	if missed {
		w.queue(name).Add(key)
	}
}

// Wake requeues every object waiting for ports, now that some were freed.
func (w *Waiters) Wake() {
	w.mu.Lock()
	w.freed++
	byQueue := map[string][]types.NamespacedName{}
	for k := range w.waiting {
		byQueue[k.queue] = append(byQueue[k.queue], k.key)
	}
	w.mu.Unlock()
	for name, keys := range byQueue {
		w.queue(name).Add(keys...)
	}
}
