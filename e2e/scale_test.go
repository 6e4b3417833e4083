package e2e

import (
	"os"
	"strconv"
	"strings"
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

// TestBurstWrites runs a small burst (50 Services, KUBELB_BURST_TEST to change it) through
// the harness's burst and delete workloads (the real binaries) and checks, from the hub API
// server's own apiserver_request_total, the hub writes kubelb makes per Service: on create,
// one LoadBalancer create (ccm), one hub Service apply and one LoadBalancer status write
// (manager); on delete, one LoadBalancer delete (ccm) and one hub Service delete (manager),
// and no finalizer patch; and that neither the manager nor the ccm logged an error line.
func TestBurstWrites(t *testing.T) {
	n := 50
	if v, err := strconv.Atoi(os.Getenv("KUBELB_BURST_TEST")); err == nil && v > 0 {
		n = v
	}
	res := bench.Run(t, bench.Config{Services: n, Tenants: 1, Workloads: []string{"delete"}})
	burst, del := res.Workloads["burst"], res.Workloads["delete"]
	c, d := burst.HubWrites.ByVerbResource, del.HubWrites.ByVerbResource
	t.Logf("hub writes of the burst: %v; of the delete: %v", c, d)
	if got := c["POST loadbalancers"] + c["APPLY loadbalancers"]; got != int64(n) {
		t.Errorf("LoadBalancer creates: %d, want %d", got, n)
	}
	if got := c["APPLY services"] + c["PATCH services"] + c["POST services"]; got != int64(n) {
		t.Errorf("hub Service writes on create: %d, want %d (one apply each)", got, n)
	}
	// One status write by the LoadBalancer controller: ports, address, Ready and Programmed
	// (the translation reads the listener ports from the hub Service, so its verdict is
	// usually known when the address comes). A LoadBalancer whose address came before its
	// translation gets Programmed in a second write by the status writer: a few per burst.
	if got := c["APPLY loadbalancers/status"] + c["PATCH loadbalancers/status"]; got > int64(n+n/5) {
		t.Errorf("LoadBalancer status writes: %d, want at most %d (one each, and a few Programmed)", got, n+n/5)
	}
	// Per Service: the writes to the kinds made per Service (the tenant's Envoy fleet,
	// made with its first LoadBalancer and removed with its last, is not).
	// The played hub load balancer's address writes (services/status) are not kubelb's.
	if got := float64(perServiceWrites(c)-burst.HubWrites.HubLBPlayer) / float64(n); got > 3.2 {
		t.Errorf("hub writes per Service on create: %.2f, want 3 (at most 3.2) (%v)", got, c)
	}
	if got := d["DELETE loadbalancers"]; got != int64(n) {
		t.Errorf("LoadBalancer deletes: %d, want %d", got, n)
	}
	if got := d["DELETE services"]; got != int64(n) {
		t.Errorf("hub Service deletes: %d, want %d", got, n)
	}
	if got := d["PATCH loadbalancers"] + d["APPLY loadbalancers"] + d["PUT loadbalancers"]; got != 0 {
		t.Errorf("LoadBalancer patches on delete (finalizer): %d, want none", got)
	}
	if got := float64(perServiceWrites(d)) / float64(n); got > 2 {
		t.Errorf("hub writes per Service on delete: %.2f, want at most 2 (%v)", got, d)
	}
	for name, w := range map[string]*bench.Workload{"burst": burst, "delete": del} {
		ccm := 0
		if w.CCM != nil {
			ccm = w.CCM.ErrorLogLines
		}
		if w.Manager.ErrorLogLines+ccm > 0 {
			t.Errorf("error log lines during the %s: manager %d, ccm %d", name, w.Manager.ErrorLogLines, ccm)
		}
	}
}

// perServiceWrites sums the writes to the kinds kubelb writes per Service: LoadBalancers,
// hub Services and Events.
func perServiceWrites(byKind map[string]int64) int64 {
	var total int64
	for k, v := range byKind {
		_, resource, _ := strings.Cut(k, " ")
		switch strings.Split(resource, "/")[0] {
		case "loadbalancers", "services", "events":
			total += v
		}
	}
	return total
}
