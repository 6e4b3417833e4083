package translator

import (
	"fmt"
	"math"
	"net/http"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/xds/routeconf"
)

// FailedBackendCluster is the name, never given to a cluster, that weighted routes send the
// share of unresolvable backends to (answered 500), and weighted TCP proxies the share of
// connections to refuse (closed at once).
const FailedBackendCluster = "kubelb-failed-backend"

// routeConfig builds a route configuration served over RDS.
func routeConfig(rc *ir.RouteConfig) (*routev3.RouteConfiguration, error) {
	return routeConfigWith(rc, nil, nil)
}

// builtHost is a virtual host built from an IR virtual host, the errors of its routes, and
// whether the message was found valid (in a configuration that validated).
type builtHost struct {
	v     *routev3.VirtualHost
	errs  []error
	valid bool
}

// routeConfigWith is routeConfig reusing the virtual hosts built before for the same IR
// virtual hosts (prev, by identity) and recording those it uses in next (nil maps: none).
// A virtual host is a pure function of its IR element, and built messages are never
// modified: two route configurations may share one.
//
// The result is validated (routeconf.Validate) without validating again the virtual hosts
// found valid before: a configuration of thousands of virtual hosts with one changed
// validates one.
func routeConfigWith(rc *ir.RouteConfig, prev, next map[*ir.VirtualHost]builtHost) (*routev3.RouteConfiguration, error) {
	var errs []error
	known := make([]bool, len(rc.VirtualHosts))
	out := &routev3.RouteConfiguration{Name: rc.Name, IgnorePortInHostMatching: true}
	for i, vh := range rc.VirtualHosts {
		b, ok := prev[vh]
		if !ok {
			b, ok = next[vh]
		}
		if !ok {
			b = virtualHost(vh)
		}
		if next != nil {
			next[vh] = b
		}
		errs = append(errs, b.errs...)
		known[i] = b.valid
		out.VirtualHosts = append(out.VirtualHosts, b.v)
	}
	if rc.HTTP3Port > 0 { // HTTP/3 is served on that port too: say so in every response
		out.ResponseHeadersToAdd = []*corev3.HeaderValueOption{{
			Header:       &corev3.HeaderValue{Key: "alt-svc", Value: AltSvcHTTP3(rc.HTTP3Port)},
			AppendAction: corev3.HeaderValueOption_ADD_IF_ABSENT,
		}}
	}
	if err := joined(errs); err != nil {
		return out, err
	}
	if err := routeconf.Validate(out, func(i int) bool { return known[i] }); err != nil {
		return out, err
	}
	for i, vh := range rc.VirtualHosts { // all valid now
		if !known[i] && next != nil {
			b := next[vh]
			b.valid = true
			next[vh] = b
		}
	}
	return out, nil
}

// AltSvcHTTP3 is the alt-svc header value that advertises HTTP/3 on port of the same host for
// a day (RFC 7838; Envoy Gateway's).
func AltSvcHTTP3(port uint32) string {
	return fmt.Sprintf(`h3=":%d"; ma=86400`, port)
}

func virtualHost(vh *ir.VirtualHost) builtHost {
	var errs []error
	v := &routev3.VirtualHost{Name: vh.Name, Domains: vh.Domains}
	shared := filterConfigs{}
	for _, r := range vh.Routes {
		rt := route(r, &errs, shared)
		if r.MaxRequestBytes > 0 {
			v.Routes = append(v.Routes, bodyLimit(rt, r.MaxRequestBytes))
		}
		v.Routes = append(v.Routes, rt)
	}
	return builtHost{v: v, errs: errs}
}

// bodyLimit is the route placed before rt that answers 413 to rt's requests whose
// Content-Length is above limit (ir.Route.MaxRequestBytes): the same match and per-route
// filter configuration (an RBAC denial still comes first), the header in range, a direct
// response. Nothing is buffered; a request without Content-Length goes on to rt.
func bodyLimit(rt *routev3.Route, limit int64) *routev3.Route {
	g := proto.Clone(rt).(*routev3.Route)
	g.Name = rt.Name + "/body-limit"
	g.Match.Headers = append(g.Match.Headers, &routev3.HeaderMatcher{
		Name:                 "content-length",
		HeaderMatchSpecifier: &routev3.HeaderMatcher_RangeMatch{RangeMatch: &typev3.Int64Range{Start: limit + 1, End: math.MaxInt64}},
	})
	g.Action = &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: http.StatusRequestEntityTooLarge,
		Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "request body too large\n"}}}}
	g.RequestHeadersToAdd, g.RequestHeadersToRemove = nil, nil
	return g
}

