package metrics

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the manager.
var (
	ManagerLoadBalancerReconcile = newReconcile("kubelb_manager_loadbalancer", "LoadBalancers", true).perTenant()
	ManagerEnvoyCPReconcile      = newReconcile("kubelb_manager_envoycp", "tenant Envoy snapshots", true).perTenant()
	ManagerTenantReconcile       = newReconcile("kubelb_manager_tenant", "Tenants", false)
	ManagerStatusReconcile       = newReconcile("kubelb_manager_status", "the Programmed conditions of a tenant's objects", true).perTenant()
	ManagerEnvoyFleetReconcile   = newReconcile("kubelb_manager_envoyfleet", "tenant Envoy fleets", true).perTenant()
	ManagerRouteReconcile        = newReconcile("kubelb_manager_route", "Routes", true).perTenant()

	ManagerLoadBalancers = &TenantGaugeVec{prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_manager_loadbalancers_total",
		Help: "LoadBalancers on the hub, per tenant.",
	}, []string{"tenant"})}
	ManagerRoutes = &TenantGaugeVec{prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_manager_routes_total",
		Help: "Routes on the hub, per tenant.",
	}, []string{"tenant"})}
	ManagerSnapshotUpdates = &TenantCounterVec{prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelb_manager_envoycp_snapshot_updates_total",
		Help: "Snapshots pushed to a tenant's Envoy fleet (identical snapshots are not pushed).",
	}, []string{"tenant"})}
	ManagerSnapshotClusters = &TenantGaugeVec{prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_manager_envoycp_clusters",
		Help: "Clusters in the current snapshot of a tenant.",
	}, []string{"tenant"})}
	ManagerSnapshotListeners = &TenantGaugeVec{prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_manager_envoycp_listeners",
		Help: "Listeners in the current snapshot of a tenant.",
	}, []string{"tenant"})}
	ManagerSnapshotEndpoints = &TenantGaugeVec{prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_manager_envoycp_endpoints",
		Help: "Endpoints in the current snapshot of a tenant.",
	}, []string{"tenant"})}
	ManagerLoadBalancerBackends = &TenantGaugeVec{prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_manager_loadbalancer_backends",
		Help: "Endpoints of a LoadBalancer by what the tenant's Envoy proxies found when they health-checked them (state: reachable, unreachable); set by the leader.",
	}, []string{"tenant", "loadbalancer", "state"})}
	ManagerSnapshotBuildDuration = &TenantHistogramVec{prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kubelb_manager_envoycp_snapshot_build_duration_seconds",
		Help:    "Time taken to translate a tenant's state into an Envoy snapshot.",
		Buckets: durationBuckets,
	}, []string{"tenant"})}
	ManagerXDSConnectedProxies = &TenantGaugeVec{prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_manager_envoycp_connected_proxies",
		Help: "Envoy proxies with an open xDS stream, per tenant.",
	}, []string{"tenant"})}
	ManagerXDSNacks = &TenantCounterVec{prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelb_manager_envoycp_nacks_total",
		Help: "xDS responses rejected by Envoy, per tenant and type URL.",
	}, []string{"tenant", "type_url"})}
	ManagerXDSSentBytes = &TenantCounterVec{prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelb_manager_envoycp_xds_sent_bytes_total",
		Help: "Bytes of the xDS responses and health check specifiers sent to Envoy proxies (serialized, before TLS), per tenant.",
	}, []string{"tenant"})}
	ManagerHealthSpecifiers = &TenantCounterVec{prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelb_manager_envoycp_health_specifiers_sent_total",
		Help: "Health check specifiers sent to Envoy proxies on health discovery, per tenant: one when a proxy connects, then one each time what it is asked to check changes.",
	}, []string{"tenant"})}
	XDSStreamsRefused = &TenantCounterVec{prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelb_xds_streams_refused_total",
		Help: "xDS streams the server refused by its limits, per tenant (that of the client certificate) and reason: " +
			"streams_per_connection, streams_per_tenant or unknown_type_url.",
	}, []string{"tenant", "reason"})}
	XDSRequestsDelayed = &TenantCounterVec{prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelb_xds_requests_delayed_total",
		Help: "xDS requests delayed by the request rate limits (per stream and per tenant), per tenant.",
	}, []string{"tenant"})}
	ManagerEnvoyProxies = &TenantGaugeVec{prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_manager_envoy_proxies_total",
		Help: "Envoy proxies the manager runs (desired replicas of the tenant's fleet).",
	}, []string{"tenant"})}
	ManagerTenants = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubelb_manager_tenants_total",
		Help: "Tenants on the hub.",
	})
	ManagerPortsAllocated = &TenantGaugeVec{prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_manager_ports_allocated",
		Help: "Envoy listener ports allocated, per tenant.",
	}, []string{"tenant"})}
	ManagerPortsFree = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubelb_manager_ports_free",
		Help: "Envoy listener ports still free in the allocation range.",
	})
	ManagerTenantLimit = &TenantGaugeVec{prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_manager_tenant_limit",
		Help: "A tenant's effective limit (its Tenant's spec.limits, else the Config's, else the default), per limit: loadBalancers, routes, listenerPorts, nodePorts, objectBytes.",
	}, []string{"tenant", "limit"})}
	ManagerTenantLimitUsage = &TenantGaugeVec{prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_manager_tenant_limit_usage",
		Help: "What a tenant's LoadBalancers and Routes ask for of each limit, admitted or not (above the limit the newest are refused: QuotaExceeded).",
	}, []string{"tenant", "limit"})}
)

