package translate

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/re2"
)

// What HTTPRoutes and GRPCRoutes share: a rule becomes candidates, one IR route per match,
// with its precedence; the candidates join the virtual hosts of the listeners the route
// attached to (gateway_vhosts.go). The kinds differ only in the types they carry and what
// reads them: HTTPRoutes in gateway_httproute.go, GRPCRoutes in gateway_grpcroute.go.

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

// rulesRoute translates an HTTPRoute or a GRPCRoute (kind): attachment, then its rules on the
// virtual hosts of every listener it attached to.
func (a *attacher) rulesRoute(r *v1alpha1.Route, kind string) {
	t := a.t
	if t.routes.replay(a, r, kind) {
		return
	}
	t.rec = t.routes.record(t, r, kind)
	defer func() {
		t.routes.keep(t, r, t.rec)
		t.rec = nil
	}()
	switch kind {
	case KindHTTPRoute:
		var o gwv1.HTTPRoute
		if a.t.decode(r, &o) {
			ro := a.newRouteObj(r, kind, o.ObjectMeta, o.Spec.CommonRouteSpec, o.Spec.Hostnames)
			ro.timeouts = a.t.routeTimeouts(r, o.Annotations)
			serveRules(a, ro, o.Spec.Rules, httpRule)
		}
	case KindGRPCRoute:
		var o gwv1.GRPCRoute
		if a.t.decode(r, &o) {
			ro := a.newRouteObj(r, kind, o.ObjectMeta, o.Spec.CommonRouteSpec, o.Spec.Hostnames)
			ro.timeouts = a.t.routeTimeouts(r, o.Annotations)
			serveRules(a, ro, o.Spec.Rules, grpcRule)
		}
	}
}

// serveRules attaches a route, serves its rules (at most maxRules) on the virtual hosts of
// every listener it attached to, and records its status: what HTTPRoutes and GRPCRoutes share.
// readRule gives a rule of the kind as ruleCandidates takes it (httpRule, grpcRule).
func serveRules[R, F, M any](a *attacher, ro *routeObj, rules []R, readRule func(*R) ruleOf[F, M]) {
	parents := a.attach(ro)
	countAttached(parents)
	a.t.rec.attach(parents)
	names := make([]string, 0, len(rules)) // every rule's, served or not: a section's policy names one
	for i := range rules {
		if n := readRule(&rules[i]).name; n != "" {
			names = append(names, n)
		}
	}
	a.t.checkPolicySections(ro.r, names, "rule")
	if len(rules) > maxRules {
		a.t.problems.Add(a.t.ref(ro.r, ""), ir.SeverityWarning, ReasonTooMany, "the route has %d rules; only the first %d are served", len(rules), maxRules)
		rules = rules[:maxRules]
	}
	in := make([]ruleOf[F, M], len(rules))
	for i := range rules {
		in[i] = readRule(&rules[i])
	}
	rs := &refs{}
	a.serve(ro, parents, rs, func(l *gwListener, dry bool) []*candidate {
		var out []*candidate
		for i := range in {
			out = append(out, ruleCandidates(a, ro, i, &in[i], l, rs, dry)...)
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
				a.t.rec.add(l, h, cs)
			}
		}
	}
	if len(done) == 0 {
		build(nil, true)
	}
}

// ruleOf is one HTTPRoute or GRPCRoute rule as ruleCandidates takes it: its parts in the
// kind's own types (F its filters, M its matches) and the functions that read them. A
// GRPCRoute rule is an HTTPRoute rule without redirects, rewrites and timeouts, on HTTP/2
// upstreams.
type ruleOf[F, M any] struct {
	name        string // spec.rules[].name; "" for none
	filters     []F
	filter      func(*F) ruleFilter
	backendRefs []backendRefOf
	http2       bool                    // the backends speak HTTP/2
	timeouts    *gwv1.HTTPRouteTimeouts // an HTTPRoute's; nil for none
	retry       *gwv1.HTTPRouteRetry    // an HTTPRoute's; nil for none
	persistence *gwv1.SessionPersistence
	matches     []M
	match       func(*M) (ir.RouteMatch, string)   // an IR match, or why it cannot be served
	precedence  func(*M, ir.RouteMatch) precedence // the IR match's rank
}

