package translate

import (
	"crypto/sha256"
	"fmt"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/routekind"
)

// What Incremental keeps of each HTTPRoute and GRPCRoute from one run to the next (see
// docs/performance.md, "What one changed HTTPRoute costs a rebuild"): what its translation
// did to the run — the problems it reported, the clusters it added and the endpoints they
// took, the candidates it added to its listeners' virtual hosts, the listeners it counted
// itself on, its status. A route whose entry still holds replays it instead of being decoded
// and translated again.
//
// An entry holds while the route is the same (UID, resourceVersion) and so is everything
// its translation reads besides the route (layer7Env): the tenant-wide input every
// LoadBalancer reads (fingerprint: the tenant, the options, the endpoint policy, the
// Addresses), the Gateways and ListenerSets (the listeners it attaches to), their hub
// Services (the listener ports), the hub Secrets (the listeners' certificates) and the
// static addresses. A route whose translation touches what other routes share is not kept
// (routeRecord.taint): a BackendTrafficPolicy or SecurityPolicy that may apply to it (its
// own, its rules', its Gateway's), a BackendTLSPolicy, a cluster it did not add itself, or
// endpoints the tenant's limit cut. The tenant's endpoint limit is checked again on replay: an
// entry whose endpoints no longer fit is translated again, as Run would cut it.
//
// The result is Run's on the same input (TestIncrementalMatchesRun,
// FuzzIncrementalGatewayAPI): a replay does to the run exactly what translating the route
// did, in the same place of the same order.
type routeMemo struct {
	env  [sha256.Size]byte
	on   bool // this run may replay and keep entries
	prev map[types.UID]*routeEntry
	next map[types.UID]*routeEntry
	// fresh: the entries recorded this run, whose clusters are handed on once the run's
	// result is interned (handOn).
	fresh []*routeEntry
	// replayed and translated count this run's routes replayed and translated (kept or not).
	replayed, translated int
	// vhosts: the Gateways' virtual hosts by the candidates they were made of, the replayed
	// routes' among them (gateway_vhosts.go).
	vhosts vhostMemo
}

// routeEntry is what one route's translation did to a run.
type routeEntry struct {
	version string
	kind    string
	env     [sha256.Size]byte
	// decoded is the type the route's tenant object was decoded into, kept in the decode
	// cache while the entry is used.
	decoded  reflect.Type
	problems ir.Problems
	status   RouteStatus
	hasState bool // status is set
	// clusters are the clusters it added, as the result it was translated or replayed in
	// holds them (normalized, shared with that result: never modified).
	clusters  []*ir.Cluster
	endpoints int // the endpoints its clusters took (Options.MaxEndpoints)
	attached  []listenerID
	adds      []vhostAdd
}

// listenerID names a listener of a run: the Route of the Gateway it serves, and its name in
// route configurations (a ListenerSet's with its Route's name).
type listenerID [2]string

func idOf(l *gwListener) listenerID { return listenerID{l.gw.route.Name, l.configName()} }

// vhostAdd is candidates added to the virtual host of a hostname of a listener.
type vhostAdd struct {
	listener listenerID
	host     string
	cands    []*candidate
}

// routeRecord records one route's translation while it runs (l7.rec).
type routeRecord struct {
	entry                         *routeEntry
	problems, clusters, endpoints int // the run's counts when it started
	tainted                       bool
}

// taint marks the route being recorded as one not to keep (r nil: none is recorded).
func (r *routeRecord) taint() {
	if r != nil {
		r.tainted = true
	}
}

// begin starts a run whose Layer 7 environment is env (ok false: it has none, nothing is
// replayed or kept).
func (m *routeMemo) begin(env [sha256.Size]byte, ok bool) {
	m.env, m.on = env, ok
	m.next = nil
	if ok {
		m.next = make(map[types.UID]*routeEntry, len(m.prev))
	}
	m.replayed, m.translated, m.fresh = 0, 0, nil
	m.vhosts.next = nil
	if ok {
		m.vhosts.begin()
	}
}