// RegisterManager registers the manager's metrics; call it once at start-up.
func RegisterManager() {
	for _, r := range managerReconciles() {
		register(r.collectors()...)
	}
	register(managerGauges()...)
}

// managerReconciles are the reconcile metrics of the manager, in declaration order.
func managerReconciles() []*Reconcile {
	return []*Reconcile{ManagerLoadBalancerReconcile, ManagerEnvoyCPReconcile, ManagerTenantReconcile, ManagerStatusReconcile,
		ManagerEnvoyFleetReconcile, ManagerSyncSecretReconcile, ManagerRouteReconcile, ManagerNodeIP.Reconcile, ManagerIPAM.Reconcile,
		ManagerOIDCKeysReconcile}
}

// managerGauges are the other metrics of the manager, in declaration order (the vectors
// themselves: the Tenant*Vec wrappers only filter what is observed).
func managerGauges() []prometheus.Collector {
	out := []prometheus.Collector{ManagerLoadBalancers.GaugeVec, ManagerRoutes.GaugeVec, ManagerSnapshotUpdates.CounterVec,
		ManagerSnapshotClusters.GaugeVec, ManagerSnapshotListeners.GaugeVec, ManagerSnapshotEndpoints.GaugeVec,
		ManagerLoadBalancerBackends.GaugeVec, ManagerSnapshotBuildDuration.HistogramVec, ManagerXDSConnectedProxies.GaugeVec, ManagerXDSNacks.CounterVec,
		ManagerXDSSentBytes.CounterVec, ManagerHealthSpecifiers.CounterVec, XDSStreamsRefused.CounterVec, XDSRequestsDelayed.CounterVec, ManagerEnvoyProxies.GaugeVec, ManagerTenants, ManagerPortsAllocated.GaugeVec, ManagerPortsFree,
		ManagerTenantLimit.GaugeVec, ManagerTenantLimitUsage.GaugeVec}
	return append(append(out, ManagerNodeIP.gauges()...), ManagerIPAM.gauges()...)
}

// tenantVecs are the manager's vectors labelled "tenant", which ForgetTenant clears.
func tenantVecs() []partialDeleter {
	return []partialDeleter{ManagerLoadBalancers, ManagerRoutes, ManagerSnapshotUpdates, ManagerSnapshotClusters,
		ManagerSnapshotListeners, ManagerSnapshotEndpoints, ManagerLoadBalancerBackends, ManagerSnapshotBuildDuration, ManagerXDSConnectedProxies,
		ManagerXDSNacks, ManagerXDSSentBytes, ManagerHealthSpecifiers, XDSStreamsRefused, XDSRequestsDelayed, ManagerEnvoyProxies, ManagerPortsAllocated,
		ManagerTenantLimit, ManagerTenantLimitUsage}
}

// tenantReconciles are the reconcile metrics labelled by tenant namespace.
func tenantReconciles() []*Reconcile {
	var out []*Reconcile
	for _, r := range managerReconciles() {
		if r.tenantScoped {
			out = append(out, r)
		}
	}
	return out
}

// Metrics of the manager's SyncSecret controller (internal/manager/syncsecret).
var ManagerSyncSecretReconcile = newReconcile("kubelb_manager_syncsecret", "SyncSecrets", true).perTenant()

// Metrics of the manager's OIDC cookie keys controller (internal/manager/oidckeys), by tenant
// namespace.
var ManagerOIDCKeysReconcile = newReconcile("kubelb_manager_oidckeys", "the tenants' OIDC cookie keys", true).perTenant()
