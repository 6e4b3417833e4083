package requeue

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/namespaces"
	"kubelb.dev/kubelb/internal/quota"
	"kubelb.dev/kubelb/internal/settings"
)

// Readmit remembers, per namespace, which objects of one kind a controller last found
// refused, and requeues (in that controller's queue) every object whose verdict changed
// since: an object that a deletion, a smaller object or a raised limit admits, and one that a
// lowered limit or a grown older object refuses. Each reconcile computes the namespace's whole
// verdict anyway; Observe makes it reach the objects it concerns. Register Source with the
// controller so it learns the queue. Its zero value is not ready: use NewReadmit.
type Readmit struct {
	queue
	kind quota.Kind

	mu      sync.Mutex
	refused map[string]map[string]struct{} // namespace → names
	store   *quota.Store                   // set: Recheck reads the tenant from it
}

// UseStore makes Recheck compute verdicts with s (straight from the informers' stores)
// instead of listing the tenant.
func (q *Readmit) UseStore(s *quota.Store) { q.store = s }

// NewReadmit returns a Readmit of the objects of kind.
func NewReadmit(kind quota.Kind) *Readmit {
	return &Readmit{kind: kind, refused: map[string]map[string]struct{}{}}
}

// Observe records the verdict of namespace and requeues the objects of the Readmit's kind
// whose verdict differs from the last one observed. Its cost is linear in the refused
// objects.
func (q *Readmit) Observe(namespace string, v quota.Verdict) {
	now := map[string]struct{}{}
	for _, name := range v.RefusedNames(q.kind) {
		now[name] = struct{}{}
	}
	q.mu.Lock()
	before := q.refused[namespace]
	if len(now) == 0 {
		delete(q.refused, namespace)
	} else {
		q.refused[namespace] = now
	}
	q.mu.Unlock()
	var changed []types.NamespacedName
	for name := range now {
		if _, ok := before[name]; !ok {
			changed = append(changed, types.NamespacedName{Namespace: namespace, Name: name})
		}
	}
	for name := range before {
		if _, ok := now[name]; !ok {
			changed = append(changed, types.NamespacedName{Namespace: namespace, Name: name})
		}
	}
	q.add(changed...)
}

// Refuses tells whether the namespace's last verdict observed refused any object of the
// Readmit's kind. A deletion only frees room: when nothing was refused, it changes no
// verdict of this kind and needs no Recheck (a mass delete would otherwise recompute the
// namespace's verdict once per deleted object).
func (q *Readmit) Refuses(namespace string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.refused[namespace]) > 0
}

// Forget drops what is remembered of namespace (no longer managed).
func (q *Readmit) Forget(namespace string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.refused, namespace)
}

// Recheck computes the verdict of a tenant namespace from c (a cache; Config "default" in
// managerNamespace) and observes it, after a change that reconciles none of the Readmit's
// objects of its own (one of them gone, an object of the other kind changed). A namespace
// that is not managed is forgotten.
func (q *Readmit) Recheck(ctx context.Context, c client.Reader, managerNamespace, namespace string) error {
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
	var verdict quota.Verdict
	if q.store != nil {
		verdict, err = q.store.LoadAdmission(ctx, namespace, tenant)
	} else {
		verdict, err = quota.LoadAdmission(ctx, c, namespace, tenant)
	}
	if err != nil {
		return err
	}
	q.Observe(namespace, verdict)
	return nil
}
