// Package reach decides whether the hub's Envoy fleet reaches a tenant's backends. The
// tenant's proxies health-check the endpoints of the tenant's clusters (Envoy's health
// discovery service, internal/xds) and report what they found to the manager replica they
// are connected to. A Tracker, on every replica, holds per tenant, per proxy and per
// endpoint the last health reported, and sums it up per cluster (Summary); the replicas
// write their summaries into the tenant's TenantState, and the leader decides per
// LoadBalancer from all of them (Decide), again only for the objects whose inputs changed
// (a Judge per tenant, reading the snapshot's Clusters). Which clusters are checked at all (at most
// MaxCheckedEndpoints endpoints a proxy) is PlanChecks, the one choice health discovery and
// the leader share. Everything here is pure: no I/O, no clock.
package reach

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Reasons of the BackendsReachable condition.
const (
	// ReasonReachable (True): every endpoint answered the health checks of every proxy
	// that checked it.
	ReasonReachable = "Reachable"
	// ReasonSomeUnreachable (False): some endpoints did not answer; the message names them.
	ReasonSomeUnreachable = "SomeBackendsUnreachable"
	// ReasonNoneReachable (False): no endpoint answered.
	ReasonNoneReachable = "NoBackendReachable"
	// ReasonNotYetChecked (Unknown): no proxy has reported on the current endpoints yet
	// (none connected, or the endpoints changed moments ago), or there are none to check.
	ReasonNotYetChecked = "NotYetChecked"
	// ReasonTooManyEndpoints (Unknown): some of the object's clusters are not checked: the
	// tenant's clusters have more endpoints than MaxCheckedEndpoints (PlanChecks).
	ReasonTooManyEndpoints = "TooManyEndpoints"
	// ReasonHealthNotReported (Unknown): no replica reported on some of the object's
	// clusters while a replica left clusters out of its report (Checks.Omitted: a replica
	// writes at most MaxReportedClusters per tenant, those with unreachable endpoints first).
	ReasonHealthNotReported = "HealthNotReported"
)

// MaxReportedClusters is how many clusters of a tenant one manager replica reports on
// (TenantState status.backendHealth), those with unreachable endpoints first.
const MaxReportedClusters = 256

// MaxNamed is how many unreachable endpoints a summary and a verdict name.
const MaxNamed = 8

