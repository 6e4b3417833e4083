package translate

import (
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
)

// What Incremental keeps of the Layer 7 front ends from one run to the next (see
// docs/performance.md, "A change of one HTTPRoute"):
//
//   - each Route's decoded tenant object (decodeCache), keyed by the Route's UID and
//     resourceVersion: reading the embedded object into its typed form is the front ends'
//     most expensive step per Route, and it depends on nothing else;
//   - the IR elements of the last result (elementIndex): an element of the new result equal
//     to the last result's element of the same name is replaced by that one, so that the back
//     end (translator.Cache, keyed by element identity) and the xDS server (digests by
//     resource) reuse what they built for it. Route configurations that changed keep the
//     virtual hosts that did not.
//
// and, in incremental_routes.go, what each HTTPRoute's and GRPCRoute's translation did to the
// run (routeMemo), replayed while nothing it reads changed. What ties the Routes together
// (listeners shared by Gateways and ListenerSets, virtual hosts merged from several Routes in
// precedence order, the tenant's endpoint budget, the policies) is worked out as Run does.

// decodeCache holds the decoded tenant objects of the Routes of the last run (prev) and of
// this one (next); a Route gone, or changed, is left behind when the run ends. A Route
// without a UID or resourceVersion (not read from an API server) is decoded every time.
type decodeCache struct {
	prev, next map[decodeKey]runtime.Object
	// reused and decoded count this run's decodes served from the cache and made anew.
	reused, decoded int
}

// decodeKey is what a decoded object depends on: the Route's identity and version, and the
// type it was decoded into.
type decodeKey struct {
	uid     types.UID
	version string
	typ     reflect.Type
}

func decodeKeyOf(r *v1alpha1.Route, out any) (decodeKey, bool) {
	if r.UID == "" || r.ResourceVersion == "" {
		return decodeKey{}, false
	}
	if _, ok := out.(runtime.Object); !ok {
		return decodeKey{}, false
	}
	return decodeKey{uid: r.UID, version: r.ResourceVersion, typ: reflect.TypeOf(out)}, true
}

// begin starts a run.
func (c *decodeCache) begin() {
	c.next = make(map[decodeKey]runtime.Object, len(c.prev))
	c.reused, c.decoded = 0, 0
}

// end finishes a run: what this run did not read is dropped.
func (c *decodeCache) end() {
	c.prev, c.next = c.next, nil
}

// get fills out (a pointer to a typed object) with a copy of the Route's object decoded
// earlier into out's type; false when there is none.
func (c *decodeCache) get(r *v1alpha1.Route, out any) bool {
	if c == nil || c.next == nil {
		return false
	}
	key, ok := decodeKeyOf(r, out)
	if !ok {
		return false
	}
	obj, hit := c.next[key]
	if !hit {
		if obj, hit = c.prev[key]; !hit {
			return false
		}
		c.next[key] = obj
	}
	// A copy: the front ends may change what they decoded.
	reflect.ValueOf(out).Elem().Set(reflect.ValueOf(obj.DeepCopyObject()).Elem())
	c.reused++
	return true
}

// keep keeps the Route's object decoded earlier into typ (a pointer type) for the next run
// without reading it (a Route replayed by routeMemo).
func (c *decodeCache) keep(r *v1alpha1.Route, typ reflect.Type) {
	if c == nil || c.next == nil || typ == nil || r.UID == "" || r.ResourceVersion == "" {
		return
	}
	key := decodeKey{uid: r.UID, version: r.ResourceVersion, typ: typ}
	if obj, ok := c.prev[key]; ok {
		c.next[key] = obj
	}
}

// put keeps a copy of the Route's object just decoded into out.
func (c *decodeCache) put(r *v1alpha1.Route, out any) {
	if c == nil || c.next == nil {
		return
	}
	key, ok := decodeKeyOf(r, out)
	if !ok {
		return
	}
	c.next[key] = out.(runtime.Object).DeepCopyObject()
	c.decoded++
}

// routes is the number of Routes whose decoded objects are kept.
func (c *decodeCache) routes() int {
	uids := make(map[types.UID]bool, len(c.prev))
	for k := range c.prev {
		uids[k.uid] = true
	}
	return len(uids)
}

// elementIndex is the IR elements of the last result by name (virtual hosts by route
// configuration and name).
type elementIndex struct {
	listeners    map[string]*ir.Listener
	routeConfigs map[string]*ir.RouteConfig
	virtualHosts map[[2]string]*ir.VirtualHost
	clusters     map[string]*ir.Cluster
	secrets      map[string]*ir.Secret
}

