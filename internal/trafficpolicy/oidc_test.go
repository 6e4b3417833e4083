package trafficpolicy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// oidcSpec is an oidc policy of the test, with extra fields appended to its oidc.
func oidcSpec(extra string) string {
	return `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]
oidc:
  provider:
    issuer: https://id.example.com
    authorizationEndpoint: https://id.example.com/authorize
    tokenEndpoint: http://id.example.com/token
    backendRefs: [{name: idp, port: 8080}]
  clientID: shop
  clientSecret: {name: shop-oidc}
` + extra
}

// TestReadAndResolveOIDC: oidc comes through as Envoy Gateway means it: openid added to the
// scopes, the default redirect URL and its path, the token endpoint's Service, the client
// secret's Secret; cookie names and domain, logout path and forwarding as written.
func TestReadAndResolveOIDC(t *testing.T) {
	o := resolvedSecurity(t, oidcSpec(`  scopes: [email, profile, email]
  resources: [https://api.example.com]
  logoutPath: /logout
  forwardAccessToken: true
  cookieDomain: example.com
  cookieNames: {accessToken: at, idToken: it}
`)).OIDC
	if o.Service != "idp" || o.Port != 8080 || o.ClientID != "shop" || o.ClientSecret != "shop-oidc" ||
		o.TokenEndpoint != "http://id.example.com/token" || o.AuthorizationEndpoint != "https://id.example.com/authorize" ||
		!slices.Equal(o.Scopes, []string{"openid", "email", "profile"}) || !slices.Equal(o.Resources, []string{"https://api.example.com"}) ||
		o.RedirectURL != DefaultOIDCRedirectURL || o.RedirectPath != "/oauth2/callback" || o.LogoutPath != "/logout" ||
		!o.ForwardAccessToken || !o.RefreshToken || o.CookieDomain != "example.com" || o.AccessTokenCookie != "at" || o.IDTokenCookie != "it" {
		t.Errorf("oidc %+v", o)
	}
	o = resolvedSecurity(t, oidcSpec("  redirectURL: https://shop.example.com/login/done\n  refreshToken: false\n")).OIDC
	if o.RefreshToken || o.RedirectURL != "https://shop.example.com/login/done" || o.RedirectPath != "/login/done" || !slices.Equal(o.Scopes, []string{"openid"}) {
		t.Errorf("oidc %+v", o)
	}
	if o.DisableTokenEncryption || o.SameSite != "" || o.DefaultTokenTTL != 0 || o.DefaultRefreshTokenTTL != 0 || o.CSRFTokenTTL != 0 || o.DenyRedirect != nil || o.PassThrough != nil || o.Discover {
		t.Errorf("unset fields: %+v", o)
	}
	// Neither endpoint: discovered from the issuer (by the manager).
	spec := strings.Replace(strings.Replace(oidcSpec(""), "    tokenEndpoint: http://id.example.com/token\n", "", 1), "    authorizationEndpoint: https://id.example.com/authorize\n", "", 1)
	if o = resolvedSecurity(t, spec).OIDC; !o.Discover || o.AuthorizationEndpoint != "" || o.TokenEndpoint != "" || o.Issuer != "https://id.example.com" {
		t.Errorf("without endpoints: %+v, want them discovered from the issuer", o)
	}
	if err := CheckOIDCDiscovered("https://id.example.com/authorize", "https://id.example.com/token"); err != nil {
		t.Errorf("discovered endpoints: %v", err)
	}
	for _, bad := range [][2]string{{"http://id.example.com/authorize", "https://id.example.com/token"}, {"https://id.example.com/a", "https://u@id.example.com/token"}, {"", "https://id.example.com/token"}} {
		if err := CheckOIDCDiscovered(bad[0], bad[1]); err == nil {
			t.Errorf("discovered endpoints %q accepted", bad)
		}
	}
}

// goodJWKS is a key set of one public Ed25519 key.
const goodJWKS = `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`

