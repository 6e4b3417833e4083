package translate

import (
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
)

// Incremental is Run for one tenant translated again after every change (the manager's Envoy
// control plane keeps one per tenant): the cost of a run follows what changed, not the size
// of the tenant. It keeps what each LoadBalancer translated to — its listeners, clusters and
// problems, a piece — keyed by the LoadBalancer's UID and resourceVersion and its hub
// Service's, and translates again only the LoadBalancers whose key changed. Every piece also
// depends on the tenant-wide input every LoadBalancer reads (the tenant, the options, the
// endpoint policy, the Addresses objects, the resolved hostnames): when its fingerprint
// changes, every LoadBalancer is translated again.
//
// The result is always Run's on the same input (TestIncrementalMatchesRun applies random
// changes and compares): the pieces are translated alone, and what ties LoadBalancers
// together is checked when they are put together, in Run's order (oldest first). When two
// LoadBalancers' listener ports conflict, when the tenant's endpoint limit
// (Options.MaxEndpoints) cuts some LoadBalancer's endpoints, or when two LoadBalancers have
// one name, that run translates every LoadBalancer as Run does. LoadBalancers or hub Services
// without a resourceVersion (objects not read from an API server) are translated every
// time. The Layer 7 front ends (Routes) run every time, reusing each Route's decoded tenant
// object (by UID and resourceVersion), replaying the translation of the HTTPRoutes and
// GRPCRoutes whose input did not change (incremental_routes.go) and handing on the last
// result's IR elements where the new ones equal them (incremental_l7.go).
//
// The IR elements of a result are shared with later results: callers must not modify them
// (the back end's translator.Cache relies on it too). An Incremental is not safe for
// concurrent use; the zero value is ready.
type Incremental struct {
	env    [sha256.Size]byte
	pieces map[string]*piece // by LoadBalancer name
	// decoded and elements: what the Layer 7 front ends keep (incremental_l7.go).
	decoded  decodeCache
	routes   routeMemo
	elements elementIndex
	// budget: the clusters the health-check budget replaced (healthbudget.go).
	budget healthBudgetMemo
	// Stats are those of the last Run.
	Stats IncrementalStats
}

// IncrementalStats say what the last Incremental.Run did.
type IncrementalStats struct {
	// Reused and Translated count the LoadBalancers whose piece was reused or translated.
	Reused, Translated int
	// Full is set when the LoadBalancers had to be put together as Run does (a conflict of
	// listener ports, the tenant's endpoint limit reached, a repeated name).
	Full bool
	// RoutesDecoded and RoutesDecodeReused count the Routes' tenant objects decoded anew and
	// taken from the last run.
	RoutesDecoded, RoutesDecodeReused int
	// RoutesKept is the number of Routes whose decoded tenant object is kept for the next
	// run: those of this run's input only.
	RoutesKept int
	// RoutesReplayed and RoutesTranslated count the HTTPRoutes and GRPCRoutes whose last
	// translation was replayed (routeMemo) and those translated.
	RoutesReplayed, RoutesTranslated int
	// ElementsReused and ElementsChanged count the listeners, route configurations,
	// clusters and secrets of the result that are the last result's (the same pointer:
	// nothing to build again in the back end) and those new or changed;
	// VirtualHostsReused and VirtualHostsChanged the same for virtual hosts.
	ElementsReused, ElementsChanged         int
	VirtualHostsReused, VirtualHostsChanged int
}

// piece is what one LoadBalancer translates to by itself.
type piece struct {
	key       pieceKey
	cacheable bool
	listeners []*ir.Listener
	clusters  []*ir.Cluster
	problems  ir.Problems
	ports     []listenerKey // the listener ports it binds
	endpoints int           // the endpoints its clusters take (Options.MaxEndpoints)
}

// pieceKey is what a piece depends on besides the tenant-wide input.
type pieceKey struct {
	uid            types.UID
	version        string
	hubUID         types.UID
	hubVersion     string
	hubServiceSeen bool
}

// keyOf is the key of a LoadBalancer's piece; false when it cannot be cached (no
// resourceVersion).
func keyOf(lb *v1alpha1.LoadBalancer, svc *corev1.Service) (pieceKey, bool) {
	k := pieceKey{uid: lb.UID, version: lb.ResourceVersion}
	if svc != nil {
		k.hubUID, k.hubVersion, k.hubServiceSeen = svc.UID, svc.ResourceVersion, true
	}
	return k, k.version != "" && (svc == nil || k.hubVersion != "")
}

