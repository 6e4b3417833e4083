package translate

import (
	"cmp"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// HubRanges returns the ranges of the hub that tenants' endpoints must not reach
// (EndpointPolicy.Hub): the CIDRs of its ServiceCIDRs, the Pod CIDRs of its Nodes and their
// InternalIP and ExternalIP addresses (each a /32 or /128). Sorted and deduplicated; entries
// that do not parse are left out.
func HubRanges(cidrs []networkingv1.ServiceCIDR, nodes []corev1.Node) []PolicyRule {
	var out []PolicyRule
	add := func(s, src string) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return
		}
		out = append(out, PolicyRule{Prefix: p.Masked(), Source: src})
	}
	for i := range cidrs {
		for _, c := range cidrs[i].Spec.CIDRs {
			add(c, SourceHubServiceCIDR)
		}
	}
	for i := range nodes {
		n := &nodes[i]
		for _, c := range n.Spec.PodCIDRs {
			add(c, SourceHubPodCIDR)
		}
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Zone() == "" {
				ip = ip.Unmap()
				out = append(out, PolicyRule{Prefix: netip.PrefixFrom(ip, ip.BitLen()), Source: SourceHubNode})
			}
		}
	}
	slices.SortFunc(out, func(a, b PolicyRule) int {
		return cmp.Or(a.Prefix.Addr().Compare(b.Prefix.Addr()), cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()), cmp.Compare(a.Source, b.Source))
	})
	return slices.Compact(out)
}
