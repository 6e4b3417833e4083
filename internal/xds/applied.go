package xds

import (
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// What the proxies connected to this server made of the configuration they were sent: for
// every stream and type, the version of the latest response the proxy answered (accepted or
// rejected). The status writer asks Applied before it tells a tenant that a route is
// served, so that the tenant's first request after its route turns Accepted meets the new
// configuration, not the previous one.

// answeredVersion records that the proxy on s answered (ACK or NACK) the response of typeURL
// at version. The caller holds c.mu.
func (c *callbacks) answeredVersion(s stream, typeURL, version string) {
	if c.answered[s] == nil {
		c.answered[s] = map[string]string{}
	}
	c.answered[s][typeURL] = version
}

// wildcardTypes are the types every proxy subscribes to whole: a change of their version
// is sent to every stream. Of the other types a stream gets only the resources it names, so
// a change of another resource sends it nothing (delta).
var wildcardTypes = map[string]bool{resource.ListenerType: true, resource.ClusterType: true}

// applied reports whether every stream of the tenant's proxies has answered the versions
// (by type URL) of the tenant's current snapshot, for each type it was sent:
//   - state of the world: every change of a type's version is sent to every stream of the
//     type, so the answered version must be the current one;
//   - delta: the same for the wildcard types; a stream of another type is current when it
//     answered the current version, or when no response of the type waits for its answer
//     (the change did not concern the resources it names, so it was sent nothing).
//
// A rejection counts as an answer: the rejection itself reaches the objects concerned.
func (c *callbacks) applied(tenant string, versions map[string]string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for s, p := range c.streams {
		if p.tenant != tenant {
			continue
		}
		if s.delta {
			for typeURL, t := range c.delta[s] {
				want, ok := versions[typeURL]
				if !ok || t.last == "" {
					continue
				}
				got := c.answered[s][typeURL]
				if got == want || (!wildcardTypes[typeURL] && len(t.unanswered) == 0) {
					continue
				}
				return false
			}
			continue
		}
		for typeURL := range c.sent[s] {
			if want, ok := versions[typeURL]; ok && c.answered[s][typeURL] != want {
				return false
			}
		}
	}
	return true
}

// Applied reports whether every Envoy proxy of the tenant connected to this server has
// answered — accepted, or rejected — the configuration whose versions (by type URL, as
// TypeVersion gives them) are given. A tenant without connected proxies has nothing to wait
// for. Proxies connected to other replicas are not known here.
func (s *Server) Applied(tenant string, versions map[string]string) bool {
	return s.cb.applied(tenant, versions)
}
