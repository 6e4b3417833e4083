package translate

import (
	"cmp"
	"fmt"
	"slices"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
)

// maxSourceProblems bounds the problems one list of endpoint addresses reports on each object
// using it: an Addresses object of 5000 denied addresses referenced by 1000 LoadBalancers
// would otherwise make five million problems. The rest are counted in one more problem.
const maxSourceProblems = 16

// expansion is one list of endpoint addresses (an Addresses object, or the inline addresses
// of one endpoint group) parsed, resolved and filtered by the endpoint policy once: every
// port of every LoadBalancer and every backend of every Route that uses the list shares it,
// so the cost of a tenant's endpoints is the size of its lists plus the size of the output,
// never their product.
type expansion struct {
	// ips are the usable addresses, sorted (as strings, the order of ir.Endpoint) and unique.
	ips []string
	// problems are what was left out and why, in the order found (at most
	// maxSourceProblems, then one TooMany).
	problems []sourceProblem

	// reportedTo is the last (problem set, object) the problems were added to: the objects
	// are translated one after another, so this saves adding them again for every port.
	reportedSet *ir.ProblemSet
	reportedTo  ir.ObjectRef
}

// sourceProblem is a problem of one list of addresses; detail is for the manager's log only
// (ir.Problem.Detail).
type sourceProblem struct{ reason, message, detail string }

// expander holds the expansions of one translation, shared by the Layer 4 and Layer 7 front
// ends.
type expander struct {
	in     *Input
	policy *policy
	// byName: Addresses objects, by name; inline: the inline lists, by their endpoint group.
	byName map[string]*expansion
	inline map[*v1alpha1.LoadBalancerEndpoints]*expansion
	// used counts the endpoints given to clusters so far (Options.MaxEndpoints).
	used int
}

func newExpander(in *Input, pol *policy) *expander {
	return &expander{in: in, policy: pol, byName: map[string]*expansion{}, inline: map[*v1alpha1.LoadBalancerEndpoints]*expansion{}}
}

// group returns the expansion of an endpoint group's addresses: its Addresses reference, or
// its inline addresses. For a reference to an Addresses object that does not exist (or to
// another namespace) it returns false and the name looked for.
func (x *expander) group(g *v1alpha1.LoadBalancerEndpoints) (*expansion, string, bool) {
	if aref := g.AddressesReference; aref != nil {
		name := cmp.Or(aref.Name, v1alpha1.DefaultAddressesName)
		a, ok := x.in.Addresses[name]
		if !ok || (aref.Namespace != "" && aref.Namespace != x.in.Tenant) {
			return nil, name, false
		}
		e, ok := x.byName[name]
		if !ok {
			e = x.expand(a.Spec.Addresses, fmt.Sprintf("Addresses %q", truncate(name)))
			x.byName[name] = e
		}
		return e, name, true
	}
	e, ok := x.inline[g]
	if !ok {
		e = x.expand(g.Addresses, "the endpoint group")
		x.inline[g] = e
	}
	return e, "", true
}

// expand parses, resolves and filters one list of addresses (what is its name in messages).
func (x *expander) expand(addrs []v1alpha1.EndpointAddress, what string) *expansion {
	e := &expansion{ips: make([]string, 0, len(addrs))}
	more := 0
	problem := func(reason, detail, format string, args ...any) {
		if len(e.problems) >= maxSourceProblems {
			more++
			return
		}
		p := sourceProblem{reason: reason, message: fmt.Sprintf(format, args...), detail: detail}
		if !slices.Contains(e.problems, p) {
			e.problems = append(e.problems, p)
		}
	}
	for _, a := range addrs {
		ep, ip, ok := parseAddress(a)
		if !ok {
			problem(ReasonInvalidAddress, "", "endpoint address (ip %q, hostname %q) is neither an IP address nor a DNS name; left out", truncate(a.IP), truncate(a.Hostname))
			continue
		}
		e.ips = append(e.ips, endpointIPs(x.in, x.policy, ep, ip, problem)...)
	}
	if more > 0 {
		e.problems = append(e.problems, sourceProblem{reason: ReasonTooMany,
			message: fmt.Sprintf("%d more endpoint addresses of %s are left out; only the first %d reasons are listed", more, what, maxSourceProblems)})
	}
	slices.Sort(e.ips)
	e.ips = slices.Clip(slices.Compact(e.ips))
	return e
}

