package translate

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
)

// gatewayAddresses is what kubelb makes of a Gateway's spec.addresses. A Gateway's address is
// whatever the hub's load balancer gives its hub Service, so:
//   - an entry of type IPAddress (the default) without a value asks for any address: served
//     (GatewayAddressEmpty);
//   - an entry of type IPAddress with a value asks for that address (a static address): the
//     manager asks the hub's load balancer for it (spec.loadBalancerIP of the hub Service)
//     when it is the only one, lies in the tenant's grant (Options.StaticAddresses) and no
//     other hub Service holds or asks for it (StaticAddressRequest); the Gateway is
//     Programmed only once the hub Service shows it, and is not Programmed
//     (AddressNotUsable) otherwise;
//   - an entry of another type (Hostname, or an implementation's) cannot be asked for at all:
//     the Gateway is not accepted (UnsupportedAddress) and nothing of it is served.
type gatewayAddresses struct {
	unsupported string   // why the Gateway is not accepted ("": it is)
	static      []string // the values of the IPAddress entries with a value
}

// maxGatewayAddresses is the most spec.addresses entries read: Gateway API's bound, which
// the embedded object of a hub Route is not validated against.
const maxGatewayAddresses = 16

// maxNamedAddresses is how many static addresses a message names.
const maxNamedAddresses = 3

// readGatewayAddresses reads spec.addresses (the first maxGatewayAddresses).
func readGatewayAddresses(addrs []gwv1.GatewaySpecAddress) gatewayAddresses {
	var out gatewayAddresses
	if len(addrs) > maxGatewayAddresses {
		addrs = addrs[:maxGatewayAddresses]
	}
	for _, a := range addrs {
		typ := gwv1.IPAddressType
		if a.Type != nil {
			typ = *a.Type
		}
		switch {
		case typ != gwv1.IPAddressType:
			if out.unsupported == "" {
				out.unsupported = fmt.Sprintf("spec.addresses asks for an address of type %q: a Gateway's address is the one the hub's load balancer gives, and only type IPAddress can be asked for", truncate(string(typ)))
			}
		case a.Value != "" && !slices.Contains(out.static, a.Value):
			out.static = append(out.static, a.Value)
		}
	}
	return out
}

// StaticAddressRequest is the static address a Gateway's spec.addresses asks for, when the
// manager may ask the hub's load balancer for it: exactly one entry of type IPAddress with a
// value, an IP address inside grant (the tenant's, settings.StaticAddressGrant). Otherwise ok
// is false and why says what stands in the way ("" when no static address is asked). Whether
// another hub Service holds or asks for the address is for the manager to find out.
func StaticAddressRequest(addrs []gwv1.GatewaySpecAddress, grant []netip.Prefix) (addr netip.Addr, ok bool, why string) {
	a := readGatewayAddresses(addrs)
	switch {
	case a.unsupported != "":
		return netip.Addr{}, false, a.unsupported
	case len(a.static) == 0:
		return netip.Addr{}, false, ""
	case len(a.static) > 1:
		return netip.Addr{}, false, fmt.Sprintf("spec.addresses asks for %d static addresses (%s): a Gateway's hub Service can ask the hub's load balancer for one; keep one", len(a.static), namedAddresses(a.static))
	}
	ip, err := netip.ParseAddr(a.static[0])
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, false, fmt.Sprintf("spec.addresses asks for %q, which is not an IP address", truncate(a.static[0]))
	}
	ip = ip.Unmap()
	for _, p := range grant {
		if p.Contains(ip) {
			return ip, true, ""
		}
	}
	return netip.Addr{}, false, fmt.Sprintf("spec.addresses asks for %s, which is not among the addresses granted to the tenant (the Tenant's spec.gatewayAPI.staticAddresses, written by the platform team); ask for a granted address, or remove the value to take the address the hub's load balancer gives", ip)
}

// namedAddresses names the first maxNamedAddresses of values.
func namedAddresses(values []string) string {
	named := make([]string, 0, maxNamedAddresses+1)
	for i, v := range values {
		if i == maxNamedAddresses {
			named = append(named, fmt.Sprintf("(and %d more)", len(values)-maxNamedAddresses))
			break
		}
		named = append(named, truncate(v))
	}
	return strings.Join(named, ", ")
}

