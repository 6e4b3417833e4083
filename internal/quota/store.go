package quota

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/settings"
)

// Store computes a tenant's verdict (the same as LoadAdmission) at a cost that stays small
// in a tenant of thousands of objects, where every reconcile of every object needs it:
//   - it reads the LoadBalancers and Routes of the namespace straight from the manager's
//     informer stores (read-only, no copy; a List copies every object);
//   - it remembers what Admit needs of each object (its Object) by resourceVersion, so an
//     object's ports are worked out once per change, not once per reconcile of any object;
//   - when the whole tenant fits its limits (the usual case), nothing is refused and no
//     ranking is needed: the verdict is the totals, without the sort Admit does.
//
// Reading the stores keeps the verdict exactly as fresh as a List from the cache would.
// With a cache that has no plain informer store (e.g. one over several namespaces) it falls
// back to LoadAdmission over c.
type Store struct {
	cache cache.Informers
	c     client.Reader

	mu     sync.Mutex
	lbs    toolscache.Indexer
	routes toolscache.Indexer
	memo   map[string]*namespaceMemo
	track  *tracker
}

// namespaceMemo is the remembered Objects of one namespace.
type namespaceMemo struct {
	mu     sync.Mutex
	lbs    memo[loadBalancerSettings]
	routes memo[routeSettings]
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
// cache has none to read directly.
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
	tr := &tracker{objs: map[types.UID]tracked{}, totals: map[string]*totals{}}
	for _, inf := range []cache.Informer{li, ri} {
		reg, err := inf.AddEventHandler(tr.handler())
		if err != nil {
			return nil, nil, false
		}
		tr.synced = append(tr.synced, reg)
	}
	s.lbs, s.routes, s.track = l.GetIndexer(), r.GetIndexer(), tr
	return s.lbs, s.routes, true
}

// LoadAdmissionFor is LoadAdmission for the reconcile of obj (a LoadBalancer or Route of
// the tenant, as read from the cache). When the tenant fits its limits as the informers'
// events have shown it, up to at least obj's version, it costs a look-up: nothing is refused.
// Otherwise it walks the tenant (LoadAdmission).
//
// The verdict may then miss changes the cache got after obj's version, as a List that ran a
// moment earlier would: Admit never refuses an object for a newer one, so objects created
// since cannot change obj's verdict, and the reconciles of changed objects compute their
// own verdicts, which requeue the objects they refuse or admit anew (requeue.Readmit).
func (s *Store) LoadAdmissionFor(ctx context.Context, obj client.Object, t settings.Tenant) (Verdict, error) {
	if _, _, ok := s.indexers(ctx); ok {
		if ports, bytes, fits := s.track.fits(obj, t); fits {
			return Verdict{namespace: obj.GetNamespace(), limits: t.Limits, UsedPorts: ports, UsedBytes: bytes}, nil
		}
	}
	return s.LoadAdmission(ctx, obj.GetNamespace(), t)
}

// LoadAdmission returns the verdict over the LoadBalancers and Routes of namespace under
// the tenant's settings t: the same as LoadAdmission.
func (s *Store) LoadAdmission(ctx context.Context, namespace string, t settings.Tenant) (Verdict, error) {
	lbIdx, routeIdx, ok := s.indexers(ctx)
	if !ok {
		return LoadAdmission(ctx, s.c, namespace, t)
	}
	lbs, err := lbIdx.ByIndex(toolscache.NamespaceIndex, namespace)
	if err != nil {
		return Verdict{}, fmt.Errorf("listing the LoadBalancers of %s: %w", namespace, err)
	}
	routes, err := routeIdx.ByIndex(toolscache.NamespaceIndex, namespace)
	if err != nil {
		return Verdict{}, fmt.Errorf("listing the Routes of %s: %w", namespace, err)
	}
	s.mu.Lock()
	m := s.memo[namespace]
	if m == nil {
		m = newNamespaceMemo()
		s.memo[namespace] = m
	}
	s.mu.Unlock()
	return m.admission(namespace, lbs, routes, t), nil
}

