package translator

import (
	mutationrulesv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	headermutationv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_mutation/v3"
	jwtauthnv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"

	"kubelb.dev/kubelb/internal/ir"
)

// JWT authentication (ir.Route.JWT): the connection managers of the listeners with
// ir.Listener.JWT run Envoy's jwt_authn filter with its providers (their keys inline) and
// requirements (one per set of providers a route requires); it has no rules, so it
// verifies nothing for a route without a configuration of its own. A route with JWT
// authentication names its requirement (PerRouteConfig.requirement_name). Envoy answers 401
// (with a WWW-Authenticate: Bearer challenge) to a request without a token (unless the
// requirement allows it missing) or with one no provider verifies, and 403 to a token whose
// audience is none of the provider's. The filter runs after the RBAC filter (a client refused
// by address gets 403 without its token being checked) and before basic_auth and the local
// rate limit (a refused client spends no tokens). The token is removed from the request
// before it reaches the backend (Envoy's default, forward false).
//
// Envoy sets a claim's header only when the token has the claim, and leaves alone a header of
// that name the client wrote: a route whose providers copy claims to headers removes those
// headers first (Envoy's header_mutation filter, right before jwt_authn, per route), so the
// backend never takes a client's header for a verified claim.

// FilterJWTAuthn is Envoy's JWT authentication HTTP filter; FilterHeaderMutation removes
// claim headers before it.
const (
	FilterJWTAuthn       = "envoy.filters.http.jwt_authn"
	FilterHeaderMutation = "envoy.filters.http.header_mutation"
)

// claimHeadersFilter is the header_mutation filter of a listener's connection manager: it
// changes nothing but for the routes that remove claim headers (claimHeadersPerRoute).
func claimHeadersFilter(errs *[]error) *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{Name: FilterHeaderMutation, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustPack(errs, &headermutationv3.HeaderMutation{})}}
}

// claimHeadersPerRoute removes the claim headers of a route's providers from its requests.
func claimHeadersPerRoute(j *ir.JWT, errs *[]error) *anypb.Any {
	m := &headermutationv3.Mutations{}
	for _, h := range j.ClaimHeaders {
		m.RequestMutations = append(m.RequestMutations, &mutationrulesv3.HeaderMutation{Action: &mutationrulesv3.HeaderMutation_Remove{Remove: h}})
	}
	return mustPack(errs, &headermutationv3.HeaderMutationPerRoute{Mutations: m})
}

// jwtRequirement is the requirement of a route: one of the providers verifies the token (or,
// with AllowMissing, there is no token).
func jwtRequirement(j *ir.JWT) *jwtauthnv3.JwtRequirement {
	if len(j.Providers) == 1 && !j.AllowMissing {
		return &jwtauthnv3.JwtRequirement{RequiresType: &jwtauthnv3.JwtRequirement_ProviderName{ProviderName: j.Providers[0]}}
	}
	or := &jwtauthnv3.JwtRequirementOrList{}
	for _, p := range j.Providers {
		or.Requirements = append(or.Requirements, &jwtauthnv3.JwtRequirement{RequiresType: &jwtauthnv3.JwtRequirement_ProviderName{ProviderName: p}})
	}
	if j.AllowMissing {
		or.Requirements = append(or.Requirements, &jwtauthnv3.JwtRequirement{RequiresType: &jwtauthnv3.JwtRequirement_AllowMissing{AllowMissing: &emptypb.Empty{}}})
	}
	return &jwtauthnv3.JwtRequirement{RequiresType: &jwtauthnv3.JwtRequirement_RequiresAny{RequiresAny: or}}
}

// jwtFilter is the jwt_authn filter of a listener's connection manager: its providers, and
// the requirements of its routes, by ir.JWT.Key.
func jwtFilter(l *ir.ListenerJWT, errs *[]error) *hcmv3.HttpFilter {
	cfg := &jwtauthnv3.JwtAuthentication{
		Providers:      make(map[string]*jwtauthnv3.JwtProvider, len(l.Providers)),
		RequirementMap: make(map[string]*jwtauthnv3.JwtRequirement, len(l.Requirements)),
	}
	for _, p := range l.Providers {
		jp := &jwtauthnv3.JwtProvider{
			Issuer:    p.Issuer,
			Audiences: p.Audiences,
			JwksSourceSpecifier: &jwtauthnv3.JwtProvider_LocalJwks{LocalJwks: &corev3.DataSource{
				Specifier: &corev3.DataSource_InlineString{InlineString: p.JWKS},
			}},
		}
		for _, c := range p.ClaimToHeaders {
			jp.ClaimToHeaders = append(jp.ClaimToHeaders, &jwtauthnv3.JwtClaimToHeader{HeaderName: c.Header, ClaimName: c.Claim})
		}
		cfg.Providers[p.Name] = jp
	}
	for i := range l.Requirements {
		cfg.RequirementMap[l.Requirements[i].Key()] = jwtRequirement(&l.Requirements[i])
	}
	return &hcmv3.HttpFilter{Name: FilterJWTAuthn, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustPack(errs, cfg)}}
}

// jwtPerRoute names a route's requirement.
func jwtPerRoute(j *ir.JWT, errs *[]error) *anypb.Any {
	return mustPack(errs, &jwtauthnv3.PerRouteConfig{RequirementSpecifier: &jwtauthnv3.PerRouteConfig_RequirementName{RequirementName: j.Key()}})
}
