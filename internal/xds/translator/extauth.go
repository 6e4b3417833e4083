package translator

import (
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"kubelb.dev/kubelb/internal/ir"
)

// External authorization (ir.ExtAuthService, ir.Route.ExtAuth): the connection managers of
// the listeners with services run one Envoy ext_authz filter per service, named
// FilterExtAuthz/<service>, disabled: a filter's service cannot change per route. A route
// asking a service enables that filter (ExtAuthzPerRoute check_settings). The filters run
// after the other authentications, before the rate limit. A denying answer reaches the client
// with its status; a service that cannot be reached answers 403 (Envoy's status_on_error
// default), or lets the request on when failure_mode_allow (FailOpen).

// FilterExtAuthz is Envoy's ext_authz HTTP filter; each service's filter is named
// FilterExtAuthz + "/" + its name.
const FilterExtAuthz = "envoy.filters.http.ext_authz"

// extAuthTimeout bounds each authorization request (Envoy Gateway's default).
const extAuthTimeout = 10 * time.Second

// extAuthFilterName is the filter of an external authorization service.
func extAuthFilterName(service string) string {
	return FilterExtAuthz + "/" + service
}

// exactHeaders matches the header names l exactly.
func exactHeaders(l []string) *matcherv3.ListStringMatcher {
	if len(l) == 0 {
		return nil
	}
	out := &matcherv3.ListStringMatcher{}
	for _, h := range l {
		out.Patterns = append(out.Patterns, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: h}, IgnoreCase: true})
	}
	return out
}

// extAuthFilter is the disabled ext_authz filter of service s.
func extAuthFilter(s *ir.ExtAuthService, errs *[]error) *hcmv3.HttpFilter {
	cfg := &extauthzv3.ExtAuthz{
		TransportApiVersion: corev3.ApiVersion_V3,
		FailureModeAllow:    s.FailOpen,
		AllowedHeaders:      exactHeaders(s.HeadersToExtAuth),
	}
	timeout := durationpb.New(extAuthTimeout)
	if s.GRPC {
		cfg.Services = &extauthzv3.ExtAuthz_GrpcService{GrpcService: &corev3.GrpcService{
			TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: s.Cluster}},
			Timeout:         timeout,
		}}
	} else {
		cfg.Services = &extauthzv3.ExtAuthz_HttpService{HttpService: &extauthzv3.HttpService{
			ServerUri: &corev3.HttpUri{
				Uri:              "http://ext-authz",
				HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: s.Cluster},
				Timeout:          timeout,
			},
			PathPrefix:   s.Path,
			PathOverride: s.PathOverride,
			AuthorizationResponse: &extauthzv3.AuthorizationResponse{
				AllowedUpstreamHeaders: exactHeaders(s.HeadersToBackend),
			},
		}}
	}
	return &hcmv3.HttpFilter{
		Name:       extAuthFilterName(s.Name),
		Disabled:   true,
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustPack(errs, cfg)},
	}
}

// extAuthPerRoute enables a service's filter on a route.
func extAuthPerRoute(errs *[]error) *anypb.Any {
	return mustPack(errs, &extauthzv3.ExtAuthzPerRoute{Override: &extauthzv3.ExtAuthzPerRoute_CheckSettings{CheckSettings: &extauthzv3.CheckSettings{}}})
}