// ruleName is a rule's name ("" for none).
func ruleName(n *gwv1.SectionName) string {
	if n == nil {
		return ""
	}
	return string(*n)
}

// filterUse is what a route kind makes of a filter type.
type filterUse int

const (
	filterUnsupported filterUse = iota // (a type the kind does not list) must not be skipped and cannot be served: the rule answers 500
	filterServed                       // read into ruleFilters
	filterIgnored                      // not yet supported: skipped with a warning
)

// ruleFilter is one filter of a rule, the same for both kinds: the filter types they share
// have the same names (an HTTPRoute's stand for both) and the same settings.
type ruleFilter struct {
	typ               gwv1.HTTPRouteFilterType
	use               filterUse
	request, response *gwv1.HTTPHeaderFilter
	redirect          *gwv1.HTTPRequestRedirectFilter
	rewrite           *gwv1.HTTPURLRewriteFilter
	mirror            *gwv1.HTTPRequestMirrorFilter
	cors              *gwv1.HTTPCORSFilter
}

// ruleFilters is what a rule's filters ask for.
type ruleFilters struct {
	request, response *ir.HeaderModifier
	redirect          *gwv1.HTTPRequestRedirectFilter
	rewrite           *gwv1.HTTPURLRewriteFilter
	mirrors           []*gwv1.HTTPRequestMirrorFilter
	cors              *ir.CORSPolicy
	warnings          []string // what a served filter leaves out
	fail              string   // a filter that must not be skipped cannot be served: answer 500
}

// add reads a served filter, or says why the rule cannot be served.
func (f *ruleFilters) add(fl *ruleFilter) (err string) {
	switch fl.typ {
	case gwv1.HTTPRouteFilterRequestHeaderModifier:
		f.request, err = headerModifier(fl.request, f.request)
	case gwv1.HTTPRouteFilterResponseHeaderModifier:
		f.response, err = headerModifier(fl.response, f.response)
	case gwv1.HTTPRouteFilterRequestRedirect:
		if fl.redirect == nil || f.redirect != nil {
			err = "RequestRedirect is missing its settings or repeated"
		}
		f.redirect = fl.redirect
	case gwv1.HTTPRouteFilterURLRewrite:
		if fl.rewrite == nil || f.rewrite != nil {
			err = "URLRewrite is missing its settings or repeated"
		}
		f.rewrite = fl.rewrite
	case gwv1.HTTPRouteFilterRequestMirror:
		if fl.mirror == nil {
			err = "RequestMirror is missing its settings"
		}
		f.mirrors = append(f.mirrors, fl.mirror)
	case gwv1.HTTPRouteFilterCORS:
		if fl.cors == nil || f.cors != nil {
			return "CORS is missing its settings or repeated"
		}
		var warn string
		f.cors, warn, err = corsPolicy(fl.cors)
		if warn != "" {
			f.warnings = append(f.warnings, warn)
		}
	}
	return err
}

