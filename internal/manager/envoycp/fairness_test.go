package envoycp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds"
)

// blackHoleDNS is a DNS server on loopback that reads every query and never answers: each
// lookup sent to it runs until its timeout. It stops when the test ends.
func blackHoleDNS(t *testing.T) string { return startDNS(t, nil) }

// keeping is the xDS server, remembering what each tenant was last given.
type keeping struct {
	*xds.Server
	mu  sync.Mutex
	set map[string]xds.Resources
}

func (k *keeping) SetTenant(ctx context.Context, tenant string, res xds.Resources) (bool, error) {
	changed, err := k.Server.SetTenant(ctx, tenant, res)
	if err == nil {
		k.mu.Lock()
		k.set[tenant] = res
		k.mu.Unlock()
	}
	return changed, err
}

// lookups is a Resolver that sends every query to one DNS server (Go's own resolver) and
// counts, per tenant (the first label of the name up to "-"), the lookups in flight and
// those that finished.
type lookups struct {
	r *net.Resolver

	mu       sync.Mutex
	inflight map[string]int
	finished map[string]int
}

func newLookups(server string) *lookups {
	return &lookups{
		r: &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", server)
		}},
		inflight: map[string]int{}, finished: map[string]int{},
	}
}

func (l *lookups) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	who, _, _ := strings.Cut(host, "-")
	l.mu.Lock()
	l.inflight[who]++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.inflight[who]--
		l.finished[who]++
		l.mu.Unlock()
	}()
	return l.r.LookupNetIP(ctx, network, host)
}

func (l *lookups) counts(who string) (inflight, finished int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inflight[who], l.finished[who]
}

// TestHostileNamesDoNotSlowOtherTenants is issue 26's proof that one tenant's endpoint
// hostnames cannot slow another's Envoy updates. On a real API server with the envoycp
// controller running, four attacker tenants (as many as the controller has workers) each
// publish MaxResolvedNames endpoint hostnames that a DNS server on loopback never answers,
// while the victim tenant changes its endpoint address. The victim's new endpoint must
// reach its snapshot while every attacker still has names that were never looked up to the
// end: before, lookups ran inside the rebuild, so the victim waited until an attacker's
// rebuild had timed out on all of its names (8 rounds of ResolveTimeout, about 40 s).
func TestHostileNamesDoNotSlowOtherTenants(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	dns := newLookups(blackHoleDNS(t))
	srv := &keeping{Server: xds.NewServer(logr.Discard(), nil), set: map[string]xds.Resources{}}
	store := status.NewStore()
	testenv.StartManager(t, hub.Config, func(mgr ctrl.Manager) error {
		return setup(mgr, srv, store, nil, "kubelb", translate.Options{ListenerAddress: "127.0.0.1"}, dns)
	})
	create := func(objs ...client.Object) {
		t.Helper()
		for _, o := range objs {
			if err := c.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	tenantObjects := func(ns string, addrs ...v1alpha1.EndpointAddress) []client.Object {
		lb := loadBalancer(ns, "web", 20001)
		return []client.Object{namespace(ns, true),
			&v1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.DefaultAddressesName},
				Spec: v1alpha1.AddressesSpec{Addresses: addrs}},
			lb, hubService(lb)}
	}
	endpoints := func(tenant string) []string {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return served(t, srv.set[tenant])
	}
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubelb"}})

	// The victim first, served before the attackers come.
	const victim = "tenant-a"
	create(tenantObjects(victim, v1alpha1.EndpointAddress{IP: "192.0.2.10"})...)
	testsupport.Eventually(t, 30*time.Second, "the victim's first snapshot", func() error {
		if got := endpoints(victim); !slices.Equal(got, []string{"192.0.2.10"}) {
			return fmt.Errorf("endpoints %v", got)
		}
		return nil
	})

	attackers := []string{"b1", "b2", "b3", "b4"}
	for _, a := range attackers {
		var addrs []v1alpha1.EndpointAddress
		for i := range MaxResolvedNames {
			addrs = append(addrs, v1alpha1.EndpointAddress{Hostname: fmt.Sprintf("%s-n%02d.attacker.test.", a, i)})
		}
		create(tenantObjects("tenant-"+a, addrs...)...)
	}
	testsupport.Eventually(t, 60*time.Second, "every attacker's lookups in flight", func() error {
		for _, a := range attackers {
			if n, _ := dns.counts(a); n == 0 {
				return fmt.Errorf("no lookup of %s in flight", a)
			}
		}
		return nil
	})

	// The victim changes its endpoint.
	changed := time.Now()
	addrs := &v1alpha1.Addresses{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: victim, Name: v1alpha1.DefaultAddressesName}, addrs); err != nil {
		t.Fatal(err)
	}
	addrs.Spec.Addresses = []v1alpha1.EndpointAddress{{IP: "192.0.2.11"}}
	if err := c.Update(ctx, addrs); err != nil {
		t.Fatal(err)
	}
	var progress []string
	testsupport.Eventually(t, 120*time.Second, "the victim's new endpoint", func() error {
		if got := endpoints(victim); !slices.Equal(got, []string{"192.0.2.11"}) {
			return fmt.Errorf("endpoints %v", got)
		}
		progress = progress[:0]
		for _, a := range attackers {
			inflight, finished := dns.counts(a)
			progress = append(progress, fmt.Sprintf("%s: %d in flight, %d finished", a, inflight, finished))
		}
		return nil
	})
	latency := time.Since(changed)
	t.Logf("the victim's update reached its snapshot %v after the change, with the attackers' lookups at %s", latency.Round(time.Millisecond), strings.Join(progress, "; "))
	for _, a := range attackers {
		if _, finished := dns.counts(a); finished >= MaxResolvedNames {
			t.Errorf("attacker %s had all its %d names looked up (%d lookups finished) before the victim's update arrived (%v): the victim waited for the attackers' DNS",
				a, MaxResolvedNames, finished, latency.Round(time.Millisecond))
		}
	}
	// The attackers' names are reported, not served.
	if rep := store.Get("tenant-b1"); rep == nil || !slices.ContainsFunc(rep.Problems, func(p ir.Problem) bool {
		return p.Reason == translate.ReasonHostnameNotResolved
	}) {
		t.Errorf("the attacker's report has no HostnameNotResolved problem: %+v", rep)
	}
}