// TestReadAndResolveOIDCSessionFields: the cookies' SameSite, the default token lifetimes, the
// CSRF token's, the requests answered 401 rather than redirected (denyRedirect, header names
// lower case, Exact by default) and passThroughAuthHeader (the headers the policy's jwt reads
// its tokens from; Authorization after "Bearer " for a provider without extractFrom) come
// through as written.
func TestReadAndResolveOIDCSessionFields(t *testing.T) {
	s := resolvedSecurity(t, oidcSpec(`  cookieConfig: {sameSite: Strict}
  defaultTokenTTL: 1h
  defaultRefreshTokenTTL: 168h
  csrfTokenTTL: 5m
  denyRedirect:
    headers:
    - {name: X-Requested-With, value: XMLHttpRequest}
    - {name: Accept, type: Prefix, value: application/json}
    - {name: User-Agent, type: RegularExpression, value: '^curl/.*'}
  passThroughAuthHeader: true
  disableTokenEncryption: true
jwt:
  providers:
  - {name: a, localJWKS: {inline: '`+goodJWKS+`'}}
  - {name: b, localJWKS: {inline: '`+goodJWKS+`'}, extractFrom: {headers: [{name: X-Token, valuePrefix: "Token "}], cookies: [t]}}
`))
	o := s.OIDC
	if !o.DisableTokenEncryption || o.SameSite != "Strict" || o.DefaultTokenTTL != time.Hour || o.DefaultRefreshTokenTTL != 168*time.Hour || o.CSRFTokenTTL != 5*time.Minute {
		t.Errorf("oidc %+v", o)
	}
	if got := fmt.Sprint(o.DenyRedirect); got != "[{x-requested-with Exact XMLHttpRequest} {accept Prefix application/json} {user-agent RegularExpression ^curl/.*}]" {
		t.Errorf("denyRedirect %s", got)
	}
	if got := fmt.Sprint(o.PassThrough); got != "[{authorization Bearer } {x-token Token }]" {
		t.Errorf("pass through %s", got)
	}
}

