package translate

import (
	"fmt"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// gatewayRefusal is why a Gateway is not accepted as a whole (Accepted False with reason):
// nothing of it is served, no route attaches to it, none of its ListenerSets is accepted.
type gatewayRefusal struct {
	reason  gwv1.GatewayConditionReason
	message string
}

// gatewayRefused is why a Gateway is not accepted as a whole (nil: it may be): first a
// spec.infrastructure.parametersRef, which kubelb cannot use (readParametersRef), then a
// spec.addresses entry that cannot be asked for (readGatewayAddresses).
func gatewayRefused(spec *gwv1.GatewaySpec, addrs gatewayAddresses) *gatewayRefusal {
	if msg := readParametersRef(spec.Infrastructure); msg != "" {
		return &gatewayRefusal{reason: gwv1.GatewayReasonInvalidParameters, message: msg}
	}
	if addrs.unsupported != "" {
		return &gatewayRefusal{reason: gwv1.GatewayReasonUnsupportedAddress, message: addrs.unsupported}
	}
	return nil
}

// readParametersRef says why a Gateway's spec.infrastructure.parametersRef cannot be used
// ("": there is none). kubelb reads no parameters resource: a Gateway's configuration is its
// own spec and the tenant's settings on the hub, so any reference is one it cannot honour, and
// serving the Gateway without what it names would serve something its owner did not ask for.
// spec.infrastructure.labels and annotations are used (docs/l7.md, "Gateway infrastructure").
func readParametersRef(infra *gwv1.GatewayInfrastructure) string {
	if infra == nil || infra.ParametersRef == nil {
		return ""
	}
	p := infra.ParametersRef
	group := string(p.Group)
	if group == "" {
		group = "core"
	}
	return fmt.Sprintf("spec.infrastructure.parametersRef names %s %q of group %q: kubelb reads no parameters resource (a Gateway is configured by its own spec and the tenant's settings on the hub); remove spec.infrastructure.parametersRef",
		truncate(string(p.Kind)), truncate(p.Name), truncate(group))
}
