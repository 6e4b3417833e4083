package translate_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"kubelb.dev/kubelb/internal/translate"
)

func TestHubRanges(t *testing.T) {
	t.Parallel()
	cidrs := []networkingv1.ServiceCIDR{
		{Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/16", "fd00:10:96::/112"}}},
		{Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/16", "garbage"}}},
	}
	nodes := []corev1.Node{
		{Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24"}}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "192.168.0.10"}, {Type: corev1.NodeExternalIP, Address: "2001:db8::10"},
			{Type: corev1.NodeHostName, Address: "node-1"}, {Type: corev1.NodeInternalDNS, Address: "node-1.internal"},
		}}},
		{Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.10"}}}},
	}
	var got []string
	for _, r := range translate.HubRanges(cidrs, nodes) {
		got = append(got, r.String())
	}
	want := []string{
		"10.96.0.0/16 (hub Service CIDR)", "10.244.1.0/24 (hub Pod CIDR)", "192.168.0.10/32 (hub node address)",
		"2001:db8::10/128 (hub node address)", "fd00:10:96::/112 (hub Service CIDR)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("HubRanges = %q, want %q", got, want)
	}
}
