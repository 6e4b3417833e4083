package envoycp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/event"

	"kubelb.dev/kubelb/internal/translate"
)

// Bounds of the resolution of endpoint hostnames (the ccm's --node-address-type=Hostname).
const (
	// ResolveInterval: a tenant with endpoint hostnames is rebuilt this often, and its names
	// whose answers are older than half of it are looked up again then (so every name is
	// looked up again about every ResolveInterval). It is also the period of ResolveBudget.
	ResolveInterval = 30 * time.Second
	// ResolveTimeout bounds one lookup.
	ResolveTimeout = 5 * time.Second
	// MaxResolvedNames is how many endpoint hostnames of one tenant are resolved; the rest
	// are left out with a problem.
	MaxResolvedNames = 64
	// MaxResolvedAddrs is how many addresses of one name are used (the lowest, sorted).
	MaxResolvedAddrs = 16
	// ResolveParallel bounds the lookups of one tenant in flight at once.
	ResolveParallel = 4
	// ResolveGlobal bounds the lookups of all tenants in flight at once.
	ResolveGlobal = 32
	// ResolveBudget is the lookup time one tenant may spend per ResolveInterval (the sum of
	// its lookups' durations): a tenant whose names time out gets a few lookups per interval,
	// the rest wait for the next one.
	ResolveBudget = 4 * ResolveTimeout
)

// Resolver looks up the addresses of a host name; *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

var _ Resolver = (*net.Resolver)(nil)

// names resolves the endpoint hostnames of tenants for the translation input
// (translate.Input.Resolved), off the controller's workers. Envoy is never given a
// tenant-supplied name: the manager resolves it here, and translation checks every resulting
// address against the endpoint policy.
//
// A rebuild only reads the last answers (want) and never waits on DNS: want queues the
// tenant's names that have no answer yet or a stale one, and returns at once. The lookups
// run in goroutines of their own, at most ResolveParallel of one tenant and ResolveGlobal of
// all at once, handed out to the tenant with the fewest lookups in flight (ties round
// robin), and within ResolveBudget of lookup time per tenant per ResolveInterval: a tenant
// whose names time out holds a few lookups, never the capacity of the others nor a rebuild
// worker. When an answer changes, the tenant is rebuilt (forward: SetupWithManager turns
// the notice into an event of the controller).
//
// A lookup that fails for a reason other than "no such host" (a timeout, a server failure)
// keeps the name's last good addresses, so that a DNS hiccup does not empty a tenant's
// clusters.
type names struct {
	resolver  Resolver
	stale     time.Duration // answers older than this are looked up again
	interval  time.Duration // the period of the budget
	perTenant int
	global    int
	budget    time.Duration
	now       func() time.Time

	mu       sync.Mutex
	tenants  map[string]*tenantNames
	ring     []string // the tenants, in the order lookups are handed out
	cursor   int
	inflight int
	timer    *time.Timer // wakes pump when a tenant's budget renews
	changed  map[string]bool
	signal   chan struct{} // a tenant was added to changed
}

// tenantNames is the resolution state of one tenant.
type tenantNames struct {
	answers  map[string]answer
	wanted   map[string]bool
	queued   map[string]bool // waiting in pending or in flight
	pending  []string
	inflight int
	window   time.Time // start of the current budget interval
	spent    time.Duration
}

// answer is the last result of a name.
type answer struct {
	res  translate.Resolved
	good []netip.Addr // the last good addresses
	at   time.Time
}

func newNames(r Resolver) *names {
	return &names{resolver: r, stale: ResolveInterval / 2, interval: ResolveInterval, perTenant: ResolveParallel, global: ResolveGlobal,
		budget: ResolveBudget, now: time.Now, tenants: map[string]*tenantNames{}, changed: map[string]bool{},
		signal: make(chan struct{}, 1)}
}

// want returns the last answers for a tenant's names (at most MaxResolvedNames; a name
// without an answer yet is missing, which translation reports as not resolved yet) and queues
// the names whose answers are missing or stale. It never waits on a lookup.
func (n *names) want(tenant string, hostnames []string) map[string]translate.Resolved {
	if len(hostnames) == 0 {
		n.forget(tenant)
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	tn := n.tenants[tenant]
	if tn == nil {
		tn = &tenantNames{answers: map[string]answer{}, queued: map[string]bool{}}
		n.tenants[tenant] = tn
		n.ring = append(n.ring, tenant)
	}
	now := n.now()
	out := make(map[string]translate.Resolved, len(hostnames))
	tn.wanted = make(map[string]bool, min(len(hostnames), MaxResolvedNames))
	for i, name := range hostnames {
		if i >= MaxResolvedNames {
			out[name] = translate.Resolved{Error: fmt.Sprintf("the tenant has %d endpoint hostnames; only the first %d (sorted) are resolved", len(hostnames), MaxResolvedNames)}
			continue
		}
		tn.wanted[name] = true
		a, ok := tn.answers[name]
		if ok {
			out[name] = a.res
		}
		if (!ok || now.Sub(a.at) >= n.stale) && !tn.queued[name] {
			tn.queued[name] = true
			tn.pending = append(tn.pending, name)
		}
	}
	for name := range tn.answers {
		if !tn.wanted[name] {
			delete(tn.answers, name)
		}
	}
	n.pump(now)
	return out
}

// pump hands out lookups, one at a time, to the tenant with names waiting that has the
// fewest lookups in flight (ties: round robin), within the per-tenant, global and budget
// bounds. n.mu is held.
func (n *names) pump(now time.Time) {
	var renew time.Time // the earliest budget renewal of a tenant held back by its budget
	for n.inflight < n.global && len(n.ring) > 0 {
		best := -1
		for i := range len(n.ring) {
			at := (n.cursor + i) % len(n.ring)
			tn := n.tenants[n.ring[at]]
			for len(tn.pending) > 0 && !tn.wanted[tn.pending[0]] { // no longer wanted
				delete(tn.queued, tn.pending[0])
				tn.pending = tn.pending[1:]
			}
			if len(tn.pending) == 0 || tn.inflight >= n.perTenant {
				continue
			}
			if now.Sub(tn.window) >= n.interval {
				tn.window, tn.spent = now, 0
			}
			if tn.spent >= n.budget {
				if r := tn.window.Add(n.interval); renew.IsZero() || r.Before(renew) {
					renew = r
				}
				continue
			}
			if best < 0 || tn.inflight < n.tenants[n.ring[best]].inflight {
				best = at
			}
		}
		if best < 0 {
			break
		}
		n.cursor = best + 1
		tenant := n.ring[best]
		tn := n.tenants[tenant]
		name := tn.pending[0]
		tn.pending = tn.pending[1:]
		tn.inflight++
		n.inflight++
		go n.run(tenant, tn, name)
	}
	if !renew.IsZero() && n.inflight < n.global {
		if n.timer != nil {
			n.timer.Stop()
		}
		n.timer = time.AfterFunc(renew.Sub(now), func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.pump(n.now())
		})
	}
}

