package xds

import (
	"maps"
	"slices"

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

// requestedNames records that a state-of-the-world stream asks for a type, and the resources
// it names. The caller holds c.mu.
func (c *callbacks) requestedNames(s stream, req *discoveryv3.DiscoveryRequest) {
	if c.requested[s] == nil {
		c.requested[s] = map[string][]string{}
	}
	typeURL := req.GetTypeUrl()
	if _, sent := c.sent[s][typeURL]; !sent && req.GetVersionInfo() != "" && req.GetErrorDetail() == nil {
		// A proxy that reconnects says which version it has; it is sent nothing while that is
		// the current one.
		c.answeredVersion(s, typeURL, req.GetVersionInfo())
		c.answeredNamesOf(s, typeURL, req.GetResourceNames())
	}
	if wildcardTypes[typeURL] {
		c.requested[s][typeURL] = nil
		return
	}
	c.requested[s][typeURL] = req.GetResourceNames()
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

// subscribe follows what a delta request says of the resources the proxy has and wants: the
// versions it already has (initial_resource_versions, on a new stream), and, of the types
// it names resources of, the resources it subscribes to and unsubscribes from.
func (t *deltaType) subscribe(req *discoveryv3.DeltaDiscoveryRequest) {
	if t.answered == nil {
		t.answered = map[string]string{}
	}
	for n, v := range req.GetInitialResourceVersions() {
		t.answered[n] = v
	}
	if wildcardTypes[req.GetTypeUrl()] {
		return
	}
	if t.subscribed == nil {
		t.subscribed = map[string]struct{}{}
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
		t.answered = map[string]string{}
	}
	for i, n := range resp.names {
		if v := resp.versions[i]; v != "" {
			t.answered[n] = v
		} else {
			delete(t.answered, n)
		}
	}
}

// current reports whether the proxy answered every resource of have (name → version) it
// gets: all of them (all), or those it subscribed to.
func (t *deltaType) current(all bool, have map[string]string) bool {
	if all {
		for n, v := range have {
			if t.answered[n] != v {
				return false
			}
		}
		return true
	}
	for n := range t.subscribed {
		if v, ok := have[n]; ok && t.answered[n] != v {
			return false
		}
	}
	return true
}

// parentType is the type whose resources reference those of a type: a cluster its endpoints,
// a listener its route configurations. A snapshot holds exactly the endpoints and route
// configurations its clusters and listeners reference (newSnapshot checks it), so a proxy
// that accepted every cluster and listener asks for every one of them.
var parentType = map[string]string{resource.EndpointType: resource.ClusterType, resource.RouteType: resource.ListenerType}

// applied reports whether every stream of the tenant's proxies has answered the tenant's
// configuration: versions by type URL, and current, the version of each resource of the
// tenant's snapshot by type URL. A proxy gets every listener and cluster, and so asks for
// every route configuration and endpoints they reference (unless it rejected the listeners
// or clusters); of the other types (secrets) only those it asks for by name:
//   - delta: each resource the proxy gets was answered at its current version, or was already
//     the proxy's when the stream opened;
//   - state of the world: the latest response of each type was answered at the given version,
//     and carried every resource the proxy gets.
//
// So a type the proxy has not asked for yet, while the snapshot holds resources of it, is
// waited for: Envoy asks for listeners only once its first clusters are warm, and for a new
// cluster's endpoints sometimes after it answered the clusters. A change of resources the
// proxy does not get (a secret it does not use) is not waited for. A rejection counts as an
// answer: the rejection itself reaches the objects concerned.
func (c *callbacks) applied(tenant string, versions map[string]string, current map[string]map[string]string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for s, p := range c.streams {
		if p.tenant != tenant || p.rateLimit { // the rate-limit service applies no listeners
			continue
		}
		for typeURL, want := range versions {
			have := current[typeURL]
			parent, dependent := parentType[typeURL]
			all := wildcardTypes[typeURL] || (dependent && !c.rejected[s][parent])
			if s.delta {
				t := c.delta[s][typeURL]
				if t == nil {
					if all && len(have) > 0 {
						return false
					}
					continue
				}
				if !t.current(all, have) {
					return false
				}
				continue
			}
			asked, ok := c.requested[s][typeURL]
			if !ok {
				if all && len(have) > 0 {
					return false
				}
				continue
			}
			if _, sent := c.sent[s][typeURL]; (sent || len(have) > 0) && c.answered[s][typeURL] != want {
				return false
			}
			if wildcardTypes[typeURL] {
				continue
			}
			if all {
				asked = slices.Collect(maps.Keys(have))
			}
			if !carried(asked, c.answeredNames[s][typeURL], have) {
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
	current := map[string]map[string]string{}
	if snap, err := s.ordered.GetSnapshot(tenant); err == nil {
		for typeURL := range versions {
			current[typeURL] = snap.GetVersionMap(typeURL)
		}
	}
	return s.cb.applied(tenant, versions, current)
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
