package translate

import (
	"fmt"
	"regexp"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/internal/ir"
)

var (
	grpcServiceRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z_0-9]*(\.[A-Za-z_][A-Za-z_0-9]*)*$`)
	grpcMethodRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z_0-9]*$`)
)

// grpcFilterUse is what a GRPCRoute makes of each filter type; any other (ExtensionRef,
// unknown) must not be skipped and cannot be served.
var grpcFilterUse = map[gwv1.GRPCRouteFilterType]filterUse{
	gwv1.GRPCRouteFilterRequestHeaderModifier:  filterServed,
	gwv1.GRPCRouteFilterResponseHeaderModifier: filterServed,
	gwv1.GRPCRouteFilterRequestMirror:          filterServed,
}

// grpcRule is a GRPCRoute rule as ruleCandidates takes it: an HTTPRoute rule without
// redirects, rewrites or timeouts, on HTTP/2 upstreams, matching the gRPC service and method
// in the path.
func grpcRule(rule *gwv1.GRPCRouteRule) ruleOf[gwv1.GRPCRouteFilter, gwv1.GRPCRouteMatch] {
	refs := backendRefs(rule.BackendRefs, func(b *gwv1.GRPCBackendRef) (gwv1.BackendRef, []gwv1.GRPCRouteFilter) { return b.BackendRef, b.Filters }, grpcFilter)
	return ruleOf[gwv1.GRPCRouteFilter, gwv1.GRPCRouteMatch]{
		name:    ruleName(rule.Name),
		filters: rule.Filters, filter: grpcFilter, backendRefs: refs, http2: true, persistence: rule.SessionPersistence,
		matches: rule.Matches, match: grpcMatch, precedence: grpcPrecedence,
	}
}

// grpcFilter reads a GRPCRoute filter under the name of the HTTPRoute filter it shares.
func grpcFilter(fl *gwv1.GRPCRouteFilter) ruleFilter {
	return ruleFilter{
		typ: gwv1.HTTPRouteFilterType(fl.Type), use: grpcFilterUse[fl.Type],
		request: fl.RequestHeaderModifier, response: fl.ResponseHeaderModifier, mirror: fl.RequestMirror,
	}
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
	var err string
	out.Headers, err = stringMatches(m.Headers, func(h *gwv1.GRPCHeaderMatch) (string, string, *gwv1.GRPCHeaderMatchType) {
		return string(h.Name), h.Value, h.Type
	}, gwv1.GRPCHeaderMatchExact, gwv1.GRPCHeaderMatchRegularExpression, true)
	return out, err
}