// run looks up one name of a tenant and records the answer.
func (n *names) run(tenant string, tn *tenantNames, name string) {
	start := time.Now()
	addrs, err := n.lookup(context.Background(), name)
	took := time.Since(start)

	n.mu.Lock()
	defer n.mu.Unlock()
	n.inflight--
	defer func() { n.pump(n.now()) }()
	if n.tenants[tenant] != tn {
		return // forgotten meanwhile
	}
	tn.inflight--
	tn.spent += took
	delete(tn.queued, name)
	if !tn.wanted[name] {
		return
	}
	prev, had := tn.answers[name]
	a := answer{at: n.now()}
	switch {
	case err == nil:
		a.res, a.good = translate.Resolved{Addrs: addrs}, addrs
	case !isNotFound(err) && len(prev.good) > 0:
		a.res, a.good = translate.Resolved{Addrs: prev.good}, prev.good
	default:
		a.res = translate.Resolved{Error: tenantSafe(err), Detail: err.Error()}
	}
	tn.answers[name] = a
	if !had || prev.res.Error != a.res.Error || !slices.Equal(prev.res.Addrs, a.res.Addrs) {
		n.changed[tenant] = true
		select {
		case n.signal <- struct{}{}:
		default:
		}
	}
}

// busy returns how many names of a tenant wait for a lookup or are being looked up.
func (n *names) busy(tenant string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	tn := n.tenants[tenant]
	if tn == nil {
		return 0
	}
	return len(tn.queued)
}

// takeChanged returns the tenants whose answers changed since the last call, sorted.
func (n *names) takeChanged() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := slices.Sorted(maps.Keys(n.changed))
	clear(n.changed)
	return out
}

// forward sends an event for every tenant whose answers changed (an object named after
// its namespace) to events, until ctx ends.
func (n *names) forward(ctx context.Context, events chan<- event.GenericEvent) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.signal:
		}
		for _, tenant := range n.takeChanged() {
			select {
			case events <- event.GenericEvent{Object: tenantKey(tenant)}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// lookup resolves one name to its sorted, unique, unmapped addresses, at most
// MaxResolvedAddrs of them.
func (n *names) lookup(ctx context.Context, name string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, ResolveTimeout)
	defer cancel()
	// The name is looked up as the manager's Pod would (hosts file, resolv.conf with its
	// search domains): a short name may find a hub Service, which is why translation checks
	// every address against the endpoint policy (the hub ranges deny it).
	addrs, err := n.resolver.LookupNetIP(ctx, "ip", name)
	if err != nil {
		return nil, err
	}
	for i := range addrs {
		addrs[i] = addrs[i].Unmap()
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	if len(addrs) == 0 {
		return nil, fmt.Errorf("lookup %s: %w", name, errNoAddresses)
	}
	return addrs[:min(len(addrs), MaxResolvedAddrs)], nil
}

func (n *names) forget(tenant string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.tenants[tenant]; !ok {
		return
	}
	delete(n.tenants, tenant)
	delete(n.changed, tenant)
	if i := slices.Index(n.ring, tenant); i >= 0 {
		n.ring = slices.Delete(n.ring, i, i+1)
	}
}

// isNotFound reports whether err says the name does not exist.
// tenantSafe says why a lookup failed in words the tenant may read: the resolver's own error
// names the hub's DNS server ("lookup x on 10.96.0.10:53: ..."), which stays in the
// manager's log (translate.Resolved.Detail).
func tenantSafe(err error) string {
	var dnsErr *net.DNSError
	switch {
	case isNotFound(err):
		return "no such host"
	case errors.As(err, &dnsErr) && dnsErr.IsTimeout, errors.Is(err, context.DeadlineExceeded):
		return "the lookup timed out"
	case errors.Is(err, errNoAddresses):
		return "no addresses"
	default:
		return "the lookup failed"
	}
}

// errNoAddresses: the name exists but has no address.
var errNoAddresses = errors.New("no addresses")

func isNotFound(err error) bool {
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr) && dnsErr.IsNotFound
}
