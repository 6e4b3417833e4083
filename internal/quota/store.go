package quota

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/settings"
)

// Store is the manager's one source of a tenant's quota verdict — the same as LoadAdmission —
// for every controller that needs it: the leader's planner (internal/manager/planner: listener
// ports and hub Services), the Envoy control plane (every replica) and the Tenant controller.
// Its cost stays small in a tenant of thousands of objects:
//   - it reads the LoadBalancers and Routes of the namespace straight from the manager's
//     informer stores (read-only, no copy; a List copies every object);
//   - it remembers what Admit needs of each object (its Object) by resourceVersion, so an
//     object's ports are worked out once per change, not once per translation of the tenant;
//   - it keeps each namespace's last verdict until one of its LoadBalancers or Routes changes
//     (an informer event) or the settings asked with differ, so the planner, the Envoy
//     control plane and the Tenant controller reacting to one change compute it once.
//
// Reading the stores keeps the verdict exactly as fresh as a List from the cache would.
// With a cache that has no plain informer store (e.g. one over several namespaces) it falls
// back to LoadAdmission over c, each time.
type Store struct {
	cache cache.Informers
	c     client.Reader

	mu     sync.Mutex
	lbs    toolscache.Indexer
	routes toolscache.Indexer
	// handlers are the registrations of the change counters; until they have synced, the
	// informers are still telling them of the objects already cached (as added), and each
	// such event counts as a change.
	handlers []toolscache.ResourceEventHandlerRegistration
	memo     map[string]*namespaceMemo
}

// namespaceMemo is the remembered Objects of one namespace, and its last verdict.
type namespaceMemo struct {
	// changes counts the informer events of the namespace's LoadBalancers and Routes; it is
	// read before the stores are, so a verdict kept with a count is at least that fresh.
	changes atomic.Uint64

	mu     sync.Mutex
	lbs    memo[loadBalancerSettings]
	routes memo[routeSettings]
	last   *lastVerdict
}

// lastVerdict is a namespace's last verdict, valid while the namespace's change count and
// the settings it was made with stay the same.
type lastVerdict struct {
	changes uint64
	key     verdictKey
	verdict Verdict
}

// verdictKey is what of the tenant's settings a verdict depends on.
type verdictKey struct {
	lbs    loadBalancerSettings
	routes routeSettings
	limits settings.Limits
}

func verdictKeyOf(t settings.Tenant) verdictKey {
	return verdictKey{lbs: lbSettings(t), routes: routeSettingsOf(t), limits: t.Limits}
}

func newNamespaceMemo() *namespaceMemo {
	return &namespaceMemo{lbs: memo[loadBalancerSettings]{}, routes: memo[routeSettings]{}}
}

// memo is the remembered Object of each object of one kind, by UID, valid for the
// resourceVersion and the tenant settings S it was worked out with.
type memo[S comparable] map[types.UID]*memoEntry[S]

type memoEntry[S comparable] struct {
	resourceVersion string
	settings        S
	obj             Object
	ok              bool
}

// remember returns the remembered Object of o, working it out anew when o or the settings
// changed since.
func remember[S comparable, T client.Object](m memo[S], o T, set S, object func(T) (Object, bool)) *memoEntry[S] {
	e, hit := m[o.GetUID()]
	if !hit || e.resourceVersion != o.GetResourceVersion() || e.settings != set {
		e = &memoEntry[S]{resourceVersion: o.GetResourceVersion(), settings: set}
		e.obj, e.ok = object(o)
		m[o.GetUID()] = e
	}
	return e
}

// pruned forgets objects no longer in the namespace (items, of type T) once they are many.
func pruned[S comparable, T client.Object](m memo[S], items []any) memo[S] {
	if len(m) <= 2*len(items)+64 {
		return m
	}
	keep := make(memo[S], len(items))
	each(items, func(o T) {
		if e, hit := m[o.GetUID()]; hit {
			keep[o.GetUID()] = e
		}
	})
	return keep
}

// each calls f with every item of an informer's store that is of type T (read-only).
func each[T client.Object](items []any, f func(T)) {
	for _, item := range items {
		if o, ok := item.(T); ok {
			f(o)
		}
	}
}

// NewStore returns a Store over the manager's cache (informers) and client c (reading
// from that cache).
func NewStore(informers cache.Informers, c client.Reader) *Store {
	return &Store{cache: informers, c: c, memo: map[string]*namespaceMemo{}}
}

// indexerOf is the informer's store of a shared informer.
type indexerOf interface{ GetIndexer() toolscache.Indexer }

// indexers returns the stores of the LoadBalancer and Route informers, or false when the
// cache has none to read directly. The first call also counts each namespace's changes from
// the informers' events.
func (s *Store) indexers(ctx context.Context) (lbs, routes toolscache.Indexer, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lbs != nil {
		return s.lbs, s.routes, true
	}
	li, err := s.cache.GetInformer(ctx, &kubelbv1alpha1.LoadBalancer{})
	if err != nil {
		return nil, nil, false
	}
	ri, err := s.cache.GetInformer(ctx, &kubelbv1alpha1.Route{})
	if err != nil {
		return nil, nil, false
	}
	l, lok := li.(indexerOf)
	r, rok := ri.(indexerOf)
	if !lok || !rok {
		return nil, nil, false
	}
	count := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    s.changed,
		UpdateFunc: func(_, o any) { s.changed(o) },
		DeleteFunc: s.changed,
	}
	lreg, err := li.AddEventHandler(count)
	if err != nil {
		return nil, nil, false
	}
	rreg, err := ri.AddEventHandler(count)
	if err != nil {
		return nil, nil, false
	}
	s.handlers = []toolscache.ResourceEventHandlerRegistration{lreg, rreg}
	s.lbs, s.routes = l.GetIndexer(), r.GetIndexer()
	return s.lbs, s.routes, true
}