// TestResolveOIDCRefuses: what kubelb does not serve, what Envoy could not use, and anything
// that would make the hub reach an address the tenant writes or read the hub's own values is
// refused, naming the field.
func TestResolveOIDCRefuses(t *testing.T) {
	long := strings.Repeat("a", 600)
	many := "[" + strings.Repeat("s,", 16) + "s]"
	for _, c := range []struct{ spec, want string }{
		{strings.Replace(oidcSpec(""), "    tokenEndpoint: http://id.example.com/token\n", "", 1), "oidc.provider.tokenEndpoint is not set: set both provider.authorizationEndpoint and provider.tokenEndpoint, or neither"},
		{strings.Replace(oidcSpec(""), "    authorizationEndpoint: https://id.example.com/authorize\n", "", 1), "oidc.provider.authorizationEndpoint is not set"},
		{strings.Replace(oidcSpec(""), "    backendRefs: [{name: idp, port: 8080}]\n", "", 1), "oidc.provider.backendRefs has 0 entries"},
		{strings.Replace(oidcSpec(""), "name: idp, port", "name: idp, namespace: other, port", 1), "a Service of another namespace is not yet supported"},
		{strings.Replace(oidcSpec(""), "issuer: https://", "issuer: http://", 1), "oidc.provider.issuer"},
		{strings.Replace(oidcSpec(""), "authorize", long, 1), "oidc.provider.authorizationEndpoint"},
		{strings.Replace(oidcSpec(""), "clientID: shop", "clientID: a b", 1), "oidc.clientID"},
		{strings.Replace(oidcSpec(""), "{name: shop-oidc}", "{name: shop-oidc, namespace: other}", 1), "oidc.clientSecret namespace"},
		{oidcSpec("  scopes: " + many + "\n"), "oidc.scopes has 17 scopes, at most 16"},
		{oidcSpec("  scopes: ['a\"b']\n"), "oidc.scopes[0]"},
		{oidcSpec("  redirectURL: https://%ENVIRONMENT(HOME)%/cb\n"), "oidc.redirectURL"},
		{oidcSpec("  redirectURL: https://shop.example.com\n"), "oidc.redirectURL"},
		{oidcSpec("  logoutPath: logout\n"), "oidc.logoutPath"},
		{oidcSpec("  logoutPath: /oauth2/callback\n"), "is the redirectURL's path"},
		{oidcSpec("  cookieDomain: 'bad domain'\n"), "oidc.cookieDomain"},
		{oidcSpec("  cookieNames: {accessToken: 'a;b'}\n"), "oidc.cookieNames.accessToken"},
		{oidcSpec("  forwardIDToken: {header: X-Id}\n"), "spec.oidc.forwardIDToken not yet supported"},
		{oidcSpec("  defaultTokenTTL: 30s\n"), "oidc.defaultTokenTTL 30s is out of range; use 1m to 24h"},
		{oidcSpec("  defaultRefreshTokenTTL: 721h\n"), "oidc.defaultRefreshTokenTTL 721h is out of range; use 1m to 720h"},
		{oidcSpec("  csrfTokenTTL: 2h\n"), "oidc.csrfTokenTTL 2h is out of range; use 1m to 1h"},
		{oidcSpec("  csrfTokenTTL: 1d\n"), `oidc.csrfTokenTTL "1d" is not a duration`},
		{oidcSpec("  cookieConfig: {sameSite: Sometimes}\n"), `oidc.cookieConfig.sameSite "Sometimes": use Lax, Strict or None`},
		{oidcSpec("  denyRedirect: {headers: [{name: 'x y', value: a}]}\n"), `oidc.denyRedirect.headers[0].name "x y" is not an HTTP header name`},
		{oidcSpec("  denyRedirect: {headers: [{name: x, type: Glob, value: a}]}\n"), `oidc.denyRedirect.headers[0].type "Glob"`},
		{oidcSpec("  denyRedirect: {headers: [{name: x, type: RegularExpression, value: '(a'}]}\n"), `oidc.denyRedirect.headers[0].value "(a": `},
		{oidcSpec("  denyRedirect: {headers: [{name: x, type: RegularExpression, value: '[a-z]{1,200}[0-9]{1,200}'}]}\n"), `too complex for Envoy`},
		{oidcSpec("  denyRedirect: {headers: [{name: x, value: ''}]}\n"), `oidc.denyRedirect.headers[0].value: 1 to 256 printable characters`},
		{oidcSpec("  denyRedirect: {headers: [{name: x, value: a, extra: b}]}\n"), `the spec cannot be read`},
		{oidcSpec("  denyRedirect: {headers: [" + strings.Repeat("{name: x, value: a},", 16) + "{name: x, value: a}]}\n"), `oidc.denyRedirect.headers has 17 headers, at most 16`},
		{oidcSpec("  passThroughAuthHeader: true\n"), "oidc.passThroughAuthHeader lets requests with a token skip the login: the policy needs jwt"},
		{oidcSpec("  passThroughAuthHeader: true\njwt: {optional: true, providers: [{name: a, localJWKS: {inline: '" + goodJWKS + "'}}]}\n"), "with an optional jwt"},
		{oidcSpec("  passThroughAuthHeader: true\njwt: {providers: [{name: a, localJWKS: {inline: '" + goodJWKS + "'}, extractFrom: {cookies: [t]}}]}\n"), "reads tokens from no header"},
		{oidcSpec("  clientIDRef: {name: x}\n"), "spec.oidc.clientIDRef"},
		{strings.Replace(oidcSpec(""), "port: 8080}", "port: 8080, filters: []}", 1), "spec.oidc.provider.backendRefs[0].filters"},
	} {
		if err := securityErr(t, c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.spec, err, c.want)
		}
	}
}

// TestOIDCBounds: the platform team allows oidc by its feature OIDC.
func TestOIDCBounds(t *testing.T) {
	s := resolvedSecurity(t, oidcSpec(""))
	if err := CheckSecurityBounds(&Bounds{Features: []v1alpha1.TrafficPolicyFeature{"OIDC"}}, s); err != nil {
		t.Errorf("OIDC allowed: %v", err)
	}
	err := CheckSecurityBounds(&Bounds{Features: []v1alpha1.TrafficPolicyFeature{"JWT"}}, s)
	if want := "the policy uses oidc (OIDC)"; !errors.Is(err, ErrOverBound) || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want one with %q", err, want)
	}
}

// TestCheckOIDCClientSecret: the client secret is read from key client-secret, bounded, and
// errors never show it.
func TestCheckOIDCClientSecret(t *testing.T) {
	if v, err := CheckOIDCClientSecret(map[string][]byte{"client-secret": []byte("s3cret")}); err != nil || v != "s3cret" {
		t.Errorf("got %q, %v", v, err)
	}
	for _, d := range []map[string][]byte{{}, {"client-secret": []byte("has space s3cret")}, {"client-secret": []byte(strings.Repeat("x", 1025))}} {
		if _, err := CheckOIDCClientSecret(d); err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%v: %v", d, err)
		}
	}
}
