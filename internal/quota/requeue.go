package quota

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/namespaces"
	"kubelb.dev/kubelb/internal/settings"
)

// Requeuer remembers, per namespace, which objects of one kind a controller last found
// refused, and requeues (in that controller's queue) every object whose verdict changed
// since: an object that a deletion, a smaller object or a raised limit admits, and one that a
// lowered limit or a grown older object refuses. Each reconcile computes the namespace's whole
// verdict anyway; Observe makes it reach the objects it concerns. Register Source with the
// controller so it learns the queue. Its zero value is not ready: use NewRequeuer.
type Requeuer struct {
	kind Kind

	mu      sync.Mutex
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]
	refused map[string]map[string]struct{} // namespace → names
	store   *Store                         // set: Recheck reads the tenant from it
}

// UseStore makes Recheck compute verdicts with s (straight from the informers' stores)
// instead of listing the tenant.
func (q *Requeuer) UseStore(s *Store) { q.store = s }

// NewRequeuer returns a Requeuer of the objects of kind.
func NewRequeuer(kind Kind) *Requeuer {
	return &Requeuer{kind: kind, refused: map[string]map[string]struct{}{}}
}

// Observe records the verdict of namespace and requeues the objects of the Requeuer's kind
// whose verdict differs from the last one observed. Its cost is linear in the refused
// objects.
func (q *Requeuer) Observe(namespace string, v Verdict) {
	now := map[string]struct{}{}
	for r := range v.refused {
		if r.Kind == q.kind {
			now[r.Name] = struct{}{}
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	before := q.refused[namespace]
	if len(now) == 0 {
		delete(q.refused, namespace)
	} else {
		q.refused[namespace] = now
	}
	if q.queue == nil {
		return
	}
	add := func(name string) {
		q.queue.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}})
	}
	for name := range now {
		if _, ok := before[name]; !ok {
			add(name)
		}
	}
	for name := range before {
		if _, ok := now[name]; !ok {
			add(name)
		}
	}
}

// Refuses tells whether the namespace's last verdict observed refused any object of the
// Requeuer's kind. A deletion only frees room: when nothing was refused, it changes no
// verdict of this kind and needs no Recheck (a mass delete would otherwise recompute the
// namespace's verdict once per deleted object).
func (q *Requeuer) Refuses(namespace string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.refused[namespace]) > 0
}

// Forget drops what is remembered of namespace (no longer managed).
func (q *Requeuer) Forget(namespace string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.refused, namespace)
}

// Source is a source that only captures the controller's queue, for Observe.
func (q *Requeuer) Source() source.Source {
	return source.Func(func(_ context.Context, wq workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.queue = wq
		return nil
	})
}

// Recheck computes the verdict of a tenant namespace from c (a cache; Config "default" in
// managerNamespace) and observes it, after a change that reconciles none of the Requeuer's
// objects of its own (one of them gone, an object of the other kind changed). A namespace
// that is not managed is forgotten.
func (q *Requeuer) Recheck(ctx context.Context, c client.Reader, managerNamespace, namespace string) error {
	managed, err := namespaces.Managed(ctx, c, namespace)
	if err != nil {
		return err
	}
	if !managed {
		q.Forget(namespace)
		return nil
	}
	tenant, err := settings.Load(ctx, c, managerNamespace, hubnames.TenantName(namespace))
	if err != nil {
		return err
	}
	var verdict Verdict
	if q.store != nil {
		verdict, err = q.store.LoadAdmission(ctx, namespace, tenant)
	} else {
		verdict, err = LoadAdmission(ctx, c, namespace, tenant)
	}
	if err != nil {
		return err
	}
	q.Observe(namespace, verdict)
	return nil
}