// filterConfigs are the per-route filter configurations built for one virtual host, by the
// IR element each is built from (a pointer): the routes of one rule, and of its matches, share
// their policies' elements, so each is built, validated and marshalled once. The messages
// are never modified.
type filterConfigs map[any]*anypb.Any

// get is the configuration built from key, building it the first time.
func (f filterConfigs) get(key any, build func() *anypb.Any) *anypb.Any {
	if a, ok := f[key]; ok {
		return a
	}
	a := build()
	f[key] = a
	return a
}

// compressorKey and extAuthKey key the one per-route compressor and external authorization
// configurations (they have no settings of their own).
type (
	compressorKey struct{}
	extAuthKey    struct{}
	oidcKey       struct{}
)

func route(r *ir.Route, errs *[]error, shared filterConfigs) *routev3.Route {
	out := &routev3.Route{Name: r.Name, Match: routeMatch(r.Match)}
	switch {
	case r.Redirect != nil:
		out.Action = &routev3.Route_Redirect{Redirect: redirect(r.Redirect)}
	case r.DirectResponse != nil:
		dr := &routev3.DirectResponseAction{Status: r.DirectResponse.Status}
		if r.DirectResponse.Body != "" {
			dr.Body = &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: r.DirectResponse.Body}}
		}
		out.Action = &routev3.Route_DirectResponse{DirectResponse: dr}
	default:
		out.Action = &routev3.Route_Route{Route: routeAction(r)}
	}
	if h := r.RequestHeaders; h != nil {
		out.RequestHeadersToAdd = headersToAdd(h)
		out.RequestHeadersToRemove = h.Remove
	}
	if h := r.ResponseHeaders; h != nil {
		out.ResponseHeadersToAdd = headersToAdd(h)
		out.ResponseHeadersToRemove = h.Remove
	}
	if r.CORS != nil || r.SessionPersistence != nil || len(r.SourceRanges) > 0 || r.Authorization != nil || r.BasicAuth != nil || r.JWT != nil || r.RateLimit != nil || r.GlobalRateLimit != nil || len(r.Compression) > 0 || r.APIKeyAuth != nil || r.ExtAuth != "" || r.OIDC != "" {
		out.TypedPerFilterConfig = map[string]*anypb.Any{}
	}
	for _, c := range r.Compression {
		out.TypedPerFilterConfig[compressorFilterName(c)] = shared.get(compressorKey{}, func() *anypb.Any { return compressorPerRoute(errs) })
	}
	if len(r.Compression) > 0 && !slices.Contains(out.RequestHeadersToRemove, "accept-encoding") {
		// Envoy compresses: the backend must answer uncompressed (compression.go).
		out.RequestHeadersToRemove = append(slices.Clone(out.RequestHeadersToRemove), "accept-encoding")
	}
	if r.BasicAuth != nil {
		out.TypedPerFilterConfig[FilterBasicAuth] = shared.get(r.BasicAuth, func() *anypb.Any { return basicAuthPerRoute(r.BasicAuth, errs) })
	}
	if r.JWT != nil {
		out.TypedPerFilterConfig[FilterJWTAuthn] = shared.get(r.JWT, func() *anypb.Any { return jwtPerRoute(r.JWT, errs) })
	}
	if r.APIKeyAuth != nil {
		out.TypedPerFilterConfig[FilterAPIKeyAuth] = shared.get(r.APIKeyAuth, func() *anypb.Any { return apiKeyAuthPerRoute(r.APIKeyAuth, errs) })
	}
	if r.ExtAuth != "" {
		out.TypedPerFilterConfig[extAuthFilterName(r.ExtAuth)] = shared.get(extAuthKey{}, func() *anypb.Any { return extAuthPerRoute(errs) })
	}
	if r.OIDC != "" {
		out.TypedPerFilterConfig[oidcFilterName(r.OIDC)] = shared.get(oidcKey{}, func() *anypb.Any { return oidcPerRoute(errs) })
	}
	if r.GlobalRateLimit != nil {
		out.TypedPerFilterConfig[FilterRateLimit] = shared.get(r.GlobalRateLimit, func() *anypb.Any { return globalRateLimitPerRoute(r.GlobalRateLimit, errs) })
	}
	if r.RateLimit != nil {
		out.TypedPerFilterConfig[FilterLocalRateLimit] = shared.get(r.RateLimit, func() *anypb.Any { return localRateLimitPerRoute(r.RateLimit, errs) })
	}
	if len(r.SourceRanges) > 0 {
		out.TypedPerFilterConfig[FilterRBAC] = rbacPerRoute(r.SourceRanges, errs)
	}
	if r.Authorization != nil {
		out.TypedPerFilterConfig[FilterRBAC] = shared.get(r.Authorization, func() *anypb.Any { return rbacAuthorizationPerRoute(r.Authorization, errs) })
	}
	if r.CORS != nil {
		out.TypedPerFilterConfig[FilterCORS] = mustPack(errs, corsPolicy(r.CORS))
	}
	if r.SessionPersistence != nil {
		out.TypedPerFilterConfig[FilterStatefulSession] = mustPack(errs, statefulSessionPerRoute(r.SessionPersistence, errs))
	}
	return out
}

