package translate

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"

	"kubelb.dev/kubelb/internal/ir"
)

// candidate is one IR route (a rule's match) waiting for its place in a virtual host.
type candidate struct {
	route *ir.Route
	key   precedence
}

// precedence orders the routes of one virtual host as Gateway API requires: exact path,
// then (implementation-specific) regular expressions, longest first, then the longest path
// prefix; then a method match; the most header matches; the most query parameter matches;
// the oldest route; the route's namespace/name; rule and match order.
type precedence struct {
	pathKind        int // 0 exact, 1 regular expression, 2 prefix
	pathLen         int
	method          bool
	headers         int
	queries         int
	created         time.Time
	namespace, name string
	rule, match     int
}

func (p precedence) compare(o precedence) int {
	b := func(x bool) int {
		if x {
			return 1
		}
		return 0
	}
	return cmp.Or(
		cmp.Compare(p.pathKind, o.pathKind),
		cmp.Compare(o.pathLen, p.pathLen),
		cmp.Compare(b(o.method), b(p.method)),
		cmp.Compare(o.headers, p.headers),
		cmp.Compare(o.queries, p.queries),
		p.created.Compare(o.created),
		cmp.Compare(p.namespace, o.namespace),
		cmp.Compare(p.name, o.name),
		cmp.Compare(p.rule, o.rule),
		cmp.Compare(p.match, o.match))
}

func matchPrecedence(m ir.RouteMatch) precedence {
	p := precedence{pathKind: 2, pathLen: 1, method: m.Method != "", headers: len(m.Headers), queries: len(m.QueryParams)}
	switch {
	case m.PathExact != "":
		p.pathKind, p.pathLen = 0, len(m.PathExact)
	case m.PathRegex != "":
		p.pathKind, p.pathLen = 1, len(m.PathRegex)
	case m.PathPrefix != "":
		p.pathLen = len(strings.TrimRight(m.PathPrefix, "/")) + 1
	}
	return p
}

// virtualHosts turns candidates by hostname into virtual hosts ("*" matches any host). A
// virtual host also carries the routes of every less specific hostname that covers it ("*",
// "*.example.com" for "a.example.com"), after its own: Envoy picks one virtual host per
// request, and Gateway API ranks the most specific matching hostname first (precise before
// wildcard, longer before shorter). Within one hostname the routes are in precedence order;
// a route reached through two listeners is kept once.
//
// memo (nil: none) keeps the virtual hosts of the last run by the candidates they were made
// of: a hostname whose candidates are the same (the same pointers, in the same order: a
// replayed route's) gets the same virtual host, not a copy of it.
func virtualHosts(m map[string][]*candidate, memo *vhostMemo) []*ir.VirtualHost {
	keys := slices.Sorted(maps.Keys(m))
	// Only a hostname itself and wildcards cover a hostname (coversHostname): "*", and
	// "*.<suffix>" for each suffix of the hostname that starts at a dot. Looking those up
	// keeps this linear in the total length of the hostnames (a Gateway may carry thousands,
	// and thousands of wildcards).
	star := false
	wild := map[string]bool{} // the wildcards "*.<suffix>" by ".<suffix>"
	for _, k := range keys {
		switch {
		case k == "*":
			star = true
		case strings.HasPrefix(k, "*."):
			wild[k[1:]] = true
		}
	}
	out := make([]*ir.VirtualHost, 0, len(keys))
	var covering []string
	var cs []ranked
	for _, h := range keys {
		covering = append(covering[:0], h)
		if star && h != "*" {
			covering = append(covering, "*")
		}
		for i := range len(h) {
			if h[i] == '.' && wild[h[i:]] && (i != 1 || h[0] != '*') {
				covering = append(covering, "*"+h[i:])
			}
		}
		slices.Sort(covering)
		cs = cs[:0] // reused from host to host: a kept virtual host costs no allocation
		for _, k := range covering {
			for _, c := range m[k] {
				cs = append(cs, ranked{c, k})
			}
		}
		if vh := memo.get(h, cs); vh != nil {
			out = append(out, vh)
			continue
		}
		made := slices.Clone(cs)
		slices.SortStableFunc(cs, func(a, b ranked) int {
			return cmp.Or(compareHostSpecificity(a.host, b.host), a.c.key.compare(b.c.key))
		})
		vh := &ir.VirtualHost{Name: h, Domains: []string{h}}
		seen := map[string]bool{}
		for _, c := range cs {
			if seen[c.c.route.Name] {
				continue
			}
			seen[c.c.route.Name] = true
			r := *c.c.route
			vh.Routes = append(vh.Routes, &r)
		}
		memo.put(h, made, vh)
		out = append(out, vh)
	}
	return out
}

