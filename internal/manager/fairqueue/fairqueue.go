// Package fairqueue holds a controller workqueue that takes turns across namespaces (tenants).
package fairqueue

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// New returns a controller's workqueue (controller.Options.NewQueue) that hands requests
// out round robin across namespaces, i.e. across tenants: a tenant that queues thousands of
// its objects at once gets one request handed out in turn with every other tenant that has
// requests waiting, instead of all of them ahead of the others (client-go's workqueue is
// first in, first out). Within a namespace the order is first in, first out. Otherwise it
// behaves as client-go's rate-limiting workqueue: a request queued twice is handed out once,
// a request is never handed to two workers at once (queued again while being processed, it
// comes back after Done), AddAfter and AddRateLimited delay it, the rate limiter counts the
// retries.
//
// Its workqueue metrics (under the controller's name) count namespaces with requests
// waiting, not requests.
func New(controllerName string, rateLimiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	q := &fairQueue{
		turns:       workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: controllerName}),
		rateLimiter: rateLimiter,
		pending:     map[string][]reconcile.Request{},
		queued:      map[reconcile.Request]bool{},
		processing:  map[reconcile.Request]bool{},
		again:       map[reconcile.Request]bool{},
		timers:      map[reconcile.Request]*delayed{},
	}
	q.idle = sync.NewCond(&q.mu)
	return q
}

type fairQueue struct {
	// turns holds each namespace with requests waiting once: its order is the round robin.
	turns       workqueue.TypedInterface[string]
	rateLimiter workqueue.TypedRateLimiter[reconcile.Request]

	mu         sync.Mutex
	idle       *sync.Cond // signalled when processing becomes empty
	pending    map[string][]reconcile.Request
	queued     map[reconcile.Request]bool // in pending
	processing map[reconcile.Request]bool
	again      map[reconcile.Request]bool // queued while processing
	timers     map[reconcile.Request]*delayed
	stopping   bool
}

type delayed struct {
	at    time.Time
	timer *time.Timer
}

func (q *fairQueue) Add(req reconcile.Request) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.add(req)
}

// add queues req. q.mu is held.
func (q *fairQueue) add(req reconcile.Request) {
	if q.stopping || q.queued[req] {
		return
	}
	if q.processing[req] {
		q.again[req] = true
		return
	}
	q.queued[req] = true
	q.pending[req.Namespace] = append(q.pending[req.Namespace], req)
	q.turns.Add(req.Namespace)
}

func (q *fairQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queued)
}

// Get hands out the first request of the namespace whose turn it is; the namespace takes its
// next turn behind the others that wait.
func (q *fairQueue) Get() (reconcile.Request, bool) {
	for {
		ns, shutdown := q.turns.Get()
		if shutdown {
			return reconcile.Request{}, true
		}
		q.mu.Lock()
		reqs := q.pending[ns]
		if len(reqs) == 0 {
			q.turns.Done(ns)
			q.mu.Unlock()
			continue
		}
		req := reqs[0]
		if len(reqs) == 1 {
			delete(q.pending, ns)
		} else {
			q.pending[ns] = reqs[1:]
		}
		delete(q.queued, req)
		q.processing[req] = true
		q.turns.Done(ns)
		if len(q.pending[ns]) > 0 {
			q.turns.Add(ns)
		}
		q.mu.Unlock()
		return req, false
	}
}

func (q *fairQueue) Done(req reconcile.Request) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, req)
	if q.again[req] {
		delete(q.again, req)
		q.add(req)
	}
	if len(q.processing) == 0 {
		q.idle.Broadcast()
	}
}

func (q *fairQueue) ShutDown() {
	q.mu.Lock()
	q.stopping = true
	for req, d := range q.timers {
		d.timer.Stop()
		delete(q.timers, req)
	}
	q.mu.Unlock()
	q.turns.ShutDown()
}

// ShutDownWithDrain stops taking requests and waits until the requests handed out are done.
func (q *fairQueue) ShutDownWithDrain() {
	q.mu.Lock()
	q.stopping = true
	for len(q.processing) > 0 {
		q.idle.Wait()
	}
	q.mu.Unlock()
	q.ShutDown()
}

func (q *fairQueue) ShuttingDown() bool { return q.turns.ShuttingDown() }

// AddAfter queues req after d; of several delays of one request, the earliest counts.
func (q *fairQueue) AddAfter(req reconcile.Request, d time.Duration) {
	if d <= 0 {
		q.Add(req)
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopping {
		return
	}
	at := time.Now().Add(d)
	if old := q.timers[req]; old != nil {
		if !at.Before(old.at) {
			return
		}
		old.timer.Stop()
	}
	entry := &delayed{at: at}
	entry.timer = time.AfterFunc(d, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.timers[req] == entry {
			delete(q.timers, req)
			q.add(req)
		}
	})
	q.timers[req] = entry
}

func (q *fairQueue) AddRateLimited(req reconcile.Request) { q.AddAfter(req, q.rateLimiter.When(req)) }

func (q *fairQueue) Forget(req reconcile.Request) { q.rateLimiter.Forget(req) }

func (q *fairQueue) NumRequeues(req reconcile.Request) int { return q.rateLimiter.NumRequeues(req) }
