package loadbalancer

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/manager/planner"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/quota"
)

// FieldOwner is the server-side apply field manager of the hub Services (the planner applies
// them) and of the hostname Certificates.
const FieldOwner = planner.LoadBalancerFieldOwner

// ConditionReady is the condition of a LoadBalancer that says whether its hub Service exposes
// every port with an address.
const ConditionReady = "Ready"

// Reasons of the Ready condition.
const (
	// ReasonAddressAssigned: every port has a listener port and the hub Service an address.
	ReasonAddressAssigned = "AddressAssigned"
	// ReasonNoExternalAddress: every port has a listener port and the hub Service is of type
	// ClusterIP or NodePort, as spec.type asks: such a Service gets no external address, and
	// the LoadBalancer (and the tenant Service) shows none.
	ReasonNoExternalAddress = "NoExternalAddress"
	// ReasonUnsupportedType: spec.type is none of ClusterIP, NodePort and LoadBalancer
	// (ExternalName): the hub Service is of type ClusterIP.
	ReasonUnsupportedType = "UnsupportedType"
	// ReasonNodePortsNotAllowed: spec.type is NodePort and the tenant's
	// spec.loadBalancer.allocateNodePorts is off: the hub Service is of type ClusterIP and
	// takes no hub NodePort.
	ReasonNodePortsNotAllowed = "NodePortsNotAllowed"
	// ReasonWaitingForAddress: the hub Service exists but has no address yet.
	ReasonWaitingForAddress = "WaitingForAddress"
	// ReasonPortsExhausted: the listener port range has no room for the LoadBalancer's ports.
	ReasonPortsExhausted = "PortsExhausted"
	// ReasonLoadBalancingDisabled: the Tenant or Config disables load balancing; the hub
	// Service is removed (allocated ports are kept).
	ReasonLoadBalancingDisabled = "LoadBalancingDisabled"
	// ReasonNoPorts: the LoadBalancer asks for no ports, so there is no hub Service.
	ReasonNoPorts = "NoPorts"
	// ReasonInvalidPorts: some ports repeat another one and were left out.
	ReasonInvalidPorts = "InvalidPorts"
	// ReasonServiceFailed: the API server rejected the hub Service.
	ReasonServiceFailed = "ServiceFailed"
	// ReasonIPFamilyUnavailable: the hub's API server refused the IP families the
	// LoadBalancer asks for (spec.ipFamilyPolicy RequireDualStack, or a family in
	// spec.ipFamilies, on a hub whose Service range lacks that family).
	ReasonIPFamilyUnavailable = "IPFamilyUnavailable"
	// ReasonQuotaExceeded: the tenant's limits (spec.limits of the Tenant or Config) refuse
	// the LoadBalancer (quota.Admit); it has no hub Service and holds no listener ports.
	ReasonQuotaExceeded = quota.ReasonQuotaExceeded
)

// lbPort is one port a LoadBalancer exposes, with its allocation key.
type lbPort = quota.LoadBalancerPort

// planPorts returns the LoadBalancer's ports (quota.LoadBalancerPorts: the same ports the
// tenant's limits count).
func planPorts(lb *kubelbv1alpha1.LoadBalancer) ([]lbPort, []string) {
	return quota.LoadBalancerPorts(lb)
}

// allocated returns the ports that have a listener port, in order.
func allocated(ports []lbPort, alloc map[portalloc.Key]int32) []lbPort {
	out := make([]lbPort, 0, len(ports))
	for _, p := range ports {
		if alloc[p.Key] != 0 {
			out = append(out, p)
		}
	}
	return out
}

// hubFamilies are the IP families the hub Service got (nil when there is none).
func hubFamilies(svc *corev1.Service) []corev1.IPFamily {
	if svc == nil || len(svc.Spec.IPFamilies) == 0 {
		return nil
	}
	return slices.Clone(svc.Spec.IPFamilies)
}

// nodePort is the NodePort of the hub Service's port (same number and protocol, the keys of
// a Service's ports) for p; 0 when svc is nil or the port has none.
func nodePort(svc *corev1.Service, p lbPort) int32 {
	if svc == nil {
		return 0
	}
	for _, sp := range svc.Spec.Ports {
		if sp.Port == p.Port && kubelbv1alpha1.ProtocolOrTCP(sp.Protocol) == p.Protocol {
			return sp.NodePort
		}
	}
	return 0
}

