package nodeip

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// node is a node, Ready or not, with addresses given as type=address pairs.
func node(name string, ready bool, addrs ...string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
	for i := 0; i+1 < len(addrs); i += 2 {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeAddressType(addrs[i]), Address: addrs[i+1]})
	}
	return n
}

// byAnnotation is the standalone node set (the Service's annotation).
func byAnnotation(svc *corev1.Service) (string, error) { return NodeSetOf(svc) }

// setNode is a node of a node set (label value set; "-" for no label) with addresses given
// as type=address pairs (type, address, type, address, ...).
func setNode(name, set string, ready bool, addrs ...string) corev1.Node {
	n := node(name, ready, addrs...)
	if set != "-" {
		n.Labels = map[string]string{LabelUseAsLoadBalancer: set}
	}
	return n
}

func addrs(ips ...string) []netip.Addr {
	var out []netip.Addr
	for _, ip := range ips {
		out = append(out, netip.MustParseAddr(ip))
	}
	return out
}

const (
	ext = string(corev1.NodeExternalIP)
	in  = string(corev1.NodeInternalIP)
)

func TestSelectNodeIPs(t *testing.T) {
	many := make([]corev1.Node, 0, 20)
	for i := 20; i > 0; i-- {
		many = append(many, setNode(fmt.Sprintf("m%d", i), "true", true, in, fmt.Sprintf("10.0.0.%d", i)))
	}
	v4, v6 := []corev1.IPFamily{corev1.IPv4Protocol}, []corev1.IPFamily{corev1.IPv6Protocol}
	for _, tc := range []struct {
		name     string
		nodes    []corev1.Node
		set      string
		families []corev1.IPFamily
		want     []netip.Addr
	}{
		{name: "ExternalIP first, else InternalIP; sorted and deduplicated", set: "true", nodes: []corev1.Node{
			setNode("a", "true", true, ext, "192.0.2.9", in, "10.0.0.1"),
			setNode("b", "true", true, in, "10.0.0.2", string(corev1.NodeHostName), "b"),
			setNode("c", "", true, ext, "192.0.2.9"), // empty value: the default set
		}, want: addrs("10.0.0.2", "192.0.2.9")},
		{name: "NotReady, unlabelled, other set, excluded and deleted nodes are left out", set: "true", nodes: []corev1.Node{
			setNode("notready", "true", false, in, "10.0.0.1"),
			setNode("unlabelled", "-", true, in, "10.0.0.2"),
			setNode("other", "edge", true, in, "10.0.0.3"),
			func() corev1.Node {
				n := setNode("excluded", "true", true, in, "10.0.0.4")
				n.Labels[corev1.LabelNodeExcludeBalancers] = ""
				return n
			}(),
			func() corev1.Node {
				n := setNode("deleted", "true", true, in, "10.0.0.5")
				n.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
				return n
			}(),
			setNode("ok", "true", true, in, "10.0.0.6"),
		}, want: addrs("10.0.0.6")},
		{name: "a named set", set: "edge", nodes: []corev1.Node{
			setNode("a", "true", true, in, "10.0.0.1"),
			setNode("b", "edge", true, in, "10.0.0.2"),
		}, want: addrs("10.0.0.2")},
		{name: "IPv6 family: the ExternalIP of the other family does not hide the InternalIP", set: "true", families: v6, nodes: []corev1.Node{
			setNode("a", "true", true, ext, "192.0.2.1", in, "fd00::1"),
		}, want: addrs("fd00::1")},
		{name: "IPv4 family; IPv4 before IPv6 when both", set: "true", families: v4, nodes: []corev1.Node{
			setNode("a", "true", true, in, "fd00::1", in, "10.0.0.1"),
		}, want: addrs("10.0.0.1")},
		{name: "hostnames and garbage are no addresses", set: "true", nodes: []corev1.Node{
			setNode("a", "true", true, ext, "not-an-ip", string(corev1.NodeHostName), "a"),
		}},
		{name: "bounded to the first MaxNodeIPIngress in order", set: "true", nodes: many,
			want: addrs("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6", "10.0.0.7", "10.0.0.8",
				"10.0.0.9", "10.0.0.10", "10.0.0.11", "10.0.0.12", "10.0.0.13", "10.0.0.14", "10.0.0.15", "10.0.0.16")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := SelectNodeIPs(tc.nodes, tc.set, tc.families).Public
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Error(diff)
			}
		})
	}
}

