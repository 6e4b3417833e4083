package v1alpha1

import corev1 "k8s.io/api/core/v1"

// ProtocolOrTCP returns p, or TCP when p is empty (the Kubernetes default for ports).
func ProtocolOrTCP(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// MatchesPort is the one rule that ties a status port (status.service.ports[]) to a spec
// port (spec.ports[]): the protocols must be equal (empty meaning TCP) and either the spec
// port is named and the names are equal, or the port numbers are equal. StatusPortFor
// prefers a match by name over one by number.
func (sp *ServicePort) MatchesPort(p LoadBalancerPort, byName bool) bool {
	if ProtocolOrTCP(sp.Protocol) != ProtocolOrTCP(p.Protocol) {
		return false
	}
	if byName {
		return p.Name != "" && sp.Name == p.Name
	}
	return sp.Port == p.Port
}

// StatusPortFor returns the status port of a spec port: the first one that matches it by
// name (when the spec port is named), else the first that matches it by number.
func (s *LoadBalancerStatus) StatusPortFor(p LoadBalancerPort) (ServicePort, bool) {
	for _, byName := range []bool{true, false} {
		for _, sp := range s.Service.Ports {
			if sp.MatchesPort(p, byName) {
				return sp, true
			}
		}
	}
	return ServicePort{}, false
}