// end finishes a run whose result's clusters are index (by name, as interned): the entries
// recorded in the run take the clusters of the result, and the entries of routes gone,
// changed or not kept are dropped.
func (m *routeMemo) end(index map[string]*ir.Cluster) {
	for _, e := range m.fresh {
		for i, c := range e.clusters {
			// The result's cluster of that name is c, or one equal to it (intern); no other
			// step replaces the clusters of a kept route (they have no health checks for
			// budgetHealthChecks).
			if o := index[c.Name]; o != nil {
				e.clusters[i] = o
			}
		}
	}
	m.prev, m.next, m.fresh = m.next, nil, nil
	m.vhosts.end()
}

// decodedType is the type a route kind's tenant object is decoded into.
func decodedType(kind string) reflect.Type {
	switch kind {
	case KindHTTPRoute:
		return reflect.TypeFor[*gwv1.HTTPRoute]()
	case KindGRPCRoute:
		return reflect.TypeFor[*gwv1.GRPCRoute]()
	}
	return nil
}

// replay does to the run what translating route r (of kind) did in the last one, and
// reports whether it could: false when it has no entry that still holds.
func (m *routeMemo) replay(a *attacher, r *v1alpha1.Route, kind string) bool {
	if m == nil || !m.on || r.UID == "" || r.ResourceVersion == "" {
		return false
	}
	e := m.prev[r.UID]
	if e == nil || e.version != r.ResourceVersion || e.kind != kind || e.env != m.env {
		return false
	}
	if _, dup := m.next[r.UID]; dup {
		return false
	}
	t := a.t
	if limit := t.opts.MaxEndpoints; limit > 0 && t.expander.used+e.endpoints > limit {
		return false
	}
	ls := a.listenerIndex()
	for _, id := range e.attached {
		if ls[id] == nil {
			return false
		}
	}
	for _, ad := range e.adds {
		if ls[ad.listener] == nil {
			return false
		}
	}
	index := t.clusterIndex()
	for _, c := range e.clusters {
		if _, dup := index[c.Name]; dup {
			return false
		}
	}
	for _, p := range e.problems {
		t.problems.AddProblem(p)
	}
	for _, c := range e.clusters {
		index[c.Name] = c
		t.cfg.Clusters = append(t.cfg.Clusters, c)
	}
	t.expander.used += e.endpoints
	for _, id := range e.attached {
		ls[id].attached++
	}
	for _, ad := range e.adds {
		l := ls[ad.listener]
		l.vhosts[ad.host] = append(l.vhosts[ad.host], ad.cands...)
	}
	if e.hasState {
		t.statuses[r.Name] = e.status
	}
	t.decoded.keep(r, e.decoded)
	m.next[r.UID] = e
	m.replayed++
	return true
}

// record starts recording the translation of route r (of kind); nil when it cannot be kept.
func (m *routeMemo) record(t *l7, r *v1alpha1.Route, kind string) *routeRecord {
	if m == nil || !m.on {
		return nil
	}
	m.translated++
	if r.UID == "" || r.ResourceVersion == "" {
		return nil
	}
	if _, dup := m.next[r.UID]; dup {
		return nil
	}
	return &routeRecord{
		entry:    &routeEntry{version: r.ResourceVersion, kind: kind, env: m.env, decoded: decodedType(kind)},
		problems: t.problems.Len(), clusters: len(t.cfg.Clusters), endpoints: t.expander.used,
	}
}

