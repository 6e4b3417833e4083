package translate

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"kubelb.dev/kubelb/internal/ir"
)

// ReasonHealthCheckThrottled: the tenant's active health checks would send more probes per
// second than its budget (Options.HealthCheckProbesPerSecond): a cluster's checks run less
// often than asked, or, for the largest clusters when stretching is not enough, not at all.
// A Warning: the cluster is served, with slower (or no) detection of failed endpoints.
const ReasonHealthCheckThrottled = "HealthCheckThrottled"

// budgetHealthChecks bounds the probes the tenant's proxies send: every proxy checks every
// endpoint of every health-checked cluster once per interval, so the tenant costs
// Σ endpoints × proxies / interval probes per second, aimed at addresses the tenant chose.
// (The interval is the shorter of the interval and the no-traffic interval, which a tenant
// may set too.) Over the budget, both intervals of every cluster are stretched by the same
// factor, the smallest power of two that meets the budget (rounded up to a whole second, at
// most MaxHealthCheckInterval); if that is not enough, the checks of the largest clusters
// (most endpoints, then name) are turned off until the rest fits. A cluster's warning names
// only what is its own and the budget, never what follows the tenant's size (its total, or
// the factor and so the stretched interval): a growing tenant would otherwise rewrite every
// owner's condition, with an Event, each time the factor doubles. The clusters are
// replaced, never modified (the incremental front end shares them between runs). Returns
// a Warning per affected cluster, on its owners. memo (nil: none) keeps each cluster's
// replacement from one run to the next (healthBudgetMemo).
func budgetHealthChecks(cfg *ir.Config, opts Options, memo *healthBudgetMemo) ir.Problems {
	budget := float64(opts.HealthCheckProbesPerSecond)
	next := memo.begin()
	defer memo.end(next)
	if budget <= 0 {
		return nil
	}
	proxies := float64(max(opts.HealthCheckProxies, 1))
	// A cluster that has seen no traffic is checked every NoTrafficInterval (Envoy's
	// default when unset): the shorter of the two decides the rate.
	every := func(hc *ir.HealthCheck) time.Duration {
		nt := hc.NoTrafficInterval.D()
		if nt <= 0 {
			nt = EnvoyNoTrafficInterval
		}
		return min(hc.Interval.D(), nt)
	}
	rate := func(n int, iv time.Duration) float64 { return float64(n) * proxies / iv.Seconds() }
	var checked []int
	total := 0.0
	for i, c := range cfg.Clusters {
		if c.HealthCheck == nil || len(c.Endpoints) == 0 || c.HealthCheck.Interval <= 0 {
			continue
		}
		checked = append(checked, i)
		total += rate(len(c.Endpoints), every(c.HealthCheck))
	}
	if total <= budget {
		return nil
	}
	// The smallest power of two that meets the budget, not total/budget itself: a tenant
	// that grows would move the factor on every rebuild, and every checked cluster's interval
	// (a changed cluster sent to every proxy) with it. A power of two moves a dozen times at
	// most (up to MaxHealthCheckInterval), and checks run at least half as often as the
	// budget allows. The warnings do not name the factor at all.
	factor := math.Exp2(math.Ceil(math.Log2(total / budget)))
	stretch := func(d time.Duration) time.Duration {
		return min(time.Duration(math.Ceil(d.Seconds()*factor))*time.Second, MaxHealthCheckInterval)
	}
	stretched := make([]ir.HealthCheck, len(cfg.Clusters)) // by cluster index
	after := 0.0
	for _, i := range checked {
		c := cfg.Clusters[i]
		hc := *c.HealthCheck
		nt := hc.NoTrafficInterval.D()
		if nt <= 0 {
			nt = EnvoyNoTrafficInterval
		}
		hc.Interval, hc.NoTrafficInterval = ir.Duration(stretch(hc.Interval.D())), ir.Duration(stretch(nt))
		stretched[i] = hc
		after += rate(len(c.Endpoints), every(&hc))
	}
	// Still over (intervals at their maximum): the largest clusters lose their checks. (The
	// stretched intervals alone meet the budget up to rounding: compare with a margin.)
	over := func() bool { return after > budget*(1+1e-9) }
	off := map[int]bool{}
	if over() {
		bySize := slices.Clone(checked)
		slices.SortFunc(bySize, func(a, b int) int {
			ca, cb := cfg.Clusters[a], cfg.Clusters[b]
			return cmp.Or(cmp.Compare(len(cb.Endpoints), len(ca.Endpoints)), cmp.Compare(ca.Name, cb.Name))
		})
		for _, i := range bySize {
			if !over() {
				break
			}
			off[i] = true
			after -= rate(len(cfg.Clusters[i].Endpoints), every(&stretched[i]))
		}
	}
	problems := make(ir.Problems, 0, len(checked))
	for _, i := range checked {
		old := cfg.Clusters[i]
		v := budgetVerdict{factor: factor, off: off[i], proxies: int(proxies), budget: opts.HealthCheckProbesPerSecond}
		b, ok := memo.get(old, v)
		if !ok {
			b = budgetCluster(old, v, stretched[i], every(old.HealthCheck))
		}
		if next != nil {
			next[old] = b
		}
		cfg.Clusters[i] = b.cluster
		for _, o := range old.Owners {
			problems = append(problems, ir.Problem{Object: o, Severity: ir.SeverityWarning, Reason: ReasonHealthCheckThrottled, Message: b.message})
		}
	}
	problems.Sort()
	return problems.Compact()
}