// ranked is a candidate of a virtual host and the hostname it was added for.
type ranked struct {
	c    *candidate
	host string
}

// vhostMemo keeps the virtual hosts made in the last run (prev) and this one (next) by
// hostname and first candidate, each with the candidates it was made of, in the order
// virtualHosts collected them. Virtual hosts are never modified once made, so one may stand
// in a later result.
type vhostMemo struct {
	prev, next map[vhostKey]vhostEntry
}

// vhostKey finds a kept virtual host: its hostname and first candidate (a listener's own
// for the hostname, or of a hostname covering it); the candidates are then compared.
type vhostKey struct {
	host  string
	first *candidate
}

type vhostEntry struct {
	cs []ranked
	vh *ir.VirtualHost
}

// begin starts a run.
func (m *vhostMemo) begin() {
	m.next = make(map[vhostKey]vhostEntry, len(m.prev))
}

// end finishes a run: the virtual hosts it did not use are dropped.
func (m *vhostMemo) end() {
	m.prev, m.next = m.next, nil
}

// get is the virtual host of hostname h made of the candidates cs, nil when none is kept.
func (m *vhostMemo) get(h string, cs []ranked) *ir.VirtualHost {
	if m == nil || m.next == nil || len(cs) == 0 {
		return nil
	}
	k := vhostKey{h, cs[0].c}
	if e, ok := m.next[k]; ok && slices.Equal(e.cs, cs) {
		return e.vh
	}
	if e, ok := m.prev[k]; ok && slices.Equal(e.cs, cs) {
		m.next[k] = e
		return e.vh
	}
	return nil
}

// put keeps the virtual host of hostname h made of the candidates cs (one kept for the same
// hostname and first candidate is replaced).
func (m *vhostMemo) put(h string, cs []ranked, vh *ir.VirtualHost) {
	if m == nil || m.next == nil || len(cs) == 0 {
		return
	}
	m.next[vhostKey{h, cs[0].c}] = vhostEntry{cs: cs, vh: vh}
}

