package planner

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/hubcache"
	"kubelb.dev/kubelb/internal/translate"
)

// IndexServiceAddress is the field index of the hub Services kubelb made (labelled
// kubelb.k8c.io/managed-by: kubelb), in every namespace, by the addresses they ask the hub's
// load balancer for (spec.loadBalancerIP) and hold (the IPs of status.loadBalancer.ingress).
const IndexServiceAddress = "kubelb.serviceAddress"

// indexServiceAddresses registers IndexServiceAddress with idx, once per indexer.
func indexServiceAddresses(ctx context.Context, idx client.FieldIndexer) error {
	return hubcache.IndexOnce(ctx, idx, &corev1.Service{}, IndexServiceAddress, "Services by address", serviceAddressIndex)
}

// serviceAddressIndex is the index function of IndexServiceAddress.
func serviceAddressIndex(o client.Object) []string {
	svc, ok := o.(*corev1.Service)
	if !ok || svc.Labels[kubelbv1alpha1.LabelManagedBy] != kubelbv1alpha1.LabelManagedByValue {
		return nil
	}
	var out []string
	add := func(s string) {
		if a, err := netip.ParseAddr(s); err == nil {
			if k := a.Unmap().String(); !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	add(svc.Spec.LoadBalancerIP)
	for _, in := range svc.Status.LoadBalancer.Ingress {
		add(in.IP)
	}
	return out
}

// staticAddress is the address the manager asks the hub's load balancer for on the hub
// Service of Gateway route (spec.loadBalancerIP; invalid: none, and taken when another hub
// Service holds or asks for the one it asks for): the one static address its
// spec.addresses asks for, inside the tenant's grant (translate.StaticAddressRequest), when
// no other hub Service of any tenant holds it or asks for it first (staticAddressFree).
// Translate reports on the Gateway why it is not asked for.
func (c *Controller) staticAddress(ctx context.Context, route *kubelbv1alpha1.Route, grant []netip.Prefix, own *corev1.Service) (_ netip.Addr, taken bool, _ error) {
	if len(grant) == 0 {
		return netip.Addr{}, false, nil
	}
	addrs, ok := gatewaySpecAddresses(route)
	if !ok {
		return netip.Addr{}, false, nil
	}
	ip, ok, _ := translate.StaticAddressRequest(addrs, grant)
	if !ok {
		return netip.Addr{}, false, nil
	}
	list := &corev1.ServiceList{}
	if err := c.client.List(ctx, list, client.MatchingFields{IndexServiceAddress: ip.String()}, client.UnsafeDisableDeepCopy); err != nil {
		return netip.Addr{}, false, fmt.Errorf("listing the hub Services of address %s: %w", ip, err)
	}
	self := types.NamespacedName{Namespace: route.Namespace, Name: hubnames.GatewayServiceName(route.Name)}
	if !staticAddressFree(ip, self, own, list.Items) {
		return netip.Addr{}, true, nil
	}
	return ip, false, nil
}

// staticAddressFree reports whether the hub Service self (own: as it is, nil when it does not
// exist yet) may ask for ip, given the other hub Services that ask for it (spec.loadBalancerIP)
// or hold it (show it in status.loadBalancer.ingress): a holder keeps it (of two holders, the
// older: creation time, then namespace/name); with no holder, the oldest that asks takes it —
// whatever order the reconciles run in.
func staticAddressFree(ip netip.Addr, self types.NamespacedName, own *corev1.Service, others []corev1.Service) bool {
	holds := own != nil && showsIP(own, ip)
	for i := range others {
		o := &others[i]
		if o.Namespace == self.Namespace && o.Name == self.Name {
			continue
		}
		switch {
		case showsIP(o, ip) && (!holds || olderService(o, own)):
			return false
		case !holds && (own == nil || olderService(o, own)):
			return false
		}
	}
	return true
}

// showsIP reports whether svc's status.loadBalancer.ingress has ip.
func showsIP(svc *corev1.Service, ip netip.Addr) bool {
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil && a.Unmap() == ip {
			return true
		}
	}
	return false
}

// olderService reports whether a was created before b (then by namespace/name).
func olderService(a, b *corev1.Service) bool {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c < 0
	}
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name)) < 0
}

// gatewaySpecAddresses reads spec.addresses of the Gateway embedded in route.
func gatewaySpecAddresses(route *kubelbv1alpha1.Route) ([]gwv1.GatewaySpecAddress, bool) {
	var spec struct {
		Addresses []gwv1.GatewaySpecAddress `json:"addresses"`
	}
	raw, _ := route.Spec.Source.Kubernetes.Route.Object["spec"].(map[string]any)
	if raw == nil || runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec) != nil {
		return nil, false
	}
	return spec.Addresses, true
}
