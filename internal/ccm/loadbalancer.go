package ccm

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/sourcerange"
	"kubelb.dev/kubelb/internal/textcut"
)

// KindService is the value of the origin-resource-kind label on LoadBalancers mirroring
// Services.
const KindService = "Service"

// annotationLastApplied is kubectl's copy of the whole object: never useful on the hub, and
// large, so it is not mirrored.
const annotationLastApplied = corev1.LastAppliedConfigAnnotation

// ClassVerdict says what the ccm does with a Service given its type and loadBalancerClass.
type ClassVerdict int

// Verdicts of ServiceClass.
const (
	// NotLoadBalancer: the Service is not of type LoadBalancer.
	NotLoadBalancer ClassVerdict = iota
	// OtherClass: the Service asks for another load balancer implementation (or, with the class
	// filter on, for none); the ccm never mirrors it.
	OtherClass
	// OurClass: the ccm mirrors the Service.
	OurClass
)

// ServiceClass decides whether a Service is one the ccm mirrors. A Service with a
// loadBalancerClass other than kubelb belongs to another implementation and is never
// mirrored; with useClass a Service without a class is not mirrored either.
func ServiceClass(svc *corev1.Service, useClass bool) ClassVerdict {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return NotLoadBalancer
	}
	c := svc.Spec.LoadBalancerClass
	switch {
	case c != nil && *c == v1alpha1.DefaultClass:
		return OurClass
	case c != nil, useClass:
		return OtherClass
	}
	return OurClass
}

// PortProblem is a Service port the mirror leaves out, and why.
type PortProblem struct {
	// Port is the Service port's label (its name, or port/protocol).
	Port string
	// Pending is true when the port only waits for its NodePort to be allocated.
	Pending bool
	// Message explains the problem to a person.
	Message string
}

// PortName is the name a Service port gets on the LoadBalancer: its own name, or
// "<port>-<protocol>" (lower case) when it has none, as KubeLB Community Edition does, so
// ports and endpoint ports always match by name.
func PortName(p corev1.ServicePort) string {
	if p.Name != "" {
		return strings.ToLower(p.Name)
	}
	return fmt.Sprintf("%d-%s", p.Port, strings.ToLower(string(p.Protocol)))
}

// carriedPort is a Service port's name and protocol (TCP when unset), or the problem when the
// LoadBalancer API cannot carry its protocol (only TCP and UDP).
func carriedPort(p corev1.ServicePort) (string, corev1.Protocol, *PortProblem) {
	protocol := p.Protocol
	if protocol == "" {
		protocol = corev1.ProtocolTCP
	}
	name := PortName(p)
	if protocol != corev1.ProtocolTCP && protocol != corev1.ProtocolUDP {
		return name, protocol, &PortProblem{Port: name, Message: fmt.Sprintf("protocol %s is not supported; only TCP and UDP are", protocol)}
	}
	return name, protocol, nil
}

// DesiredLoadBalancer maps a tenant Service to the LoadBalancer the ccm keeps in namespace
// (the tenant's namespace on the hub). Ports whose NodePort is not allocated yet, or whose
// protocol the LoadBalancer API does not carry (SCTP), are left out and reported.
func DesiredLoadBalancer(svc *corev1.Service, namespace string) (*v1alpha1.LoadBalancer, []PortProblem) {
	var ports []v1alpha1.LoadBalancerPort
	var endpointPorts []v1alpha1.EndpointPort
	var problems []PortProblem
	for _, p := range svc.Spec.Ports {
		name, protocol, problem := carriedPort(p)
		switch {
		case problem != nil:
			problems = append(problems, *problem)
			continue
		case p.NodePort == 0:
			problems = append(problems, PortProblem{Port: name, Pending: true, Message: "no NodePort is allocated yet"})
			continue
		}
		ports = append(ports, v1alpha1.LoadBalancerPort{Name: name, Port: p.Port, Protocol: protocol})
		endpointPorts = append(endpointPorts, v1alpha1.EndpointPort{Name: name, Port: p.NodePort, Protocol: protocol})
	}

	lb := &v1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{
			Name:        string(svc.UID),
			Namespace:   namespace,
			Labels:      hubnames.OriginLabels(namespace, KindService, svc.Namespace, svc.Name),
			Annotations: mirroredAnnotations(svc.Annotations),
			// No finalizer: the manager needs none (it deletes the hub Service on the delete
			// event, and sweeps what it missed at start-up), so the delete is one write.
			// Mirrors an earlier ccm made with kubelb.k8c.io/cleanup keep it (desiredMirror).
		},
		Spec: v1alpha1.LoadBalancerSpec{
			Endpoints: []v1alpha1.LoadBalancerEndpoints{{
				AddressesReference: &corev1.ObjectReference{Kind: "Addresses", Name: v1alpha1.DefaultAddressesName},
				Ports:              endpointPorts,
			}},
			Ports:                 ports,
			Type:                  corev1.ServiceTypeLoadBalancer,
			ExternalTrafficPolicy: svc.Spec.ExternalTrafficPolicy,
		},
	}
	// With externalTrafficPolicy Local only nodes with a local endpoint may get traffic: the
	// hub health-checks kube-proxy's /healthz on this port of every node. Any other policy
	// leaves the field out, so a Service switched back to Cluster clears it.
	if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal && svc.Spec.HealthCheckNodePort > 0 {
		lb.Spec.HealthCheckNodePort = svc.Spec.HealthCheckNodePort
	}
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		lb.Spec.Persistence = &v1alpha1.Persistence{Type: v1alpha1.PersistenceSourceIP}
	}
	lb.Spec.IPFamilyPolicy, lb.Spec.IPFamilies = ipFamilies(svc)
	lb.Spec.SourceRanges = SourceRanges(svc).Ranges
	return lb, problems
}

