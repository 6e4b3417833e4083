package xds

import (
	"errors"
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
)

// The tenant's rate-limit service (Envoy's ratelimit, which counts the global rate limits of
// its proxies; translator.RateLimitConfig) gets its configuration from this server too:
// CONFIG_TYPE=GRPC_XDS_SOTW, an ADS stream asking for resource.RateLimitConfigType, with the
// client certificate of the tenant's fleet. It is served the tenant's snapshot like a proxy,
// and so only ever its own tenant's configuration. Two differences:
//   - ratelimit sends no node.cluster (only node.id and metadata): a stream whose first
//     request asks for its configuration without one is taken to be of the tenant its
//     certificate names (rateLimitClient), which is what authorize checks anyway;
//   - it applies no listeners or clusters: Applied does not wait for it, and it is not
//     counted among the connected proxies.

// rateLimitClient reports whether the first request of a stream (node, typeURL) comes from a
// rate-limit service, which sends no node.cluster; it then sets node.cluster to identity,
// the tenant of the stream's client certificate. go-control-plane keeps that node for the
// stream and keys the tenant's snapshot by it.
func rateLimitClient(node *corev3.Node, typeURL, identity string) bool {
	if typeURL != resource.RateLimitConfigType || node == nil {
		return false
	}
	if node.GetCluster() == "" {
		node.Cluster = identity
	}
	return true
}

// Bounds of a rate-limit service's configuration.
const (
	maxRateLimitDepth   = 16
	maxRateLimitEntries = 1 << 16
)

// rateLimitConfig validates a RateLimitConfig (its proto has no validation of its own): a
// name and a domain, and descriptors with keys, nested at most maxRateLimitDepth deep, at
// most maxRateLimitEntries in all, each with a unit when it has a limit.
type rateLimitConfig struct{ *rlsconfv3.RateLimitConfig }

func (c rateLimitConfig) Validate() error {
	if c.GetName() == "" || c.GetDomain() == "" {
		return errors.New("rate-limit configuration without a name or a domain")
	}
	n := 0
	var check func(ds []*rlsconfv3.RateLimitDescriptor, depth int) error
	check = func(ds []*rlsconfv3.RateLimitDescriptor, depth int) error {
		if depth > maxRateLimitDepth {
			return fmt.Errorf("descriptors nested more than %d deep", maxRateLimitDepth)
		}
		for _, d := range ds {
			if n++; n > maxRateLimitEntries {
				return fmt.Errorf("more than %d descriptors", maxRateLimitEntries)
			}
			if strings.TrimSpace(d.GetKey()) == "" {
				return errors.New("a descriptor without a key")
			}
			if rl := d.GetRateLimit(); rl != nil && rl.GetUnit() == rlsconfv3.RateLimitUnit_UNKNOWN && !rl.GetUnlimited() {
				return fmt.Errorf("descriptor %q: a limit without a unit", d.GetKey())
			}
			if err := check(d.GetDescriptors(), depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return check(c.GetDescriptors(), 1)
}