// statusPorts records the allocation of each allocated port. The name is the spec port's
// own (possibly empty) name, so that the status keys back to the same allocation. nodePorts
// is the hub Service whose NodePorts the status shows (nil: none).
func statusPorts(ports []lbPort, alloc map[portalloc.Key]int32, nodePorts *corev1.Service) []kubelbv1alpha1.ServicePort {
	if len(ports) == 0 {
		return nil
	}
	out := make([]kubelbv1alpha1.ServicePort, 0, len(ports))
	for _, p := range ports {
		out = append(out, kubelbv1alpha1.ServicePort{
			ServicePort: corev1.ServicePort{
				Name:       p.Name,
				Protocol:   p.Protocol,
				Port:       p.Port,
				TargetPort: intstr.FromInt32(alloc[p.Key]),
				NodePort:   nodePort(nodePorts, p),
			},
			UpstreamTargetPort: alloc[p.Key],
		})
	}
	return out
}

// outcome is what a reconcile found; readyCondition turns it into the Ready condition.
type outcome struct {
	disabled   bool
	quota      string // why the tenant's limits refuse the LoadBalancer; "" when admitted
	noPorts    bool
	serviceErr error
	// familyErr is the API server's refusal of the IP families the LoadBalancer asks for.
	familyErr  error
	exhausted  error
	problems   []string
	hasAddress bool
	// addressPending is why kubelb's own address provider (--address-provider) keeps the hub
	// Service without an address (its condition kubelb.k8c.io/AddressAssigned); "" when
	// none says.
	addressPending string
	// lbClass is the load-balancer class the hub Service asks for (nil: none, the hub's
	// default implementation); hubService is its name.
	lbClass    *string
	hubService string
	// serviceType is the hub Service's type (hubServiceType); "" when it is not known (no
	// hub Service is made).
	serviceType corev1.ServiceType
	// unsupportedType is the LoadBalancer's spec.type when hubServiceType does not support it.
	unsupportedType corev1.ServiceType
	hostname        hostnameState
	// ipMode of the addresses in status (translate.IPMode).
	ipMode corev1.LoadBalancerIPMode
}

// readyCondition is the Ready condition for an outcome, the most important problem first.
func readyCondition(o outcome, generation int64) metav1.Condition {
	c := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: generation}
	switch {
	case o.disabled:
		c.Reason, c.Message = ReasonLoadBalancingDisabled, "Load balancing is disabled for this tenant; the hub Service was removed and its listener ports freed."
	case o.quota != "":
		c.Reason, c.Message = ReasonQuotaExceeded, "Not served: "+o.quota+". It has no hub Service and holds no listener ports."
	case o.noPorts:
		c.Reason, c.Message = ReasonNoPorts, "The LoadBalancer has no ports to expose."
	case o.familyErr != nil:
		c.Reason, c.Message = ReasonIPFamilyUnavailable, "The hub cannot give the IP families asked for (spec.ipFamilyPolicy, spec.ipFamilies; the tenant Service's): "+
			o.familyErr.Error()+". Ask for PreferDualStack, which gets what the hub has, or the hub's family, or have the hub's Service range configured for the family."
	case o.serviceErr != nil:
		c.Reason, c.Message = ReasonServiceFailed, "The hub Service was rejected: "+o.serviceErr.Error()
	case o.exhausted != nil:
		c.Reason, c.Message = ReasonPortsExhausted, "No listener port is left for this LoadBalancer: "+o.exhausted.Error()
	case o.unsupportedType == corev1.ServiceTypeNodePort:
		c.Reason, c.Message = ReasonNodePortsNotAllowed, "spec.type NodePort takes hub NodePorts, which this tenant may not take (spec.loadBalancer.allocateNodePorts of the Tenant or Config is false); "+
			"the hub Service is of type ClusterIP and gets no NodePort. Use spec.type LoadBalancer, or ask the platform team to allow NodePorts."
	case o.unsupportedType != "":
		c.Reason, c.Message = ReasonUnsupportedType, "spec.type "+string(o.unsupportedType)+
			" is not supported (ClusterIP, NodePort or LoadBalancer); the hub Service is of type ClusterIP and gets no external address."
	case len(o.problems) > 0:
		c.Reason, c.Message = ReasonInvalidPorts, "Ports left out: "+strings.Join(o.problems, "; ")
	case o.serviceType == corev1.ServiceTypeClusterIP:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonNoExternalAddress,
			"No external address for spec.type ClusterIP: the hub Service is of type ClusterIP, reachable inside the hub and through the LoadBalancer's hostname when it has one. Set spec.type LoadBalancer for an address."
	case o.serviceType == corev1.ServiceTypeNodePort:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonNoExternalAddress,
			"No external address for spec.type NodePort: the hub Service is of type NodePort, reachable on the hub's nodes at the nodePorts of status.service.ports. Set spec.type LoadBalancer for an address."
	case !o.hasAddress && o.addressPending != "":
		c.Reason, c.Message = ReasonWaitingForAddress, "The hub Service has no address: "+o.addressPending
	case !o.hasAddress:
		c.Reason, c.Message = ReasonWaitingForAddress, waitingMessage(o)
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonAddressAssigned, "The hub Service has an address."
	}
	return c
}

