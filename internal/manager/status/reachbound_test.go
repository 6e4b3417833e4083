package status

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/process"
	"kubelb.dev/kubelb/internal/reach"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds"
)

// TestReachabilityPassesBounded: a tenant's reachability pass that comes too soon after the
// last (ReachShare) does not run, and says when to run instead; once that time has come it
// runs. A Reconcile that skips the pass is requeued for it, so no change is lost.
func TestReachabilityPassesBounded(t *testing.T) {
	passes := 0
	c := fake.NewClientBuilder().WithScheme(process.Scheme()).Build()
	w := &Writer{client: c, now: time.Now, sink: NewSink(c), endpoints: func(string) reach.Clusters {
		passes++
		return reach.Clusters{}
	}}
	st := &tenantState{}
	report := &Report{Objects: map[ir.ObjectRef]int64{}}
	ctx := context.Background()
	if _, err := w.boundedReachability(ctx, st, "tenant-a", report); err != nil {
		t.Fatal(err)
	}
	if passes != 1 {
		t.Fatalf("first look: %d passes, want 1", passes)
	}
	st.reachAt = time.Now().Add(time.Second) // as after a pass of 10 ms
	wait, err := w.boundedReachability(ctx, st, "tenant-a", report)
	if err != nil {
		t.Fatal(err)
	}
	if passes != 1 || wait <= 0 || wait > time.Second {
		t.Fatalf("a look too soon after the last: %d passes, come back after %v; want 1 pass and at most 1s", passes, wait)
	}
	st.reachAt = time.Now().Add(-time.Millisecond)
	if _, err := w.boundedReachability(ctx, st, "tenant-a", report); err != nil {
		t.Fatal(err)
	}
	if passes != 2 {
		t.Fatalf("a look once the wait is over: %d passes, want 2", passes)
	}
	if !st.reachAt.After(time.Now().Add(-time.Second)) {
		t.Errorf("the pass set no next time: %v", st.reachAt)
	}
	for took, want := range map[time.Duration]time.Duration{
		10 * time.Microsecond: 990 * time.Microsecond, // a small tenant: no wait to speak of
		8 * time.Millisecond:  792 * time.Millisecond, // 10 000 clusters
		time.Second:           MaxReachWait,
	} {
		if got := reachWait(took); got != want {
			t.Errorf("reachWait(%v) = %v, want %v", took, got, want)
		}
	}
}

// TestGoneLoadBalancerLeavesBackendsMetric: a LoadBalancer gone from the tenant's snapshot
// loses its kubelb_manager_loadbalancer_backends series, and only it (the others stay).
func TestGoneLoadBalancerLeavesBackendsMetric(t *testing.T) {
	const tenant = "tenant-metric"
	now := time.Now()
	res := xds.Resources{}
	ts := &v1alpha1.TenantState{ObjectMeta: metav1.ObjectMeta{Name: hubnames.TenantStateName, Namespace: tenant}}
	report := &Report{Objects: map[ir.ObjectRef]int64{}, Owners: map[string]map[string][]ir.ObjectRef{resource.ClusterType: {}}}
	var lbs []*v1alpha1.LoadBalancer
	for i := range 3 {
		name := fmt.Sprintf("lb-%d", i)
		addrs := []string{fmt.Sprintf("10.0.%d.1:30000", i)}
		res[resource.ClusterType] = append(res[resource.ClusterType], benchCluster(name))
		res[resource.EndpointType] = append(res[resource.EndpointType], benchAssignment(name, addrs))
		ref := ir.ObjectRef{Kind: translate.KindLoadBalancer, Namespace: tenant, Name: name}
		report.Objects[ref] = 1
		report.Owners[resource.ClusterType][name] = []ir.ObjectRef{ref}
		ts.Status.BackendHealth = append(ts.Status.BackendHealth, v1alpha1.BackendHealth{Cluster: name, Endpoints: reach.EndpointsHash(addrs), Time: metav1.NewTime(now)})
		lbs = append(lbs, &v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant, Generation: 1}})
	}
	srv := xds.NewServer(logr.Discard(), nil)
	ctx := context.Background()
	if _, err := srv.SetTenant(ctx, tenant, res); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(process.Scheme()).WithObjects(ts).WithStatusSubresource(ts, &v1alpha1.LoadBalancer{})
	for _, lb := range lbs {
		b = b.WithObjects(lb)
	}
	c := cacheReader{Client: b.Build(), ts: ts}
	w := &Writer{client: c, now: func() time.Time { return now }, sink: NewSink(c), endpoints: srv.ClusterEndpoints}
	st := &tenantState{}
	if _, err := w.reachability(ctx, st, tenant, report); err != nil {
		t.Fatal(err)
	}
	series := func() int { return testutil.CollectAndCount(metrics.ManagerLoadBalancerBackends.GaugeVec) }
	before := series()
	if before < 6 {
		t.Fatalf("%d series of kubelb_manager_loadbalancer_backends after the first pass, want 2 per LoadBalancer", before)
	}
	// lb-2 is gone.
	res[resource.ClusterType], res[resource.EndpointType] = res[resource.ClusterType][:2], res[resource.EndpointType][:2]
	owners := maps.Clone(report.Owners[resource.ClusterType]) // a new Report: new maps
	delete(owners, "lb-2")
	report = &Report{Objects: maps.Clone(report.Objects), Owners: map[string]map[string][]ir.ObjectRef{resource.ClusterType: owners}}
	delete(report.Objects, ir.ObjectRef{Kind: translate.KindLoadBalancer, Namespace: tenant, Name: "lb-2"})
	if _, err := srv.SetTenant(ctx, tenant, res); err != nil {
		t.Fatal(err)
	}
	if _, err := w.reachability(ctx, st, tenant, report); err != nil {
		t.Fatal(err)
	}
	if got := series(); got != before-2 {
		t.Errorf("%d series after lb-2 went, want %d", got, before-2)
	}
}
