package metrics

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the ccm.
var (
	CCMServiceReconcile = newReconcile("kubelb_ccm_service", "tenant Services", true)
	CCMNodeReconcile    = newReconcile("kubelb_ccm_node", "tenant Nodes", false)
	// CCMServiceStatusReconcile counts the copies of hub status onto tenant Services.
	CCMServiceStatusReconcile = newReconcile("kubelb_ccm_service_status", "tenant Service status copies", true)

	// Layer 7 sources (internal/ccm/source): one reconcile metric per kind, namespaced.
	CCMIngressReconcile     = newReconcile("kubelb_ccm_ingress", "tenant Ingresses", true)
	CCMGatewayReconcile     = newReconcile("kubelb_ccm_gateway", "tenant Gateways", true)
	CCMHTTPRouteReconcile   = newReconcile("kubelb_ccm_httproute", "tenant HTTPRoutes", true)
	CCMGRPCRouteReconcile   = newReconcile("kubelb_ccm_grpcroute", "tenant GRPCRoutes", true)
	CCMTLSRouteReconcile    = newReconcile("kubelb_ccm_tlsroute", "tenant TLSRoutes", true)
	CCMTCPRouteReconcile    = newReconcile("kubelb_ccm_tcproute", "tenant TCPRoutes", true)
	CCMUDPRouteReconcile    = newReconcile("kubelb_ccm_udproute", "tenant UDPRoutes", true)
	CCMListenerSetReconcile = newReconcile("kubelb_ccm_listenerset", "tenant ListenerSets", true)
	// CCMGatewayClassReconcile counts reconciles of GatewayClasses (the kubelb class and the
	// Accepted condition on classes of kubelb's controllerName).
	CCMGatewayClassReconcile = newReconcile("kubelb_ccm_gatewayclass", "tenant GatewayClasses", false)
	// CCMEndpointSliceReconcile counts reconciles of the EndpointSlices of NodePort twins of
	// Services without a selector.
	CCMEndpointSliceReconcile = newReconcile("kubelb_ccm_endpointslice", "the EndpointSlices of NodePort twins", true)

	CCMManagedIngresses = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_ccm_managed_ingresses_total",
		Help: "Tenant Ingresses the ccm mirrors into the hub as Routes, per namespace.",
	}, []string{"namespace"})
	CCMManagedGateways = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_ccm_managed_gateways_total",
		Help: "Tenant Gateways the ccm mirrors into the hub as Routes, per namespace.",
	}, []string{"namespace"})
	CCMManagedHTTPRoutes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_ccm_managed_httproutes_total",
		Help: "Tenant HTTPRoutes the ccm mirrors into the hub as Routes, per namespace.",
	}, []string{"namespace"})
	CCMManagedGRPCRoutes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_ccm_managed_grpcroutes_total",
		Help: "Tenant GRPCRoutes the ccm mirrors into the hub as Routes, per namespace.",
	}, []string{"namespace"})
	CCMManagedTLSRoutes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_ccm_managed_tlsroutes_total",
		Help: "Tenant TLSRoutes the ccm mirrors into the hub as Routes, per namespace.",
	}, []string{"namespace"})
	CCMManagedTCPRoutes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_ccm_managed_tcproutes_total",
		Help: "Tenant TCPRoutes the ccm mirrors into the hub as Routes, per namespace.",
	}, []string{"namespace"})
	CCMManagedUDPRoutes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_ccm_managed_udproutes_total",
		Help: "Tenant UDPRoutes the ccm mirrors into the hub as Routes, per namespace.",
	}, []string{"namespace"})
	CCMManagedListenerSets = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_ccm_managed_listenersets_total",
		Help: "Tenant ListenerSets the ccm mirrors into the hub as Routes, per namespace.",
	}, []string{"namespace"})

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
	CCMHubFieldsLeftOut = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelb_ccm_hub_fields_left_out_total",
		Help: "Objects the ccm prepared for the hub from which it left out a field the hub's CRDs do not declare (a KubeLB CE or older kubelb hub), by kind and field path.",
	}, []string{"kind", "field"})
	CCMOperationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kubelb_ccm_kubelb_operation_duration_seconds",
		Help:    "Time taken by requests of the ccm to the hub API server.",
		Buckets: durationBuckets,
	}, []string{"operation"})
)

// ccmReconciles are the reconcile metrics of the ccm, in declaration order.
func ccmReconciles() []*Reconcile {
	return []*Reconcile{CCMServiceReconcile, CCMServiceStatusReconcile, CCMNodeReconcile,
		CCMIngressReconcile, CCMGatewayReconcile, CCMHTTPRouteReconcile, CCMGRPCRouteReconcile,
		CCMTLSRouteReconcile, CCMTCPRouteReconcile, CCMUDPRouteReconcile, CCMListenerSetReconcile, CCMGatewayClassReconcile, CCMEndpointSliceReconcile, CCMSecretReconcile,
		CCMIPAM.Reconcile}
}

// ccmGauges are the other metrics of the ccm, in declaration order.
func ccmGauges() []prometheus.Collector {
	out := []prometheus.Collector{CCMManagedIngresses, CCMManagedGateways, CCMManagedHTTPRoutes, CCMManagedGRPCRoutes,
		CCMManagedTLSRoutes, CCMManagedTCPRoutes, CCMManagedUDPRoutes, CCMManagedListenerSets,
		CCMManagedServices, CCMNodes, CCMClusterConnected, CCMOperations, CCMOperationDuration, CCMManagedSecrets, CCMHubFieldsLeftOut}
	return append(append(out, CCMNodeIP.gauges()...), CCMIPAM.gauges()...)
}

// RegisterCCM registers the ccm's metrics; call it once at start-up.
func RegisterCCM() {
	for _, r := range ccmReconciles() {
		register(r.collectors()...)
	}
	register(ccmGauges()...)
}

// Metrics of the ccm's Secret synchronizer (internal/ccm/secrets).
var (
	CCMSecretReconcile = newReconcile("kubelb_ccm_secret", "tenant Secrets mirrored as SyncSecrets", true)
	CCMManagedSecrets  = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubelb_ccm_managed_secrets_total",
		Help: "Secrets the ccm mirrors into the hub as SyncSecrets, per namespace.",
	}, []string{"namespace"})
)
