package translator

import (
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	jwtauthnv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"

	"kubelb.dev/kubelb/internal/ir"
)

// JWT authentication (ir.Route.JWT): the connection managers of the listeners with
// ir.Listener.JWT run Envoy's jwt_authn filter with its providers (their keys inline) and
// requirements (one per set of providers a route requires); it has no rules, so it
// verifies nothing for a route without a configuration of its own. A route with JWT
// authentication names its requirement (PerRouteConfig.requirement_name). Envoy answers 401
// (with a WWW-Authenticate: Bearer challenge) to a request without a token (in the
// Authorization header, or where the provider's FromHeaders, FromCookies and FromParams say) (unless the
// requirement allows it missing) or with one no provider verifies, and 403 to a token whose
// audience is none of the provider's. The filter runs after the RBAC filter (a client refused
// by address gets 403 without its token being checked) and before basic_auth and the local
// rate limit (a refused client spends no tokens). The token is removed from the request
// before it reaches the backend (Envoy's default, forward false). A provider with a key
// server (ir.RemoteJWKS) fetches its key set through the server's cluster asynchronously:
// the listener is ready without waiting for it (fast_listener), a token is refused (401)
// while no key set has been fetched, a fetched set is kept for its cache duration, and a
// failed fetch is tried again after its wait.

// FilterJWTAuthn is Envoy's JWT authentication HTTP filter.
const FilterJWTAuthn = "envoy.filters.http.jwt_authn"

// jwksFetchTimeout bounds each fetch of a key set from a key server.
const jwksFetchTimeout = 5 * time.Second

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
		if r := p.Remote; r != nil {
			jp.JwksSourceSpecifier = &jwtauthnv3.JwtProvider_RemoteJwks{RemoteJwks: &jwtauthnv3.RemoteJwks{
				HttpUri: &corev3.HttpUri{
					Uri:              r.URI,
					HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: r.Cluster},
					Timeout:          durationpb.New(jwksFetchTimeout),
				},
				CacheDuration: durationpb.New(r.CacheDuration.D()),
				AsyncFetch:    &jwtauthnv3.JwksAsyncFetch{FastListener: true, FailedRefetchDuration: durationpb.New(r.FailedRefetch.D())},
			}}
		}
		for _, c := range p.ClaimToHeaders {
			jp.ClaimToHeaders = append(jp.ClaimToHeaders, &jwtauthnv3.JwtClaimToHeader{HeaderName: c.Header, ClaimName: c.Claim})
		}
		for _, h := range p.FromHeaders {
			jp.FromHeaders = append(jp.FromHeaders, &jwtauthnv3.JwtHeader{Name: h.Name, ValuePrefix: h.ValuePrefix})
		}
		jp.FromCookies, jp.FromParams = p.FromCookies, p.FromParams
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
