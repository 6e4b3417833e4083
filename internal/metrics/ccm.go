package metrics

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the ccm.
var (
	CCMServiceReconcile   = newReconcile("kubelb_ccm_service", "tenant Services", true)
	CCMIngressReconcile   = newReconcile("kubelb_ccm_ingress", "tenant Ingresses", true)
	CCMGatewayReconcile   = newReconcile("kubelb_ccm_gateway", "tenant Gateways", true)
	CCMHTTPRouteReconcile = newReconcile("kubelb_ccm_httproute", "tenant HTTPRoutes", true)
	CCMGRPCRouteReconcile = newReconcile("kubelb_ccm_grpcroute", "tenant GRPCRoutes", true)
	CCMNodeReconcile      = newReconcile("kubelb_ccm_node", "tenant Nodes", false)

	CCMManagedServices = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_ccm_managed_services_total",
		Help: "LoadBalancer Services the ccm mirrors into the hub, per namespace.",
	}, []string{"namespace"})
	CCMManagedIngresses = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_ccm_managed_ingresses_total",
		Help: "Ingresses the ccm mirrors into the hub, per namespace.",
	}, []string{"namespace"})
	CCMManagedGateways = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_ccm_managed_gateways_total",
		Help: "Gateways the ccm mirrors into the hub, per namespace.",
	}, []string{"namespace"})
	CCMManagedHTTPRoutes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_ccm_managed_httproutes_total",
		Help: "HTTPRoutes the ccm mirrors into the hub, per namespace.",
	}, []string{"namespace"})
	CCMManagedGRPCRoutes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_ccm_managed_grpcroutes_total",
		Help: "GRPCRoutes the ccm mirrors into the hub, per namespace.",
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
	for _, r := range []*Reconcile{CCMServiceReconcile, CCMIngressReconcile, CCMGatewayReconcile,
		CCMHTTPRouteReconcile, CCMGRPCRouteReconcile, CCMNodeReconcile} {
		register(r.collectors()...)
	}
	register(CCMManagedServices, CCMManagedIngresses, CCMManagedGateways, CCMManagedHTTPRoutes,
		CCMManagedGRPCRoutes, CCMNodes, CCMClusterConnected, CCMOperations, CCMOperationDuration)
}