// keep ends the recording of route r: its entry is kept for the next run unless it was
// tainted or reported a problem on another object.
func (m *routeMemo) keep(t *l7, r *v1alpha1.Route, rec *routeRecord) {
	if rec == nil || rec.tainted {
		return
	}
	e := rec.entry
	e.problems = t.problems.Since(rec.problems)
	for _, p := range e.problems {
		if p.Object.Kind != KindRoute || p.Object.Namespace != t.in.Tenant || p.Object.Name != r.Name {
			return
		}
	}
	for _, c := range t.cfg.Clusters[rec.clusters:] {
		if c.HealthCheck != nil { // budgetHealthChecks may replace it
			return
		}
	}
	e.clusters = slices.Clone(t.cfg.Clusters[rec.clusters:])
	e.endpoints = t.expander.used - rec.endpoints
	e.status, e.hasState = t.statuses[r.Name]
	m.next[r.UID] = e
	m.fresh = append(m.fresh, e)
}

// attach records the listeners the route counted itself on (countAttached).
func (r *routeRecord) attach(parents []*parentResult) {
	if r == nil {
		return
	}
	seen := map[*gwListener]bool{}
	for _, p := range parents {
		for _, l := range p.listeners {
			if !seen[l] {
				seen[l] = true
				r.entry.attached = append(r.entry.attached, idOf(l))
			}
		}
	}
}

// add records candidates added to the virtual host of host of listener l.
func (r *routeRecord) add(l *gwListener, host string, cands []*candidate) {
	if r != nil {
		r.entry.adds = append(r.entry.adds, vhostAdd{listener: idOf(l), host: host, cands: cands})
	}
}

// added reports whether the route being recorded added cluster c itself (true when none is
// recorded).
func (r *routeRecord) added(t *l7, c *ir.Cluster) bool {
	return r == nil || slices.Contains(t.cfg.Clusters[r.clusters:], c)
}

// listenerIndex is the listeners of the tenant's Gateways (and their ListenerSets') by
// listenerID, made on first use.
func (a *attacher) listenerIndex() map[listenerID]*gwListener {
	if a.listeners == nil {
		a.listeners = map[listenerID]*gwListener{}
		for _, g := range a.gateways {
			for _, l := range g.listeners {
				if _, dup := a.listeners[idOf(l)]; !dup {
					a.listeners[idOf(l)] = l
				}
			}
		}
	}
	return a.listeners
}

// layer7Env hashes what a route's translation reads besides the route (see routeMemo):
// env (fingerprint's), the Gateway and ListenerSet Routes, the Routes' hub Services and the
// hub Secrets, by name, UID and resourceVersion, and the static addresses. False when one of
// those objects has no resourceVersion (not read from an API server), or two Routes have one
// name (the clusters of a route are named after it: a replayed route's must be its own).
func layer7Env(in *Input, env [sha256.Size]byte) ([sha256.Size]byte, bool) {
	var keys []string
	ok := true
	names := make(map[string]struct{}, len(in.Routes))
	for i := range in.Routes {
		if _, dup := names[in.Routes[i].Name]; dup {
			return [sha256.Size]byte{}, false
		}
		names[in.Routes[i].Name] = struct{}{}
	}
	add := func(kind, name string, uid types.UID, version string) {
		if version == "" {
			ok = false
		}
		keys = append(keys, kind+"/"+name+"/"+string(uid)+"/"+version)
	}
	for i := range in.Routes {
		r := &in.Routes[i]
		if kind, _ := routekind.Of(r); kind == routekind.Gateway || kind == routekind.ListenerSet {
			add("Route", r.Name, r.UID, r.ResourceVersion)
		}
	}
	for i := range in.RouteServices {
		s := &in.RouteServices[i]
		add("Service", s.Name, s.UID, s.ResourceVersion)
	}
	for i := range in.Secrets {
		s := &in.Secrets[i]
		add("Secret", s.Name, s.UID, s.ResourceVersion)
	}
	if !ok {
		return [sha256.Size]byte{}, false
	}
	slices.Sort(keys)
	h := sha256.New()
	h.Write(env[:])
	for _, k := range keys {
		fmt.Fprintf(h, "%q;", k)
	}
	fmt.Fprintf(h, "%q", in.StaticAddresses)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum, true
}
