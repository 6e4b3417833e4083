package ccm

import (
	"cmp"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/nodeip"
)

// LabelExcludeFromExternalLoadBalancers is the well-known node label that keeps a node out of
// every cloud load balancer; the ccm honours it like the cloud providers do.
const LabelExcludeFromExternalLoadBalancers = corev1.LabelNodeExcludeBalancers

// addressFallback lists, for each configured node address type, the types tried in order for
// a node that has no address of the configured type.
var addressFallback = map[string][]corev1.NodeAddressType{
	NodeAddressExternalIP: {corev1.NodeExternalIP, corev1.NodeInternalIP, corev1.NodeHostName},
	NodeAddressInternalIP: {corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName},
	NodeAddressHostname:   {corev1.NodeHostName, corev1.NodeInternalIP, corev1.NodeExternalIP},
}

// NodeReady tells whether a node's Ready condition is True.
func NodeReady(n *corev1.Node) bool { return nodeip.NodeReady(n) }

// nodeServes tells whether a node receives load balancer traffic: Ready, not being deleted, and
// not labelled node.kubernetes.io/exclude-from-external-load-balancers.
func nodeServes(n *corev1.Node) bool { return nodeip.NodeServes(n) }

// NodeAddresses returns the addresses the hub sends traffic to: for every serving node (see
// nodeServes) all its addresses of the configured type, or, when it has none, of the first
// fallback type it has (ExternalIP → InternalIP → Hostname; InternalIP → ExternalIP →
// Hostname; Hostname → InternalIP → ExternalIP). The result is sorted and deduplicated; it
// also returns the number of nodes that contributed an address.
func NodeAddresses(nodes []corev1.Node, addressType string) ([]v1alpha1.EndpointAddress, int) {
	order, ok := addressFallback[addressType]
	if !ok {
		order = addressFallback[NodeAddressExternalIP]
	}
	var out []v1alpha1.EndpointAddress
	serving := 0
	for i := range nodes {
		n := &nodes[i]
		if !nodeServes(n) {
			continue
		}
		for _, t := range order {
			found := false
			for _, a := range n.Status.Addresses {
				if a.Type != t || a.Address == "" {
					continue
				}
				found = true
				if t == corev1.NodeHostName {
					out = append(out, v1alpha1.EndpointAddress{Hostname: a.Address})
				} else {
					out = append(out, v1alpha1.EndpointAddress{IP: a.Address})
				}
			}
			if found {
				serving++
				break
			}
		}
	}
	slices.SortFunc(out, compareAddresses)
	return slices.Compact(out), serving
}

// DesiredAddresses is Addresses/default in the tenant's hub namespace holding addresses, or
// nil when there are none (the object must then not exist).
func DesiredAddresses(namespace string, addresses []v1alpha1.EndpointAddress) *v1alpha1.Addresses {
	if len(addresses) == 0 {
		return nil
	}
	return &v1alpha1.Addresses{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultAddressesName, Namespace: namespace, Labels: hubnames.TenantLabels(hubnames.TenantName(namespace))},
		Spec:       v1alpha1.AddressesSpec{Addresses: addresses},
	}
}

// compareAddresses orders hostnames first (by name), then IPs numerically (IPv4 before IPv6);
// text that is not an IP sorts by its string after the IPs.
func compareAddresses(a, b v1alpha1.EndpointAddress) int {
	if a.IP == "" || b.IP == "" {
		return cmp.Or(cmp.Compare(a.IP, b.IP), cmp.Compare(a.Hostname, b.Hostname))
	}
	ia, errA := netip.ParseAddr(a.IP)
	ib, errB := netip.ParseAddr(b.IP)
	switch {
	case errA == nil && errB == nil:
		return cmp.Or(ia.Compare(ib), cmp.Compare(a.IP, b.IP))
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return cmp.Compare(a.IP, b.IP)
}