// ServiceSourceRanges are the client ranges of a Service as its LoadBalancer carries them, and
// what was wrong with them.
type ServiceSourceRanges struct {
	// Ranges go to the LoadBalancer's spec.sourceRanges: the valid entries in canonical form
	// (sourcerange.Parse), sorted, without repeats, and the invalid ones as written (cut to
	// v1alpha1.MaxSourceRangeLength), so that the hub refuses the Service's traffic until they
	// are fixed rather than serve more clients than asked (left out, the last valid entry
	// gone would leave an empty list, which serves everyone).
	Ranges []string
	// Invalid are the entries that are not CIDRs.
	Invalid []string
	// Dropped counts the entries past v1alpha1.MaxSourceRanges (after repeats are removed),
	// left out: fewer clients are served, never more.
	Dropped int
	// FromAnnotation: the ranges come from the annotation
	// service.beta.kubernetes.io/load-balancer-source-ranges (spec.loadBalancerSourceRanges
	// is empty).
	FromAnnotation bool
}

// SourceRanges reads the clients a Service allows as Kubernetes does:
// spec.loadBalancerSourceRanges, or, when that is empty, the comma-separated annotation
// service.beta.kubernetes.io/load-balancer-source-ranges. None: every client.
func SourceRanges(svc *corev1.Service) ServiceSourceRanges {
	var out ServiceSourceRanges
	in := svc.Spec.LoadBalancerSourceRanges
	if len(in) == 0 {
		if a := strings.TrimSpace(svc.Annotations[v1alpha1.AnnotationLoadBalancerSourceRanges]); a != "" {
			in, out.FromAnnotation = strings.Split(a, ","), true
		}
	}
	var valid, invalid []string
	for _, r := range in {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		if c, err := sourcerange.Parse(r); err == nil {
			valid = append(valid, c)
			continue
		}
		cut := textcut.Cut(r, v1alpha1.MaxSourceRangeLength, textcut.Ellipsis)
		if !slices.Contains(invalid, cut) {
			invalid = append(invalid, cut)
		}
	}
	out.Invalid = invalid
	all := append(sourcerange.Sort(valid), invalid...)
	if len(all) > v1alpha1.MaxSourceRanges {
		// The invalid entries are kept (the hub must refuse the traffic); valid ones go.
		keep := max(v1alpha1.MaxSourceRanges-len(invalid), 0)
		out.Dropped = len(all) - v1alpha1.MaxSourceRanges
		all = append(all[:keep:keep], invalid[:min(len(invalid), v1alpha1.MaxSourceRanges)]...)
	}
	if len(all) > 0 {
		out.Ranges = all
	}
	return out
}