// TestSelectPublicAndPrivate: the node annotations override the node's addresses (invalid
// entries are skipped, an annotation without a valid entry is ignored), and only nodes whose
// private addresses differ from their public ones (a 1:1 NAT) give private addresses.
func TestSelectPublicAndPrivate(t *testing.T) {
	annotated := func(n corev1.Node, kv ...string) corev1.Node {
		n.Annotations = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Annotations[kv[i]] = kv[i+1]
		}
		return n
	}
	nodes := []corev1.Node{
		setNode("nat", "true", true, ext, "192.0.2.1", in, "10.0.0.1"), // cloud 1:1 NAT: the ExternalIP is public
		setNode("plain", "true", true, in, "10.0.0.2"),                 // public = private: no NAT
		annotated(setNode("labelled", "true", true, in, "10.0.0.3"), // addresses from annotations
			AnnotationPublicAddresses, "198.51.100.3, not-an-ip, 2001:db8::3", AnnotationPrivateAddresses, "10.1.0.3"),
		annotated(setNode("bad", "true", true, in, "10.0.0.4"), AnnotationPublicAddresses, "nonsense"), // ignored
	}
	got := SelectNodeIPs(nodes, "true", nil)
	eq := cmp.Comparer(func(a, b netip.Addr) bool { return a == b })
	if diff := cmp.Diff(addrs("10.0.0.2", "10.0.0.4", "192.0.2.1", "198.51.100.3", "2001:db8::3"), got.Public, eq); diff != "" {
		t.Errorf("public: %s", diff)
	}
	if diff := cmp.Diff(addrs("10.0.0.1", "10.1.0.3"), got.Private, eq); diff != "" {
		t.Errorf("private: %s", diff)
	}
	v6 := SelectNodeIPs(nodes, "true", []corev1.IPFamily{corev1.IPv6Protocol})
	if diff := cmp.Diff(addrs("2001:db8::3"), v6.Public, eq); diff != "" {
		t.Errorf("IPv6 public: %s", diff)
	}
}

// TestAssignNodeIPsHub: in the hub, a pending Service's message never names a Service of
// another namespace (another tenant's); one of its own namespace is named.
func TestAssignNodeIPsHub(t *testing.T) {
	nodes := []corev1.Node{setNode("a", "true", true, in, "10.0.0.1")}
	other := nodeIPService("theirs", 1, "", "80/TCP")
	other.Namespace = "tenant-b"
	mine := nodeIPService("mine", 2, "", "80/TCP")
	mine.Namespace = "tenant-a"
	mine2 := nodeIPService("mine2", 3, "", "443/TCP")
	mine2.Namespace = "tenant-a"
	first := nodeIPService("first", 0, "", "443/TCP")
	first.Namespace = "tenant-a"
	got := AssignNodeIPs([]*corev1.Service{other, mine, mine2, first}, nodes, nil, byAnnotation, true)
	v := got[types.NamespacedName{Namespace: "tenant-a", Name: "mine"}]
	if v.Reason != ReasonPortConflict || strings.Contains(v.Message, "tenant-b") || strings.Contains(v.Message, "theirs") ||
		!strings.Contains(v.Message, "a Service of another tenant") || v.Holder != (types.NamespacedName{}) {
		t.Errorf("another tenant's holder shown: %+v", v)
	}
	if v := got[types.NamespacedName{Namespace: "tenant-a", Name: "mine2"}]; !strings.Contains(v.Message, "tenant-a/first") {
		t.Errorf("the tenant's own holder not named: %+v", v)
	}
}

func TestParseReservedPorts(t *testing.T) {
	got, err := ParseReservedPorts(" 22/tcp, 53 ,30000-32767/UDP,")
	if err != nil {
		t.Fatal(err)
	}
	want := []PortRange{{Protocol: "TCP", First: 22, Last: 22}, {First: 53, Last: 53}, {Protocol: "UDP", First: 30000, Last: 32767}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
	if got, err := ParseReservedPorts(DefaultReservedPorts); err != nil || len(got) != 4 {
		t.Errorf("default: %v, %v", got, err)
	}
	if got, err := ParseReservedPorts(""); err != nil || got != nil {
		t.Errorf("empty: %v, %v", got, err)
	}
	for _, bad := range []string{"0", "65536", "80/ICMP", "x", "90-80", "80-", "/TCP", strings.Repeat("1,", 65)} {
		if _, err := ParseReservedPorts(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestNodeSetOf(t *testing.T) {
	for v, want := range map[string]string{"": DefaultNodeSet, "edge": "edge", "true": "true", "bad value!": "", strings.Repeat("a", 64): ""} {
		svc := nodeIPService("s", 1, "")
		svc.Annotations = map[string]string{LabelUseAsLoadBalancer: v}
		got, err := NodeSetOf(svc)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("%q: %q, %v; want %q", v, got, err, want)
		}
	}
}

// nodeIPService is a LoadBalancer Service created at second created, on node set (""
// none), with ports "80/TCP" style.
func nodeIPService(name string, created int64, set string, ports ...string) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name}},
	}
	svc.CreationTimestamp = metav1.Time{Time: time.Unix(created, 0)}
	if set != "" {
		svc.Annotations = map[string]string{LabelUseAsLoadBalancer: set}
	}
	svc.Spec.Ports = nil
	for _, p := range ports {
		var n int32
		var proto string
		fmt.Sscanf(strings.Replace(p, "/", " ", 1), "%d %s", &n, &proto)
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Port: n, Protocol: corev1.Protocol(proto)})
	}
	return svc
}

