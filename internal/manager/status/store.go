package status

import (
	"reflect"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"kubelb.dev/kubelb/internal/ir"
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
// registers its queue with it and is told of every tenant whose Report changed.
type Store struct {
	mu      sync.Mutex
	reports map[string]*Report
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]
}

// NewStore returns an empty Store.
func NewStore() *Store { return &Store{reports: map[string]*Report{}} }

// Publish records the tenant's latest Report; the Writer hears of it when it changed.
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
}

// Remove forgets a tenant.
func (s *Store) Remove(tenant string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.reports, tenant)
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
