package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ccm"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ssa"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestLiveHeapPerService runs the real kubelb binary (KUBELB_HEAP_BINARY, else built from this
// tree) against a real API server and etcd, writes KUBELB_HEAP_SERVICES (default 1000)
// LoadBalancers into one tenant as its ccm would (the ccm's code: a two-port LoadBalancer
// Service each, server-side apply as kubelb-ccm, an Addresses object of three nodes), waits
// until the manager has written every status and gone quiet, and reports the manager's live
// heap (after a garbage collection it is asked for) before and after, per Service. It measures
// and asserts nothing about the figure; it runs only with KUBELB_HEAP=1
// (docs/benchmarks.md, "Live heap per Service"). With KUBELB_PPROF_DIR it leaves the heap
// profile of the last reading there (manager-heap.pprof).
func TestLiveHeapPerService(t *testing.T) {
	if os.Getenv("KUBELB_HEAP") == "" {
		t.Skip("set KUBELB_HEAP=1 to measure the manager's live heap per Service")
	}
	n := 1000
	if v := os.Getenv("KUBELB_HEAP_SERVICES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("KUBELB_HEAP_SERVICES=%q", v)
		}
	}
	hub := testenv.Start(t, "hub", testenv.Options{})
	ctx := context.Background()
	c := hub.Client
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	bin := os.Getenv("KUBELB_HEAP_BINARY")
	if bin == "" {
		bin = testsupport.BuildBinary(t, "./cmd/kubelb")
	}
	m, ns := startTenantHub(t, hub, bin, "heap")
	var nodes []kubelbv1alpha1.EndpointAddress
	for i := range 3 {
		nodes = append(nodes, kubelbv1alpha1.EndpointAddress{IP: fmt.Sprintf("192.0.2.%d", i+1)})
	}
	addrs := ccm.DesiredAddresses(ns, nodes)
	must(ssa.Apply(ctx, c, addrs, nil, hubnames.FieldOwnerCCM, ""))
	time.Sleep(10 * time.Second)
	before := liveHeap(t, m)

	start := time.Now()
	mirrorTwoPortServices(t, c, ns, n)
	testsupport.Eventually(t, 10*time.Minute, "every LoadBalancer to have a status", func() error {
		lbs := &kubelbv1alpha1.LoadBalancerList{}
		if err := c.List(ctx, lbs, client.InNamespace(ns)); err != nil {
			return err
		}
		done := 0
		for _, lb := range lbs.Items {
			if len(lb.Status.Conditions) > 0 && len(lb.Status.Service.Ports) > 0 {
				done++
			}
		}
		if done < n {
			return fmt.Errorf("%d of %d LoadBalancers have a status", done, n)
		}
		return nil
	})
	time.Sleep(20 * time.Second) // the Envoy control plane's last rebuilds (measured, not asserted)
	one := &kubelbv1alpha1.LoadBalancer{}
	must(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "00000000-0000-0000-0000-000000000000"}, one))
	for _, e := range one.ManagedFields {
		t.Logf("a LoadBalancer's managedFields: %s %s %q (%d bytes)", e.Manager, e.Operation, e.Subresource, len(e.FieldsV1.Raw))
	}
	after := liveHeap(t, m)
	t.Logf("%d LoadBalancers settled after %v", n, time.Since(start).Round(time.Second))
	t.Logf("manager live heap: %.1f MiB before, %.1f MiB after: %.0f bytes per Service",
		before/(1<<20), after/(1<<20), (after-before)/float64(n))
}

// liveHeap asks the manager for a garbage collection (a heap profile with gc=1) and reads its
// heap in use right after (go_memstats_heap_alloc_bytes).
func liveHeap(t *testing.T, m managerProcess) float64 {
	t.Helper()
	resp, err := http.Get("http://" + testsupport.Loopback(m.pprofPort) + "/debug/pprof/heap?gc=1") //nolint:noctx // a test, loopback
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("KUBELB_PPROF_DIR"); dir != "" { // the last one stays
		if err := os.WriteFile(dir+"/manager-heap.pprof", b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return promValue(t, "http://"+testsupport.Loopback(m.metricsPort)+"/metrics", "go_memstats_heap_alloc_bytes")
}
