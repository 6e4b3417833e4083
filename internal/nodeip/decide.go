// Package nodeip is the node-IP mode (issue 15; GlueKube-CCM, MicroShift, k3s ServiceLB): a
// LoadBalancer Service gets the addresses of the Ready nodes of a node set (nodes labelled
// kubelb.k8c.io/use-as-loadbalancer), for kube-proxy to program. It runs in a standalone ccm
// (the cluster's own Services) or in the manager (the hub Services of the Envoy fleets). The
// decision over every served Service at once is pure (AssignNodeIPs); the one-key controller
// (Setup) writes it through internal/lbaddress, and keeps the 1:1 NAT shadow Services.
package nodeip

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"kubelb.dev/kubelb/internal/lbaddress"
)

// LabelUseAsLoadBalancer is the node label that puts a node into a node set of the node-IP
// mode; in a standalone ccm, as a Service annotation, it names the node set (the label's
// value) the Service takes its addresses from. In the hub the tenant's
// spec.loadBalancer.nodeSet names it.
const LabelUseAsLoadBalancer = "kubelb.k8c.io/use-as-loadbalancer"

// Node annotations that override the addresses a node gives (comma-separated IPs, at most
// MaxNodeIPIngress): the public ones, shown in the Services' status, and the private ones the
// 1:1 NAT shadow Services carry. Annotations rather than labels: a label value cannot hold an
// IPv6 address or a list.
const (
	AnnotationPublicAddresses  = "kubelb.k8c.io/public-addresses"
	AnnotationPrivateAddresses = "kubelb.k8c.io/private-addresses"
)

// Reasons of the pending verdicts (condition kubelb.k8c.io/AddressAssigned and Warning Events).
const (
	// ReasonNoLoadBalancerNodes: no Ready node carries the node-set label the Service asks for.
	ReasonNoLoadBalancerNodes = "NoLoadBalancerNodes"
	// ReasonPortConflict: a port of the Service is reserved, or held on one of its node
	// addresses by a Service created earlier.
	ReasonPortConflict = "PortConflict"
	// ReasonInvalidNodeSet: the node set the Service asks for is not a valid label value.
	ReasonInvalidNodeSet = "InvalidNodeSet"
)

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
	return nodeSetValue(svc.Annotations[LabelUseAsLoadBalancer], "annotation "+LabelUseAsLoadBalancer)
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

// NodeReady tells whether a node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NodeServes tells whether a node receives load balancer traffic: Ready, not being deleted, and
// not labelled node.kubernetes.io/exclude-from-external-load-balancers.
func NodeServes(n *corev1.Node) bool {
	if n.DeletionTimestamp != nil || !NodeReady(n) {
		return false
	}
	_, excluded := n.Labels[corev1.LabelNodeExcludeBalancers]
	return !excluded
}

// Selected are the addresses a Service gets from a node set.
type Selected struct {
	// Public are the addresses shown in the Service's status: per serving node of the set,
	// its kubelb.k8c.io/public-addresses annotation, else its ExternalIPs, else its
	// InternalIPs.
	Public []netip.Addr
	// Private are the private addresses (the kubelb.k8c.io/private-addresses annotation, else
	// the InternalIPs) of the nodes whose private addresses are not their public ones: where
	// a 1:1 NAT delivers the public address's traffic.
	Private []netip.Addr
}

// SelectNodeIPs returns the addresses a Service of the given IP families (none: any) gets from
// a node set (see Selected), of those families only. Hostnames and text that is not an IP are
// skipped. Each list is sorted (IPv4 before IPv6, numerically), deduplicated and cut to
// MaxNodeIPIngress.
func SelectNodeIPs(nodes []corev1.Node, set string, families []corev1.IPFamily) Selected {
	var out Selected
	for i := range nodes {
		n := &nodes[i]
		if !nodeInSet(n, set) || !NodeServes(n) {
			continue
		}
		public := nodeAddresses(n, AnnotationPublicAddresses, families, corev1.NodeExternalIP, corev1.NodeInternalIP)
		private := nodeAddresses(n, AnnotationPrivateAddresses, families, corev1.NodeInternalIP)
		out.Public = append(out.Public, public...)
		if !slices.Equal(sorted(public), sorted(private)) {
			out.Private = append(out.Private, private...)
		}
	}
	out.Public, out.Private = capped(out.Public), capped(out.Private)
	return out
}

