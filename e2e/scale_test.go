package e2e

import (
	"os"
	"strconv"
	"testing"

	"kubelb.dev/kubelb/e2e/bench"
)

// BenchmarkBurstLoadBalancerServices is the burst workload of the `make bench` harness
// (e2e/bench) alone: a burst of LoadBalancer Services in one tenant (1000, or KUBELB_BURST)
// against the real binaries, reporting the time until every Service shows an address, the
// hub writes per Service made by kubelb (the played hub LoadBalancer implementation's writes
// are subtracted), and the manager's CPU seconds and peak RSS. KUBELB_PPROF_DIR=<dir> profiles
// the manager and the ccm during the burst (docs/performance.md#profiling). It runs once
// whatever b.N is: `go test ./e2e -run '^$' -bench Burst -benchtime 1x`.
func BenchmarkBurstLoadBalancerServices(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("KUBELB_BURST")); err == nil && v > 0 {
		n = v
	}
	res := bench.Run(b, bench.Config{Services: n, Tenants: 1, Workloads: []string{}, PprofDir: os.Getenv("KUBELB_PPROF_DIR")})
	w := res.Workloads["burst"]
	b.ReportMetric(w.ConvergenceSeconds, "s-to-all-addressed")
	b.ReportMetric(w.HubWrites.PerService, "hub-writes/svc")
	b.ReportMetric(w.Manager.CPUSeconds, "manager-cpu-s")
	b.ReportMetric(w.Manager.PeakRSSMiB, "manager-peak-rss-MiB")
	b.Logf("hub writes by verb and resource (the played hub LoadBalancer made %d of the services/status ones): %v",
		w.HubWrites.HubLBPlayer, w.HubWrites.ByVerbResource)
}
