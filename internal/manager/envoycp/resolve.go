package envoycp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"kubelb.dev/kubelb/internal/translate"
)

// Bounds of the resolution of endpoint hostnames (the ccm's --node-address-type=Hostname).
const (
	// ResolveInterval: a tenant with endpoint hostnames is rebuilt, and its names resolved
	// again, this often; every rebuild for a change of its input resolves them too.
	ResolveInterval = 30 * time.Second
	// ResolveTimeout bounds one lookup.
	ResolveTimeout = 5 * time.Second
	// MaxResolvedNames is how many endpoint hostnames of one tenant are resolved; the rest
	// are left out with a problem.
	MaxResolvedNames = 64
	// MaxResolvedAddrs is how many addresses of one name are used (the lowest, sorted).
	MaxResolvedAddrs = 16
	// resolveParallel bounds the lookups of one tenant in flight at once.
	resolveParallel = 8
)

// Resolver looks up the addresses of a host name; *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

var _ Resolver = (*net.Resolver)(nil)

// names resolves the endpoint hostnames of tenants for the translation input
// (translate.Input.Resolved). Envoy is never given a tenant-supplied name: the manager
// resolves it here, and translation checks every resulting address against the endpoint
// policy. A lookup that fails for a reason other than "no such host" (a timeout, a server
// failure) keeps the name's last good addresses, so that a DNS hiccup does not empty a
// tenant's clusters.
type names struct {
	resolver Resolver

	mu   sync.Mutex
	last map[string]map[string][]netip.Addr // tenant → name → last good addresses
}

func newNames(r Resolver) *names {
	return &names{resolver: r, last: map[string]map[string][]netip.Addr{}}
}

// resolve looks up every name of a tenant (at most MaxResolvedNames, each bounded by
// ResolveTimeout, a few at once) and returns what translation needs.
func (n *names) resolve(ctx context.Context, tenant string, hostnames []string) map[string]translate.Resolved {
	if len(hostnames) == 0 {
		n.forget(tenant)
		return nil
	}
	n.mu.Lock()
	last := n.last[tenant]
	n.mu.Unlock()

	out := make(map[string]translate.Resolved, len(hostnames))
	good := make(map[string][]netip.Addr, len(hostnames))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, resolveParallel)
	for i, name := range hostnames {
		if i >= MaxResolvedNames {
			mu.Lock()
			out[name] = translate.Resolved{Error: fmt.Sprintf("the tenant has %d endpoint hostnames; only the first %d (sorted) are resolved", len(hostnames), MaxResolvedNames)}
			mu.Unlock()
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			addrs, err := n.lookup(ctx, name)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				out[name] = translate.Resolved{Addrs: addrs}
				good[name] = addrs
			case !isNotFound(err) && len(last[name]) > 0:
				out[name] = translate.Resolved{Addrs: last[name]}
				good[name] = last[name]
			default:
				out[name] = translate.Resolved{Error: tenantSafe(err), Detail: err.Error()}
			}
		}()
	}
	wg.Wait()
	n.mu.Lock()
	n.last[tenant] = good
	n.mu.Unlock()
	return out
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
	delete(n.last, tenant)
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