// waitingMessage says what a hub Service without an address waits for: which load-balancer
// class, and who should serve it.
func waitingMessage(o outcome) string {
	svc := "the hub Service"
	if o.hubService != "" {
		svc = "hub Service " + o.hubService
	}
	if o.lbClass != nil {
		return fmt.Sprintf("Waiting for %s to get an address: it asks for load-balancer class %q, and nothing in the hub cluster has given it one yet. "+
			"The hub's platform team should run the implementation of that class, or set spec.loadBalancer.class of the Tenant or Config to a class that is served.", svc, *o.lbClass)
	}
	return "Waiting for " + svc + " to get an address: it names no load-balancer class, so the hub cluster's default implementation (a cloud provider, MetalLB, kube-vip, ...) should give it one, and none has yet. " +
		"The hub's platform team should install one, or start the manager with --address-provider=node-ip or ipam (docs/modes.md)."
}

// setHostnameStatus sets status.hostname and the Hostname condition (removed when the
// LoadBalancer has no hostname). The condition's transition time is now only when its status
// changes.
func setHostnameStatus(st *kubelbv1alpha1.LoadBalancerStatus, h hostnameState, generation int64, now metav1.Time) {
	st.Hostname = hostnameStatus(h)
	c := hostnameCondition(h, generation)
	if c == nil {
		meta.RemoveStatusCondition(&st.Conditions, ConditionHostname)
		return
	}
	c.LastTransitionTime = now
	meta.SetStatusCondition(&st.Conditions, *c)
}

// nextStatus is the status the LoadBalancer should have: the hub Service's address (svc may
// be nil) when the hub Service is of type LoadBalancer, its NodePorts when it is of type
// NodePort or LoadBalancer (typ, the type the hub Service should have: an address or
// NodePorts of a Service that is still of another type are not shown), the IP families the
// hub Service got (whatever its type), the allocated ports and the Ready condition. The condition's transition time is now only when its status
// changes.
func nextStatus(lb *kubelbv1alpha1.LoadBalancer, svc *corev1.Service, typ corev1.ServiceType, ports []lbPort, alloc map[portalloc.Key]int32,
	cond metav1.Condition, now metav1.Time) kubelbv1alpha1.LoadBalancerStatus {
	st := *lb.Status.DeepCopy()
	st.LoadBalancer = corev1.LoadBalancerStatus{}
	families := hubFamilies(svc) // whatever its type: Envoy serves its cluster IPs too
	if svc != nil && (svc.Spec.Type != typ || typ == corev1.ServiceTypeClusterIP) {
		svc = nil
	}
	if svc != nil && typ == corev1.ServiceTypeLoadBalancer {
		st.LoadBalancer = *svc.Status.LoadBalancer.DeepCopy()
	}
	st.Service.Ports = statusPorts(allocated(ports, alloc), alloc, svc)
	st.Service.IPFamilies = families
	cond.LastTransitionTime = now
	meta.SetStatusCondition(&st.Conditions, cond)
	st.ObservedGeneration = lb.Generation
	return st
}
