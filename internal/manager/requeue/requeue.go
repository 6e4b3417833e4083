// Package requeue holds what controllers add to their own queues besides the watches'
// events: a Queue, captured through a source registered with the controller, and the
// tenants whose plan waits for free listener ports (Waiters, for the planner).
package requeue

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Queue is a controller's queue, learnt through Source, for requests a controller adds to
// its own queue. Its zero value adds nothing until the controller starts.
type Queue struct {
	mu sync.Mutex
	q  workqueue.TypedRateLimitingInterface[reconcile.Request]
}

// Source is a source that only captures the controller's queue: register it with the
// controller (WatchesRawSource).
func (q *Queue) Source() source.Source {
	return source.Func(func(_ context.Context, wq workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.q = wq
		return nil
	})
}

// Add queues the keys (none before the controller started).
func (q *Queue) Add(keys ...types.NamespacedName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.q == nil {
		return
	}
	for _, k := range keys {
		q.q.Add(reconcile.Request{NamespacedName: k})
	}
}
