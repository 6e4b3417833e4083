package ccm

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// node builds a Node with a Ready condition and addresses given as type=address pairs.
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

func ips(s ...string) []v1alpha1.EndpointAddress {
	var out []v1alpha1.EndpointAddress
	for _, ip := range s {
		out = append(out, v1alpha1.EndpointAddress{IP: ip})
	}
	return out
}

func TestNodeAddresses(t *testing.T) {
	t.Parallel()
	const (
		extIP = string(corev1.NodeExternalIP)
		intIP = string(corev1.NodeInternalIP)
		host  = string(corev1.NodeHostName)
	)
	excluded := node("excluded", true, extIP, "1.1.1.9")
	excluded.Labels = map[string]string{corev1.LabelNodeExcludeBalancers: ""}
	deleting := node("deleting", true, extIP, "1.1.1.8")
	deleting.DeletionTimestamp = &metav1.Time{}
	noCondition := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "new"}, Status: corev1.NodeStatus{
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "1.1.1.7"}}}}

	tests := []struct {
		name        string
		nodes       []corev1.Node
		addressType string
		want        []v1alpha1.EndpointAddress
		serving     int
	}{
		{
			name:        "no nodes",
			addressType: NodeAddressExternalIP,
		},
		{
			name: "external IPs sorted numerically and deduplicated",
			nodes: []corev1.Node{
				node("a", true, extIP, "10.0.0.10", intIP, "192.168.0.1"),
				node("b", true, extIP, "10.0.0.2"),
				node("c", true, extIP, "10.0.0.10"), // same address as a
			},
			addressType: NodeAddressExternalIP,
			want:        ips("10.0.0.2", "10.0.0.10"),
			serving:     3,
		},
		{
			name: "not ready, excluded, deleting and condition-less nodes are left out",
			nodes: []corev1.Node{
				node("a", true, extIP, "1.1.1.1"),
				node("down", false, extIP, "1.1.1.2"),
				excluded, deleting, noCondition,
			},
			addressType: NodeAddressExternalIP,
			want:        ips("1.1.1.1"),
			serving:     1,
		},
		{
			name: "ExternalIP falls back to InternalIP, then Hostname",
			nodes: []corev1.Node{
				node("a", true, extIP, "1.1.1.1", intIP, "10.0.0.1"),
				node("b", true, intIP, "10.0.0.2", host, "b.example"),
				node("c", true, host, "c.example"),
				node("d", true), // no address at all: contributes nothing
			},
			addressType: NodeAddressExternalIP,
			want:        []v1alpha1.EndpointAddress{{Hostname: "c.example"}, {IP: "1.1.1.1"}, {IP: "10.0.0.2"}},
			serving:     3,
		},
		{
			name: "InternalIP falls back to ExternalIP",
			nodes: []corev1.Node{
				node("a", true, extIP, "1.1.1.1", intIP, "10.0.0.1"),
				node("b", true, extIP, "1.1.1.2"),
			},
			addressType: NodeAddressInternalIP,
			want:        ips("1.1.1.2", "10.0.0.1"),
			serving:     2,
		},
		{
			name: "Hostname falls back to InternalIP",
			nodes: []corev1.Node{
				node("a", true, intIP, "10.0.0.1", host, "a.example"),
				node("b", true, extIP, "1.1.1.2", intIP, "10.0.0.2"),
			},
			addressType: NodeAddressHostname,
			want:        []v1alpha1.EndpointAddress{{Hostname: "a.example"}, {IP: "10.0.0.2"}},
			serving:     2,
		},
		{
			name: "all addresses of the type (dual stack), IPv4 before IPv6",
			nodes: []corev1.Node{
				node("a", true, intIP, "fd00::1", intIP, "10.0.0.1"),
			},
			addressType: NodeAddressInternalIP,
			want:        ips("10.0.0.1", "fd00::1"),
			serving:     1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, serving := NodeAddresses(tc.nodes, tc.addressType)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("addresses (-want +got):\n%s", diff)
			}
			if serving != tc.serving {
				t.Errorf("serving nodes = %d, want %d", serving, tc.serving)
			}
		})
	}
}
