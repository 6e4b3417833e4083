package translator

import (
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	oauth2v3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/oauth2/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"kubelb.dev/kubelb/internal/ir"
)

// OpenID Connect logins (ir.OIDC, ir.Route.OIDC): the connection managers of the listeners
// with logins run one Envoy oauth2 filter per login, named FilterOAuth2/<login>, disabled: a
// filter's provider cannot change per route. A route running a login enables its filter. The
// filters run after the RBAC filter (authorization by client address) and before the other
// authentications: a request without a session never reaches them. The client secret and the HMAC key of the cookies come by SDS (generic secrets).
// A login's cookies all get its SameSite attribute; requests matching its deny-redirect
// headers are answered 401 rather than redirected; requests with one of its pass-through
// headers skip it (pass_through_matcher), their token then verified by jwt_authn, which runs
// after it.

// FilterOAuth2 is Envoy's oauth2 HTTP filter; each login's filter is named FilterOAuth2 + "/"
// + its name.
const FilterOAuth2 = "envoy.filters.http.oauth2"

// oidcTokenTimeout bounds each token request.
const oidcTokenTimeout = 10 * time.Second

// oidcFilterName is the filter of a login.
func oidcFilterName(login string) string {
	return FilterOAuth2 + "/" + login
}

// oidcFilter is the disabled oauth2 filter of login o.
func oidcFilter(o *ir.OIDC, errs *[]error) *hcmv3.HttpFilter {
	path := func(p string) *matcherv3.PathMatcher {
		return &matcherv3.PathMatcher{Rule: &matcherv3.PathMatcher_Path{Path: &matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_Exact{Exact: p}}}}
	}
	cookie := func(name, set string) string {
		if set != "" {
			return set
		}
		return name + "-" + o.CookieSuffix
	}
	cfg := &oauth2v3.OAuth2Config{
		TokenEndpoint: &corev3.HttpUri{
			Uri:              o.TokenEndpoint,
			HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: o.Cluster},
			Timeout:          durationpb.New(oidcTokenTimeout),
		},
		AuthorizationEndpoint: o.AuthorizationEndpoint,
		Credentials: &oauth2v3.OAuth2Credentials{
			ClientId:       o.ClientID,
			TokenSecret:    &tlsv3.SdsSecretConfig{Name: o.ClientSecret, SdsConfig: adsSource()},
			TokenFormation: &oauth2v3.OAuth2Credentials_HmacSecret{HmacSecret: &tlsv3.SdsSecretConfig{Name: o.HMACSecret, SdsConfig: adsSource()}},
			CookieNames: &oauth2v3.OAuth2Credentials_CookieNames{
				BearerToken:  cookie("AccessToken", o.AccessTokenCookie),
				IdToken:      cookie("IdToken", o.IDTokenCookie),
				OauthHmac:    cookie("OauthHMAC", ""),
				OauthExpires: cookie("OauthExpires", ""),
				RefreshToken: cookie("RefreshToken", ""),
				OauthNonce:   cookie("OauthNonce", ""),
				CodeVerifier: cookie("CodeVerifier", ""),
			},
			CookieDomain: o.CookieDomain,
		},
		RedirectUri:         o.RedirectURL,
		RedirectPathMatcher: path(o.RedirectPath),
		ForwardBearerToken:  o.ForwardAccessToken,
		UseRefreshToken:     wrapperspb.Bool(o.RefreshToken),
		AuthScopes:          o.Scopes,
		Resources:           o.Resources,
		// The client secret travels in the token request's body, as Envoy Gateway sends it.
		AuthType:               oauth2v3.OAuth2Config_URL_ENCODED_BODY,
		DisableTokenEncryption: o.DisableTokenEncryption,
	}
	if o.SameSite != "" {
		same := &oauth2v3.CookieConfig{SameSite: map[string]oauth2v3.CookieConfig_SameSite{
			"Lax": oauth2v3.CookieConfig_LAX, "Strict": oauth2v3.CookieConfig_STRICT, "None": oauth2v3.CookieConfig_NONE}[o.SameSite]}
		cfg.CookieConfigs = &oauth2v3.CookieConfigs{
			BearerTokenCookieConfig: same, OauthHmacCookieConfig: same, OauthExpiresCookieConfig: same, IdTokenCookieConfig: same,
			RefreshTokenCookieConfig: same, OauthNonceCookieConfig: same, CodeVerifierCookieConfig: same,
		}
	}
	ttl := func(d ir.Duration) *durationpb.Duration {
		if d == 0 {
			return nil
		}
		return durationpb.New(d.D())
	}
	cfg.DefaultExpiresIn, cfg.DefaultRefreshTokenExpiresIn, cfg.CsrfTokenExpiresIn = ttl(o.DefaultTokenTTL), ttl(o.DefaultRefreshTokenTTL), ttl(o.CSRFTokenTTL)
	for _, m := range o.DenyRedirect {
		sm := &matcherv3.StringMatcher{}
		switch m.Type {
		case ir.MatchPrefix:
			sm.MatchPattern = &matcherv3.StringMatcher_Prefix{Prefix: m.Value}
		case ir.MatchSuffix:
			sm.MatchPattern = &matcherv3.StringMatcher_Suffix{Suffix: m.Value}
		case ir.MatchRegex:
			sm.MatchPattern = &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: m.Value}}
		default:
			sm.MatchPattern = &matcherv3.StringMatcher_Exact{Exact: m.Value}
		}
		cfg.DenyRedirectMatcher = append(cfg.DenyRedirectMatcher, &routev3.HeaderMatcher{
			Name: m.Name, HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: sm}})
	}
	for _, h := range o.PassThrough {
		hm := &routev3.HeaderMatcher{Name: h.Name, HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}
		if h.ValuePrefix != "" {
			hm.HeaderMatchSpecifier = &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
				MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: h.ValuePrefix}}}
		}
		cfg.PassThroughMatcher = append(cfg.PassThroughMatcher, hm)
	}
	if o.LogoutPath != "" {
		cfg.SignoutPath = path(o.LogoutPath)
	} else {
		// Envoy requires a sign-out path: one no client reaches by chance, under the redirect's.
		cfg.SignoutPath = path(o.RedirectPath + "/logout")
	}
	return &hcmv3.HttpFilter{
		Name:       oidcFilterName(o.Name),
		Disabled:   true,
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustPack(errs, &oauth2v3.OAuth2{Config: cfg})},
	}
}

// oidcPerRoute enables a login's filter on a route: the oauth2 filter has no per-route
// configuration, so an empty one (Envoy refuses a FilterConfig without any).
func oidcPerRoute(errs *[]error) *anypb.Any {
	return mustPack(errs, &routev3.FilterConfig{Config: &anypb.Any{}})
}
