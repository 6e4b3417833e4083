package translate

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/internal/ir"
)

// httpFilterUse is what an HTTPRoute makes of each filter type; any other (ExtensionRef,
// ExternalAuth, unknown) must not be skipped and cannot be served.
var httpFilterUse = map[gwv1.HTTPRouteFilterType]filterUse{
	gwv1.HTTPRouteFilterRequestHeaderModifier:  filterServed,
	gwv1.HTTPRouteFilterResponseHeaderModifier: filterServed,
	gwv1.HTTPRouteFilterRequestRedirect:        filterServed,
	gwv1.HTTPRouteFilterURLRewrite:             filterServed,
	gwv1.HTTPRouteFilterRequestMirror:          filterServed,
	gwv1.HTTPRouteFilterCORS:                   filterServed,
}

var httpMethods = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}

// httpRule is an HTTPRoute rule as ruleCandidates takes it.
func httpRule(rule *gwv1.HTTPRouteRule) ruleOf[gwv1.HTTPRouteFilter, gwv1.HTTPRouteMatch] {
	refs := backendRefs(rule.BackendRefs, func(b *gwv1.HTTPBackendRef) (gwv1.BackendRef, []gwv1.HTTPRouteFilter) { return b.BackendRef, b.Filters }, httpFilter)
	return ruleOf[gwv1.HTTPRouteFilter, gwv1.HTTPRouteMatch]{
		name:    ruleName(rule.Name),
		filters: rule.Filters, filter: httpFilter, backendRefs: refs, timeouts: rule.Timeouts,
		retry: rule.Retry, persistence: rule.SessionPersistence,
		matches: rule.Matches, match: httpMatch, precedence: httpPrecedence,
	}
}

// httpPrecedence ranks an HTTPRoute match by its IR match alone (matchPrecedence).
func httpPrecedence(_ *gwv1.HTTPRouteMatch, m ir.RouteMatch) precedence { return matchPrecedence(m) }

// httpFilter reads an HTTPRoute filter.
func httpFilter(fl *gwv1.HTTPRouteFilter) ruleFilter {
	return ruleFilter{
		typ: fl.Type, use: httpFilterUse[fl.Type],
		request: fl.RequestHeaderModifier, response: fl.ResponseHeaderModifier,
		redirect: fl.RequestRedirect, rewrite: fl.URLRewrite, mirror: fl.RequestMirror, cors: fl.CORS,
	}
}

// ruleTimeouts is what an HTTPRoute rule's timeouts ask of its routes to backends.
type ruleTimeouts struct {
	request, backend time.Duration
	requestSet       bool // timeouts.request is set ("0s": no timeout at all)
}

// httpTimeouts reads an HTTPRoute rule's timeouts (nil: none), or says why the rule cannot be
// served.
func httpTimeouts(to *gwv1.HTTPRouteTimeouts) (ruleTimeouts, string) {
	var out ruleTimeouts
	if to == nil {
		return out, ""
	}
	var err string
	if out.request, err = gatewayDuration(to.Request); err != "" {
		return out, "timeouts.request: " + err
	}
	out.requestSet = to.Request != nil
	if out.backend, err = gatewayDuration(to.BackendRequest); err != "" {
		return out, "timeouts.backendRequest: " + err
	}
	return out, ""
}

// maxRetryCodes bounds the status codes of an HTTPRoute rule's retry.
const maxRetryCodes = 32