func routeMatch(m ir.RouteMatch) *routev3.RouteMatch {
	out := &routev3.RouteMatch{}
	switch {
	case m.PathExact != "":
		out.PathSpecifier = &routev3.RouteMatch_Path{Path: m.PathExact}
	case m.PathRegex != "":
		out.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: m.PathRegex}}
	case m.PathPrefix != "" && m.PathPrefix != "/":
		// A path prefix matches whole segments: /foo matches /foo and /foo/bar, not /foobar.
		out.PathSpecifier = &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: trimSlash(m.PathPrefix)}
	default:
		out.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: "/"}
	}
	for _, h := range m.Headers {
		out.Headers = append(out.Headers, &routev3.HeaderMatcher{
			Name:                 h.Name,
			HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: stringMatcher(h)},
		})
	}
	if m.Method != "" {
		out.Headers = append(out.Headers, &routev3.HeaderMatcher{
			Name:                 ":method",
			HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: stringMatcher(ir.StringMatch{Value: m.Method})},
		})
	}
	for _, q := range m.QueryParams {
		out.QueryParameters = append(out.QueryParameters, &routev3.QueryParameterMatcher{
			Name:                         q.Name,
			QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{StringMatch: stringMatcher(q)},
		})
	}
	return out
}

func stringMatcher(m ir.StringMatch) *matcherv3.StringMatcher {
	if m.Regex {
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: m.Value}}}
	}
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: m.Value}}
}

func routeAction(r *ir.Route) *routev3.RouteAction {
	a := &routev3.RouteAction{}
	if len(r.Backends) == 1 && r.FailedWeight == 0 && !r.Backends[0].HasHeaders() {
		a.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: r.Backends[0].Cluster}
	} else {
		wc := &routev3.WeightedCluster{}
		for _, b := range r.Backends {
			cw := &routev3.WeightedCluster_ClusterWeight{Name: b.Cluster, Weight: wrapperspb.UInt32(b.Weight)}
			// A backend's own header changes apply to the requests sent to it; Envoy
			// applies them before the route's.
			if h := b.RequestHeaders; h != nil {
				cw.RequestHeadersToAdd, cw.RequestHeadersToRemove = headersToAdd(h), h.Remove
			}
			if h := b.ResponseHeaders; h != nil {
				cw.ResponseHeadersToAdd, cw.ResponseHeadersToRemove = headersToAdd(h), h.Remove
			}
			wc.Clusters = append(wc.Clusters, cw)
		}
		if r.FailedWeight > 0 {
			// The share of backends that could not be resolved goes to a cluster that does
			// not exist: Envoy answers it with cluster_not_found_response_code (route
			// configurations over RDS do not validate cluster names).
			wc.Clusters = append(wc.Clusters, &routev3.WeightedCluster_ClusterWeight{Name: FailedBackendCluster, Weight: wrapperspb.UInt32(r.FailedWeight)})
			a.ClusterNotFoundResponseCode = routev3.RouteAction_INTERNAL_SERVER_ERROR
		}
		a.ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: wc}
	}
	// Always set: 0s disables the route timeout, whose default (15 s) would cut long
	// responses and gRPC streams.
	a.Timeout = durationpb.New(r.Timeout.D())
	if r.IdleTimeout > 0 {
		a.IdleTimeout = durationpb.New(r.IdleTimeout.D())
	}
	for _, m := range r.Mirrors {
		mp := &routev3.RouteAction_RequestMirrorPolicy{Cluster: m.Cluster, HostRewriteLiteral: m.Host}
		if m.PerMillion < 1000000 {
			mp.RuntimeFraction = &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: m.PerMillion, Denominator: typev3.FractionalPercent_MILLION}}
		}
		a.RequestMirrorPolicies = append(a.RequestMirrorPolicies, mp)
	}
	a.RetryPolicy = retryPolicy(r)
	a.HashPolicy = hashPolicy(r.Hash)
	if rw := r.Rewrite; rw != nil {
		if rw.Hostname != "" {
			a.HostRewriteSpecifier = &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: rw.Hostname}
		}
		switch {
		case rw.Path != "":
			a.RegexRewrite = &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: "^.*$"}, Substitution: rw.Path}
		case rw.PathPrefix != "":
			a.PrefixRewrite = rw.PathPrefix
		case rw.PathRegex != nil:
			a.RegexRewrite = &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: rw.PathRegex.Pattern}, Substitution: rw.PathRegex.Substitution}
		}
	}
	return a
}