// Problem says what is wrong with the ranges, for a Warning on the Service; "" when nothing.
func (s ServiceSourceRanges) Problem() string {
	field := "spec.loadBalancerSourceRanges"
	if s.FromAnnotation {
		field = "the annotation " + v1alpha1.AnnotationLoadBalancerSourceRanges
	}
	var msgs []string
	if len(s.Invalid) > 0 {
		quoted := make([]string, 0, len(s.Invalid))
		for _, r := range s.Invalid {
			quoted = append(quoted, strconv.Quote(r))
		}
		msgs = append(msgs, fmt.Sprintf("%s has entries that are not CIDRs (such as 203.0.113.0/24): %s; the load balancer refuses all traffic until they are fixed",
			field, strings.Join(quoted, ", ")))
	}
	if s.Dropped > 0 {
		msgs = append(msgs, fmt.Sprintf("%s has more than %d distinct entries: the last %d are left out, and clients only they allow are refused",
			field, v1alpha1.MaxSourceRanges, s.Dropped))
	}
	return strings.Join(msgs, "; ")
}

// ipFamilies are the Service's ipFamilyPolicy and ipFamilies as the LoadBalancer carries
// them, so that the hub Service asks for the same families. The tenant API server fills both
// on create; a family other than IPv4 and IPv6, a repeated one or more than two (which it
// would not accept) leave the families out.
func ipFamilies(svc *corev1.Service) (*corev1.IPFamilyPolicy, []corev1.IPFamily) {
	var policy *corev1.IPFamilyPolicy
	switch p := ptr.Deref(svc.Spec.IPFamilyPolicy, ""); p {
	case corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack:
		policy = ptr.To(p)
	}
	fams := svc.Spec.IPFamilies
	if len(fams) == 0 || len(fams) > 2 || (len(fams) == 2 && fams[0] == fams[1]) {
		return policy, nil
	}
	for _, f := range fams {
		if f != corev1.IPv4Protocol && f != corev1.IPv6Protocol {
			return policy, nil
		}
	}
	return policy, slices.Clone(fams)
}

// mirroredAnnotations are the Service's annotations as mirrored: all of them (the hub decides
// which reach its objects) but kubectl's last-applied-configuration.
func mirroredAnnotations(in map[string]string) map[string]string {
	if len(in) == 0 {
		return nil
	}
	out := maps.Clone(in)
	delete(out, annotationLastApplied)
	if len(out) == 0 {
		return nil
	}
	return out
}

// ExternalLoadBalancer turns desired, the mirror of svc that DesiredLoadBalancer made, into
// the mirror for --enable-cloud-provider=false (KubeLB CE's meaning): another load balancer
// implementation serves svc, and the hub sends to the addresses it put in the Service's
// status.loadBalancer.ingress (an IP, else the hostname), on the Service's own ports (that
// address serves spec.ports[].port; KubeLB CE sends to the NodePort instead, which only
// kube-proxy in IPVS mode answers there). NodePorts are not needed, so ports DesiredLoadBalancer
// left out waiting for one are put back; the returned problems are the rest.
func ExternalLoadBalancer(desired *v1alpha1.LoadBalancer, svc *corev1.Service) (*v1alpha1.LoadBalancer, []PortProblem) {
	var ports []v1alpha1.LoadBalancerPort
	var endpointPorts []v1alpha1.EndpointPort
	var problems []PortProblem
	for _, p := range svc.Spec.Ports {
		name, protocol, problem := carriedPort(p)
		if problem != nil {
			problems = append(problems, *problem)
			continue
		}
		ports = append(ports, v1alpha1.LoadBalancerPort{Name: name, Port: p.Port, Protocol: protocol})
		endpointPorts = append(endpointPorts, v1alpha1.EndpointPort{Name: name, Port: p.Port, Protocol: protocol})
	}
	var addresses []v1alpha1.EndpointAddress
	for _, in := range svc.Status.LoadBalancer.Ingress {
		switch {
		case in.IP != "":
			addresses = append(addresses, v1alpha1.EndpointAddress{IP: in.IP})
		case in.Hostname != "":
			addresses = append(addresses, v1alpha1.EndpointAddress{Hostname: in.Hostname})
		}
	}
	out := desired.DeepCopy()
	out.Spec.Ports = ports
	out.Spec.Endpoints = []v1alpha1.LoadBalancerEndpoints{{Addresses: addresses, Ports: endpointPorts}}
	// The endpoints are the other load balancer's addresses, not nodes: there is no
	// kube-proxy health endpoint on them to check.
	out.Spec.HealthCheckNodePort = 0
	return out, problems
}
