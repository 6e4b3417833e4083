package translator

import (
	"maps"
	"slices"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"kubelb.dev/kubelb/internal/ir"
)

// ownersMemo is what Cache.Owners keeps from one call to the next: the element lists it last
// saw and what it made of them, and each route configuration's owners by element.
type ownersMemo struct {
	listeners []*ir.Listener
	clusters  []*ir.Cluster
	secrets   []*ir.Secret
	out       map[string]map[string][]ir.ObjectRef
	rcs       map[*ir.RouteConfig][]ir.ObjectRef
}

// Owners is the package's Owners, for a Config whose unchanged elements are the last one's
// (translate.Incremental hands them on): a type whose elements are the same as last time
// keeps its map of owners, a route configuration seen last time its owners.
// The maps returned are shared with later calls and must not be changed.
func (c *Cache) Owners(cfg *ir.Config) map[string]map[string][]ir.ObjectRef {
	m := &c.owners
	out := make(map[string]map[string][]ir.ObjectRef, len(m.out)+1)
	// keep takes the last call's maps of typeURLs when their elements are the same (equal),
	// else works out part's.
	keep := func(equal bool, part *ir.Config, typeURLs ...string) {
		if m.out == nil || !equal {
			maps.Copy(out, Owners(part))
			return
		}
		for _, t := range typeURLs {
			if byName, ok := m.out[t]; ok {
				out[t] = byName
			}
		}
	}
	keep(slices.Equal(cfg.Listeners, m.listeners), &ir.Config{Listeners: cfg.Listeners}, resource.ListenerType)
	keep(slices.Equal(cfg.Clusters, m.clusters), &ir.Config{Clusters: cfg.Clusters}, resource.ClusterType, resource.EndpointType)
	keep(slices.Equal(cfg.Secrets, m.secrets), &ir.Config{Secrets: cfg.Secrets}, resource.SecretType)

	rcs := make(map[*ir.RouteConfig][]ir.ObjectRef, len(cfg.RouteConfigs))
	routes := map[string][]ir.ObjectRef{}
	repeated := false
	for _, rc := range cfg.RouteConfigs {
		refs, ok := m.rcs[rc]
		if !ok {
			var all []ir.ObjectRef
			for _, vh := range rc.VirtualHosts {
				for _, r := range vh.Routes {
					all = append(all, r.Owners...)
				}
			}
			refs = ir.NormalizeRefs(all)
		}
		rcs[rc] = refs
		if !slices.ContainsFunc(rc.VirtualHosts, func(vh *ir.VirtualHost) bool { return len(vh.Routes) > 0 }) {
			continue // Owners names only route configurations with routes
		}
		if _, dup := routes[rc.Name]; dup {
			repeated = true
		}
		routes[rc.Name] = refs
	}
	if repeated { // route configurations of one name (an invalid Config): as Owners merges them
		routes = Owners(&ir.Config{RouteConfigs: cfg.RouteConfigs})[resource.RouteType]
	}
	if len(routes) > 0 {
		out[resource.RouteType] = routes
	}
	*m = ownersMemo{listeners: cfg.Listeners, clusters: cfg.Clusters, secrets: cfg.Secrets, out: out, rcs: rcs}
	return out
}