func TestAssignNodeIPs(t *testing.T) {
	nodes := []corev1.Node{
		setNode("a", "true", true, in, "10.0.0.1"),
		setNode("b", "true", true, in, "10.0.0.2"),
		setNode("e", "edge", true, in, "10.0.1.1"),
		setNode("both", "shared", true, in, "10.0.0.2"), // shares an address with the default set
	}
	reserved, _ := ParseReservedPorts("22/TCP,9000-9009")
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }
	type want struct {
		addrs  []netip.Addr
		reason string
		holder string
		note   string
	}
	for _, tc := range []struct {
		name     string
		services []*corev1.Service
		want     map[string]want
	}{
		{name: "the later Service on a taken port is pending and names the holder",
			services: []*corev1.Service{nodeIPService("late", 20, "", "80/TCP"), nodeIPService("early", 10, "", "80/TCP", "443/TCP")},
			want: map[string]want{
				"early": {addrs: addrs("10.0.0.1", "10.0.0.2")},
				"late":  {reason: ReasonPortConflict, holder: "ns/early", note: "Port 80/TCP on 10.0.0.1 is held by Service ns/early"},
			}},
		{name: "same creation time: namespace/name decides",
			services: []*corev1.Service{nodeIPService("b", 10, "", "80/TCP"), nodeIPService("a", 10, "", "80/TCP")},
			want: map[string]want{
				"a": {addrs: addrs("10.0.0.1", "10.0.0.2")},
				"b": {reason: ReasonPortConflict, holder: "ns/a"},
			}},
		{name: "other protocol or port: no conflict",
			services: []*corev1.Service{nodeIPService("tcp", 1, "", "53/TCP"), nodeIPService("udp", 2, "", "53/UDP"), nodeIPService("other", 3, "", "54/TCP")},
			want: map[string]want{
				"tcp":   {addrs: addrs("10.0.0.1", "10.0.0.2")},
				"udp":   {addrs: addrs("10.0.0.1", "10.0.0.2")},
				"other": {addrs: addrs("10.0.0.1", "10.0.0.2")},
			}},
		{name: "disjoint node sets do not conflict; overlapping ones do, on the shared address",
			services: []*corev1.Service{nodeIPService("default", 1, "", "80/TCP"), nodeIPService("edge", 2, "edge", "80/TCP"), nodeIPService("shared", 3, "shared", "80/TCP")},
			want: map[string]want{
				"default": {addrs: addrs("10.0.0.1", "10.0.0.2")},
				"edge":    {addrs: addrs("10.0.1.1")},
				"shared":  {reason: ReasonPortConflict, holder: "ns/default", note: "on 10.0.0.2"},
			}},
		{name: "a pending Service holds nothing",
			services: []*corev1.Service{nodeIPService("first", 1, "", "22/TCP", "80/TCP"), nodeIPService("second", 2, "", "80/TCP")},
			want: map[string]want{
				"first":  {reason: ReasonPortConflict, note: "Port 22/TCP is reserved (--reserved-ports 22/TCP)"},
				"second": {addrs: addrs("10.0.0.1", "10.0.0.2")},
			}},
		{name: "a reserved range of every protocol",
			services: []*corev1.Service{nodeIPService("udp", 1, "", "9005/UDP"), nodeIPService("tcp22udp", 2, "", "22/UDP")},
			want: map[string]want{
				"udp":      {reason: ReasonPortConflict, note: "reserved (--reserved-ports 9000-9009)"},
				"tcp22udp": {addrs: addrs("10.0.0.1", "10.0.0.2")},
			}},
		{name: "no node in the set; an invalid set",
			services: []*corev1.Service{nodeIPService("none", 1, "nowhere", "80/TCP"), nodeIPService("bad", 2, "a b", "80/TCP")},
			want: map[string]want{
				"none": {reason: ReasonNoLoadBalancerNodes, note: LabelUseAsLoadBalancer + "=nowhere"},
				"bad":  {reason: ReasonInvalidNodeSet, note: "not a valid label value"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := AssignNodeIPs(tc.services, nodes, reserved, byAnnotation, false)
			if len(got) != len(tc.want) {
				t.Fatalf("%d verdicts, want %d: %+v", len(got), len(tc.want), got)
			}
			for name, w := range tc.want {
				v := got[key(name)]
				if !cmp.Equal(w.addrs, v.Addresses, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })) ||
					v.Reason != w.reason || !strings.Contains(v.Message, w.note) {
					t.Errorf("%s: %+v, want %+v", name, v, w)
				}
				if holder := v.Holder.String(); w.holder != "" && holder != w.holder {
					t.Errorf("%s: holder %s, want %s", name, holder, w.holder)
				}
				if (v.Reason == "") != (len(v.Addresses) > 0) {
					t.Errorf("%s: pending and addressed at once: %+v", name, v)
				}
			}
		})
	}
}

