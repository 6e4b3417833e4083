package ccm

import (
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/nodeip"
)

// LabelUseAsLoadBalancer is nodeip.LabelUseAsLoadBalancer: the node label of the node sets,
// and, on a Service, the annotation that picks one.
const LabelUseAsLoadBalancer = nodeip.LabelUseAsLoadBalancer

// DefaultReservedPorts is nodeip.DefaultReservedPorts (the default of --reserved-ports).
const DefaultReservedPorts = nodeip.DefaultReservedPorts

// Reasons of the standalone node-IP mode's Events (see internal/nodeip).
const (
	// ReasonNoLoadBalancerNodes (Warning): no Ready node carries the node-set label the
	// Service asks for; it stays pending.
	ReasonNoLoadBalancerNodes = nodeip.ReasonNoLoadBalancerNodes
	// ReasonPortConflict (Warning): a port of the Service is reserved, or held on one of its
	// node addresses by a Service created earlier (named in the note); it stays pending.
	ReasonPortConflict = nodeip.ReasonPortConflict
	// ReasonInvalidNodeSet (Warning): the Service's kubelb.k8c.io/use-as-loadbalancer
	// annotation is not a valid label value.
	ReasonInvalidNodeSet = nodeip.ReasonInvalidNodeSet
)

// SetupStandalone adds the controllers of the standalone node-IP mode to mgr (a manager on
// the cluster itself; there is no hub): the node-IP controller (internal/nodeip) for the
// Services of the ccm's class, the node set chosen by each Service's annotation.
func SetupStandalone(mgr ctrl.Manager, opts Options) error {
	return nodeip.Setup(mgr, nodeip.Options{
		Name:     "ccm-node-ip",
		Owns:     func(svc *corev1.Service) bool { return ServiceClass(svc, opts.UseLoadBalancerClass) == OurClass },
		NodeSet:  nodeip.StandaloneNodeSet,
		Reserved: opts.ReservedPorts,
		NAT:      opts.NodeIPNAT,
		Metrics:  metrics.CCMNodeIP,
		Observe:  func(serving int) { metrics.CCMNodes.Set(float64(serving)) },
	})
}
