package metrics

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the manager.
var (
	ManagerLoadBalancerReconcile = newReconcile("kubelb_manager_loadbalancer", "LoadBalancers", true)
	ManagerEnvoyCPReconcile      = newReconcile("kubelb_manager_envoycp", "tenant Envoy snapshots", true)
	ManagerTenantReconcile       = newReconcile("kubelb_manager_tenant", "Tenants", false)
	ManagerStatusReconcile       = newReconcile("kubelb_manager_status", "the Programmed conditions of a tenant's objects", true)
	ManagerEnvoyFleetReconcile   = newReconcile("kubelb_manager_envoyfleet", "tenant Envoy fleets", true)
	ManagerRouteReconcile        = newReconcile("kubelb_manager_route", "Routes", true)

	ManagerLoadBalancers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_manager_loadbalancers_total",
		Help: "LoadBalancers on the hub, per tenant.",
	}, []string{"tenant"})
	ManagerRoutes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_manager_routes_total",
		Help: "Routes on the hub, per tenant.",
	}, []string{"tenant"})
	ManagerSnapshotUpdates = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelb_manager_envoycp_snapshot_updates_total",
		Help: "Snapshots pushed to a tenant's Envoy fleet (identical snapshots are not pushed).",
	}, []string{"tenant"})
	ManagerSnapshotClusters = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_manager_envoycp_clusters",
		Help: "Clusters in the current snapshot of a tenant.",
	}, []string{"tenant"})
	ManagerSnapshotListeners = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_manager_envoycp_listeners",
		Help: "Listeners in the current snapshot of a tenant.",
	}, []string{"tenant"})
	ManagerSnapshotEndpoints = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_manager_envoycp_endpoints",
		Help: "Endpoints in the current snapshot of a tenant.",
	}, []string{"tenant"})
	ManagerSnapshotBuildDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kubelb_manager_envoycp_snapshot_build_duration_seconds",
		Help:    "Time taken to translate a tenant's state into an Envoy snapshot.",
		Buckets: durationBuckets,
	}, []string{"tenant"})
	ManagerXDSConnectedProxies = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_manager_envoycp_connected_proxies",
		Help: "Envoy proxies with an open xDS stream, per tenant.",
	}, []string{"tenant"})
	ManagerXDSNacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelb_manager_envoycp_nacks_total",
		Help: "xDS responses rejected by Envoy, per tenant and type URL.",
	}, []string{"tenant", "type_url"})
	ManagerEnvoyProxies = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_manager_envoy_proxies_total",
		Help: "Envoy proxies the manager runs (desired replicas of the tenant's fleet).",
	}, []string{"tenant"})
	ManagerTenants = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubelb_manager_tenants_total",
		Help: "Tenants on the hub.",
	})
	ManagerPortsAllocated = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_manager_ports_allocated",
		Help: "Envoy listener ports allocated, per tenant.",
	}, []string{"tenant"})
	ManagerPortsFree = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubelb_manager_ports_free",
		Help: "Envoy listener ports still free in the allocation range.",
	})
)

// RegisterManager registers the manager's metrics; call it once at start-up.
func RegisterManager() {
	for _, r := range []*Reconcile{ManagerLoadBalancerReconcile, ManagerEnvoyCPReconcile, ManagerTenantReconcile, ManagerStatusReconcile, ManagerEnvoyFleetReconcile, ManagerSyncSecretReconcile, ManagerRouteReconcile} {
		register(r.collectors()...)
	}
	register(ManagerLoadBalancers, ManagerRoutes, ManagerSnapshotUpdates, ManagerSnapshotClusters,
		ManagerSnapshotListeners, ManagerSnapshotEndpoints, ManagerSnapshotBuildDuration,
		ManagerXDSConnectedProxies, ManagerXDSNacks, ManagerEnvoyProxies, ManagerTenants,
		ManagerPortsAllocated, ManagerPortsFree)
}

// Metrics of the manager's SyncSecret controller (internal/manager/syncsecret).
var ManagerSyncSecretReconcile = newReconcile("kubelb_manager_syncsecret", "SyncSecrets", true)