// Run translates the tenant as Run(in) does, reusing the pieces of the LoadBalancers that did
// not change since the previous Run.
func (x *Incremental) Run(in Input) (Result, error) {
	x.Stats = IncrementalStats{}
	x.decoded.begin()
	base, err := newL4(in)
	if err != nil {
		x.pieces = nil
		return Result{}, err
	}
	env, err := fingerprint(&in, base.opts)
	if err != nil { // plain data; cannot happen
		x.pieces = nil
		return Run(in)
	}
	if env != x.env {
		x.env, x.pieces = env, nil
	}
	x.routes.begin(layer7Env(&in, env))
	// Pieces are translated without the tenant's endpoint limit; it is checked below.
	alone := *base
	alone.opts.MaxEndpoints = 0

	lbs := byAge(in.LoadBalancers)
	pieces := make(map[string]*piece, len(lbs))
	list := make([]*piece, 0, len(lbs))
	full := false
	for _, lb := range lbs {
		if _, dup := pieces[lb.Name]; dup {
			full = true
			continue
		}
		key, cacheable := keyOf(lb, in.HubServices[lb.Name])
		p := x.pieces[lb.Name]
		if !cacheable || p == nil || !p.cacheable || p.key != key {
			p = alone.piece(lb)
			p.key, p.cacheable = key, cacheable
			x.Stats.Translated++
		} else {
			x.Stats.Reused++
		}
		pieces[lb.Name] = p
		list = append(list, p)
	}
	x.pieces = pieces

	cfg := &ir.Config{}
	var problems ir.Problems
	endpoints := 0
	if !full {
		bound := make(map[listenerKey]bool, len(list))
		for _, p := range list {
			for _, k := range p.ports {
				if bound[k] {
					full = true
				}
				bound[k] = true
			}
			endpoints += p.endpoints
			cfg.Listeners = append(cfg.Listeners, p.listeners...)
			cfg.Clusters = append(cfg.Clusters, p.clusters...)
			problems = append(problems, p.problems...)
		}
		if limit := base.opts.MaxEndpoints; limit > 0 && endpoints > limit {
			full = true
		}
	}
	if full {
		x.Stats.Full = true
		t, err := translateL4(in)
		if err != nil {
			return Result{}, err
		}
		return x.finish(runL7(in, t.cfg, t.problems.List(), t.expander, &x.decoded, &x.routes, &x.budget)), nil
	}
	// In name order, as Run's Layer 4 front end leaves them.
	slices.SortFunc(cfg.Listeners, func(a, b *ir.Listener) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(cfg.Clusters, func(a, b *ir.Cluster) int { return cmp.Compare(a.Name, b.Name) })
	problems.Sort()
	// The Layer 7 front ends take their endpoints after the LoadBalancers'.
	base.expander.used = endpoints
	return x.finish(runL7(in, cfg, problems, base.expander, &x.decoded, &x.routes, &x.budget)), nil
}

// piece translates one LoadBalancer by itself with t's input, options and expansions.
func (t *l4) piece(lb *v1alpha1.LoadBalancer) *piece {
	one := &l4{in: t.in, opts: t.opts, cfg: &ir.Config{}, listeners: map[listenerKey]string{}, expander: t.expander}
	one.loadBalancer(lb)
	one.cfg.Normalize()
	p := &piece{listeners: one.cfg.Listeners, clusters: one.cfg.Clusters, problems: one.problems.List()}
	for k := range one.listeners {
		p.ports = append(p.ports, k)
	}
	for _, c := range p.clusters {
		p.endpoints += len(c.Endpoints)
	}
	return p
}

// fingerprint hashes the tenant-wide input every LoadBalancer's translation reads: the
// tenant, the options (opts, with defaults, less the tenant's endpoint limit, which Run
// checks when putting the pieces together, and its health-check budget), the endpoint policy, the resolved hostnames and
// the Addresses objects (by UID and resourceVersion, or their content when they have none).
func fingerprint(in *Input, opts Options) ([sha256.Size]byte, error) {
	opts.MaxEndpoints = 0
	// The health-check budget applies to the assembled configuration (budgetHealthChecks),
	// never to one LoadBalancer's piece: a tenant's share changing with the number of
	// tenants re-translates nothing.
	opts.HealthCheckProbesPerSecond, opts.HealthCheckProxies = 0, 0
	// A LoadBalancer carries no traffic policy: the bounds on them (a pointer, which %#v
	// would print as an address new with every resolution of the settings) do not concern it.
	opts.TrafficPolicies = nil
	h := sha256.New()
	fmt.Fprintf(h, "%q;%#v;", in.Tenant, opts)
	enc := json.NewEncoder(h)
	if err := enc.Encode(in.Policy); err != nil {
		return [sha256.Size]byte{}, err
	}
	if err := enc.Encode(in.Resolved); err != nil {
		return [sha256.Size]byte{}, err
	}
	names := make([]string, 0, len(in.Addresses))
	for name := range in.Addresses {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		a := in.Addresses[name]
		fmt.Fprintf(h, "%q:", name)
		if a.ResourceVersion != "" {
			fmt.Fprintf(h, "%s/%s;", a.UID, a.ResourceVersion)
			continue
		}
		if err := enc.Encode(a.Spec); err != nil {
			return [sha256.Size]byte{}, err
		}
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum, nil
}
