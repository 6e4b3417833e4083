package ccm

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

// Modes of the ccm (--mode).
const (
	// ModeHub mirrors the tenant's objects into its namespace of the hub (the default).
	ModeHub = "hub"
	// ModeStandalone gives LoadBalancer Services the addresses of selected nodes, with no hub.
	ModeStandalone = "standalone"
)

// LabelUseAsLoadBalancer is the node label that puts a node into a node set of the
// standalone node-IP mode; as a Service annotation it names the node set (the label's value)
// the Service takes its addresses from.
const LabelUseAsLoadBalancer = "kubelb.k8c.io/use-as-loadbalancer"

// DefaultNodeSet is the label value of the default node set, which a Service without the
// annotation (or with an empty value) gets; a node labelled with an empty value belongs to
// it too.
const DefaultNodeSet = "true"

// MaxNodeIPIngress bounds the addresses one Service gets: the first ones in address order.
const MaxNodeIPIngress = 16

// DefaultReservedPorts are the ports a node-IP Service may not take by default: kube-proxy
// programs a load balancer address like a VIP, so a Service on a node's own address would
// capture the node's SSH, API server, kubelet and kube-proxy health ports.
const DefaultReservedPorts = "22/TCP,6443/TCP,10250/TCP,10256/TCP"

// maxReservedPorts bounds the entries of --reserved-ports.
const maxReservedPorts = 64

// PortRange is a reserved range of ports of one protocol ("" means every protocol).
type PortRange struct {
	Protocol corev1.Protocol
	First    int32
	Last     int32
}

// String returns the range as --reserved-ports spells it.
func (r PortRange) String() string {
	s := strconv.Itoa(int(r.First))
	if r.Last != r.First {
		s += "-" + strconv.Itoa(int(r.Last))
	}
	if r.Protocol != "" {
		s += "/" + string(r.Protocol)
	}
	return s
}

// holds tells whether the range covers a port of a protocol.
func (r PortRange) holds(protocol corev1.Protocol, port int32) bool {
	return (r.Protocol == "" || r.Protocol == protocol) && port >= r.First && port <= r.Last
}

// ParseReservedPorts parses a comma-separated list of PORT[-PORT][/PROTOCOL] (protocol TCP,
// UDP or SCTP, any case; without one the ports are reserved for every protocol). "" is none.
func ParseReservedPorts(s string) ([]PortRange, error) {
	var out []PortRange
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if len(out) == maxReservedPorts {
			return nil, fmt.Errorf("more than %d entries", maxReservedPorts)
		}
		ports, proto, hasProto := strings.Cut(item, "/")
		var r PortRange
		if hasProto {
			switch p := corev1.Protocol(strings.ToUpper(proto)); p {
			case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
				r.Protocol = p
			default:
				return nil, fmt.Errorf("%q: protocol must be TCP, UDP or SCTP", item)
			}
		}
		first, last, isRange := strings.Cut(ports, "-")
		if !isRange {
			last = first
		}
		a, errA := strconv.ParseInt(first, 10, 32)
		b, errB := strconv.ParseInt(last, 10, 32)
		if errA != nil || errB != nil || a < 1 || b > 65535 || a > b {
			return nil, fmt.Errorf("%q: want PORT[-PORT][/PROTOCOL] with ports 1-65535", item)
		}
		r.First, r.Last = int32(a), int32(b)
		out = append(out, r)
	}
	return out, nil
}

// NodeSetOf returns the node set a Service asks for with the kubelb.k8c.io/use-as-loadbalancer
// annotation (DefaultNodeSet without it or when empty), and an error when the value is not a
// valid label value (a tenant-written field: no node can carry it).
func NodeSetOf(svc *corev1.Service) (string, error) {
	v := svc.Annotations[LabelUseAsLoadBalancer]
	if v == "" {
		return DefaultNodeSet, nil
	}
	if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
		return "", fmt.Errorf("annotation %s: %q is not a valid label value: %s", LabelUseAsLoadBalancer, cleanText(v, 70), strings.Join(errs, "; "))
	}
	return v, nil
}

// nodeInSet tells whether a node belongs to a node set by its label.
func nodeInSet(n *corev1.Node, set string) bool {
	v, ok := n.Labels[LabelUseAsLoadBalancer]
	if !ok {
		return false
	}
	if v == "" {
		v = DefaultNodeSet
	}
	return v == set
}