// TestAssignNodeIPsIsOrderIndependent: the verdicts do not depend on the order the cache
// lists the Services in.
func TestAssignNodeIPsIsOrderIndependent(t *testing.T) {
	nodes := []corev1.Node{setNode("a", "true", true, in, "10.0.0.1")}
	s := []*corev1.Service{nodeIPService("x", 3, "", "80/TCP"), nodeIPService("y", 1, "", "80/TCP"), nodeIPService("z", 2, "", "80/TCP")}
	first := AssignNodeIPs(s, nodes, nil, byAnnotation, false)
	second := AssignNodeIPs([]*corev1.Service{s[2], s[0], s[1]}, nodes, nil, byAnnotation, false)
	if !cmp.Equal(first, second, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })) {
		t.Errorf("%+v != %+v", first, second)
	}
	if len(first[types.NamespacedName{Namespace: "ns", Name: "y"}].Addresses) != 1 {
		t.Errorf("the earliest Service y did not get the port: %+v", first)
	}
}

// TestAssignNodeIPsKeepsTheHolderWithinASecond: creation times have a resolution of one
// second; a Service created in the same second as the holder of its port, and sorting before it
// by name, does not take the port from it.
func TestAssignNodeIPsKeepsTheHolderWithinASecond(t *testing.T) {
	nodes := []corev1.Node{setNode("a", "true", true, in, "10.0.0.1")}
	holder := nodeIPService("web", 5, "", "80/TCP")
	holder.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.0.0.1"}}
	late := nodeIPService("late", 5, "", "80/TCP") // "late" < "web", same second
	got := AssignNodeIPs([]*corev1.Service{late, holder}, nodes, nil, byAnnotation, false)
	if v := got[types.NamespacedName{Namespace: "ns", Name: "web"}]; v.Pending() {
		t.Errorf("the holder lost its port to a Service of the same second: %+v", v)
	}
	if v := got[types.NamespacedName{Namespace: "ns", Name: "late"}]; v.Reason != ReasonPortConflict || !strings.Contains(v.Message, "ns/web") {
		t.Errorf("the newcomer: %+v", v)
	}
}

func TestOnlyNodeIPs(t *testing.T) {
	given := map[netip.Addr]bool{netip.MustParseAddr("10.0.0.1"): true}
	for _, tc := range []struct {
		ingress []corev1.LoadBalancerIngress
		want    bool
	}{
		{[]corev1.LoadBalancerIngress{{IP: "10.0.0.1"}}, true},
		{[]corev1.LoadBalancerIngress{{IP: "10.0.0.1"}, {IP: "192.0.2.1"}}, false},
		{[]corev1.LoadBalancerIngress{{Hostname: "lb.example"}}, false},
		{[]corev1.LoadBalancerIngress{{IP: "10.0.0.1", Ports: []corev1.PortStatus{{Port: 80}}}}, false},
	} {
		if got := onlyNodeIPs(corev1.LoadBalancerStatus{Ingress: tc.ingress}, given); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.ingress, got, tc.want)
		}
	}
}

// BenchmarkAssignNodeIPs: one decision over 1000 Services of two ports each (half of them
// on port 80, so 499 conflicts) on 16 node addresses, as one reconcile of the node-IP
// controller makes it.
func BenchmarkAssignNodeIPs(b *testing.B) {
	var nodes []corev1.Node
	for i := range 16 {
		nodes = append(nodes, setNode(fmt.Sprintf("n%d", i), "true", true, in, fmt.Sprintf("10.0.0.%d", i+1)))
	}
	var services []*corev1.Service
	for i := range 1000 {
		port := fmt.Sprintf("%d/TCP", 1000+i)
		if i%2 == 0 {
			port = "80/TCP"
		}
		services = append(services, nodeIPService(fmt.Sprintf("s%04d", i), int64(i), "", port, fmt.Sprintf("%d/UDP", 5000+i)))
	}
	reserved, _ := ParseReservedPorts(DefaultReservedPorts)
	b.ReportAllocs()
	for b.Loop() {
		AssignNodeIPs(services, nodes, reserved, byAnnotation, false)
	}
}
