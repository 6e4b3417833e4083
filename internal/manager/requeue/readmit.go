package requeue

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/namespaces"
	"kubelb.dev/kubelb/internal/quota"
	"kubelb.dev/kubelb/internal/settings"
)

// Readmit is the manager's one source of a tenant's quota verdict for the LoadBalancer and
// Route controllers: it computes verdicts through one quota.Store (one memo and one tracker
// over the informers for both controllers), remembers per namespace which objects the last
// verdict refused, and requeues, in the queue of each object's controller, every object
// whose verdict changed since: an object that a deletion, a smaller object or a raised limit
// admits, and one that a lowered limit or a grown older object refuses — of either kind,
// whichever controller computed the verdict (a Route that grows can refuse a LoadBalancer).
// Register LoadBalancers and Routes with the two controllers so it learns their queues.
type Readmit struct {
	store       *quota.Store
	lbs, routes Queue

	mu      sync.Mutex
	refused map[string]map[quota.Ref]struct{} // namespace → refused objects
}

// NewReadmit returns a Readmit computing verdicts through store.
func NewReadmit(store *quota.Store) *Readmit {
	return &Readmit{store: store, refused: map[string]map[quota.Ref]struct{}{}}
}

// LoadBalancers captures the LoadBalancer controller's queue.
func (q *Readmit) LoadBalancers() source.Source { return q.lbs.Source() }

// Routes captures the Route controller's queue.
func (q *Readmit) Routes() source.Source { return q.routes.Source() }

// AdmissionFor is the tenant's verdict for the reconcile of obj (quota.Store.LoadAdmissionFor),
// observed.
func (q *Readmit) AdmissionFor(ctx context.Context, obj client.Object, t settings.Tenant) (quota.Verdict, error) {
	v, err := q.store.LoadAdmissionFor(ctx, obj, t)
	if err == nil {
		q.Observe(obj.GetNamespace(), v)
	}
	return v, err
}

// Admission is the verdict of namespace (quota.Store.LoadAdmission), observed.
func (q *Readmit) Admission(ctx context.Context, namespace string, t settings.Tenant) (quota.Verdict, error) {
	v, err := q.store.LoadAdmission(ctx, namespace, t)
	if err == nil {
		q.Observe(namespace, v)
	}
	return v, err
}

// Observe records the verdict of namespace and requeues the objects whose verdict differs
// from the last one observed. Its cost is linear in the refused objects.
func (q *Readmit) Observe(namespace string, v quota.Verdict) {
	now := map[quota.Ref]struct{}{}
	for _, kind := range []quota.Kind{quota.KindLoadBalancer, quota.KindRoute} {
		for _, name := range v.RefusedNames(kind) {
			now[quota.Ref{Kind: kind, Name: name}] = struct{}{}
		}
	}
	q.mu.Lock()
	before := q.refused[namespace]
	if len(now) == 0 {
		delete(q.refused, namespace)
	} else {
		q.refused[namespace] = now
	}
	q.mu.Unlock()
	var lbs, routes []types.NamespacedName
	changed := func(ref quota.Ref) {
		key := types.NamespacedName{Namespace: namespace, Name: ref.Name}
		if ref.Kind == quota.KindLoadBalancer {
			lbs = append(lbs, key)
		} else {
			routes = append(routes, key)
		}
	}
	for ref := range now {
		if _, ok := before[ref]; !ok {
			changed(ref)
		}
	}
	for ref := range before {
		if _, ok := now[ref]; !ok {
			changed(ref)
		}
	}
	q.lbs.Add(lbs...)
	q.routes.Add(routes...)
}

// Refuses tells whether the namespace's last verdict observed refused any object. A
// deletion only frees room: when nothing was refused, it changes no verdict and needs no
// Recheck (a mass delete would otherwise recompute the namespace's verdict once per deleted
// object).
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

// Recheck computes and observes the verdict of a tenant namespace (Config "default" and the
// Tenant read through c, a cache, in managerNamespace) after a change that reconciles no
// object of its own: an object gone, or going. A namespace that is not managed is
// forgotten. Only when something was refused: a deletion can only admit.
func (q *Readmit) Recheck(ctx context.Context, c client.Reader, managerNamespace, namespace string) error {
	if !q.Refuses(namespace) {
		return nil
	}
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
	_, err = q.Admission(ctx, namespace, tenant)
	return err
}
