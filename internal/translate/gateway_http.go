package translate

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/re2"
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
func virtualHosts(m map[string][]*candidate) []*ir.VirtualHost {
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
	var out []*ir.VirtualHost
	var covering []string
	for _, h := range keys {
		type ranked struct {
			c    *candidate
			host string
		}
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
		var cs []ranked
		for _, k := range covering {
			for _, c := range m[k] {
				cs = append(cs, ranked{c, k})
			}
		}
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
		out = append(out, vh)
	}
	return out
}

// isolatedVirtualHosts merges the virtual hosts of HTTP listeners sharing a port into one
// route configuration with listener isolation: a request is served by the listener whose
// hostname matches its host most specifically (as Gateway API routes it), so each merged
// virtual host carries the routes of that one listener only.
func isolatedVirtualHosts(ls []*gwListener) []*ir.VirtualHost {
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
		for _, vh := range virtualHosts(m) {
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
func httpsVirtualHosts(l *gwListener, ls []*gwListener, owner ir.ObjectRef) []*ir.VirtualHost {
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
	for _, vh := range virtualHosts(m) {
		if hostListener(ls, vh.Name) == l {
			out = append(out, vh)
		} else {
			misdirected = append(misdirected, vh.Name)
		}
	}
	if len(misdirected) > 0 {
		out = append(out, &ir.VirtualHost{Name: misdirectedVirtualHost, Domains: misdirected, Routes: []*ir.Route{{
			Name:           "misdirected",
			Owners:         []ir.ObjectRef{owner},
			Match:          ir.RouteMatch{PathPrefix: "/"},
			DirectResponse: &ir.DirectResponse{Status: 421},
		}}})
	}
	return out
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

// add records a backend problem once.
func (rs *refs) add(reason gwv1.RouteConditionReason, msg string) {
	if !slices.Contains(rs.messages, msg) {
		rs.fail(reason, msg)
	}
}

// invalid records a rule (or match) that is not served, for PartiallyInvalid.
func (rs *refs) invalid(msg string) {
	if !slices.Contains(rs.partial, msg) && len(rs.partial) < 8 {
		rs.partial = append(rs.partial, msg)
	}
}

// httpRoute translates an HTTPRoute: attachment, then its rules on the virtual hosts of every
// listener it attached to.
func (a *attacher) httpRoute(r *v1alpha1.Route) {
	t := a.t
	var hr gwv1.HTTPRoute
	if !t.decode(r, &hr) {
		return
	}
	ro := a.newRouteObj(r, KindHTTPRoute, hr.ObjectMeta, hr.Spec.CommonRouteSpec, hr.Spec.Hostnames)
	serveRules(a, ro, hr.Spec.Rules, func(i int, rule *gwv1.HTTPRouteRule, l *gwListener, rs *refs, dry bool) []*candidate {
		return a.httpRule(ro, i, rule, l, rs, dry)
	})
}

// serveRules attaches a route, serves its rules (at most maxRules) on the virtual hosts of
// every listener it attached to, and records its status: what HTTPRoutes and GRPCRoutes share.
func serveRules[R any](a *attacher, ro *routeObj, rules []R, rule func(i int, r *R, l *gwListener, rs *refs, dry bool) []*candidate) {
	parents := a.attach(ro)
	countAttached(parents)
	if len(rules) > maxRules {
		a.t.problems.Add(a.t.ref(ro.r, ""), ir.SeverityWarning, ReasonTooMany, "the route has %d rules; only the first %d are served", len(rules), maxRules)
		rules = rules[:maxRules]
	}
	rs := &refs{}
	a.serve(ro, parents, rs, func(l *gwListener, dry bool) []*candidate {
		var out []*candidate
		for i := range rules {
			out = append(out, rule(i, &rules[i], l, rs, dry)...)
		}
		return out
	})
	a.routeStatus(ro, parents, rs)
}

// serve builds a route's candidates for every served listener it attached to and adds them
// to the listener's virtual hosts; when it is served nowhere, its rules are still checked
// (dry: no clusters are added) so that ResolvedRefs and problems are reported.
func (a *attacher) serve(ro *routeObj, parents []*parentResult, rs *refs, build func(l *gwListener, dry bool) []*candidate) {
	done := map[*gwListener][]*candidate{}
	for _, p := range parents {
		for i, l := range p.listeners {
			if !l.served {
				continue
			}
			cs, ok := done[l]
			if !ok {
				cs = build(l, false)
				done[l] = cs
			}
			for _, h := range p.hosts[i] {
				l.vhosts[h] = append(l.vhosts[h], cs...)
			}
		}
	}
	if len(done) == 0 {
		build(nil, true)
	}
}

// ruleFilters is what a rule's filters ask for.
type ruleFilters struct {
	request, response *ir.HeaderModifier
	redirect          *gwv1.HTTPRequestRedirectFilter
	rewrite           *gwv1.HTTPURLRewriteFilter
	fail              string // a filter that must not be skipped cannot be served: answer 500
}

// httpRule turns one HTTPRoute rule into candidates (one per match) for listener l (nil when
// dry). A rule that cannot be served is left out with a problem.
func (a *attacher) httpRule(ro *routeObj, i int, rule *gwv1.HTTPRouteRule, l *gwListener, rs *refs, dry bool) []*candidate {
	t := a.t
	owner := t.ref(ro.r, fmt.Sprintf("rule %d", i))
	bad := func(format string, args ...any) []*candidate {
		msg := fmt.Sprintf(format, args...)
		t.problems.Add(owner, ir.SeverityError, ReasonInvalidRule, "%s; the rule is not served", msg)
		rs.invalid(fmt.Sprintf("rule %d: %s", i, msg))
		return nil
	}
	var f ruleFilters
	filters := rule.Filters
	if len(filters) > maxFilters {
		return bad("%d filters; at most %d are served", len(filters), maxFilters)
	}
	for _, fl := range filters {
		var err string
		switch fl.Type {
		case gwv1.HTTPRouteFilterRequestHeaderModifier:
			f.request, err = headerModifier(fl.RequestHeaderModifier, f.request)
		case gwv1.HTTPRouteFilterResponseHeaderModifier:
			f.response, err = headerModifier(fl.ResponseHeaderModifier, f.response)
		case gwv1.HTTPRouteFilterRequestRedirect:
			if fl.RequestRedirect == nil || f.redirect != nil {
				err = "RequestRedirect is missing its settings or repeated"
			}
			f.redirect = fl.RequestRedirect
		case gwv1.HTTPRouteFilterURLRewrite:
			if fl.URLRewrite == nil || f.rewrite != nil {
				err = "URLRewrite is missing its settings or repeated"
			}
			f.rewrite = fl.URLRewrite
		case gwv1.HTTPRouteFilterRequestMirror, gwv1.HTTPRouteFilterCORS:
			t.problems.Add(owner, ir.SeverityWarning, ReasonUnsupportedFilter, "filter %s is not yet supported; ignored", fl.Type)
		default: // ExtensionRef, ExternalAuth, unknown: must not be skipped
			f.fail = fmt.Sprintf("filter %s is not supported", truncate(string(fl.Type)))
			t.problems.Add(owner, ir.SeverityError, ReasonUnsupportedFilter, "%s; the rule answers 500", f.fail)
			rs.invalid(fmt.Sprintf("rule %d: %s", i, f.fail))
		}
		if err != "" {
			return bad("filter %s: %s", fl.Type, err)
		}
	}
	if f.redirect != nil && f.rewrite != nil {
		return bad("RequestRedirect and URLRewrite cannot be combined")
	}
	if len(rule.BackendRefs) > maxBackendRefs {
		return bad("%d backendRefs; at most %d are served", len(rule.BackendRefs), maxBackendRefs)
	}
	var brefs []gwv1.BackendRef
	for _, b := range rule.BackendRefs {
		if len(b.Filters) > 0 {
			t.problems.Add(owner, ir.SeverityWarning, ReasonUnsupportedFilter, "filters on a backendRef are not yet supported; ignored")
		}
		brefs = append(brefs, b.BackendRef)
	}
	backends, failed := a.weightedBackends(ro, owner, brefs, false, rs, dry, f.redirect != nil)
	var timeout, backendTimeout time.Duration
	noTimeout := false
	if to := rule.Timeouts; to != nil {
		var err string
		if timeout, err = gatewayDuration(to.Request); err != "" {
			return bad("timeouts.request: %s", err)
		}
		noTimeout = to.Request != nil && timeout == 0 // "0s": no timeout at all
		if backendTimeout, err = gatewayDuration(to.BackendRequest); err != "" {
			return bad("timeouts.backendRequest: %s", err)
		}
	}
	matches := rule.Matches
	if len(matches) > maxMatches {
		return bad("%d matches; at most %d are served", len(matches), maxMatches)
	}
	if len(matches) == 0 {
		matches = []gwv1.HTTPRouteMatch{{}}
	}
	var out []*candidate
	for j := range matches {
		m, err := httpMatch(&matches[j])
		if err != "" {
			bad("match %d: %s", j, err)
			continue
		}
		route := &ir.Route{
			Name:            fmt.Sprintf("%s/rule-%d/match-%d", ro.r.Name, i, j),
			Owners:          []ir.ObjectRef{owner},
			Match:           m,
			RequestHeaders:  f.request,
			ResponseHeaders: f.response,
			Timeout:         ir.Duration(timeout),
			NoTimeout:       noTimeout,
			BackendTimeout:  ir.Duration(backendTimeout),
		}
		switch {
		case f.redirect != nil:
			port, https := int32(0), false
			if l != nil {
				port, https = int32(l.spec.Port), l.spec.Protocol == gwv1.HTTPSProtocolType
			}
			rd, err := redirect(f.redirect, m, port, https)
			if err != "" {
				bad("match %d: RequestRedirect: %s", j, err)
				continue
			}
			route.Redirect = rd
			route.Timeout, route.NoTimeout, route.BackendTimeout = 0, false, 0
		case f.fail != "":
			route.DirectResponse = &ir.DirectResponse{Status: 500}
		case len(backends) == 0:
			route.DirectResponse = &ir.DirectResponse{Status: 500}
		default:
			route.Backends, route.FailedWeight = backends, failed
		}
		if f.rewrite != nil && route.Backends != nil {
			rw, err := rewrite(f.rewrite, m)
			if err != "" {
				bad("match %d: URLRewrite: %s", j, err)
				continue
			}
			route.Rewrite = rw
		}
		if route.Backends == nil {
			route.Timeout, route.NoTimeout, route.BackendTimeout = 0, false, 0
		}
		key := matchPrecedence(m)
		key.created, key.namespace, key.name, key.rule, key.match = ro.created().Time, ro.meta.Namespace, ro.meta.Name, i, j
		out = append(out, &candidate{route: route, key: key})
	}
	return out
}

// weightedBackends resolves a rule's backendRefs into weighted clusters: weight 0 is left
// out; a backend that cannot be resolved is reported (ResolvedRefs) and left out. The
// caller answers 500 when none remains. ignored: the rule redirects, backends are unused.
func (a *attacher) weightedBackends(ro *routeObj, owner ir.ObjectRef, brefs []gwv1.BackendRef, http2 bool, rs *refs, dry, ignored bool) ([]ir.WeightedCluster, uint32) {
	t := a.t
	var out []ir.WeightedCluster
	var failed uint32
	bad := 0
	var firstReason gwv1.RouteConditionReason
	for _, ref := range brefs {
		b := a.checkBackendRef(ro, ref)
		if b.reason == "" && (dry || ignored || b.weight == 0) {
			a.dryResolve(ro, &b)
		}
		var cluster string
		if b.reason == "" && !dry && !ignored && b.weight > 0 {
			be, reason, msg := t.backend(ro.r, owner, b.namespace, b.name, b.port, http2)
			if reason != "" {
				b.reason, b.message = gwv1.RouteReasonBackendNotFound, msg
			}
			cluster = be.cluster
		}
		if b.reason != "" {
			bad++
			if firstReason == "" {
				firstReason = b.reason
			}
			rs.add(b.reason, b.message)
			t.problems.Add(owner, ir.SeverityWarning, string(b.reason), "%s; its share of requests is answered with 500", b.message)
			if b.weight > 0 && b.weight <= 1000000 {
				failed += uint32(b.weight)
			}
			continue
		}
		if b.weight == 0 || cluster == "" {
			continue
		}
		if i := slices.IndexFunc(out, func(w ir.WeightedCluster) bool { return w.Cluster == cluster }); i >= 0 {
			out[i].Weight += uint32(b.weight)
			continue
		}
		out = append(out, ir.WeightedCluster{Cluster: cluster, Weight: uint32(b.weight)})
	}
	if len(out) == 0 && bad > 0 && !dry && !ignored {
		t.problems.Add(owner, ir.SeverityError, string(firstReason), "no backend of the rule can be used; the rule answers 500")
	}
	if len(out) == 0 {
		failed = 0
	}
	return out, failed
}

func gatewayDuration(d *gwv1.Duration) (time.Duration, string) {
	if d == nil {
		return 0, ""
	}
	v, err := time.ParseDuration(string(*d))
	if err != nil || v < 0 {
		return 0, fmt.Sprintf("%q is not a duration", truncate(string(*d)))
	}
	return v, ""
}

var headerNameRE = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,256}$")

func validHeaderName(n string) bool { return headerNameRE.MatchString(n) }

// validValue: a header or query value Envoy accepts (no control characters), bounded.
func validValue(v string) bool {
	if len(v) > maxValueLen {
		return false
	}
	for _, c := range []byte(v) {
		if c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// validPath: an absolute path without whitespace or control characters, bounded.
func validPath(p string) bool {
	if !strings.HasPrefix(p, "/") || len(p) > 1024 {
		return false
	}
	for _, c := range []byte(p) {
		if c <= 0x20 || c == 0x7f || c == '?' || c == '#' {
			return false
		}
	}
	return true
}

// regexProblem says why Envoy would refuse re (re2.Check), "" when it accepts it.
func regexProblem(re string) string {
	if err := re2.Check(re); err != nil {
		return err.Error()
	}
	return ""
}

// headerModifier checks and merges a header filter. Envoy refuses to modify Host and
// pseudo-headers this way, so those are refused here.
func headerModifier(h *gwv1.HTTPHeaderFilter, prev *ir.HeaderModifier) (*ir.HeaderModifier, string) {
	if h == nil || prev != nil {
		return nil, "missing its settings or repeated"
	}
	if len(h.Set)+len(h.Add)+len(h.Remove) > 3*maxHeaders {
		return nil, "too many headers"
	}
	out := &ir.HeaderModifier{}
	check := func(name string) string {
		if !validHeaderName(name) {
			return fmt.Sprintf("%q is not a header name", truncate(name))
		}
		if strings.EqualFold(name, "host") {
			return "the Host header cannot be modified this way (use URLRewrite hostname)"
		}
		return ""
	}
	for _, list := range []struct {
		in  []gwv1.HTTPHeader
		out *[]ir.Header
	}{{h.Set, &out.Set}, {h.Add, &out.Add}} {
		for _, hd := range list.in {
			if err := check(string(hd.Name)); err != "" {
				return nil, err
			}
			if !validValue(hd.Value) {
				return nil, fmt.Sprintf("the value of %s is too long or has control characters", truncate(string(hd.Name)))
			}
			*list.out = append(*list.out, ir.Header{Name: strings.ToLower(string(hd.Name)), Value: hd.Value})
		}
	}
	for _, n := range h.Remove {
		if err := check(n); err != "" {
			return nil, err
		}
		out.Remove = append(out.Remove, strings.ToLower(n))
	}
	return out, ""
}

var httpMethods = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}

// httpMatch turns an HTTPRouteMatch into an IR match, or says why it cannot be served.
func httpMatch(m *gwv1.HTTPRouteMatch) (ir.RouteMatch, string) {
	out := ir.RouteMatch{PathPrefix: "/"}
	if p := m.Path; p != nil {
		typ := gwv1.PathMatchPathPrefix
		if p.Type != nil {
			typ = *p.Type
		}
		v := "/"
		if p.Value != nil {
			v = *p.Value
		}
		switch typ {
		case gwv1.PathMatchExact, gwv1.PathMatchPathPrefix:
			if !validPath(v) {
				return out, fmt.Sprintf("path %q is not an absolute path", truncate(v))
			}
			if typ == gwv1.PathMatchExact {
				out.PathPrefix, out.PathExact = "", v
			} else {
				out.PathPrefix = v
			}
		case gwv1.PathMatchRegularExpression:
			if err := regexProblem(v); err != "" {
				return out, fmt.Sprintf("path %q: %s", truncate(v), err)
			}
			out.PathPrefix, out.PathRegex = "", v
		default:
			return out, fmt.Sprintf("path match type %q is not supported", truncate(string(typ)))
		}
	}
	if len(m.Headers) > maxHeaders || len(m.QueryParams) > maxHeaders {
		return out, "too many header or query parameter matches"
	}
	for _, h := range m.Headers {
		regex := h.Type != nil && *h.Type == gwv1.HeaderMatchRegularExpression
		if h.Type != nil && !regex && *h.Type != gwv1.HeaderMatchExact {
			return out, fmt.Sprintf("header match type %q is not supported", truncate(string(*h.Type)))
		}
		sm, err := stringMatch(string(h.Name), h.Value, regex, true)
		if err != "" {
			return out, err
		}
		out.Headers = append(out.Headers, sm)
	}
	for _, q := range m.QueryParams {
		regex := q.Type != nil && *q.Type == gwv1.QueryParamMatchRegularExpression
		if q.Type != nil && !regex && *q.Type != gwv1.QueryParamMatchExact {
			return out, fmt.Sprintf("query parameter match type %q is not supported", truncate(string(*q.Type)))
		}
		sm, err := stringMatch(string(q.Name), q.Value, regex, false)
		if err != "" {
			return out, err
		}
		out.QueryParams = append(out.QueryParams, sm)
	}
	if m.Method != nil {
		if !slices.Contains(httpMethods, string(*m.Method)) {
			return out, fmt.Sprintf("method %q is not an HTTP method", truncate(string(*m.Method)))
		}
		out.Method = string(*m.Method)
	}
	return out, ""
}

func stringMatch(name, value string, regex, header bool) (ir.StringMatch, string) {
	if !validHeaderName(name) {
		return ir.StringMatch{}, fmt.Sprintf("%q is not a valid name", truncate(name))
	}
	if header {
		name = strings.ToLower(name)
	}
	if !validValue(value) {
		return ir.StringMatch{}, fmt.Sprintf("the value of %s is not valid", truncate(name))
	}
	if regex {
		if err := regexProblem(value); err != "" {
			return ir.StringMatch{}, fmt.Sprintf("the value of %s: %s", truncate(name), err)
		}
	}
	return ir.StringMatch{Name: name, Value: value, Regex: regex}, ""
}

// redirect builds a RequestRedirect for a listener (its tenant-facing port and whether it is
// HTTPS). The port of the Location is, as Gateway API says: the filter's port; else the
// scheme's well-known port when the scheme is set; else the Gateway listener's port (the
// tenant-facing one, never Envoy's). A well-known port (80 for http, 443 for https) is left
// out of the Location: Envoy then keeps the request's host as it is, which carries no port when
// the client used the listener's well-known port, and drops it when the hostname is replaced.
// Otherwise the port is written explicitly (a client of port 8080 redirected to https gets
// :443: correct, if not the shortest URL).
func redirect(f *gwv1.HTTPRequestRedirectFilter, m ir.RouteMatch, listenerPort int32, listenerHTTPS bool) (*ir.Redirect, string) {
	rd := &ir.Redirect{StatusCode: 302}
	if f.Scheme != nil {
		switch *f.Scheme {
		case "http", "https":
			rd.Scheme = *f.Scheme
		default:
			return nil, fmt.Sprintf("scheme %q is not http or https", truncate(*f.Scheme))
		}
	}
	if f.Hostname != nil {
		h := strings.ToLower(string(*f.Hostname))
		if !validHostname(h, false) {
			return nil, fmt.Sprintf("hostname %q is not a DNS name", truncate(h))
		}
		rd.Hostname = h
	}
	listenerScheme := "http"
	if listenerHTTPS {
		listenerScheme = "https"
	}
	wellKnown := map[string]int32{"http": 80, "https": 443}
	scheme := cmp.Or(rd.Scheme, listenerScheme)
	var port int32
	switch {
	case f.Port != nil:
		if *f.Port < 1 || *f.Port > 65535 {
			return nil, fmt.Sprintf("port %d is out of range", *f.Port)
		}
		port = int32(*f.Port)
	case rd.Scheme != "":
		port = wellKnown[rd.Scheme]
	default:
		port = listenerPort
	}
	hostWithoutPort := rd.Hostname != "" || listenerPort == wellKnown[listenerScheme]
	if port != wellKnown[scheme] || !hostWithoutPort {
		rd.Port = uint32(port)
	}
	if f.StatusCode != nil {
		switch *f.StatusCode {
		case 301, 302, 303, 307, 308:
			rd.StatusCode = uint32(*f.StatusCode)
		default:
			return nil, fmt.Sprintf("status code %d is not a redirect", *f.StatusCode)
		}
	}
	if p := f.Path; p != nil {
		full, re, err := pathModifier(p, m)
		if err != "" {
			return nil, err
		}
		rd.Path, rd.PathRegex = full, re
	}
	return rd, ""
}

func rewrite(f *gwv1.HTTPURLRewriteFilter, m ir.RouteMatch) (*ir.URLRewrite, string) {
	rw := &ir.URLRewrite{}
	if f.Hostname != nil {
		h := strings.ToLower(string(*f.Hostname))
		if !validHostname(h, false) {
			return nil, fmt.Sprintf("hostname %q is not a DNS name", truncate(h))
		}
		rw.Hostname = h
	}
	if p := f.Path; p != nil {
		full, re, err := pathModifier(p, m)
		if err != "" {
			return nil, err
		}
		rw.Path, rw.PathRegex = full, re
	}
	if rw.Hostname == "" && rw.Path == "" && rw.PathRegex == nil {
		return nil, ""
	}
	return rw, ""
}

// pathModifier returns the full path, or the rewrite of the matched prefix; ReplacePrefixMatch
// needs a PathPrefix match.
func pathModifier(p *gwv1.HTTPPathModifier, m ir.RouteMatch) (string, *ir.RegexRewrite, string) {
	switch p.Type {
	case gwv1.FullPathHTTPPathModifier:
		if p.ReplaceFullPath == nil || !validPath(*p.ReplaceFullPath) {
			return "", nil, "replaceFullPath is not an absolute path"
		}
		return *p.ReplaceFullPath, nil, ""
	case gwv1.PrefixMatchHTTPPathModifier:
		if p.ReplacePrefixMatch == nil || !validPath(*p.ReplacePrefixMatch) || strings.Contains(*p.ReplacePrefixMatch, `\`) {
			return "", nil, "replacePrefixMatch is not an absolute path"
		}
		if m.PathPrefix == "" {
			return "", nil, "ReplacePrefixMatch needs a PathPrefix path match"
		}
		return "", prefixRewrite(m.PathPrefix, *p.ReplacePrefixMatch), ""
	}
	return "", nil, fmt.Sprintf("path modifier type %q is not supported", truncate(string(p.Type)))
}

// prefixRewrite replaces a matched path prefix as Gateway API defines it, on whole segments
// and without doubled slashes: with prefix /foo, /foo/bar becomes /xyz/bar for /xyz and /bar
// for /; /foo becomes /xyz or /. (Envoy's prefix_rewrite would make //bar of the latter.)
func prefixRewrite(prefix, replacement string) *ir.RegexRewrite {
	p := strings.TrimRight(prefix, "/")
	r := strings.TrimRight(replacement, "/")
	switch {
	case p == "":
		return &ir.RegexRewrite{Pattern: "^/", Substitution: r + "/"}
	case r == "":
		return &ir.RegexRewrite{Pattern: "^" + regexp.QuoteMeta(p) + "/*", Substitution: "/"}
	}
	return &ir.RegexRewrite{Pattern: "^" + regexp.QuoteMeta(p) + "(/.*)?$", Substitution: r + `\1`}
}

// grpcRoute translates a GRPCRoute: like an HTTPRoute, on HTTP/2 upstreams, matching the
// gRPC service and method in the path.
func (a *attacher) grpcRoute(r *v1alpha1.Route) {
	t := a.t
	var gr gwv1.GRPCRoute
	if !t.decode(r, &gr) {
		return
	}
	ro := a.newRouteObj(r, KindGRPCRoute, gr.ObjectMeta, gr.Spec.CommonRouteSpec, gr.Spec.Hostnames)
	serveRules(a, ro, gr.Spec.Rules, func(i int, rule *gwv1.GRPCRouteRule, _ *gwListener, rs *refs, dry bool) []*candidate {
		return a.grpcRule(ro, i, rule, rs, dry)
	})
}

var (
	grpcServiceRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z_0-9]*(\.[A-Za-z_][A-Za-z_0-9]*)*$`)
	grpcMethodRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z_0-9]*$`)
)

func (a *attacher) grpcRule(ro *routeObj, i int, rule *gwv1.GRPCRouteRule, rs *refs, dry bool) []*candidate {
	t := a.t
	owner := t.ref(ro.r, fmt.Sprintf("rule %d", i))
	bad := func(format string, args ...any) []*candidate {
		msg := fmt.Sprintf(format, args...)
		t.problems.Add(owner, ir.SeverityError, ReasonInvalidRule, "%s; the rule is not served", msg)
		rs.invalid(fmt.Sprintf("rule %d: %s", i, msg))
		return nil
	}
	var f ruleFilters
	if len(rule.Filters) > maxFilters {
		return bad("%d filters; at most %d are served", len(rule.Filters), maxFilters)
	}
	for _, fl := range rule.Filters {
		var err string
		switch fl.Type {
		case gwv1.GRPCRouteFilterRequestHeaderModifier:
			f.request, err = headerModifier(fl.RequestHeaderModifier, f.request)
		case gwv1.GRPCRouteFilterResponseHeaderModifier:
			f.response, err = headerModifier(fl.ResponseHeaderModifier, f.response)
		case gwv1.GRPCRouteFilterRequestMirror:
			t.problems.Add(owner, ir.SeverityWarning, ReasonUnsupportedFilter, "filter %s is not yet supported; ignored", fl.Type)
		default:
			f.fail = fmt.Sprintf("filter %s is not supported", truncate(string(fl.Type)))
			t.problems.Add(owner, ir.SeverityError, ReasonUnsupportedFilter, "%s; the rule answers 500", f.fail)
			rs.invalid(fmt.Sprintf("rule %d: %s", i, f.fail))
		}
		if err != "" {
			return bad("filter %s: %s", fl.Type, err)
		}
	}
	if len(rule.BackendRefs) > maxBackendRefs {
		return bad("%d backendRefs; at most %d are served", len(rule.BackendRefs), maxBackendRefs)
	}
	var brefs []gwv1.BackendRef
	for _, b := range rule.BackendRefs {
		if len(b.Filters) > 0 {
			t.problems.Add(owner, ir.SeverityWarning, ReasonUnsupportedFilter, "filters on a backendRef are not yet supported; ignored")
		}
		brefs = append(brefs, b.BackendRef)
	}
	backends, failed := a.weightedBackends(ro, owner, brefs, true, rs, dry, false)
	matches := rule.Matches
	if len(matches) > maxMatches {
		return bad("%d matches; at most %d are served", len(matches), maxMatches)
	}
	if len(matches) == 0 {
		matches = []gwv1.GRPCRouteMatch{{}}
	}
	var out []*candidate
	for j := range matches {
		m, err := grpcMatch(&matches[j])
		if err != "" {
			bad("match %d: %s", j, err)
			continue
		}
		route := &ir.Route{
			Name:            fmt.Sprintf("%s/rule-%d/match-%d", ro.r.Name, i, j),
			Owners:          []ir.ObjectRef{owner},
			Match:           m,
			RequestHeaders:  f.request,
			ResponseHeaders: f.response,
		}
		switch {
		case f.fail != "" || len(backends) == 0:
			route.DirectResponse = &ir.DirectResponse{Status: 500}
		default:
			route.Backends, route.FailedWeight = backends, failed
		}
		key := grpcPrecedence(&matches[j], m)
		key.created, key.namespace, key.name, key.rule, key.match = ro.created().Time, ro.meta.Namespace, ro.meta.Name, i, j
		out = append(out, &candidate{route: route, key: key})
	}
	return out
}

// grpcPrecedence ranks a GRPCRoute match as Gateway API says (after the hostname): the most
// characters of the matching service, then of the matching method, then the most header
// matches. Exact method matches rank with exact paths, regular expressions with path regular
// expressions; a match without a method match is a catch-all.
func grpcPrecedence(gm *gwv1.GRPCRouteMatch, m ir.RouteMatch) precedence {
	p := matchPrecedence(m)
	mm := gm.Method
	if mm == nil {
		return p
	}
	svc, method := 0, 0
	if mm.Service != nil {
		svc = len(*mm.Service)
	}
	if mm.Method != nil {
		method = len(*mm.Method)
	}
	p.pathKind, p.pathLen = 0, svc*2048+method
	if mm.Type != nil && *mm.Type == gwv1.GRPCMethodMatchRegularExpression {
		p.pathKind = 1
	}
	return p
}

// grpcMatch matches the gRPC service and method in the request path (/<service>/<method>):
// both exact → an exact path; the service alone → the prefix /<service>/; anything with a
// regular expression or the method alone → a path regular expression.
func grpcMatch(m *gwv1.GRPCRouteMatch) (ir.RouteMatch, string) {
	out := ir.RouteMatch{PathPrefix: "/"}
	if mm := m.Method; mm != nil {
		svc, method := "", ""
		if mm.Service != nil {
			svc = *mm.Service
		}
		if mm.Method != nil {
			method = *mm.Method
		}
		regex := mm.Type != nil && *mm.Type == gwv1.GRPCMethodMatchRegularExpression
		if mm.Type != nil && !regex && *mm.Type != gwv1.GRPCMethodMatchExact {
			return out, fmt.Sprintf("method match type %q is not supported", truncate(string(*mm.Type)))
		}
		if svc == "" && method == "" {
			return out, "a method match needs a service or a method"
		}
		if regex {
			svcRE, methodRE := "[^/]+", "[^/]+"
			if svc != "" {
				if err := regexProblem(svc); err != "" {
					return out, fmt.Sprintf("service %q: %s", truncate(svc), err)
				}
				svcRE = "(?:" + svc + ")"
			}
			if method != "" {
				if err := regexProblem(method); err != "" {
					return out, fmt.Sprintf("method %q: %s", truncate(method), err)
				}
				methodRE = "(?:" + method + ")"
			}
			out.PathPrefix, out.PathRegex = "", "^/"+svcRE+"/"+methodRE+"$"
			if err := regexProblem(out.PathRegex); err != "" {
				return out, fmt.Sprintf("service and method together: %s", err)
			}
		} else {
			if svc != "" && !grpcServiceRE.MatchString(svc) || len(svc) > 1024 {
				return out, fmt.Sprintf("service %q is not a gRPC service name", truncate(svc))
			}
			if method != "" && !grpcMethodRE.MatchString(method) || len(method) > 1024 {
				return out, fmt.Sprintf("method %q is not a gRPC method name", truncate(method))
			}
			switch {
			case svc != "" && method != "":
				out.PathPrefix, out.PathExact = "", "/"+svc+"/"+method
			case svc != "":
				out.PathPrefix = "/" + svc + "/"
			default:
				out.PathPrefix, out.PathRegex = "", "^/[^/]+/"+regexp.QuoteMeta(method)+"$"
			}
		}
	}
	if len(m.Headers) > maxHeaders {
		return out, "too many header matches"
	}
	for _, h := range m.Headers {
		regex := h.Type != nil && *h.Type == gwv1.GRPCHeaderMatchRegularExpression
		if h.Type != nil && !regex && *h.Type != gwv1.GRPCHeaderMatchExact {
			return out, fmt.Sprintf("header match type %q is not supported", truncate(string(*h.Type)))
		}
		sm, err := stringMatch(string(h.Name), h.Value, regex, true)
		if err != "" {
			return out, err
		}
		out.Headers = append(out.Headers, sm)
	}
	return out, ""
}