// nodeAddresses returns a node's addresses of the families: those of the annotation when it
// holds any valid one, else those of the first address type the node has.
func nodeAddresses(n *corev1.Node, annotation string, families []corev1.IPFamily, types ...corev1.NodeAddressType) []netip.Addr {
	if v, ok := n.Annotations[annotation]; ok {
		var out []netip.Addr
		for i, item := range strings.Split(v, ",") {
			if i == MaxNodeIPIngress {
				break
			}
			if ip, err := netip.ParseAddr(strings.TrimSpace(item)); err == nil && familyAllowed(ip.Unmap(), families) {
				out = append(out, ip.Unmap())
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	for _, t := range types {
		var out []netip.Addr
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); a.Type == t && err == nil && familyAllowed(ip.Unmap(), families) {
				out = append(out, ip.Unmap())
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

func sorted(ips []netip.Addr) []netip.Addr {
	out := slices.Clone(ips)
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(out)
}

// capped sorts, deduplicates and cuts a list to MaxNodeIPIngress.
func capped(ips []netip.Addr) []netip.Addr {
	out := sorted(ips)
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

// Verdict is what the node-IP mode decides for one Service it serves: the addresses (or why
// it is pending), and the private addresses its 1:1 NAT shadow Service carries.
type Verdict struct {
	lbaddress.Verdict
	// Private are the private addresses of the nodes behind a 1:1 NAT (Selected.Private);
	// empty while the Service is pending.
	Private []netip.Addr
}

// AssignNodeIPs is the one ordered decision of the node-IP mode. services are the Services the
// ccm owns (type LoadBalancer, our class). They are taken in creation order (then
// namespace/name): each gets the addresses of its node set unless one of its (protocol, port)
// pairs is reserved, or is already taken on one of those addresses by an earlier Service that
// got its addresses; then it stays pending and takes nothing. Conflicts are per address:
// Services on disjoint node sets never conflict.
//
// setOf names the node set of each Service (an error leaves it pending, ReasonInvalidNodeSet).
// With hub, a message never names a Service of another namespace (another tenant's).
func AssignNodeIPs(services []*corev1.Service, nodes []corev1.Node, reserved []PortRange, setOf func(*corev1.Service) (string, error), hub bool) map[types.NamespacedName]Verdict {
	ordered := slices.Clone(services)
	// Creation times have a resolution of one second: within the same second a Service that
	// has its addresses already comes first, so a newer one never takes its port.
	holds := func(s *corev1.Service) int {
		if len(s.Status.LoadBalancer.Ingress) > 0 {
			return 0
		}
		return 1
	}
	slices.SortFunc(ordered, func(a, b *corev1.Service) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(holds(a), holds(b)),
			cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	// The selection depends only on the node set and the families: made once for each.
	selected := map[string]Selected{}
	type slot struct {
		addr     netip.Addr
		protocol corev1.Protocol
		port     int32
	}
	taken := map[slot]types.NamespacedName{}
	out := make(map[types.NamespacedName]Verdict, len(ordered))
	for _, svc := range ordered {
		key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
		set, err := setOf(svc)
		if err != nil {
			out[key] = pending(ReasonInvalidNodeSet, err.Error()+".")
			continue
		}
		selKey := fmt.Sprint(set, svc.Spec.IPFamilies)
		sel, ok := selected[selKey]
		if !ok {
			sel = SelectNodeIPs(nodes, set, svc.Spec.IPFamilies)
			selected[selKey] = sel
		}
		addrs := sel.Public
		if len(addrs) == 0 {
			out[key] = pending(ReasonNoLoadBalancerNodes, fmt.Sprintf(
				"No Ready node carries the label %s=%s%s with an address of the Service's IP families; the Service stays pending.",
				LabelUseAsLoadBalancer, set, defaultSetNote(set, hub)))
			continue
		}
		v := Verdict{Verdict: lbaddress.Verdict{Addresses: addrs}, Private: sel.Private}
	ports:
		for _, p := range svc.Spec.Ports {
			proto := cmp.Or(p.Protocol, corev1.ProtocolTCP)
			for _, r := range reserved {
				if r.holds(proto, p.Port) {
					v = pending(ReasonPortConflict, fmt.Sprintf(
						"Port %d/%s is reserved (--reserved-ports %s); the Service stays pending.", p.Port, proto, r))
					break ports
				}
			}
			for _, a := range addrs {
				if holder, ok := taken[slot{a, proto, p.Port}]; ok {
					who := "Service " + holder.String()
					if hub && holder.Namespace != svc.Namespace {
						who, holder = "a Service of another tenant", types.NamespacedName{}
					}
					v = pending(ReasonPortConflict, fmt.Sprintf(
						"Port %d/%s on %s is held by %s, created earlier; the Service stays pending until that Service releases it.",
						p.Port, proto, a, who))
					v.Holder = holder
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

// pending is a pending verdict.
func pending(reason, message string) Verdict {
	return Verdict{Verdict: lbaddress.Verdict{Reason: reason, Message: message}}
}

// defaultSetNote explains the default node set in messages (in the hub, the tenant's
// spec.loadBalancer.nodeSet chooses the set, not an annotation).
func defaultSetNote(set string, hub bool) string {
	if set != DefaultNodeSet {
		return ""
	}
	if hub {
		return " (or an empty value; the Tenant's spec.loadBalancer.nodeSet picks another set)"
	}
	return ` (or an empty value; a Service picks another set with the annotation ` + LabelUseAsLoadBalancer + `)`
}

// ReservedPortsFlag is the flag value of --reserved-ports (the ccm's and the manager's).
type ReservedPortsFlag struct {
	text string
	// Ranges are the parsed ranges.
	Ranges []PortRange
}

// String returns the list as given.
func (r *ReservedPortsFlag) String() string { return r.text }

// Set parses the list.
func (r *ReservedPortsFlag) Set(v string) error {
	ranges, err := ParseReservedPorts(v)
	if err != nil {
		return err
	}
	r.text, r.Ranges = v, ranges
	return nil
}