// admission is the verdict over the stores' objects (read-only).
func (m *namespaceMemo) admission(namespace string, lbs, routes []any, t settings.Tenant) Verdict {
	m.mu.Lock()
	defer m.mu.Unlock()
	lbSet := lbSettings(t)
	routeSet := routeSettings{disableGatewayAPI: t.DisableGatewayAPI, disableIngress: t.DisableIngress, allocateNodePorts: t.AllocateNodePorts}
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
		return Verdict{namespace: namespace, limits: l, UsedPorts: ports, UsedBytes: bytes}
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

// The fast path of LoadAdmissionFor: the informers' event handlers keep, per namespace,
// the totals Admit would add up (how many LoadBalancers and Routes, their listener ports,
// whether an Ingress shares the Ingress Service), so that a reconcile of one object in a
// tenant that fits its limits costs a look-up, not a walk over the tenant.

// totals are what the tracker adds up of one namespace's objects (those not being deleted),
// under settings that enable everything and make no LoadBalancer hostnames.
type totals struct {
	loadBalancers, routes       int
	lbPorts, routePorts         int
	lbNodePorts, routeNodePorts int   // with allocateNodePorts on
	ingresses                   int   // Routes that share the Ingress Service
	bytes                       int64 // of every object (limits.objectBytes)
}

// tracked is what the tracker knows of one object: the version it saw last and its Object
// under the neutral settings.
type tracked struct {
	namespace       string
	resourceVersion string
	obj             Object
	ok              bool // not being deleted
}

// tracker keeps totals per namespace from the informers' events.
type tracker struct {
	mu     sync.Mutex
	objs   map[types.UID]tracked
	totals map[string]*totals
	synced []toolscache.ResourceEventHandlerRegistration
}

func (tr *tracker) set(uid types.UID, now *tracked) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	apply := func(f tracked, sign int) {
		if !f.ok {
			return
		}
		t := tr.totals[f.namespace]
		if t == nil {
			t = &totals{}
			tr.totals[f.namespace] = t
		}
		t.bytes += int64(sign) * f.obj.Bytes
		if f.obj.Kind == KindLoadBalancer {
			t.loadBalancers += sign
			t.lbPorts += sign * f.obj.Ports
			t.lbNodePorts += sign * f.obj.NodePorts
		} else {
			t.routes += sign
			t.routePorts += sign * f.obj.Ports
			t.routeNodePorts += sign * f.obj.NodePorts
			if f.obj.Shared != "" {
				t.ingresses += sign
			}
		}
		if *t == (totals{}) {
			delete(tr.totals, f.namespace)
		}
	}
	if old, ok := tr.objs[uid]; ok {
		apply(old, -1)
		delete(tr.objs, uid)
	}
	if now != nil {
		apply(*now, +1)
		tr.objs[uid] = *now
	}
}

// trackerSettings are the neutral settings the tracker counts under: everything enabled, no
// hostnames, hub NodePorts on (fits drops them when the tenant has them off).
var trackerSettings = settings.Tenant{AllocateNodePorts: true}

// observe is the event handler's view of one object (nil: gone).
func (tr *tracker) observe(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	switch o := obj.(type) {
	case *kubelbv1alpha1.LoadBalancer:
		f := tracked{namespace: o.Namespace, resourceVersion: o.ResourceVersion}
		f.obj, f.ok = loadBalancerObject(o, trackerSettings)
		tr.set(o.UID, &f)
	case *kubelbv1alpha1.Route:
		f := tracked{namespace: o.Namespace, resourceVersion: o.ResourceVersion}
		f.obj, f.ok = routeObject(o, trackerSettings)
		tr.set(o.UID, &f)
	}
}

func (tr *tracker) forget(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if o, ok := obj.(client.Object); ok {
		tr.set(o.GetUID(), nil)
	}
}

// handler is the informers' event handler of the tracker.
func (tr *tracker) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { tr.observe(obj) },
		UpdateFunc: func(_, obj any) { tr.observe(obj) },
		DeleteFunc: tr.forget,
	}
}

// fits returns the ports and bytes the namespace's objects use and true when, as the tracker saw
// them, they fit the tenant's limits under its settings t: then Admit refuses none of
// them. It returns false when it cannot tell: the handlers have not seen every object yet,
// or the tracker has not seen obj (the object being reconciled) at its version from the
// cache — it would be behind the cache the reconcile reads — or t makes LoadBalancer
// hostnames (which depend on the settings).
func (tr *tracker) fits(obj client.Object, t settings.Tenant) (int, int64, bool) {
	if !t.DNS.IsZero() {
		return 0, 0, false
	}
	for _, r := range tr.synced {
		if !r.HasSynced() {
			return 0, 0, false
		}
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if f, ok := tr.objs[obj.GetUID()]; !ok || f.resourceVersion != obj.GetResourceVersion() {
		return 0, 0, false
	}
	var sum totals
	if n := tr.totals[obj.GetNamespace()]; n != nil {
		sum = *n
	}
	ports := 0
	if !t.DisableLoadBalancer {
		ports += sum.lbPorts
	}
	if !t.DisableGatewayAPI {
		ports += sum.routePorts
	}
	if !t.DisableIngress && sum.ingresses > 0 {
		ports += IngressServicePorts
	}
	l := t.Limits
	// Hub NodePorts: none without allocateNodePorts (quota.Object.NodePorts).
	nodePorts := 0
	if t.AllocateNodePorts {
		if !t.DisableLoadBalancer {
			nodePorts += sum.lbNodePorts
		}
		if !t.DisableGatewayAPI {
			nodePorts += sum.routeNodePorts
		}
		if !t.DisableIngress && sum.ingresses > 0 {
			nodePorts += IngressServicePorts
		}
	}
	return ports, sum.bytes, sum.loadBalancers <= l.LoadBalancers && sum.routes <= l.Routes && ports <= l.ListenerPorts &&
		nodePorts <= l.NodePorts && sum.bytes <= l.ObjectBytes
}