// ruleCandidates turns rule i of a route into candidates (one per match) for listener l (nil
// when dry). A rule that cannot be served is left out with a problem, and so is a match.
func ruleCandidates[F, M any](a *attacher, ro *routeObj, i int, rule *ruleOf[F, M], l *gwListener, rs *refs, dry bool) []*candidate {
	t := a.t
	owner := t.ref(ro.r, fmt.Sprintf("rule %d", i))
	bad := func(format string, args ...any) []*candidate {
		msg := fmt.Sprintf(format, args...)
		t.problems.Add(owner, ir.SeverityError, ReasonInvalidRule, "%s; the rule is not served", msg)
		rs.invalid(fmt.Sprintf("rule %d: %s", i, msg))
		return nil
	}
	var f ruleFilters
	if len(rule.filters) > maxFilters {
		return bad("%d filters; at most %d are served", len(rule.filters), maxFilters)
	}
	for j := range rule.filters {
		fl := rule.filter(&rule.filters[j])
		var err string
		switch fl.use {
		case filterServed:
			err = f.add(&fl)
		case filterIgnored:
			t.problems.Add(owner, ir.SeverityWarning, ReasonUnsupportedFilter, "filter %s is not yet supported; ignored", fl.typ)
		default:
			f.fail = fmt.Sprintf("filter %s is not supported", truncate(string(fl.typ)))
			t.problems.Add(owner, ir.SeverityError, ReasonUnsupportedFilter, "%s; the rule answers 500", f.fail)
			rs.invalid(fmt.Sprintf("rule %d: %s", i, f.fail))
		}
		if err != "" {
			return bad("filter %s: %s", fl.typ, err)
		}
	}
	for _, w := range f.warnings {
		t.problems.Add(owner, ir.SeverityWarning, ReasonUnsupportedFilter, "filter CORS: %s", w)
	}
	if f.redirect != nil && f.rewrite != nil {
		return bad("RequestRedirect and URLRewrite cannot be combined")
	}
	if len(rule.backendRefs) > maxBackendRefs {
		return bad("%d backendRefs; at most %d are served", len(rule.backendRefs), maxBackendRefs)
	}
	headers, err := backendHeaders(t, owner, rule.backendRefs)
	if err != "" {
		return bad("%s", err)
	}
	clientCert := "" // the client certificate of the listener's Gateway, for TLS backends
	if l != nil {
		clientCert = l.gw.clientCert
	}
	var traffic *backendTraffic // the BackendTrafficPolicy of the route under the listener's Gateway
	var security routeSecurity  // its SecurityPolicy's
	if l != nil {
		traffic = t.trafficFor(ro.r, rule.name, l, owner)
		security = t.securityFor(ro.r, rule.name, l, owner)
	}
	backends, failed := a.weightedBackends(ro, owner, rule.backendRefs, headers, rule.http2, clientCert, traffic, rs, dry, f.redirect != nil)
	mirrors := a.mirrors(ro, owner, f.mirrors, rule.http2, clientCert, rs, dry || f.redirect != nil)
	timeouts, err := httpTimeouts(rule.timeouts)
	if err != "" {
		return bad("%s", err)
	}
	retry, err := httpRetry(rule.retry, func(format string, args ...any) {
		t.problems.Add(owner, ir.SeverityWarning, ReasonTooMany, format, args...)
	})
	if err != "" {
		return bad("%s", err)
	}
	session := sessionPersistence(rule.persistence, defaultSessionName(ro.meta.Namespace, ro.meta.Name, i), func(format string, args ...any) {
		t.problems.Add(owner, ir.SeverityWarning, ReasonUnsupportedPersistence, format, args...)
	})
	matches := rule.matches
	if len(matches) > maxMatches {
		return bad("%d matches; at most %d are served", len(matches), maxMatches)
	}
	if len(matches) == 0 {
		matches = make([]M, 1) // no match: every request
	}
	var out []*candidate
	for j := range matches {
		m, err := rule.match(&matches[j])
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
			CORS:            f.cors,
			Authorization:   security.authorization,
			BasicAuth:       security.basicAuth,
			APIKeyAuth:      security.apiKeyAuth,
			ExtAuth:         security.extAuth,
			OIDC:            security.oidc,
			JWT:             security.jwt,
		}
		// A redirect answers by itself; a filter that cannot be served, or no backend left,
		// answers 500; otherwise the backends, with the rule's rewrite and timeouts.
		switch {
		case security.closed: // basic or JWT authentication that cannot be served
			route.DirectResponse = &ir.DirectResponse{Status: 500}
		case f.redirect != nil:
			rd, err := listenerRedirect(f.redirect, m, l)
			if err != "" {
				bad("match %d: RequestRedirect: %s", j, err)
				continue
			}
			route.Redirect = rd
		case f.fail != "" || len(backends) == 0:
			route.DirectResponse = &ir.DirectResponse{Status: 500}
		default:
			route.Backends, route.FailedWeight = backends, failed
			rt := ro.timeouts
			if timeouts.requestSet {
				rt.request = timeouts.request
			}
			rt.set(route)
			route.BackendTimeout = ir.Duration(timeouts.backend)
			route.Retry = retry
			route.SessionPersistence = session.at(m)
			route.Mirrors = mirrors
			traffic.applyRoute(route)
			if f.rewrite != nil {
				rw, err := rewrite(f.rewrite, m)
				if err != "" {
					bad("match %d: URLRewrite: %s", j, err)
					continue
				}
				route.Rewrite = rw
			}
		}
		key := rule.precedence(&matches[j], m)
		key.created, key.namespace, key.name, key.rule, key.match = ro.created().Time, ro.meta.Namespace, ro.meta.Name, i, j
		out = append(out, &candidate{route: route, key: key})
	}
	return out
}

