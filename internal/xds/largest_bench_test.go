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

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"

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
func BenchmarkLargestTenant(b *testing.B) {
	for _, q := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("size=%d/4", q), func(b *testing.B) {
			child := largestInChild(b, q)
			in := translatetest.LargestTenant(b, q)
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
func largestInChild(b *testing.B, quarters int) largestResult {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLargestTenantChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), largestChildEnv+"="+strconv.Itoa(quarters))
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
	q, err := strconv.Atoi(os.Getenv(largestChildEnv))
	if err != nil {
		t.Skip("run by BenchmarkLargestTenant")
	}
	in := translatetest.LargestTenant(t, q)
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
	for _, res := range out[resource.EndpointType] {
		r.Endpoints += len(res.(*endpointv3.ClusterLoadAssignment).GetEndpoints()[0].GetLbEndpoints())
	}
	runtime.KeepAlive(in)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("LARGEST %s\n", b)
}

// peakRSSMiB is this process's peak resident memory (VmHWM of /proc/self/status), in MiB.
func peakRSSMiB(t testing.TB) float64 {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb / 1024
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
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
