package translate

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/internal/ir"
)

// gatewayAddresses is what kubelb makes of a Gateway's spec.addresses. A Gateway's address is
// whatever the hub's load balancer gives its hub Service, so:
//   - an entry of type IPAddress (the default) without a value asks for any address: served
//     (GatewayAddressEmpty);
//   - an entry of type IPAddress with a value asks for that address (a static address): not yet
//     supported — the Gateway is served at the address the hub gives, and is not Programmed
//     (AddressNotUsable), so that nobody takes the asked address for its own;
//   - an entry of another type (Hostname, or an implementation's) cannot be asked for at all:
//     the Gateway is not accepted (UnsupportedAddress) and nothing of it is served.
type gatewayAddresses struct {
	unsupported string // why the Gateway is not accepted ("": it is)
	unusable    string // why it is not programmed ("": it is, address permitting)
}

// maxGatewayAddresses is the most spec.addresses entries read: Gateway API's bound, which
// the embedded object of a hub Route is not validated against.
const maxGatewayAddresses = 16

// maxNamedAddresses is how many static addresses a message names.
const maxNamedAddresses = 3

// readGatewayAddresses reads spec.addresses (the first maxGatewayAddresses).
func readGatewayAddresses(addrs []gwv1.GatewaySpecAddress) gatewayAddresses {
	var out gatewayAddresses
	var static []string
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
				out.unsupported = fmt.Sprintf("spec.addresses asks for an address of type %q: a Gateway's address is the one the hub's load balancer gives, and only type IPAddress without a value (any address) can be asked for", truncate(string(typ)))
			}
		case a.Value != "":
			static = append(static, truncate(a.Value))
		}
	}
	if n := len(static); n > maxNamedAddresses {
		static = append(static[:maxNamedAddresses], fmt.Sprintf("(and %d more)", n-maxNamedAddresses))
	}
	if len(static) > 0 {
		out.unusable = fmt.Sprintf("spec.addresses asks for %s: static Gateway addresses are not yet supported (the Gateway is served at the address the hub's load balancer gives); remove the value to take that address", strings.Join(static, ", "))
	}
	return out
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
// is not accepted as a whole (its parametersRef, an address that cannot be asked for) or its
// spec.addresses cannot be served (Programmed only when it was True), and reports why on the
// Route.
func (t *l7) addressConditions(g *gateway, st *gwv1.GatewayStatus) {
	r := g.route
	switch {
	case g.refused != nil:
		meta.SetStatusCondition(&st.Conditions, t.cond(r, string(gwv1.GatewayConditionAccepted), false, string(g.refused.reason), "%s", g.refused.message))
		meta.SetStatusCondition(&st.Conditions, t.cond(r, string(gwv1.GatewayConditionProgrammed), false, string(gwv1.GatewayReasonInvalid), "the Gateway is not accepted; nothing is served"))
		t.problems.Add(t.ref(r, ""), ir.SeverityError, string(g.refused.reason), "%s; nothing is served", g.refused.message)
	case g.addresses.unusable != "":
		// An address not assigned yet says more than the one asked for.
		if meta.IsStatusConditionTrue(st.Conditions, string(gwv1.GatewayConditionProgrammed)) {
			meta.SetStatusCondition(&st.Conditions, t.cond(r, string(gwv1.GatewayConditionProgrammed), false, string(gwv1.GatewayReasonAddressNotUsable), "%s", g.addresses.unusable))
		}
		t.problems.Add(t.ref(r, ""), ir.SeverityError, string(gwv1.GatewayReasonAddressNotUsable), "%s", g.addresses.unusable)
	}
}