// EndpointsHash identifies a set of endpoint addresses (host:port), whatever their order:
// every replica computes the same for the same set.
func EndpointsHash(addrs []string) string {
	sorted := slices.Sorted(slices.Values(addrs))
	h := sha256.New()
	for _, a := range slices.Compact(sorted) {
		h.Write([]byte(a))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Report is what one proxy reported: the endpoints it was asked to check, by cluster, and
// the health of those it reported on (true: healthy).
type Report struct {
	Asked  map[string][]string
	Health map[string]map[string]bool
}

// ClusterHealth is what the proxies of one replica found of the endpoints of one cluster.
type ClusterHealth struct {
	Cluster string
	// Endpoints is the EndpointsHash of the set that was checked.
	Endpoints string
	// Reachable is the number of endpoints every reporting proxy reached.
	Reachable int
	// Unreachable are the endpoints at least one proxy did not reach, sorted.
	Unreachable []string
}

// Tracker holds the last report of every proxy of every tenant connected to one replica. It
// is safe for concurrent use.
type Tracker struct {
	mu      sync.Mutex
	tenants map[string]*tenant
}

type tenant struct {
	proxies map[string]*proxy
	// current is, per cluster, the set of endpoints last asked of any proxy: the cluster's
	// current endpoints; proxies still asked about an older set do not count for it.
	current map[string]string
}

type proxy struct {
	asked  map[string]string // cluster → EndpointsHash
	report Report
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker { return &Tracker{tenants: map[string]*tenant{}} }

// Hear records the latest report of a proxy of a tenant; it replaces the proxy's previous one.
func (t *Tracker) Hear(tenantName, proxyName string, r Report) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tn := t.tenants[tenantName]
	if tn == nil {
		tn = &tenant{proxies: map[string]*proxy{}, current: map[string]string{}}
		t.tenants[tenantName] = tn
	}
	p := &proxy{asked: make(map[string]string, len(r.Asked)), report: r}
	for c, addrs := range r.Asked {
		h := EndpointsHash(addrs)
		p.asked[c] = h
		if old := tn.proxies[proxyName]; old == nil || old.asked[c] != h {
			tn.current[c] = h // newly asked: the cluster's endpoints as they are now
		}
	}
	tn.proxies[proxyName] = p
	tn.prune()
}

// Forget drops what a proxy reported (it disconnected).
func (t *Tracker) Forget(tenantName, proxyName string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tn := t.tenants[tenantName]
	if tn == nil {
		return
	}
	delete(tn.proxies, proxyName)
	if len(tn.proxies) == 0 {
		delete(t.tenants, tenantName)
		return
	}
	tn.prune()
}

// prune forgets the current set of clusters no proxy is asked about any more.
func (tn *tenant) prune() {
	maps.DeleteFunc(tn.current, func(c, _ string) bool {
		for _, p := range tn.proxies {
			if _, ok := p.asked[c]; ok {
				return false
			}
		}
		return true
	})
}

// Summary sums up, per cluster, what the tenant's proxies found of the cluster's current
// endpoints, sorted by cluster. A cluster with an endpoint no proxy has reported on yet is
// left out (not yet checked).
func (t *Tracker) Summary(tenantName string) []ClusterHealth {
	t.mu.Lock()
	defer t.mu.Unlock()
	tn := t.tenants[tenantName]
	if tn == nil {
		return nil
	}
	var out []ClusterHealth
	for _, c := range slices.Sorted(maps.Keys(tn.current)) {
		h := tn.current[c]
		var addrs []string
		reported := map[string]bool{}
		down := map[string]bool{}
		for _, p := range tn.proxies {
			if p.asked[c] != h {
				continue
			}
			addrs = p.report.Asked[c]
			for a, healthy := range p.report.Health[c] {
				reported[a] = true
				if !healthy {
					down[a] = true
				}
			}
		}
		complete := len(addrs) > 0
		for _, a := range addrs {
			complete = complete && reported[a]
		}
		if !complete {
			continue
		}
		unreachable := slices.Sorted(maps.Keys(down))
		out = append(out, ClusterHealth{Cluster: c, Endpoints: h, Reachable: len(slices.Compact(slices.Sorted(slices.Values(addrs)))) - len(unreachable), Unreachable: unreachable})
	}
	return out
}

// Found is what one replica wrote of one cluster (a TenantState entry).
type Found struct {
	Cluster, Endpoints string
	UnreachableCount   int
	// Unreachable names some or all of the unreachable endpoints.
	Unreachable []string
}

// Verdict is the BackendsReachable condition of a LoadBalancer, with the counts of its
// endpoints (the metric).
type Verdict struct {
	Status                 string // "True", "False" or "Unknown"
	Reason, Message        string
	Reachable, Unreachable int
}

// Decide judges a LoadBalancer whose clusters have the given current endpoints (cluster →
// host:port addresses), from what every replica found, and the tenant's Checks (which
// clusters are not checked at all). Entries about another set of endpoints than a
// cluster's current one are not used. An endpoint is unreachable when a proxy of any
// replica did not reach it. Unreachable endpoints make the verdict False even when other
// clusters are not checked; otherwise a cluster left out by the checks makes it Unknown
// (TooManyEndpoints), one not reported on yet Unknown (NotYetChecked), or, while a replica
// left clusters out of its report (checks.Omitted), Unknown HealthNotReported.
func Decide(clusters map[string][]string, found []Found, checks Checks) Verdict {
	total, unreachable, pending, skipped := 0, 0, 0, 0
	var named []string
	for _, c := range slices.Sorted(maps.Keys(clusters)) {
		addrs := slices.Compact(slices.Sorted(slices.Values(clusters[c])))
		if len(addrs) == 0 {
			continue
		}
		total += len(addrs)
		if checks.Skipped[c] {
			skipped += len(addrs)
			continue
		}
		h := EndpointsHash(addrs)
		seen, count := false, 0
		down := map[string]bool{}
		for _, f := range found {
			if f.Cluster != c || f.Endpoints != h {
				continue
			}
			seen = true
			count = max(count, f.UnreachableCount)
			for _, a := range f.Unreachable {
				if _, ok := slices.BinarySearch(addrs, a); ok {
					down[a] = true
				}
			}
		}
		if !seen {
			pending += len(addrs)
			continue
		}
		n := min(max(count, len(down)), len(addrs))
		unreachable += n
		named = append(named, slices.Sorted(maps.Keys(down))...)
	}
	reachable := total - unreachable - pending - skipped
	v := Verdict{Reachable: reachable, Unreachable: unreachable}
	switch {
	case total == 0:
		v.Status, v.Reason, v.Message = "Unknown", ReasonNotYetChecked, "the LoadBalancer has no endpoints to check"
	case unreachable == 0 && skipped > 0:
		v.Status, v.Reason = "Unknown", ReasonTooManyEndpoints
		what := "this object's endpoints are"
		if skipped < total {
			what = fmt.Sprintf("%d of this object's %d endpoints are", skipped, total)
		}
		// Not the tenant's number of endpoints: it moves with every Service of the tenant, and
		// every object left out would be written again each time.
		v.Message = fmt.Sprintf("reachability is not checked: %s left out: the tenant has more endpoints than the hub's Envoy "+
			"proxies health-check, at most %d (clusters by name, those that fit)", what, MaxCheckedEndpoints)
	case unreachable == 0 && pending > 0 && checks.Omitted:
		// Not the number of clusters left out: it moves with the tenant.
		v.Status, v.Reason = "Unknown", ReasonHealthNotReported
		v.Message = fmt.Sprintf("the health of %d of %d endpoints was not reported: the hub's Envoy proxies found unreachable endpoints "+
			"in more of the tenant's clusters than a manager replica reports (%d); fix the objects whose BackendsReachable is False first", pending, total, MaxReportedClusters)
	case unreachable == 0 && pending > 0:
		v.Status, v.Reason = "Unknown", ReasonNotYetChecked
		v.Message = fmt.Sprintf("the hub's Envoy proxies have not reported on %d of %d endpoints yet", pending, total)
	case unreachable == 0:
		v.Status, v.Reason = "True", ReasonReachable
		v.Message = fmt.Sprintf("the hub's Envoy proxies reach all %d endpoints", total)
	case reachable == 0 && pending == 0 && skipped == 0:
		v.Status, v.Reason = "False", ReasonNoneReachable
		v.Message = fmt.Sprintf("the hub's Envoy proxies reach none of the %d endpoints: %s", total, nameSome(named, unreachable))
	default:
		v.Status, v.Reason = "False", ReasonSomeUnreachable
		v.Message = fmt.Sprintf("%d of %d endpoints do not answer the hub's Envoy proxies: %s", unreachable, total, nameSome(named, unreachable))
	}
	return v
}

// nameSome names up to MaxNamed of the unreachable endpoints, and how many more there are.
func nameSome(named []string, count int) string {
	named = slices.Compact(slices.Sorted(slices.Values(named)))
	if len(named) > MaxNamed {
		named = named[:MaxNamed]
	}
	s := strings.Join(named, ", ")
	if more := count - len(named); more > 0 {
		if s != "" {
			s += " "
		}
		s += fmt.Sprintf("(and %d more)", more)
	}
	return s
}
