package translate_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
)

// probes returns the active health-check probes per second of cfg's clusters from proxies
// proxies, and the clusters checked.
func probes(cfg *ir.Config, proxies int) (float64, int) {
	total, checked := 0.0, 0
	for _, c := range cfg.Clusters {
		if c.HealthCheck != nil && len(c.Endpoints) > 0 {
			checked++
			total += float64(len(c.Endpoints)*proxies) / c.HealthCheck.Interval.D().Seconds()
		}
	}
	return total, checked
}

// TestHealthCheckBudgetLargestTenant: the largest tenant the default limits allow (every
// cluster at 1000 endpoints) would have its proxies send hundreds of thousands of probes per
// second at addresses it chose. With a budget, it sends at most the budget: intervals are
// stretched up to an hour, and the largest clusters lose their checks when that is not
// enough; each is told (HealthCheckThrottled). The incremental front end gives the same, and
// its cached clusters are not modified: without the budget, the next run asks the old rate.
func TestHealthCheckBudgetLargestTenant(t *testing.T) {
	t.Parallel()
	const budget, proxies = 2000, 3
	in := translatetest.LargestTenant(t, 4)
	in.Options.HealthCheckProxies = proxies
	free, err := translate.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	asked, checked := probes(free.Config, proxies)

	in.Options.HealthCheckProbesPerSecond = budget
	// Versions, as objects from the API server have, so that the incremental front end
	// caches each LoadBalancer's translation.
	for i := range in.LoadBalancers {
		lb := &in.LoadBalancers[i]
		lb.UID, lb.ResourceVersion = types.UID(lb.Name), "1"
		if svc := in.HubServices[lb.Name]; svc != nil {
			svc.UID, svc.ResourceVersion = types.UID("svc-"+lb.Name), "1"
		}
	}
	inc := &translate.Incremental{}
	for _, run := range []struct {
		name string
		run  func(translate.Input) (translate.Result, error)
	}{{"Run", translate.Run}, {"Incremental", inc.Run}} {
		r, err := run.run(in)
		if err != nil {
			t.Fatal(err)
		}
		got, stillChecked := probes(r.Config, proxies)
		if got > budget*(1+1e-9) {
			t.Errorf("%s: %.0f probes/s, over the budget of %d", run.name, got, budget)
		}
		told := map[ir.ObjectRef]bool{}
		for _, p := range r.Problems {
			if p.Reason == translate.ReasonHealthCheckThrottled {
				told[p.Object] = true
			}
		}
		if len(told) == 0 {
			t.Errorf("%s: no object told of its throttled health checks", run.name)
		}
		var longest time.Duration
		for _, c := range r.Config.Clusters {
			if c.HealthCheck != nil && c.HealthCheck.Interval.D() > longest {
				longest = c.HealthCheck.Interval.D()
			}
		}
		t.Logf("%s: %d clusters checked, %.0f probes/s asked from %d proxies; with a budget of %d: %.0f probes/s, %d clusters still checked (longest interval %s), %d objects told",
			run.name, checked, asked, proxies, budget, got, stillChecked, longest, len(told))
	}
	in.Options.HealthCheckProbesPerSecond = 0
	r, err := inc.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := probes(r.Config, proxies); got != asked {
		t.Errorf("without the budget the incremental front end asks %.0f probes/s, want %.0f: a budgeted run modified its cache", got, asked)
	}
	// The budget applies to the assembled configuration: changing it re-translates no more
	// than an unchanged input does (the LoadBalancers that cannot be cached).
	changed := inc.Stats
	if _, err := inc.Run(in); err != nil {
		t.Fatal(err)
	}
	if changed.Translated != 0 || changed.Full || inc.Stats.Translated != 0 {
		t.Errorf("a changed budget re-translated %d LoadBalancers (full: %v), an unchanged input %d; want none", changed.Translated, changed.Full, inc.Stats.Translated)
	}
}

// TestHealthCheckBudgetTurnsOffTheLargest: when even an hour between checks is too often,
// the largest clusters (most endpoints, then name) lose their checks; the others keep them.
func TestHealthCheckBudgetTurnsOffTheLargest(t *testing.T) {
	t.Parallel()
	in := translatetest.LargestTenant(t, 1)
	in.Options.HealthCheckProxies = 3
	in.Options.HealthCheckProbesPerSecond = 1 // 1000 endpoints × 3 proxies every hour: 0.83 probes/s per cluster
	r, err := translate.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	got, checked := probes(r.Config, 3)
	if got > 1 || checked != 1 {
		t.Errorf("%.2f probes/s from %d clusters checked, want at most 1 from exactly 1 (one cluster every hour)", got, checked)
	}
	for _, c := range r.Config.Clusters {
		if c.HealthCheck != nil && c.HealthCheck.Interval.D() != translate.MaxHealthCheckInterval {
			t.Errorf("cluster %s checked every %s, want %s", c.Name, c.HealthCheck.Interval.D(), translate.MaxHealthCheckInterval)
		}
	}
}
