package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestMain runs the harness in a private network namespace (framework.RunInNetns), as the
// e2e packages do: its Envoys bind listener ports of their own.
func TestMain(m *testing.M) { framework.RunInNetns(m, "e2e/bench") }

// TestHarnessMeasuresEveryWorkload runs a tiny version of every workload (6 Services across
// a real and a played tenant, a real Envoy, a 5 s quiet window, 10 s of churn) so that the
// harness cannot rot. It checks that every figure was measured and is sane, never how fast.
func TestHarnessMeasuresEveryWorkload(t *testing.T) {
	res := Run(t, Config{Services: 6, Tenants: 2, RealTenants: 1, Envoy: true,
		Quiet: 5 * time.Second, ChurnPerSecond: 2, ChurnDuration: 10 * time.Second, Command: "go test ./e2e/bench"})

	for _, name := range []string{"burst", "quiet", "change", "churn", "delete"} {
		w := res.Workloads[name]
		if w == nil {
			t.Fatalf("no %s workload in %+v", name, res.Workloads)
		}
		t.Run(name, func(t *testing.T) {
			checkCommon(t, w)
			switch name {
			case "burst":
				checkLatency(t, w.TimeToAddress, 6)
				if w.ConvergenceSeconds <= 0 || w.IssueSeconds <= 0 || w.HubWrites.Kubelb <= 0 || w.HubWrites.PlayedCCM != 3 {
					t.Errorf("burst: convergence %v s, issued in %v s, %d kubelb writes, %d by the played ccm (want 3)",
						w.ConvergenceSeconds, w.IssueSeconds, w.HubWrites.Kubelb, w.HubWrites.PlayedCCM)
				}
				if w.SettledSeconds < w.ConvergenceSeconds {
					t.Errorf("burst: settled after %v s, before the last address at %v s", w.SettledSeconds, w.ConvergenceSeconds)
				}
				if w.TenantWrites.LoadGen != 3 || w.Envoycp.Builds <= 0 || w.Envoycp.TenantsBuilt != 2 || w.EnvoySyncSeconds <= 0 {
					t.Errorf("burst: %d creates by the load generator (want 3), %v snapshot builds over %d tenants (want 2), Envoy synced after %v s",
						w.TenantWrites.LoadGen, w.Envoycp.Builds, w.Envoycp.TenantsBuilt, w.EnvoySyncSeconds)
				}
			case "change":
				if w.ChangeToHubSeconds <= 0 || w.ChangeToEnvoySeconds <= 0 || w.Envoy.RxBytes <= 0 || w.Envoy.ListenersAdded < 1 {
					t.Errorf("change: hub after %v s, Envoy after %v s, %d bytes and %d listeners added to Envoy",
						w.ChangeToHubSeconds, w.ChangeToEnvoySeconds, w.Envoy.RxBytes, w.Envoy.ListenersAdded)
				}
				if w.Envoycp.SentBytes <= 0 {
					t.Errorf("change: the manager counted no xDS bytes sent")
				}
				if w.Envoycp.BuildsByTenant["tenant-t000"] <= 0 {
					t.Errorf("change: no snapshot build of the changed tenant: %v", w.Envoycp.BuildsByTenant)
				}
			case "churn":
				if w.Services < churnPool+1 || w.TimeToAddress == nil || w.TimeToAddress.Count < churnPool {
					t.Errorf("churn: %d operations, time to address %+v", w.Services, w.TimeToAddress)
				} else {
					checkLatency(t, w.TimeToAddress, w.TimeToAddress.Count)
				}
			case "delete":
				// The burst's 6 and the churned Services that lived on.
				if w.Services != 6+churnPool || w.ConvergenceSeconds <= 0 || w.HubWrites.Kubelb <= 0 {
					t.Errorf("delete: %d Services (want %d), converged after %v s, %d kubelb writes", w.Services, 6+churnPool, w.ConvergenceSeconds, w.HubWrites.Kubelb)
				}
			}
		})
	}
	if res.Setup.RealTenants != 1 || res.Setup.PlayedTenants != 1 || res.Machine.CPUs < 1 || res.Machine.MemoryMiB <= 0 || res.Machine.LoadSamples < 1 {
		t.Errorf("setup %+v, machine %+v", res.Setup, res.Machine)
	}
	if len(res.NotMeasured) != 0 {
		t.Errorf("figures not measured: %v", res.NotMeasured)
	}

	// The JSON and the plots are made from it.
	dir := t.TempDir()
	path, err := res.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Read(path)
	if err != nil || back.Workloads["burst"].TimeToAddress.Count != 6 {
		t.Fatalf("reading %s back: %v", path, err)
	}
	if table := Tables([]*Result{back}); !strings.Contains(table, "| 6 × 2 (1 real, 1 played) |") {
		t.Errorf("the results tables lack the run:\n%s", table)
	}
	if err := Plot([]*Result{back}, dir); err != nil {
		t.Fatal(err)
	}
	for _, png := range []string{PlotTimeToAddress, PlotManagerMemory} {
		if st, err := os.Stat(filepath.Join(dir, png)); err != nil || st.Size() == 0 {
			t.Errorf("plot %s: %v", png, err)
		}
	}
}