// finish ends a run of the Layer 7 front ends: it drops the decoded objects of Routes gone
// and hands on the last result's elements where the new ones equal them.
func (x *Incremental) finish(r Result) Result {
	x.decoded.end()
	x.Stats.RoutesDecoded, x.Stats.RoutesDecodeReused = x.decoded.decoded, x.decoded.reused
	x.Stats.RoutesKept = x.decoded.routes()
	x.elements = x.intern(r.Config)
	x.Stats.RoutesReplayed, x.Stats.RoutesTranslated = x.routes.replayed, x.routes.translated
	x.routes.end(x.elements.clusters)
	return r
}

// intern replaces each element of cfg equal (reflect.DeepEqual) to the last result's
// element of the same name by that element, and returns cfg's index for the next run. cfg's
// lists are the result's own (never a cached piece's), so they may be changed; the elements
// themselves are not.
func (x *Incremental) intern(cfg *ir.Config) elementIndex {
	prev := x.elements
	// Listeners, clusters and secrets, the thousands of a large tenant, are kept in the last
	// index's maps, changed in place: a run pays for the names that changed, not for a new
	// map of every element.
	next := elementIndex{
		listeners:    prev.listeners,
		routeConfigs: make(map[string]*ir.RouteConfig, len(cfg.RouteConfigs)),
		virtualHosts: map[[2]string]*ir.VirtualHost{},
		clusters:     prev.clusters,
		secrets:      prev.secrets,
	}
	s := &x.Stats
	next.listeners = internList(next.listeners, cfg.Listeners, func(l *ir.Listener) string { return l.Name }, s)
	next.clusters = internList(next.clusters, cfg.Clusters, func(c *ir.Cluster) string { return c.Name }, s)
	next.secrets = internList(next.secrets, cfg.Secrets, func(c *ir.Secret) string { return c.Name }, s)
	for i, rc := range cfg.RouteConfigs {
		if old := prev.routeConfigs[rc.Name]; old != nil && old != rc {
			// Its virtual hosts first: an equal configuration then compares by pointer.
			var vhs []*ir.VirtualHost
			if rc.VirtualHosts != nil {
				vhs = make([]*ir.VirtualHost, len(rc.VirtualHosts))
			}
			for j, vh := range rc.VirtualHosts {
				vhs[j] = vh
				if o := prev.virtualHosts[[2]string{rc.Name, vh.Name}]; o != nil && o != vh && reflect.DeepEqual(o, vh) {
					vhs[j] = o
				}
			}
			// A copy: the IR's elements are never modified.
			c := *rc
			c.VirtualHosts = vhs
			if reflect.DeepEqual(old, &c) {
				cfg.RouteConfigs[i] = old
			} else {
				cfg.RouteConfigs[i] = &c
			}
		}
		rc = cfg.RouteConfigs[i]
		if old := prev.routeConfigs[rc.Name]; old == rc {
			s.ElementsReused++
		} else {
			s.ElementsChanged++
		}
		next.routeConfigs[rc.Name] = rc
		for _, vh := range rc.VirtualHosts {
			k := [2]string{rc.Name, vh.Name}
			if prev.virtualHosts[k] == vh {
				s.VirtualHostsReused++
			} else {
				s.VirtualHostsChanged++
			}
			next.virtualHosts[k] = vh
		}
	}
	return next
}

// internList is intern for one kind of element: it hands on index's element where list's
// equals it, records list's others in index (made when nil), and forgets the names list no
// longer has. It returns the index.
func internList[T any](index map[string]*T, list []*T, name func(*T) string, s *IncrementalStats) map[string]*T {
	if index == nil {
		index = make(map[string]*T, len(list))
	}
	for i, e := range list {
		n := name(e)
		if old := index[n]; old != nil && (old == e || reflect.DeepEqual(old, e)) {
			list[i] = old
			s.ElementsReused++
			continue
		}
		s.ElementsChanged++
		index[n] = e
	}
	if len(index) > len(list) { // names gone (a list's names are distinct)
		keep := make(map[string]bool, len(list))
		for _, e := range list {
			keep[name(e)] = true
		}
		for n := range index {
			if !keep[n] {
				delete(index, n)
			}
		}
	}
	return index
}
