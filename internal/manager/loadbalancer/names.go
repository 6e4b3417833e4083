package loadbalancer

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/util/validation"
)

// hubServicePrefix prefixes the LoadBalancer name to form its hub Service name, as KubeLB
// Community Edition does, so hub Services made by either manager have the same names.
const hubServicePrefix = "envoy-"

// HubServiceName is the name of the hub Service of a LoadBalancer, in the LoadBalancer's
// namespace: "envoy-<lb name>". A LoadBalancer is named by a tenant Service UID, which may
// start with a digit and so is not a valid Service name by itself; the prefix makes it one.
// Names that would still be invalid (too long, other characters) become "envoy-" plus a
// hash of the name, which is as deterministic.
func HubServiceName(lbName string) string {
	name := hubServicePrefix + lbName
	if len(validation.IsDNS1035Label(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(lbName))
	return hubServicePrefix + hex.EncodeToString(sum[:])[:32]
}