// checkCommon checks what every workload measures: process costs and writes that add up.
func checkCommon(t *testing.T, w *Workload) {
	t.Helper()
	if w.Seconds <= 0 || w.Manager.CPUSeconds < 0 || w.Manager.PeakRSSMiB <= 0 || w.Manager.ErrorLogLines < 0 {
		t.Errorf("manager: %+v over %v s", w.Manager, w.Seconds)
	}
	if w.CCM == nil || w.CCM.Processes != 1 || w.CCM.CPUSeconds < 0 || w.CCM.PeakRSSMiB <= 0 {
		t.Errorf("ccm: %+v", w.CCM)
	}
	for _, wr := range []*Writes{&w.HubWrites, w.TenantWrites} {
		var sum int64
		for _, v := range wr.ByVerbResource {
			sum += v
		}
		if wr.Total != sum || wr.Kubelb < 0 || wr.Kubelb > wr.Total || wr.PerService < 0 {
			t.Errorf("writes do not add up: %+v", wr)
		}
	}
	if w.Envoycp.Builds < 0 || w.Envoycp.Pushes < 0 || w.Envoycp.MeanBuildSeconds < 0 || w.Envoycp.SentBytes < 0 {
		t.Errorf("envoycp: %+v", w.Envoycp)
	}
	// The harness's own processes are all seen: the API servers, etcd, the manager, the ccm
	// and itself; the machine was busy some of the time.
	for _, cmd := range []string{"kube-apiserver", "etcd", "kubelb", "ccm", "bench.test"} {
		if _, ok := w.CPUByProcess[cmd]; !ok {
			t.Errorf("no CPU of %s in %v", cmd, w.CPUByProcess)
		}
	}
	if m := w.MachineCPU; m == nil || m.BusySeconds <= 0 || m.Utilization <= 0 || m.Utilization > 1 {
		t.Errorf("machine CPU %+v", m)
	}
	if w.Envoy != nil && (w.Envoy.WarningLines < 0 || w.Envoy.InitialFetchTimeouts > w.Envoy.WarningLines) {
		t.Errorf("Envoy warnings %+v", w.Envoy)
	}
}

// checkLatency checks a distribution of n samples is ordered and non-negative.
func checkLatency(t *testing.T, l *Latency, n int) {
	t.Helper()
	if l == nil || l.Count != n || l.P50 < 0 || l.P50 > l.P95 || l.P95 > l.P99 || l.P99 > l.Max {
		t.Errorf("time to address of %d Services: %+v", n, l)
	}
}

// BenchmarkHarness runs the harness for every size of BENCH_N × BENCH_T (comma lists;
// default 100 × 1) and writes each run's JSON into BENCH_OUT (default docs/benchmarks of the
// repository). It runs once whatever b.N is: `make bench-harness` (see docs/benchmarks.md).
// BENCH_ENVOY=0 runs without a real Envoy; BENCH_QUIET, BENCH_CHURN_RATE,
// BENCH_CHURN_DURATION and BENCH_REAL_TENANTS tune the workloads; BENCH_MANAGER_GOMEMLIMIT
// gives the manager a GOMEMLIMIT (as a container memory limit would); BENCH_CCM_ARGS and
// BENCH_MANAGER_ARGS (space-separated) add flags to the ccm and the manager.
func BenchmarkHarness(b *testing.B) {
	ns, ts := intList(b, "BENCH_N", "100"), intList(b, "BENCH_T", "1")
	out := envOr("BENCH_OUT", filepath.Join(testsupport.RepoRoot(), "docs", "benchmarks"))
	quiet := duration(b, "BENCH_QUIET", "60s")
	churnFor := duration(b, "BENCH_CHURN_DURATION", "60s")
	rate, err := strconv.ParseFloat(envOr("BENCH_CHURN_RATE", "5"), 64)
	if err != nil {
		b.Fatalf("BENCH_CHURN_RATE: %v", err)
	}
	real, err := strconv.Atoi(envOr("BENCH_REAL_TENANTS", "0"))
	if err != nil {
		b.Fatalf("BENCH_REAL_TENANTS: %v", err)
	}
	for _, n := range ns {
		for _, t := range ts {
			if n < t {
				continue
			}
			b.Run(fmt.Sprintf("n=%d/t=%d", n, t), func(b *testing.B) {
				res := Run(b, Config{Services: n, Tenants: t, RealTenants: real, Envoy: envOr("BENCH_ENVOY", "1") != "0",
					Quiet: quiet, ChurnPerSecond: rate, ChurnDuration: churnFor, PprofDir: os.Getenv("KUBELB_PPROF_DIR"),
					ManagerMemoryLimit: os.Getenv("BENCH_MANAGER_GOMEMLIMIT"),
					CCMArgs:            strings.Fields(os.Getenv("BENCH_CCM_ARGS")), ManagerArgs: strings.Fields(os.Getenv("BENCH_MANAGER_ARGS")),
					Command: fmt.Sprintf("make bench-harness BENCH_N=%d BENCH_T=%d", n, t)})
				path, err := res.Write(out)
				if err != nil {
					b.Fatal(err)
				}
				burst := res.Workloads["burst"]
				b.ReportMetric(burst.ConvergenceSeconds, "s-to-all-addressed")
				b.ReportMetric(burst.TimeToAddress.P99, "s-p99-to-address")
				b.ReportMetric(burst.HubWrites.PerService, "hub-writes/svc")
				b.ReportMetric(burst.Manager.CPUSeconds, "manager-cpu-s")
				b.ReportMetric(burst.Manager.PeakRSSMiB, "manager-peak-rss-MiB")
				b.Logf("wrote %s", path)
			})
		}
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func intList(b *testing.B, name, def string) []int {
	var out []int
	for _, f := range strings.Split(envOr(name, def), ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			b.Fatalf("%s: %q is not a positive number", name, f)
		}
		out = append(out, v)
	}
	return out
}

func duration(b *testing.B, name, def string) time.Duration {
	d, err := time.ParseDuration(envOr(name, def))
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	return d
}