// budgetVerdict is what the budget decided for one cluster: the factor its intervals are
// stretched by, or off; with what its warning names.
type budgetVerdict struct {
	factor  float64
	off     bool
	proxies int
	budget  int
}

// budgeted is a cluster as the budget left it, and the warning its owners get.
type budgeted struct {
	verdict budgetVerdict
	cluster *ir.Cluster
	message string
}

// healthBudgetMemo keeps budgetHealthChecks' replacement of each cluster (by pointer: the
// incremental front end hands on the clusters that did not change) for the next run: a
// cluster under the same verdict gets the same replacement, so a run over the budget
// formats no message and copies no cluster that did not change, and the back end finds
// the last run's cluster (nothing to build again). Only the last run's clusters are kept.
type healthBudgetMemo struct {
	last map[*ir.Cluster]budgeted
}

// begin returns the map the run records its replacements in (nil without a memo).
func (m *healthBudgetMemo) begin() map[*ir.Cluster]budgeted {
	if m == nil {
		return nil
	}
	return map[*ir.Cluster]budgeted{}
}

// end keeps the run's replacements for the next run.
func (m *healthBudgetMemo) end(next map[*ir.Cluster]budgeted) {
	if m != nil {
		m.last = next
	}
}

// get is the last run's replacement of c under verdict v.
func (m *healthBudgetMemo) get(c *ir.Cluster, v budgetVerdict) (budgeted, bool) {
	if m == nil {
		return budgeted{}, false
	}
	b, ok := m.last[c]
	return b, ok && b.verdict == v
}

// budgetCluster replaces old (checked every asked) under verdict v: its checks stretched
// (stretched) or off, with the warning its owners get.
func budgetCluster(old *ir.Cluster, v budgetVerdict, stretched ir.HealthCheck, asked time.Duration) budgeted {
	c := *old
	var msg string
	if v.off {
		c.HealthCheck = nil
		msg = fmt.Sprintf("active health checks of %d endpoints every %s from %d proxies, with those of the tenant's other clusters, would exceed the tenant's health-check budget of %d probes/s; "+
			"they are turned off for this cluster, among the largest, and a failed endpoint is noticed only when connections to it fail. "+
			"Lower the number of endpoints or ask the platform team for a larger spec.limits.healthCheckProbesPerSecond",
			len(old.Endpoints), asked, v.proxies, v.budget)
	} else {
		c.HealthCheck = &stretched
		msg = fmt.Sprintf("active health checks of %d endpoints every %s from %d proxies, with those of the tenant's other clusters, would exceed the tenant's health-check budget of %d probes/s; "+
			"they run less often than asked, at most every %s (the tenant's clusters share the budget, so how much less follows the tenant's size). "+
			"Lower the number of endpoints or lengthen the interval, or ask the platform team for a larger spec.limits.healthCheckProbesPerSecond",
			len(old.Endpoints), asked, v.proxies, v.budget, MaxHealthCheckInterval)
	}
	return budgeted{verdict: v, cluster: &c, message: msg}
}

// EnvoyNoTrafficInterval is how often the healthy endpoints of a cluster that has seen no
// traffic are checked when the configuration leaves it unset (ir.EnvoyNoTrafficInterval).
const EnvoyNoTrafficInterval = ir.EnvoyNoTrafficInterval
