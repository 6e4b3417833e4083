package status

import (
	"reflect"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/manager/requeue"
	"kubelb.dev/kubelb/internal/translate"
)

// Report is what one translation of a tenant found.
type Report struct {
	// Objects are the objects translated (refs without section) and the generation of each
	// that was translated, and those the tenant's settings held back from translation
	// (refused by its limits, or LoadBalancers of a tenant with load balancing disabled),
	// whose Error problems say why.
	Objects map[ir.ObjectRef]int64
	// Problems found by the front end and the back end.
	Problems ir.Problems
	// Owners of each resource, by type URL and resource name (translator.Owners).
	Owners map[string]map[string][]ir.ObjectRef
	// Versions of the tenant's snapshot by type URL, as the xDS server versions them.
	Versions map[string]string
	// Routes are what the Layer 7 front ends say of each translated Route, by Route name
	// (translate.Result.Routes): the tenant object's kind, the generation of the tenant
	// object described, and its status as JSON, which the Writer applies to
	// status.resources.route.status. The Route's own generation is in Objects; its problems
	// are keyed by ir.ObjectRef{Kind: translate.KindRoute}.
	Routes map[string]translate.RouteStatus
	// Waiting are objects translated while a listener port of theirs is still pending
	// (translate.Waiting.Translated): a Route's tenant object's status is written, but no
	// object gets a Programmed verdict until a Report without it.
	Waiting map[ir.ObjectRef]bool
}

// GivesVerdict tells whether the Report may decide ref's Programmed condition: it was
// translated with every listener port it needs (not in Waiting). Every writer of a verdict
// asks this, so no verdict is given on a version whose ports do not exist yet.
func (r *Report) GivesVerdict(ref ir.ObjectRef) bool { return !r.Waiting[ref] }

// Rejected is a rejection that concerns a tenant, as read from its TenantState.
type Rejected struct {
	Proxy, TypeURL, Version, Message string
}

// Store holds the latest Report of every tenant, on every replica. The leader's Writer
// registers its queue with it and is told of every tenant whose Report changed; the
// LoadBalancer controller registers its queue (AwaitedVerdicts) and is told of each
// LoadBalancer it awaits a verdict for (AwaitVerdict) when a Report gives one.
type Store struct {
	mu      sync.Mutex
	reports map[string]*Report
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]

	// awaiting are the LoadBalancers, by tenant and name, whose first status write waits
	// for their Programmed verdict; lbQueue is the LoadBalancer controller's queue.
	awaiting map[string]map[string]struct{}
	lbQueue  requeue.Queue
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{reports: map[string]*Report{}, awaiting: map[string]map[string]struct{}{}}
}

// Publish records the tenant's latest Report; the Writer hears of it when it changed, and
// the LoadBalancer controller of each awaited LoadBalancer it gives a verdict on.
func (s *Store) Publish(tenant string, r *Report) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.reports[tenant]; ok && reflect.DeepEqual(old, r) {
		return
	}
	s.reports[tenant] = r
	if s.queue != nil {
		s.queue.Add(tenantRequest(tenant))
	}
	var given []types.NamespacedName
	for name := range s.awaiting[tenant] {
		ref := ir.ObjectRef{Kind: translate.KindLoadBalancer, Namespace: tenant, Name: name}
		if _, ok := r.Objects[ref]; ok && r.GivesVerdict(ref) {
			given = append(given, types.NamespacedName{Namespace: tenant, Name: name})
			delete(s.awaiting[tenant], name)
		}
	}
	if names, ok := s.awaiting[tenant]; ok && len(names) == 0 {
		delete(s.awaiting, tenant)
	}
	s.lbQueue.Add(given...)
}

// AwaitVerdict asks to be told (in the queue AwaitedVerdicts captures) when a Report of the
// LoadBalancer's tenant describes it with a verdict; once told, it is forgotten.
func (s *Store) AwaitVerdict(lb types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := s.awaiting[lb.Namespace]
	if names == nil {
		names = map[string]struct{}{}
		s.awaiting[lb.Namespace] = names
	}
	names[lb.Name] = struct{}{}
}

// StopAwaiting forgets an AwaitVerdict.
func (s *Store) StopAwaiting(lb types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if names := s.awaiting[lb.Namespace]; names != nil {
		delete(names, lb.Name)
		if len(names) == 0 {
			delete(s.awaiting, lb.Namespace)
		}
	}
}

// Awaiting is how many LoadBalancers await a verdict (tests).
func (s *Store) Awaiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, names := range s.awaiting {
		n += len(names)
	}
	return n
}

// AwaitedVerdicts captures the LoadBalancer controller's queue (register it with
// WatchesRawSource).
func (s *Store) AwaitedVerdicts() source.Source { return s.lbQueue.Source() }

// Remove forgets a tenant.
func (s *Store) Remove(tenant string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.reports, tenant)
	delete(s.awaiting, tenant)
}

// Get returns the tenant's latest Report, nil when there is none. The Report must not be
// modified.
func (s *Store) Get(tenant string) *Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reports[tenant]
}

// setQueue registers the Writer's queue and enqueues every known tenant.
func (s *Store) setQueue(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = q
	tenants := make([]string, 0, len(s.reports))
	for t := range s.reports {
		tenants = append(tenants, t)
	}
	slices.Sort(tenants)
	for _, t := range tenants {
		q.Add(tenantRequest(t))
	}
}

// tenantRequest is the Writer's request for a tenant: {Name: <namespace>}.
func tenantRequest(tenant string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Name: tenant}}
}

type workqueueOf = workqueue.TypedRateLimitingInterface[reconcile.Request]
