package route

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/util/validation"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

// GatewayServiceName is the name of the hub Service of a Gateway's Route, in the Route's
// namespace: "gateway-<route name>". A Route is named by a tenant object's UID, which may
// start with a digit; the prefix makes it a valid Service name. Names that would still be
// invalid (too long, other characters) become "gateway-" plus the first 32 hex digits of the
// sha256 of the Route name: the rule of loadbalancer.HubServiceName.
func GatewayServiceName(routeName string) string {
	name := kubelbv1alpha1.GatewayServicePrefix + routeName
	if len(validation.IsDNS1035Label(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(routeName))
	return kubelbv1alpha1.GatewayServicePrefix + hex.EncodeToString(sum[:])[:32]
}