// counting reports whether the change counters have heard of every object the informers had
// cached when the counters were registered; before, a kept verdict is computed again at the
// next of those late events (once more than needed, never stale).
func (s *Store) counting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handlers == nil {
		return false
	}
	for _, h := range s.handlers {
		if !h.HasSynced() {
			return false
		}
	}
	return true
}

// changed counts an informer event of a LoadBalancer or Route in its namespace.
func (s *Store) changed(o any) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	if obj, ok := o.(client.Object); ok {
		s.namespace(obj.GetNamespace()).changes.Add(1)
	}
}

// namespace returns the memo of namespace, made on first use.
func (s *Store) namespace(namespace string) *namespaceMemo {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.memo[namespace]
	if m == nil {
		m = newNamespaceMemo()
		s.memo[namespace] = m
	}
	return m
}

// LoadAdmission returns the verdict over the LoadBalancers and Routes of namespace under
// the tenant's settings t: the same as LoadAdmission, computed again only when one of them
// changed or t differs from the last call's. The verdict is shared: read it, never change it.
func (s *Store) LoadAdmission(ctx context.Context, namespace string, t settings.Tenant) (Verdict, error) {
	lbIdx, routeIdx, ok := s.indexers(ctx)
	if !ok {
		return LoadAdmission(ctx, s.c, namespace, t)
	}
	m := s.namespace(namespace)
	changes, key := m.changes.Load(), verdictKeyOf(t)
	m.mu.Lock()
	last := m.last
	m.mu.Unlock()
	if last != nil && last.changes == changes && last.key == key {
		return last.verdict, nil
	}
	lbs, err := lbIdx.ByIndex(toolscache.NamespaceIndex, namespace)
	if err != nil {
		return Verdict{}, fmt.Errorf("listing the LoadBalancers of %s: %w", namespace, err)
	}
	routes, err := routeIdx.ByIndex(toolscache.NamespaceIndex, namespace)
	if err != nil {
		return Verdict{}, fmt.Errorf("listing the Routes of %s: %w", namespace, err)
	}
	v := m.admission(namespace, lbs, routes, t)
	m.mu.Lock()
	if m.last == nil || m.last.changes <= changes {
		m.last = &lastVerdict{changes: changes, key: key, verdict: v}
	}
	m.mu.Unlock()
	return v, nil
}

// admission is the verdict over the stores' objects (read-only).
func (m *namespaceMemo) admission(namespace string, lbs, routes []any, t settings.Tenant) Verdict {
	m.mu.Lock()
	defer m.mu.Unlock()
	lbSet := lbSettings(t)
	routeSet := routeSettingsOf(t)
	// The totals decide the fast path; the full ranking (Admit) is built from the memo only
	// when the limits need it.
	var nLB, nRoute, ports, nodePorts int
	var bytes int64
	shared := map[string]int{}      // SharedPorts of each shared set
	sharedNodes := map[string]int{} // SharedNodePorts of each shared set
	uniform := true
	add := func(o Object) {
		if o.Kind == KindLoadBalancer {
			nLB++
		} else {
			nRoute++
		}
		ports += o.Ports
		nodePorts += o.NodePorts
		bytes += o.Bytes
		if o.Shared != "" {
			if p, seen := shared[o.Shared]; !seen {
				shared[o.Shared] = o.SharedPorts
				sharedNodes[o.Shared] = o.SharedNodePorts
			} else if p != o.SharedPorts || sharedNodes[o.Shared] != o.SharedNodePorts {
				uniform = false
			}
		}
	}
	each(lbs, func(lb *kubelbv1alpha1.LoadBalancer) {
		if e := remember(m.lbs, lb, lbSet, func(lb *kubelbv1alpha1.LoadBalancer) (Object, bool) { return loadBalancerObject(lb, t) }); e.ok {
			add(e.obj)
		}
	})
	each(routes, func(rt *kubelbv1alpha1.Route) {
		if e := remember(m.routes, rt, routeSet, func(rt *kubelbv1alpha1.Route) (Object, bool) { return routeObject(rt, t) }); e.ok {
			add(e.obj)
		}
	})
	m.lbs, m.routes = pruned[loadBalancerSettings, *kubelbv1alpha1.LoadBalancer](m.lbs, lbs), pruned[routeSettings, *kubelbv1alpha1.Route](m.routes, routes)
	for _, p := range shared {
		ports += p
	}
	for _, p := range sharedNodes {
		nodePorts += p
	}
	l := t.Limits
	if uniform && nLB <= l.LoadBalancers && nRoute <= l.Routes && ports <= l.ListenerPorts && nodePorts <= l.NodePorts && bytes <= l.ObjectBytes {
		// Nothing can be refused: Admit walks fewer objects than each count limit, and the
		// ports and bytes of any prefix are at most the totals.
		return Verdict{namespace: namespace, limits: l, UsedPorts: ports, UsedNodePorts: nodePorts, UsedBytes: bytes,
			Asked: Usage{LoadBalancers: nLB, Routes: nRoute, ListenerPorts: ports, NodePorts: nodePorts, ObjectBytes: bytes}}
	}
	objs := make([]Object, 0, nLB+nRoute)
	each(lbs, func(lb *kubelbv1alpha1.LoadBalancer) {
		if e := m.lbs[lb.UID]; e.ok {
			objs = append(objs, e.obj)
		}
	})
	each(routes, func(rt *kubelbv1alpha1.Route) {
		if e := m.routes[rt.UID]; e.ok {
			objs = append(objs, e.obj)
		}
	})
	return Admit(namespace, objs, l)
}