// weightedBackends resolves a rule's backendRefs into weighted clusters, each with its header
// changes (headers, by backendRef): weight 0 is left out; a backend that cannot be resolved is
// reported (ResolvedRefs) and left out. The caller answers 500 when none remains. ignored:
// the rule redirects, backends are unused.
func (a *attacher) weightedBackends(ro *routeObj, owner ir.ObjectRef, brefs []backendRefOf, headers []backendHeaderMods, http2 bool, clientCert string, traffic *backendTraffic, rs *refs, dry, ignored bool) ([]ir.WeightedCluster, uint32) {
	t := a.t
	var out []ir.WeightedCluster
	var failed uint32
	bad := 0
	firstProblem := "" // the reason of the first backend that cannot be used
	for i := range brefs {
		b := a.checkBackendRef(ro, brefs[i].ref)
		if b.reason == "" && (dry || ignored || b.weight == 0) {
			a.dryResolve(ro, &b)
		}
		var cluster string
		if b.reason == "" && !dry && !ignored && b.weight > 0 {
			be, reason, msg := t.backendWith(ro.r, owner, b.namespace, b.name, b.port, http2, clientCert, traffic)
			if reason == ReasonInvalidBackendTLS {
				// The reference resolves (the route's ResolvedRefs stays), but its policy's TLS
				// cannot be used: its share fails rather than go unencrypted.
				bad++
				if firstProblem == "" {
					firstProblem = reason
				}
				t.problems.Add(owner, ir.SeverityWarning, reason, "%s; its share of requests is answered with 500, not sent unencrypted", msg)
				if b.weight <= 1000000 {
					failed += uint32(b.weight)
				}
				continue
			}
			if reason != "" {
				b.reason, b.message = gwv1.RouteReasonBackendNotFound, msg
			}
			cluster = be.cluster
		}
		if b.reason != "" {
			bad++
			if firstProblem == "" {
				firstProblem = string(b.reason)
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
		h := headers[i]
		// backendRefs to one cluster share an entry when they change the same headers.
		if j := slices.IndexFunc(out, func(w ir.WeightedCluster) bool {
			return w.Cluster == cluster && reflect.DeepEqual(w.RequestHeaders, h.request) && reflect.DeepEqual(w.ResponseHeaders, h.response)
		}); j >= 0 {
			out[j].Weight += uint32(b.weight)
			continue
		}
		out = append(out, ir.WeightedCluster{Cluster: cluster, Weight: uint32(b.weight), RequestHeaders: h.request, ResponseHeaders: h.response})
	}
	if len(out) == 0 && bad > 0 && !dry && !ignored {
		t.problems.Add(owner, ir.SeverityError, firstProblem, "no backend of the rule can be used; the rule answers 500")
	}
	if len(out) == 0 {
		failed = 0
	}
	return out, failed
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

// stringMatches reads a match's header matches (header) or query parameter matches; each
// (name, value and type: nil for exact) is exact or a regular expression.
func stringMatches[S any, T ~string](ms []S, read func(*S) (string, string, *T), exact, regex T, header bool) ([]ir.StringMatch, string) {
	what := "query parameter"
	if header {
		what = "header"
	}
	var out []ir.StringMatch
	for i := range ms {
		name, value, typ := read(&ms[i])
		isRegex := typ != nil && *typ == regex
		if typ != nil && !isRegex && *typ != exact {
			return out, fmt.Sprintf("%s match type %q is not supported", what, truncate(string(*typ)))
		}
		sm, err := stringMatch(name, value, isRegex, header)
		if err != "" {
			return out, err
		}
		out = append(out, sm)
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

// mirrors resolves a rule's RequestMirror filters into the clusters requests are copied to,
// with the share of the requests each gets (percent, or fraction; all when neither is set).
// A mirror whose backend cannot be used is left out with a Warning and ResolvedRefs False:
// the rule's requests are still served. dry (the rule is served nowhere, or redirects)
// only checks the backends.
func (a *attacher) mirrors(ro *routeObj, owner ir.ObjectRef, filters []*gwv1.HTTPRequestMirrorFilter, http2 bool, clientCert string, rs *refs, dry bool) []ir.Mirror {
	t := a.t
	var out []ir.Mirror
	for i, m := range filters {
		b := a.checkBackendRef(ro, gwv1.BackendRef{BackendObjectReference: m.BackendRef})
		if b.reason == "" && dry {
			a.dryResolve(ro, &b)
		}
		var cluster string
		if b.reason == "" && !dry {
			be, reason, msg := t.backend(ro.r, owner, b.namespace, b.name, b.port, http2, clientCert)
			if reason == ReasonInvalidBackendTLS {
				t.problems.Add(owner, ir.SeverityWarning, reason, "RequestMirror %d: %s; requests are not mirrored there", i, msg)
				continue
			}
			if reason != "" {
				b.reason, b.message = gwv1.RouteReasonBackendNotFound, msg
			}
			cluster = be.cluster
		}
		if b.reason != "" {
			rs.add(b.reason, b.message)
			t.problems.Add(owner, ir.SeverityWarning, string(b.reason), "RequestMirror %d: %s; requests are not mirrored there", i, b.message)
			continue
		}
		share, msg := mirrorShare(m)
		if msg != "" {
			t.problems.Add(owner, ir.SeverityWarning, ReasonInvalidRule, "RequestMirror %d: %s; requests are not mirrored there", i, msg)
			continue
		}
		if dry || share == 0 || cluster == "" || slices.ContainsFunc(out, func(o ir.Mirror) bool { return o.Cluster == cluster }) {
			continue
		}
		out = append(out, ir.Mirror{Cluster: cluster, PerMillion: share})
	}
	return out
}

// mirrorShare is the share of requests, per million, a RequestMirror filter copies: its
// percent (0 to 100), or its fraction (numerator over denominator, default 100), or all.
func mirrorShare(m *gwv1.HTTPRequestMirrorFilter) (uint32, string) {
	switch {
	case m.Percent != nil && m.Fraction != nil:
		return 0, "both percent and fraction are set"
	case m.Percent != nil:
		if *m.Percent < 0 || *m.Percent > 100 {
			return 0, fmt.Sprintf("percent %d is not from 0 to 100", *m.Percent)
		}
		return uint32(*m.Percent) * 10000, ""
	case m.Fraction != nil:
		den := int64(100)
		if m.Fraction.Denominator != nil {
			den = int64(*m.Fraction.Denominator)
		}
		num := int64(m.Fraction.Numerator)
		if den <= 0 || num < 0 || num > den {
			return 0, fmt.Sprintf("fraction %d/%d is not from 0 to 1", num, den)
		}
		return uint32(num * 1000000 / den), ""
	}
	return 1000000, ""
}
