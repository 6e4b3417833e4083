package xds

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"

	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
)

// largestChildEnv makes the test binary, re-executed by BenchmarkLargestTenant, translate
// the largest tenant once in TestLargestTenantChild and print what it measured.
const largestChildEnv = "KUBELB_LARGEST_TENANT_CHILD"

// largestResult is what the child measured.
type largestResult struct {
	InputMiB  float64 `json:"inputMiB"`  // peak RSS once the input is built (the informer cache's share)
	PeakMiB   float64 `json:"peakMiB"`   // peak RSS after translating it and setting the snapshot
	Seconds   float64 `json:"seconds"`   // the one translation and snapshot, wall clock
	CPU       float64 `json:"cpu"`       // and its CPU seconds (user and system, every thread)
	Endpoints int     `json:"endpoints"` // Envoy endpoints in the snapshot
	Clusters  int     `json:"clusters"`
}

// BenchmarkLargestTenant translates the largest tenant the CRDs' bounds and the default
// limits allow (translatetest.LargestTenant) end to end — front ends, back end, xDS snapshot
// — at a quarter, a half and all of its size, so that the figures show the cost growing
// linearly. time/op and allocs/op are measured here; the peak RSS ("peak-RSS-MiB") of a
// manager doing it is measured in a child process, a re-execution of this test binary that
// builds the input and translates it once, then reads its VmHWM. The figures are in
// docs/performance.md.
//
// The last case, "size=4/4,limits", adds the tenant-wide endpoint limit the manager applies
// (spec.limits.endpoints, default 500 000): what the largest tenant really costs.
func BenchmarkLargestTenant(b *testing.B) {
	for _, c := range []struct {
		q      int
		limits bool
	}{{1, false}, {2, false}, {4, false}, {4, true}} {
		name := fmt.Sprintf("size=%d/4", c.q)
		if c.limits {
			name += ",limits"
		}
		b.Run(name, func(b *testing.B) {
			child := largestInChild(b, c.q, c.limits)
			in := largestInput(b, c.q, c.limits)
			b.ReportAllocs()
			for b.Loop() {
				_, _, out, err := translatetest.Pipeline(in)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := NewServer(logr.Discard(), nil).SetTenant(context.Background(), in.Tenant, out); err != nil {
					b.Fatal(err)
				}
			}
			// After the loop: b.Loop's start deletes metrics reported before it.
			b.ReportMetric(child.PeakMiB, "peak-RSS-MiB")
			b.ReportMetric(child.InputMiB, "input-RSS-MiB")
			b.ReportMetric(float64(child.Endpoints), "endpoints")
			b.ReportMetric(child.CPU, "child-CPU-s")
		})
	}
}

// largestInChild runs TestLargestTenantChild in a new process and returns what it measured.
func largestInChild(b *testing.B, quarters int, limits bool) largestResult {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLargestTenantChild$", "-test.v", "-test.count=1")
	env := strconv.Itoa(quarters)
	if limits {
		env += largestLimitsSuffix
	}
	cmd.Env = append(os.Environ(), largestChildEnv+"="+env)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("the child translating the largest tenant failed: %v\n%s%s", err, out, stderr.Bytes())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "LARGEST "); ok {
			var r largestResult
			if err := json.Unmarshal([]byte(v), &r); err != nil {
				b.Fatal(err)
			}
			return r
		}
	}
	b.Fatalf("the child printed no result:\n%s", out)
	return largestResult{}
}

// TestLargestTenantChild is BenchmarkLargestTenant's child process; without
// KUBELB_LARGEST_TENANT_CHILD it is skipped.
func TestLargestTenantChild(t *testing.T) {
	v, limits := strings.CutSuffix(os.Getenv(largestChildEnv), largestLimitsSuffix)
	q, err := strconv.Atoi(v)
	if err != nil {
		t.Skip("run by BenchmarkLargestTenant")
	}
	in := largestInput(t, q, limits)
	runtime.GC()
	r := largestResult{InputMiB: peakRSSMiB(t)}
	start, cpu := time.Now(), cpuSeconds(t)
	_, _, out, err := translatetest.Pipeline(in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewServer(logr.Discard(), nil).SetTenant(context.Background(), in.Tenant, out); err != nil {
		t.Fatal(err)
	}
	r.Seconds, r.CPU = time.Since(start).Seconds(), cpuSeconds(t)-cpu
	r.PeakMiB = peakRSSMiB(t)
	r.Clusters = len(out[resource.ClusterType])
	r.Endpoints = countEndpoints(Resources(out))
	runtime.KeepAlive(in)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("LARGEST %s\n", b)
}

// largestLimitsSuffix marks a child that applies the tenant-wide endpoint limit.
const largestLimitsSuffix = "+limits"

// largestInput is translatetest.LargestTenant, with the default tenant-wide endpoint limit
// (spec.limits.endpoints) when limits is set, as the manager applies it.
func largestInput(t testing.TB, quarters int, limits bool) translate.Input {
	in := translatetest.LargestTenant(t, quarters)
	if limits {
		in.Options.MaxEndpoints = int(settings.DefaultLimitEndpoints)
	}
	return in
}

// TestLargestTenantWithinLimits: the largest input a tenant can write, translated with the
// default limits the manager applies, stays within the tenant-wide endpoint bound — the
// clusters of the newest objects get fewer endpoints or none, and are told so — so one tenant
// cannot make the manager's memory grow beyond what the limit allows (figures:
// BenchmarkLargestTenant, docs/performance.md).
func TestLargestTenantWithinLimits(t *testing.T) {
	in := largestInput(t, 4, true)
	_, problems, out, err := translatetest.Pipeline(in)
	if err != nil {
		t.Fatal(err)
	}
	endpoints := countEndpoints(Resources(out))
	if limit := int(settings.DefaultLimitEndpoints); endpoints != limit {
		t.Errorf("%d endpoints in the snapshot, want the limit %d (the input has about three times more)", endpoints, limit)
	}
	told := 0
	for _, p := range problems {
		if p.Reason == "QuotaExceeded" && strings.Contains(p.Message, "spec.limits.endpoints of the tenant") {
			told++
		}
	}
	if told == 0 {
		t.Error("no object was told that the tenant's endpoint budget is spent")
	}
}

// peakRSSMiB is this process's peak resident memory (VmHWM of /proc/self/status), in MiB.
func peakRSSMiB(t testing.TB) float64 {
	t.Helper()
	return statusMiB(t, "/proc/self/status", "VmHWM:")
}

// statusMiB is the figure of field (e.g. "VmRSS:") in the /proc status file path, in MiB.
func statusMiB(t testing.TB, path, field string) float64 {
	t.Helper()
	status, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb / 1024
		}
	}
	t.Fatalf("no %s in %s", field, path)
	return 0
}

// cpuSeconds is the CPU time this process has used (user and system), in seconds.
func cpuSeconds(t testing.TB) float64 {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
