package xds

import (
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
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

// answeredNamesOf records the resources of the state-of-the-world response the proxy on s
// answered. The caller holds c.mu.
func (c *callbacks) answeredNamesOf(s stream, typeURL string, names []string) {
	if c.answeredNames[s] == nil {
		c.answeredNames[s] = map[string][]string{}
	}
	c.answeredNames[s][typeURL] = names
}

// requestedNames records the resources a state-of-the-world request asks for. The caller
// holds c.mu.
func (c *callbacks) requestedNames(s stream, req *discoveryv3.DiscoveryRequest) {
	if wildcardTypes[req.GetTypeUrl()] {
		return
	}
	if c.requested[s] == nil {
		c.requested[s] = map[string][]string{}
	}
	c.requested[s][req.GetTypeUrl()] = req.GetResourceNames()
}

// sotwNames are the resources a state-of-the-world response to req carries, of the types a
// stream names: those req asked for (the cache leaves out those it does not have). Nil for
// the wildcard types, which applied checks by version alone.
func sotwNames(req *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) []string {
	if wildcardTypes[resp.GetTypeUrl()] {
		return nil
	}
	return req.GetResourceNames()
}

// subscribe follows the resources a delta request subscribes to and unsubscribes from.
func (t *deltaType) subscribe(req *discoveryv3.DeltaDiscoveryRequest) {
	if wildcardTypes[req.GetTypeUrl()] {
		return
	}
	if t.subscribed == nil {
		t.subscribed, t.answered = map[string]struct{}{}, map[string]string{}
	}
	for _, n := range req.GetResourceNamesSubscribe() {
		t.subscribed[n] = struct{}{}
	}
	for n := range req.GetInitialResourceVersions() {
		t.subscribed[n] = struct{}{}
	}
	for _, n := range req.GetResourceNamesUnsubscribe() {
		delete(t.subscribed, n)
		delete(t.answered, n)
	}
}

// answer records the versions of the resources of a response the proxy answered.
func (t *deltaType) answer(resp deltaResponse) {
	if t.answered == nil {
		return // a wildcard type: checked by version
	}
	for i, n := range resp.names {
		if v := resp.versions[i]; v != "" {
			t.answered[n] = v
		} else {
			delete(t.answered, n)
		}
	}
}

// applied reports whether every stream of the tenant's proxies has answered the versions
// (by type URL) of the tenant's configuration, for each type it was sent. current holds the
// version of each resource of the tenant's snapshot, by type URL (the types streams name
// resources of):
//   - the wildcard types (listeners, clusters), whose every change is sent to every stream:
//     the answered version must be the given one;
//   - the other types, of which a stream is sent only the resources it names: every resource
//     it names that the snapshot holds must have been answered at its current version
//     (delta), or carried by the latest response answered, at the given version (state of
//     the world). A change of resources the stream does not name leaves it nothing to
//     answer; a resource it just asked for (a new cluster's endpoints) and was not sent yet
//     is waited for.
//
// A rejection counts as an answer: the rejection itself reaches the objects concerned.
func (c *callbacks) applied(tenant string, versions map[string]string, current map[string]map[string]string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for s, p := range c.streams {
		if p.tenant != tenant {
			continue
		}
		if s.delta {
			for typeURL, t := range c.delta[s] {
				want, ok := versions[typeURL]
				if !ok {
					continue
				}
				if wildcardTypes[typeURL] {
					if t.last != "" && c.answered[s][typeURL] != want {
						return false
					}
					continue
				}
				have := current[typeURL]
				for n := range t.subscribed {
					if v, ok := have[n]; ok && t.answered[n] != v {
						return false
					}
				}
			}
			continue
		}
		for typeURL := range c.sent[s] {
			want, ok := versions[typeURL]
			if !ok {
				continue
			}
			if c.answered[s][typeURL] != want {
				return false
			}
			if !wildcardTypes[typeURL] && !carried(c.requested[s][typeURL], c.answeredNames[s][typeURL], current[typeURL]) {
				return false
			}
		}
	}
	return true
}

// carried reports whether every resource of asked that have holds is among answered.
func carried(asked, answered []string, have map[string]string) bool {
	var in map[string]bool
	for _, n := range asked {
		if _, ok := have[n]; !ok {
			continue
		}
		if in == nil {
			in = make(map[string]bool, len(answered))
			for _, a := range answered {
				in[a] = true
			}
		}
		if !in[n] {
			return false
		}
	}
	return true
}

// Applied reports whether every Envoy proxy of the tenant connected to this server has
// answered — accepted, or rejected — the configuration whose versions (by type URL, as
// TypeVersion gives them) are given. A tenant without connected proxies has nothing to wait
// for. Proxies connected to other replicas are not known here.
func (s *Server) Applied(tenant string, versions map[string]string) bool {
	current := map[string]map[string]string{}
	if snap, err := s.ordered.GetSnapshot(tenant); err == nil {
		for typeURL := range versions {
			if !wildcardTypes[typeURL] {
				current[typeURL] = snap.GetVersionMap(typeURL)
			}
		}
	}
	return s.cb.applied(tenant, versions, current)
}
