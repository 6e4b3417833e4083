package manager

import (
	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

// HubNodePorts makes a hub Service of type LoadBalancer being applied (spec, its ports
// already set) follow the tenant's spec.loadBalancer.allocateNodePorts (allocate, from
// settings.Tenant.AllocateNodePorts): it sets allocateLoadBalancerNodePorts, and when
// NodePorts are not to be allocated, every port of spec that still has a NodePort in
// existing (the hub Service as it is, nil when there is none; the same port and protocol) is
// applied with nodePort 0. The API server keeps NodePorts allocated before the switch was
// turned off, and nobody owns them: only asking for 0 gives them back. When allocate is true
// the ports carry no nodePort, and the API server allocates them. The hub Services of
// LoadBalancers and of Routes (Gateways, the shared Ingress Service) all go through it.
func HubNodePorts(spec *corev1ac.ServiceSpecApplyConfiguration, allocate bool, existing *corev1.Service) {
	spec.WithAllocateLoadBalancerNodePorts(allocate)
	if allocate || existing == nil {
		return
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		if existingNodePort(existing, ptr.Deref(p.Port, 0), kubelbv1alpha1.ProtocolOrTCP(ptr.Deref(p.Protocol, ""))) != 0 {
			p.WithNodePort(0)
		}
	}
}

// existingNodePort is the NodePort svc has for the port (number and protocol, the keys of a
// Service's ports); 0 when it has none.
func existingNodePort(svc *corev1.Service, port int32, protocol corev1.Protocol) int32 {
	for _, sp := range svc.Spec.Ports {
		if sp.Port == port && kubelbv1alpha1.ProtocolOrTCP(sp.Protocol) == protocol {
			return sp.NodePort
		}
	}
	return 0
}