// blockingDNS is a Resolver whose lookups wait until the test releases them one by one
// (as a timeout would end them), then answer 192.0.2.1.
type blockingDNS struct {
	mu       sync.Mutex
	inflight map[string]int // tenant → lookups in flight
	max      map[string]int
	release  chan struct{}
}

func (b *blockingDNS) LookupNetIP(ctx context.Context, _, host string) ([]netip.Addr, error) {
	who, _, _ := strings.Cut(host, "-")
	b.mu.Lock()
	b.inflight[who]++
	b.max[who] = max(b.max[who], b.inflight[who])
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.inflight[who]--
		b.mu.Unlock()
	}()
	if who != "victim" {
		select {
		case <-b.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return []netip.Addr{netip.MustParseAddr("192.0.2.1")}, nil
}

func (b *blockingDNS) total() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, v := range b.inflight {
		n += v
	}
	return n
}

// TestResolveFairness: with every lookup slot held by attackers whose names never answer,
// the victim's name is looked up in the first slot that frees (the tenant with the fewest
// lookups in flight goes first), not after the attackers' other names; no tenant has more than ResolveParallel lookups in
// flight, and all tenants together no more than the global bound.
func TestResolveFairness(t *testing.T) {
	t.Parallel()
	dns := &blockingDNS{inflight: map[string]int{}, max: map[string]int{}, release: make(chan struct{})}
	n := newNames(dns)
	n.global = 2 * ResolveParallel
	t.Cleanup(func() { close(dns.release) })
	var attackers []string
	for _, a := range []string{"x1", "x2"} {
		var hostnames []string
		for i := range MaxResolvedNames {
			hostnames = append(hostnames, fmt.Sprintf("%s-n%02d.attacker.test", a, i))
		}
		n.want("tenant-"+a, hostnames)
		attackers = append(attackers, a)
	}
	testsupport.Eventually(t, 10*time.Second, "every slot taken", func() error {
		if got := dns.total(); got != n.global {
			return fmt.Errorf("%d lookups in flight, want %d", got, n.global)
		}
		return nil
	})
	if got := n.want("tenant-v", []string{"victim-node.example.com"}); len(got) != 0 {
		t.Fatalf("the victim's name has an answer before any lookup: %v", got)
	}
	// One attacker lookup ends (a timeout would): the slot goes to the victim.
	dns.release <- struct{}{}
	settle(t, n, "tenant-v")
	got := n.want("tenant-v", []string{"victim-node.example.com"})
	if r := got["victim-node.example.com"]; len(r.Addrs) != 1 {
		t.Errorf("the victim's answer %+v", r)
	}
	dns.mu.Lock()
	defer dns.mu.Unlock()
	for _, a := range attackers {
		if dns.max[a] > ResolveParallel {
			t.Errorf("attacker %s had %d lookups in flight, the bound is %d", a, dns.max[a], ResolveParallel)
		}
	}
}

// TestResolveBudget: a tenant whose lookups take long spends its ResolveBudget and waits
// for the next interval; another tenant's lookups go on.
func TestResolveBudget(t *testing.T) {
	t.Parallel()
	dns := &fakeDNS{answer: map[string][]string{}, fail: map[string]error{}}
	n := newNames(dns)
	now := time.Unix(1_000_000, 0)
	var mu sync.Mutex
	n.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	n.budget = time.Nanosecond // every lookup spends more than it
	var hostnames []string
	for i := range 10 {
		hostnames = append(hostnames, fmt.Sprintf("n%02d.example.com", i))
		dns.set(hostnames[i], "192.0.2.1")
	}
	answered := func() int { return len(n.want("tenant-x", hostnames)) }
	n.want("tenant-x", hostnames)
	// The first lookups of the interval (up to ResolveParallel) start, then none until the
	// interval renews.
	testsupport.Eventually(t, 10*time.Second, "the first lookups", func() error {
		if got := answered(); got != ResolveParallel {
			return fmt.Errorf("%d names answered, want %d", got, ResolveParallel)
		}
		return nil
	})
	n.want("tenant-y", []string{"other.example.com"})
	dns.set("other.example.com", "192.0.2.2")
	settle(t, n, "tenant-y")
	if got := answered(); got != ResolveParallel {
		t.Errorf("tenant-x has %d names answered, want %d (its budget is spent)", got, ResolveParallel)
	}
	mu.Lock()
	now = now.Add(ResolveInterval)
	mu.Unlock()
	// A rebuild pumps again: the renewed budget lets the next lookups start (the stale
	// answers of the first interval are queued behind the names never looked up).
	testsupport.Eventually(t, 10*time.Second, "the next interval's lookups", func() error {
		if got := answered(); got != 2*ResolveParallel {
			return fmt.Errorf("%d names answered, want %d", got, 2*ResolveParallel)
		}
		return nil
	})
}