// retryPolicy is a route's Envoy retry policy: its Retry (connection failures, resets, tries
// that ran out of BackendTimeout and, with codes, those answers), or none but a bound on each
// try (BackendTimeout); nil when neither is set.
func retryPolicy(r *ir.Route) *routev3.RetryPolicy {
	if r.Retry == nil && r.BackendTimeout == 0 {
		return nil
	}
	p := &routev3.RetryPolicy{NumRetries: wrapperspb.UInt32(0)}
	if r.BackendTimeout > 0 {
		p.PerTryTimeout = durationpb.New(r.BackendTimeout.D())
	}
	if rt := r.Retry; rt != nil {
		p.NumRetries = wrapperspb.UInt32(rt.Attempts)
		p.RetryOn = retryOn(rt)
		if len(rt.Codes) > 0 {
			p.RetriableStatusCodes = slices.Clone(rt.Codes)
		}
		if rt.Backoff > 0 {
			p.RetryBackOff = &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(rt.Backoff.D())}
			if rt.MaxBackoff > 0 {
				p.RetryBackOff.MaxInterval = durationpb.New(rt.MaxBackoff.D())
			}
		}
	}
	return p
}

func redirect(rd *ir.Redirect) *routev3.RedirectAction {
	out := &routev3.RedirectAction{HostRedirect: rd.Hostname, PortRedirect: rd.Port}
	if rd.Scheme != "" {
		out.SchemeRewriteSpecifier = &routev3.RedirectAction_SchemeRedirect{SchemeRedirect: rd.Scheme}
	}
	switch {
	case rd.Path != "":
		out.PathRewriteSpecifier = &routev3.RedirectAction_PathRedirect{PathRedirect: rd.Path}
	case rd.PathPrefix != "":
		out.PathRewriteSpecifier = &routev3.RedirectAction_PrefixRewrite{PrefixRewrite: rd.PathPrefix}
	case rd.PathRegex != nil:
		out.PathRewriteSpecifier = &routev3.RedirectAction_RegexRewrite{RegexRewrite: &matcherv3.RegexMatchAndSubstitute{
			Pattern: &matcherv3.RegexMatcher{Regex: rd.PathRegex.Pattern}, Substitution: rd.PathRegex.Substitution}}
	}
	switch rd.StatusCode {
	case http.StatusMovedPermanently:
		out.ResponseCode = routev3.RedirectAction_MOVED_PERMANENTLY
	case http.StatusSeeOther:
		out.ResponseCode = routev3.RedirectAction_SEE_OTHER
	case http.StatusTemporaryRedirect:
		out.ResponseCode = routev3.RedirectAction_TEMPORARY_REDIRECT
	case http.StatusPermanentRedirect:
		out.ResponseCode = routev3.RedirectAction_PERMANENT_REDIRECT
	default:
		out.ResponseCode = routev3.RedirectAction_FOUND
	}
	return out
}

func headersToAdd(h *ir.HeaderModifier) []*corev3.HeaderValueOption {
	var out []*corev3.HeaderValueOption
	for _, s := range h.Set {
		out = append(out, &corev3.HeaderValueOption{
			Header:       &corev3.HeaderValue{Key: s.Name, Value: s.Value},
			AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
		})
	}
	for _, a := range h.Add {
		out = append(out, &corev3.HeaderValueOption{
			Header:       &corev3.HeaderValue{Key: a.Name, Value: a.Value},
			AppendAction: corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD,
		})
	}
	return out
}

func trimSlash(p string) string {
	for len(p) > 1 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	return p
}