// report adds the expansion's problems to set as Warnings on obj, once per object in a row.
func (e *expansion) report(set *ir.ProblemSet, obj ir.ObjectRef) {
	if e.reportedSet == set && e.reportedTo == obj {
		return
	}
	e.reportedSet, e.reportedTo = set, obj
	for _, p := range e.problems {
		set.AddProblem(ir.Problem{Object: obj, Severity: ir.SeverityWarning, Reason: p.reason, Message: p.message, Detail: p.detail})
	}
}

// sourcePort is one expansion at one port: a cluster takes each at most once (four endpoint
// groups referencing the same Addresses at the same port add its endpoints once).
type sourcePort struct {
	e    *expansion
	port uint32
}

// clusterEndpoints builds the endpoints of one cluster: each (expansion, port) once, sorted
// by address and port, duplicates dropped, at most max of them (0: all).
type clusterEndpoints struct {
	done []sourcePort // at most the endpoint groups of one object (4)
}

func (c *clusterEndpoints) add(e *expansion, port uint32) {
	sp := sourcePort{e, port}
	if len(e.ips) == 0 || slices.Contains(c.done, sp) {
		return
	}
	c.done = append(c.done, sp)
}

// list merges the sources (each sorted already) and returns the first max endpoints, or all
// when max is 0; cut says whether some were left out. Its cost is the size of what it
// returns times the number of sources (at most 4), whatever the size of the sources.
func (c *clusterEndpoints) list(max int) (eps []ir.Endpoint, cut bool) {
	switch len(c.done) {
	case 0:
		return nil, false
	case 1:
		sp := c.done[0]
		ips := sp.e.ips
		if max > 0 && len(ips) > max {
			ips, cut = ips[:max], true
		}
		eps = make([]ir.Endpoint, len(ips))
		for i, ip := range ips {
			eps[i] = ir.Endpoint{Address: ip, Port: sp.port}
		}
		return eps, cut
	}
	next := make([]int, len(c.done)) // the next address of each source
	total := 0
	for _, sp := range c.done {
		total += len(sp.e.ips)
	}
	if max > 0 {
		total = min(total, max)
	}
	eps = make([]ir.Endpoint, 0, total)
	for {
		best := -1
		var min ir.Endpoint
		for i, sp := range c.done {
			if next[i] == len(sp.e.ips) {
				continue
			}
			ep := ir.Endpoint{Address: sp.e.ips[next[i]], Port: sp.port}
			if best < 0 || compareEndpoints(ep, min) < 0 {
				best, min = i, ep
			}
		}
		if best < 0 {
			return slices.Clip(eps), false
		}
		if max > 0 && len(eps) == max {
			return eps, true
		}
		// Drop the same endpoint from every source (two groups, one address and port).
		for i, sp := range c.done {
			if next[i] < len(sp.e.ips) && sp.port == min.Port && sp.e.ips[next[i]] == min.Address {
				next[i]++
			}
		}
		eps = append(eps, min)
	}
}

func compareEndpoints(a, b ir.Endpoint) int {
	return cmp.Or(cmp.Compare(a.Address, b.Address), cmp.Compare(a.Port, b.Port))
}

// Messages of QuotaExceeded problems.
const (
	clusterQuotaMessage = "the cluster has more than %d endpoints (spec.limits.endpointsPerCluster of the tenant); only the first %d by address are used"
	tenantQuotaSome     = "the tenant's clusters have reached %d endpoints in all (spec.limits.endpoints of the tenant); this cluster gets only its first %d by address"
	tenantQuotaNone     = "the tenant's clusters have reached %d endpoints in all (spec.limits.endpoints of the tenant); this cluster gets none"
)

// take returns the endpoints of a cluster within Options.MaxEndpointsPerCluster and what is
// left of Options.MaxEndpoints (the clusters translated first take theirs first), and the
// message of the QuotaExceeded problem to report when some are left out ("" when none are).
func (x *expander) take(c *clusterEndpoints, opts Options) ([]ir.Endpoint, string) {
	limit, tenant := opts.MaxEndpointsPerCluster, false
	if opts.MaxEndpoints > 0 {
		if left := max(opts.MaxEndpoints-x.used, 0); limit <= 0 || left < limit {
			limit, tenant = left, true
		}
	}
	if tenant && limit == 0 {
		if len(c.done) == 0 {
			return nil, ""
		}
		return nil, fmt.Sprintf(tenantQuotaNone, opts.MaxEndpoints)
	}
	eps, cut := c.list(limit)
	x.used += len(eps)
	switch {
	case !cut:
		return eps, ""
	case tenant:
		return eps, fmt.Sprintf(tenantQuotaSome, opts.MaxEndpoints, len(eps))
	default:
		return eps, fmt.Sprintf(clusterQuotaMessage, limit, limit)
	}
}