// isolatedVirtualHosts merges the virtual hosts of HTTP listeners sharing a port into one
// route configuration with listener isolation: a request is served by the listener whose
// hostname matches its host most specifically (as Gateway API routes it), so each merged
// virtual host carries the routes of that one listener only.
func isolatedVirtualHosts(ls []*gwListener, memo *vhostMemo) []*ir.VirtualHost {
	owner := map[string]*gwListener{}
	for _, l := range ls {
		if l.hostname != "" {
			owner[l.hostname] = nil // a listener's own hostname is always a virtual host
		}
		for h := range l.vhosts {
			owner[h] = nil
		}
	}
	for h := range owner {
		owner[h] = hostListener(ls, h)
	}
	// Each listener's virtual hosts are built once, with the hostnames it owns but has no
	// routes for added (empty: 404).
	byListener := map[*gwListener]map[string][]*candidate{}
	for h, l := range owner {
		if l == nil {
			continue
		}
		m, ok := byListener[l]
		if !ok {
			m = maps.Clone(l.vhosts)
			if m == nil {
				m = map[string][]*candidate{}
			}
			byListener[l] = m
		}
		if _, ok := m[h]; !ok {
			m[h] = nil
		}
	}
	var out []*ir.VirtualHost
	for _, l := range ls {
		m, ok := byListener[l]
		if !ok {
			continue
		}
		for _, vh := range virtualHosts(m, memo) {
			if owner[vh.Name] == l {
				out = append(out, vh)
			}
		}
	}
	slices.SortFunc(out, func(a, b *ir.VirtualHost) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// hostListener is the listener of ls (listeners sharing a port) that takes requests for host
// h: the one whose hostname matches h most specifically (an exact hostname, then the longest
// wildcard, then the listener without hostname); nil when none matches.
func hostListener(ls []*gwListener, h string) *gwListener {
	var best *gwListener
	for _, o := range ls {
		lh := cmp.Or(o.hostname, "*")
		if coversHostname(lh, h) && (best == nil || compareHostSpecificity(lh, cmp.Or(best.hostname, "*")) < 0) {
			best = o
		}
	}
	return best
}

// misdirectedVirtualHost names the virtual host of an HTTPS listener's route configuration that
// answers 421 Misdirected Request (no hostname can hold a "/").
const misdirectedVirtualHost = "misdirected/421"

// httpsVirtualHosts builds the virtual hosts of the route configuration of HTTPS listener l,
// whose SNI chain shares its port with the HTTPS listeners ls (l among them). A request belongs
// to the listener of ls whose hostname matches its host most specifically (hostListener, the
// same rule as for HTTP listeners sharing a port). l's chain serves the requests that belong
// to l; one that belongs to another listener, or (l having a hostname) to no listener, came
// over a connection made for another server name (HTTP/2 connection coalescing does this) and
// is answered 421 Misdirected Request, so the client retries on a connection of its own.
// Envoy picks a virtual host the same way Gateway API picks a listener (an exact domain, then
// the longest wildcard, then "*"), so the hostnames of the other listeners and "*" as domains
// of one 421 virtual host are enough; l's own hostname always has a virtual host (404 when
// nothing serves the host), and a route hostname of l that belongs to another listener joins
// the 421 domains (listener isolation).
func httpsVirtualHosts(l *gwListener, ls []*gwListener, owner ir.ObjectRef, memo *vhostMemo) []*ir.VirtualHost {
	m := maps.Clone(l.vhosts)
	if m == nil {
		m = map[string][]*candidate{}
	}
	add := func(h string) {
		if _, ok := m[h]; !ok {
			m[h] = nil
		}
	}
	for _, o := range ls {
		if o.hostname != "" {
			add(o.hostname)
		}
	}
	if l.hostname != "" {
		add("*")
	}
	var out []*ir.VirtualHost
	var misdirected []string
	for _, vh := range virtualHosts(m, memo) {
		if hostListener(ls, vh.Name) == l {
			out = append(out, vh)
		} else {
			misdirected = append(misdirected, vh.Name)
		}
	}
	if len(misdirected) > 0 {
		out = append(out, misdirectedHost(misdirected, owner))
	}
	return out
}

// misdirectedHost is the virtual host of an HTTPS chain's route configuration that answers
// 421 Misdirected Request for domains: the hosts the chain's port serves with another
// certificate (Gateway listeners, and the Ingress HTTPS listener's other certificates).
func misdirectedHost(domains []string, owners ...ir.ObjectRef) *ir.VirtualHost {
	return &ir.VirtualHost{Name: misdirectedVirtualHost, Domains: domains, Routes: []*ir.Route{{
		Name:           "misdirected",
		Owners:         owners,
		Match:          ir.RouteMatch{PathPrefix: "/"},
		DirectResponse: &ir.DirectResponse{Status: 421},
	}}}
}

// coversHostname reports whether every request for host h also matches hostname k.
func coversHostname(k, h string) bool {
	return k == h || k == "*" || strings.HasPrefix(k, "*.") && strings.HasSuffix(h, k[1:])
}

// compareHostSpecificity orders hostnames most specific first: precise before wildcard,
// then longer before shorter.
func compareHostSpecificity(a, b string) int {
	wa, wb := strings.HasPrefix(a, "*"), strings.HasPrefix(b, "*")
	if wa != wb {
		if wa {
			return 1
		}
		return -1
	}
	return cmp.Compare(len(b), len(a))
}