// staticAddressProblem says why the static address g asks for is not (yet) its address (""
// when it is, or none is asked), from the tenant's grant and its hub Service svc (may be nil):
// the manager sets the hub Service's spec.loadBalancerIP to the address it asks the hub's load
// balancer for, and the hub's load balancer shows it in status.loadBalancer.ingress.
func (t *l7) staticAddressProblem(g *gateway) string {
	if len(g.addresses.static) == 0 {
		return ""
	}
	ip, ok, why := StaticAddressRequest(g.obj.Spec.Addresses, t.in.StaticAddresses)
	if !ok {
		return why
	}
	svc := fmt.Sprintf("%s%s", v1alpha1.GatewayServicePrefix, truncate(g.route.Name))
	if g.svc == nil {
		return fmt.Sprintf("spec.addresses asks for %s: the hub Service %s does not exist yet", ip, svc)
	}
	if asked, err := netip.ParseAddr(g.svc.Spec.LoadBalancerIP); err != nil || asked.Unmap() != ip {
		return fmt.Sprintf("spec.addresses asks for %s, which another hub Service (of this or another tenant) holds or asks for; ask for another granted address, or wait until it is free", ip)
	}
	if !showsAddress(g.svc, ip) {
		return fmt.Sprintf("spec.addresses asks for %s: the hub's load balancer has not given it to the hub Service %s (yet); it must honour spec.loadBalancerIP", ip, svc)
	}
	return ""
}

// showsAddress reports whether svc's status.loadBalancer.ingress has ip.
func showsAddress(svc *corev1.Service, ip netip.Addr) bool {
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(ing.IP); err == nil && a.Unmap() == ip {
			return true
		}
	}
	return false
}

// staticStatusAddresses are the Gateway's status.addresses when it asks for a static address
// that its hub Service shows: exactly the asked addresses; nil otherwise.
func (t *l7) staticStatusAddresses(g *gateway) []gwv1.GatewayStatusAddress {
	if g.svc == nil || len(g.addresses.static) == 0 || t.staticAddressProblem(g) != "" {
		return nil
	}
	ip, _, _ := StaticAddressRequest(g.obj.Spec.Addresses, t.in.StaticAddresses)
	typ := gwv1.IPAddressType
	return []gwv1.GatewayStatusAddress{{Type: &typ, Value: ip.String()}}
}

// refuseListeners stops serving every listener of a Gateway that is not accepted (its
// parametersRef or addresses): no route attaches, nothing is programmed.
func (t *l7) refuseListeners(g *gateway) {
	for _, l := range g.listeners {
		l.attachable, l.valid, l.served = false, false, false
		l.programmed = t.cond(l.route(), string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerReasonInvalid), "the listener is not served: the Gateway is not accepted")
	}
}

// addressConditions replaces the Gateway's Accepted and Programmed conditions in st when it
// is not accepted as a whole (its parametersRef, an address that cannot be asked for) or the
// static address it asks for is not its address (Programmed only when it was True), and
// reports why on the Route.
func (t *l7) addressConditions(g *gateway, st *gwv1.GatewayStatus) {
	r := g.route
	if g.refused != nil {
		meta.SetStatusCondition(&st.Conditions, t.cond(r, string(gwv1.GatewayConditionAccepted), false, string(g.refused.reason), "%s", g.refused.message))
		meta.SetStatusCondition(&st.Conditions, t.cond(r, string(gwv1.GatewayConditionProgrammed), false, string(gwv1.GatewayReasonInvalid), "the Gateway is not accepted; nothing is served"))
		t.problems.Add(t.ref(r, ""), ir.SeverityError, string(g.refused.reason), "%s; nothing is served", g.refused.message)
		return
	}
	if msg := t.staticAddressProblem(g); msg != "" {
		// An address not assigned yet says more than the one asked for.
		if meta.IsStatusConditionTrue(st.Conditions, string(gwv1.GatewayConditionProgrammed)) {
			meta.SetStatusCondition(&st.Conditions, t.cond(r, string(gwv1.GatewayConditionProgrammed), false, string(gwv1.GatewayReasonAddressNotUsable), "%s", msg))
		}
		t.problems.Add(t.ref(r, ""), ir.SeverityError, string(gwv1.GatewayReasonAddressNotUsable), "%s", msg)
	}
}
