package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// seriesWith counts the series of every tenant-labelled vector and per-tenant reconcile metric
// whose label (tenant or namespace) has one of values.
func seriesWith(t *testing.T, values ...string) int {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	for _, c := range managerGauges() {
		reg.MustRegister(c)
	}
	for _, r := range managerReconciles() {
		reg.MustRegister(r.collectors()...)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return len(TenantSeries(families, values...))
}

// observeAll records something for tenant name (namespace ns) in every tenant-labelled
// metric, the way the manager's controllers and xDS server do.
func observeAll(name, ns string) {
	ManagerLoadBalancers.WithLabelValues(ns).Set(1)
	ManagerRoutes.WithLabelValues(ns).Set(1)
	ManagerSnapshotUpdates.WithLabelValues(ns).Inc()
	ManagerSnapshotClusters.WithLabelValues(ns).Set(1)
	ManagerSnapshotListeners.WithLabelValues(ns).Set(1)
	ManagerSnapshotEndpoints.WithLabelValues(ns).Set(1)
	ManagerLoadBalancerBackends.WithLabelValues(ns, "web", "unreachable").Set(1)
	ManagerSnapshotBuildDuration.WithLabelValues(ns).Observe(0.1)
	ManagerXDSConnectedProxies.WithLabelValues(ns).Inc()
	ManagerXDSNacks.WithLabelValues(ns, "type.googleapis.com/envoy.config.listener.v3.Listener").Inc()
	ManagerXDSSentBytes.WithLabelValues(ns).Add(100)
	ManagerHealthSpecifiers.WithLabelValues(ns).Inc()
	XDSStreamsRefused.WithLabelValues(ns, "streams_per_tenant").Inc()
	XDSRequestsDelayed.WithLabelValues(ns).Inc()
	ManagerEnvoyProxies.WithLabelValues(name).Set(2)
	ManagerPortsAllocated.WithLabelValues(ns).Set(3)
	ManagerTenantLimit.WithLabelValues(ns, "loadBalancers").Set(10)
	ManagerTenantLimitUsage.WithLabelValues(ns, "loadBalancers").Set(9)
	for _, r := range tenantReconciles() {
		r.Observe(ns, ResultSuccess, time.Now())
	}
}

// TestSeriesOnlyForExistingTenants: once the manager tracks tenants, a label value that
// names no Tenant (a forged node.cluster, an object in another namespace) creates no series;
// an existing tenant's series are all created, and ForgetTenant removes every one of them
// and nothing of other tenants.
func TestSeriesOnlyForExistingTenants(t *testing.T) {
	known := map[string]bool{"shop": true, "tenant-shop": true, "blog": true, "tenant-blog": true}
	TrackTenants(func(v string) bool { return known[v] })
	t.Cleanup(func() { TrackTenants(nil) })

	observeAll("ghost", "tenant-ghost")
	observeAll("default", "default")
	if n := seriesWith(t, "ghost", "tenant-ghost", "default"); n != 0 {
		t.Errorf("%d series for tenants that do not exist, want none", n)
	}

	observeAll("shop", "tenant-shop")
	observeAll("blog", "tenant-blog")
	want := len(tenantVecs()) + 2*len(tenantReconciles()) // a counter and a histogram each
	if n := seriesWith(t, "shop", "tenant-shop"); n != want {
		t.Errorf("%d series for tenant shop, want %d (one per metric)", n, want)
	}
	if got := testutil.ToFloat64(ManagerPortsAllocated.GaugeVec.WithLabelValues("tenant-shop")); got != 3 {
		t.Errorf("ports allocated for tenant-shop = %v, want 3", got)
	}

	delete(known, "shop")
	delete(known, "tenant-shop")
	ForgetTenant("shop", "tenant-shop")
	if n := seriesWith(t, "shop", "tenant-shop"); n != 0 {
		t.Errorf("%d series left for deleted tenant shop, want none", n)
	}
	// A late observation (a reconcile that was running) does not bring them back.
	observeAll("shop", "tenant-shop")
	if n := seriesWith(t, "shop", "tenant-shop"); n != 0 {
		t.Errorf("%d series for deleted tenant shop after a late observation, want none", n)
	}
	if n := seriesWith(t, "blog", "tenant-blog"); n != want {
		t.Errorf("%d series for tenant blog, want %d: forgetting shop removed others' series", n, want)
	}
	ForgetTenant("blog", "tenant-blog")
}