// httpRetry reads an HTTPRoute rule's retry (nil: none): Attempts default to 1 and are
// bounded by ir.MaxRetryAttempts, codes outside 400-599 and beyond maxRetryCodes are left
// out (each said through warn); a backoff that is not a duration makes the rule unusable
// (the reason is returned).
func httpRetry(rr *gwv1.HTTPRouteRetry, warn func(format string, args ...any)) (*ir.RetryPolicy, string) {
	if rr == nil {
		return nil, ""
	}
	out := &ir.RetryPolicy{Attempts: 1}
	if a := rr.Attempts; a != nil {
		switch {
		case *a < 1:
			return nil, fmt.Sprintf("retry.attempts %d is not a positive number", *a)
		case *a > ir.MaxRetryAttempts:
			warn("retry.attempts %d is more than kubelb's %d; %d are made", *a, ir.MaxRetryAttempts, ir.MaxRetryAttempts)
			out.Attempts = ir.MaxRetryAttempts
		default:
			out.Attempts = uint32(*a)
		}
	}
	for i, c := range rr.Codes {
		if c < 400 || c > 599 {
			warn("retry.codes[%d] %d is not a status code from 400 to 599; left out", i, c)
			continue
		}
		if len(out.Codes) == maxRetryCodes {
			warn("retry.codes has %d codes; only the first %d are retried", len(rr.Codes), maxRetryCodes)
			break
		}
		out.Codes = append(out.Codes, uint32(c))
	}
	slices.Sort(out.Codes)
	out.Codes = slices.Compact(out.Codes)
	backoff, err := gatewayDuration(rr.Backoff)
	if err != "" {
		return nil, "retry.backoff: " + err
	}
	if backoff > 0 && backoff < time.Millisecond {
		backoff = time.Millisecond // Envoy's least
	}
	out.Backoff = ir.Duration(backoff)
	return out, ""
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
	var err string
	out.Headers, err = stringMatches(m.Headers, func(h *gwv1.HTTPHeaderMatch) (string, string, *gwv1.HeaderMatchType) {
		return string(h.Name), h.Value, h.Type
	}, gwv1.HeaderMatchExact, gwv1.HeaderMatchRegularExpression, true)
	if err != "" {
		return out, err
	}
	out.QueryParams, err = stringMatches(m.QueryParams, func(q *gwv1.HTTPQueryParamMatch) (string, string, *gwv1.QueryParamMatchType) {
		return string(q.Name), q.Value, q.Type
	}, gwv1.QueryParamMatchExact, gwv1.QueryParamMatchRegularExpression, false)
	if err != "" {
		return out, err
	}
	if m.Method != nil {
		if !slices.Contains(httpMethods, string(*m.Method)) {
			return out, fmt.Sprintf("method %q is not an HTTP method", truncate(string(*m.Method)))
		}
		out.Method = string(*m.Method)
	}
	return out, ""
}

// listenerRedirect builds a RequestRedirect for listener l (nil when dry).
func listenerRedirect(f *gwv1.HTTPRequestRedirectFilter, m ir.RouteMatch, l *gwListener) (*ir.Redirect, string) {
	port, https := int32(0), false
	if l != nil {
		port, https = int32(l.spec.Port), l.spec.Protocol == gwv1.HTTPSProtocolType
	}
	return redirect(f, m, port, https)
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
	var err string
	if rd.Hostname, err = filterHostname(f.Hostname); err != "" {
		return nil, err
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
	if rd.Path, rd.PathRegex, err = pathModifier(f.Path, m); err != "" {
		return nil, err
	}
	return rd, ""
}

// rewrite builds a URLRewrite; nil when it changes nothing.
func rewrite(f *gwv1.HTTPURLRewriteFilter, m ir.RouteMatch) (*ir.URLRewrite, string) {
	rw := &ir.URLRewrite{}
	var err string
	if rw.Hostname, err = filterHostname(f.Hostname); err != "" {
		return nil, err
	}
	if rw.Path, rw.PathRegex, err = pathModifier(f.Path, m); err != "" {
		return nil, err
	}
	if rw.Hostname == "" && rw.Path == "" && rw.PathRegex == nil {
		return nil, ""
	}
	return rw, ""
}

// filterHostname is the hostname a RequestRedirect or URLRewrite puts in place ("" for none),
// or why it cannot be served.
func filterHostname(h *gwv1.PreciseHostname) (string, string) {
	if h == nil {
		return "", ""
	}
	s := strings.ToLower(string(*h))
	if !validHostname(s, false) {
		return "", fmt.Sprintf("hostname %q is not a DNS name", truncate(s))
	}
	return s, ""
}

// pathModifier returns the full path, or the rewrite of the matched prefix (neither for no
// modifier); ReplacePrefixMatch needs a PathPrefix match.
func pathModifier(p *gwv1.HTTPPathModifier, m ir.RouteMatch) (string, *ir.RegexRewrite, string) {
	if p == nil {
		return "", nil, ""
	}
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
