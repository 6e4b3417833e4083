package quota

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/portalloc"
)

// LoadBalancerPort is one port a LoadBalancer exposes, with its allocation key.
type LoadBalancerPort struct {
	Name     string
	Protocol corev1.Protocol
	Port     int32
	Key      portalloc.Key
}

// LoadBalancerPorts returns the LoadBalancer's ports in spec order with the protocol
// defaulted to TCP: one listener port each. A port that repeats the key (protocol and name,
// or number when unnamed) or the number and protocol of an earlier port is left out and
// described in problems: the hub Service could not have both. The LoadBalancer controller
// allocates exactly these, and Objects counts them.
func LoadBalancerPorts(lb *kubelbv1alpha1.LoadBalancer) (ports []LoadBalancerPort, problems []string) {
	type numProto struct {
		port     int32
		protocol corev1.Protocol
	}
	// A few ports (the usual case) are compared one by one; many go through sets.
	small := len(lb.Spec.Ports) <= 16
	var keys map[portalloc.Key]struct{}
	var nums map[numProto]struct{}
	if !small {
		keys, nums = map[portalloc.Key]struct{}{}, map[numProto]struct{}{}
	}
	ports = make([]LoadBalancerPort, 0, len(lb.Spec.Ports))
	for _, p := range lb.Spec.Ports {
		proto := kubelbv1alpha1.ProtocolOrTCP(p.Protocol)
		k := portalloc.KeyFor(lb.Namespace, lb.Name, proto, p.Name, p.Port)
		np := numProto{p.Port, proto}
		var dupKey, dupNum bool
		if small {
			for _, q := range ports {
				dupKey = dupKey || q.Key == k
				dupNum = dupNum || (q.Port == p.Port && q.Protocol == proto)
			}
		} else {
			_, dupKey = keys[k]
			_, dupNum = nums[np]
		}
		if dupKey || dupNum {
			problems = append(problems, fmt.Sprintf("port %s %d (name %q) repeats another port", proto, p.Port, p.Name))
			continue
		}
		if !small {
			keys[k], nums[np] = struct{}{}, struct{}{}
		}
		ports = append(ports, LoadBalancerPort{Name: p.Name, Protocol: proto, Port: p.Port, Key: k})
	}
	return ports, problems
}
