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
// a Warning per affected cluster, on its owners.
func budgetHealthChecks(cfg *ir.Config, opts Options) ir.Problems {
	budget := float64(opts.HealthCheckProbesPerSecond)
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
	stretched := make(map[int]*ir.HealthCheck, len(checked))
	after := 0.0
	for _, i := range checked {
		c := cfg.Clusters[i]
		hc := *c.HealthCheck
		nt := hc.NoTrafficInterval.D()
		if nt <= 0 {
			nt = EnvoyNoTrafficInterval
		}
		hc.Interval, hc.NoTrafficInterval = ir.Duration(stretch(hc.Interval.D())), ir.Duration(stretch(nt))
		stretched[i] = &hc
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
			after -= rate(len(cfg.Clusters[i].Endpoints), every(stretched[i]))
		}
	}
	var problems ir.ProblemSet
	for _, i := range checked {
		old := cfg.Clusters[i]
		c := *old
		asked := every(old.HealthCheck)
		var msg string
		if off[i] {
			c.HealthCheck = nil
			msg = fmt.Sprintf("active health checks of %d endpoints every %s from %d proxies, with those of the tenant's other clusters, would exceed the tenant's health-check budget of %d probes/s; "+
				"they are turned off for this cluster, among the largest, and a failed endpoint is noticed only when connections to it fail. "+
				"Lower the number of endpoints or ask the platform team for a larger spec.limits.healthCheckProbesPerSecond",
				len(old.Endpoints), asked, int(proxies), opts.HealthCheckProbesPerSecond)
		} else {
			c.HealthCheck = stretched[i]
			msg = fmt.Sprintf("active health checks of %d endpoints every %s from %d proxies, with those of the tenant's other clusters, would exceed the tenant's health-check budget of %d probes/s; "+
				"they run less often than asked, at most every %s (the tenant's clusters share the budget, so how much less follows the tenant's size). "+
				"Lower the number of endpoints or lengthen the interval, or ask the platform team for a larger spec.limits.healthCheckProbesPerSecond",
				len(old.Endpoints), asked, int(proxies), opts.HealthCheckProbesPerSecond, MaxHealthCheckInterval)
		}
		cfg.Clusters[i] = &c
		for _, o := range old.Owners {
			problems.AddMessage(o, ir.SeverityWarning, ReasonHealthCheckThrottled, msg)
		}
	}
	return problems.List()
}

// EnvoyNoTrafficInterval is Envoy's no_traffic_interval when the configuration leaves it
// unset: how often a cluster that has seen no traffic is checked.
const EnvoyNoTrafficInterval = 60 * time.Second
