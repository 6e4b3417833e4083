package metrics

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the ccm.
// The Layer 7 controllers add kubelb_ccm_{ingress,gateway,httproute,grpcroute}_reconcile_total/_duration_seconds and kubelb_ccm_managed_{ingresses,gateways,httproutes,grpcroutes}_total when they land.
var (
	CCMServiceReconcile = newReconcile("kubelb_ccm_service", "tenant Services", true)
	CCMNodeReconcile    = newReconcile("kubelb_ccm_node", "tenant Nodes", false)
	// CCMServiceStatusReconcile counts the copies of hub status onto tenant Services.
	CCMServiceStatusReconcile = newReconcile("kubelb_ccm_service_status", "tenant Service status copies", true)

	CCMManagedServices = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_ccm_managed_services_total",
		Help: "LoadBalancer Services the ccm mirrors into the hub, per namespace.",
	}, []string{"namespace"})
	CCMNodes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubelb_ccm_nodes_total",
		Help: "Ready nodes whose addresses the ccm publishes to the hub.",
	})
	CCMClusterConnected = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubelb_ccm_kubelb_cluster_connected",
		Help: "1 when the last request of the ccm to the hub API server succeeded, else 0.",
	})
	CCMOperations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelb_ccm_kubelb_operations_total",
		Help: "Requests of the ccm to the hub API server, by operation and result.",
	}, []string{"operation", "result"})
	CCMOperationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kubelb_ccm_kubelb_operation_duration_seconds",
		Help:    "Time taken by requests of the ccm to the hub API server.",
		Buckets: durationBuckets,
	}, []string{"operation"})
)

// RegisterCCM registers the ccm's metrics; call it once at start-up.
func RegisterCCM() {
	for _, r := range []*Reconcile{CCMServiceReconcile, CCMServiceStatusReconcile, CCMNodeReconcile, CCMSecretReconcile} {
		register(r.collectors()...)
	}
	register(CCMManagedServices, CCMNodes, CCMClusterConnected, CCMOperations, CCMOperationDuration, CCMManagedSecrets)
}

// Metrics of the ccm's Secret synchronizer (internal/ccm/secrets).
var (
	CCMSecretReconcile = newReconcile("kubelb_ccm_secret", "tenant Secrets mirrored as SyncSecrets", true)
	CCMManagedSecrets  = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_ccm_managed_secrets_total",
		Help: "Secrets the ccm mirrors into the hub as SyncSecrets, per namespace.",
	}, []string{"namespace"})
)