// SelectNodeIPs returns the addresses a Service of the given IP families (none: any) gets from
// a node set: for every serving node of the set (Ready, not being deleted, not excluded from
// load balancers) its ExternalIPs of those families, or its InternalIPs when it has none.
// Hostnames and text that is not an IP are skipped. The result is sorted (IPv4 before IPv6,
// numerically), deduplicated and cut to MaxNodeIPIngress.
func SelectNodeIPs(nodes []corev1.Node, set string, families []corev1.IPFamily) []netip.Addr {
	var out []netip.Addr
	for i := range nodes {
		n := &nodes[i]
		if !nodeInSet(n, set) || !nodeServes(n) {
			continue
		}
		for _, t := range []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP} {
			found := false
			for _, a := range n.Status.Addresses {
				ip, err := netip.ParseAddr(a.Address)
				if a.Type != t || err != nil || !familyAllowed(ip, families) {
					continue
				}
				found = true
				out = append(out, ip.Unmap())
			}
			if found {
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	out = slices.Compact(out)
	if len(out) > MaxNodeIPIngress {
		out = out[:MaxNodeIPIngress]
	}
	return out
}

// familyAllowed tells whether ip is of one of the families (none: any).
func familyAllowed(ip netip.Addr, families []corev1.IPFamily) bool {
	if len(families) == 0 {
		return true
	}
	f := corev1.IPv4Protocol
	if ip.Is6() && !ip.Is4In6() {
		f = corev1.IPv6Protocol
	}
	return slices.Contains(families, f)
}

// NodeIPVerdict is what the node-IP mode decides for one Service it owns.
type NodeIPVerdict struct {
	// Addresses is the Service's status.loadBalancer.ingress; empty while it is pending.
	Addresses []netip.Addr
	// Reason and Message say why it is pending (ReasonNoLoadBalancerNodes, ReasonPortConflict,
	// ReasonInvalidNodeSet); empty when it has its addresses.
	Reason  string
	Message string
	// Holder is the Service holding the port that keeps this one pending (zero when the port
	// is reserved or there is no conflict).
	Holder types.NamespacedName
}

// Status is the status.loadBalancer the verdict gives the Service (ipMode VIP: kube-proxy
// programs the address; the API server defaults it so).
func (v NodeIPVerdict) Status() corev1.LoadBalancerStatus {
	var st corev1.LoadBalancerStatus
	for _, ip := range v.Addresses {
		st.Ingress = append(st.Ingress, corev1.LoadBalancerIngress{IP: ip.String(), IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)})
	}
	return st
}

// AssignNodeIPs is the one ordered decision of the node-IP mode. services are the Services the
// ccm owns (type LoadBalancer, our class). They are taken in creation order (then
// namespace/name): each gets the addresses of its node set unless one of its (protocol, port)
// pairs is reserved, or is already taken on one of those addresses by an earlier Service that
// got its addresses; then it stays pending and takes nothing. Conflicts are per address:
// Services on disjoint node sets never conflict.
func AssignNodeIPs(services []*corev1.Service, nodes []corev1.Node, reserved []PortRange) map[types.NamespacedName]NodeIPVerdict {
	ordered := slices.Clone(services)
	slices.SortFunc(ordered, func(a, b *corev1.Service) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time),
			cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	type slot struct {
		addr     netip.Addr
		protocol corev1.Protocol
		port     int32
	}
	taken := map[slot]types.NamespacedName{}
	out := make(map[types.NamespacedName]NodeIPVerdict, len(ordered))
	for _, svc := range ordered {
		key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
		set, err := NodeSetOf(svc)
		if err != nil {
			out[key] = NodeIPVerdict{Reason: ReasonInvalidNodeSet, Message: err.Error() + "."}
			continue
		}
		addrs := SelectNodeIPs(nodes, set, svc.Spec.IPFamilies)
		if len(addrs) == 0 {
			out[key] = NodeIPVerdict{Reason: ReasonNoLoadBalancerNodes, Message: fmt.Sprintf(
				"No Ready node carries the label %s=%s%s with an address of the Service's IP families; the Service stays pending.",
				LabelUseAsLoadBalancer, set, defaultSetNote(set))}
			continue
		}
		v := NodeIPVerdict{Addresses: addrs}
	ports:
		for _, p := range svc.Spec.Ports {
			proto := cmp.Or(p.Protocol, corev1.ProtocolTCP)
			for _, r := range reserved {
				if r.holds(proto, p.Port) {
					v = NodeIPVerdict{Reason: ReasonPortConflict, Message: fmt.Sprintf(
						"Port %d/%s is reserved (--reserved-ports %s); the Service stays pending.", p.Port, proto, r)}
					break ports
				}
			}
			for _, a := range addrs {
				if holder, ok := taken[slot{a, proto, p.Port}]; ok {
					v = NodeIPVerdict{Reason: ReasonPortConflict, Holder: holder, Message: fmt.Sprintf(
						"Port %d/%s on %s is held by Service %s, created earlier; the Service stays pending until that Service releases it.",
						p.Port, proto, a, holder)}
					break ports
				}
			}
		}
		if v.Reason == "" {
			for _, p := range svc.Spec.Ports {
				for _, a := range addrs {
					taken[slot{a, cmp.Or(p.Protocol, corev1.ProtocolTCP), p.Port}] = key
				}
			}
		}
		out[key] = v
	}
	return out
}

// defaultSetNote explains the default node set in messages.
func defaultSetNote(set string) string {
	if set != DefaultNodeSet {
		return ""
	}
	return ` (or an empty value; a Service picks another set with the annotation ` + LabelUseAsLoadBalancer + `)`
}
