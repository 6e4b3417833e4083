package trafficpolicy

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/re2"
)

// OpenID Connect login (a SecurityPolicy's oidc): a request without a valid session is
// redirected to the provider's authorization endpoint; the code the provider sends back is
// exchanged at its token endpoint, by the hub's Envoy, for tokens kept in cookies. Tenants are
// untrusted, so the hub never reaches an address a policy writes: the token endpoint is
// reached through a Service of the policy's namespace (provider.backendRefs), which the ccm
// embeds in the Route as it embeds backends, and which the hub reaches as any backend (the
// tenant's nodes × its NodePort, under the endpoint policy). The URL of the token endpoint only
// gives the requests' Host and path. The provider's endpoints are not discovered (the hub
// fetches no tenant URL): authorizationEndpoint and tokenEndpoint are required.

// OIDCClientSecretKey is the key of the client secret in the Secret clientSecret names.
const OIDCClientSecretKey = "client-secret"

// Bounds of an oidc.
const (
	MaxOIDCScopes       = 16
	MaxOIDCResources    = 16
	MaxOIDCURL          = 512
	MaxOIDCClientID     = 256
	MaxOIDCPath         = 256
	MaxOIDCScope        = 64
	MaxOIDCCookieName   = 64
	MaxOIDCClientSecret = 1024
	MaxOIDCDenyRedirect = 16
	MaxOIDCMatchValue   = 256
)

// Bounds of an oidc's durations (Envoy's defaults when unset: the tokens' lifetime from the
// provider's answer, a refresh token kept a week, 10 minutes to finish a login).
const (
	MinOIDCTokenTTL        = time.Minute
	MaxOIDCTokenTTL        = 24 * time.Hour
	MaxOIDCRefreshTokenTTL = 30 * 24 * time.Hour
	MaxOIDCCSRFTokenTTL    = time.Hour
)

// Header match types of denyRedirect (Envoy Gateway's StringMatch types).
const (
	MatchExact  = "Exact"
	MatchPrefix = "Prefix"
	MatchSuffix = "Suffix"
	MatchRegex  = "RegularExpression"
)

// DefaultOIDCRedirectURL is Envoy Gateway's default redirectURL.
const DefaultOIDCRedirectURL = "%REQ(x-forwarded-proto)%://%REQ(:authority)%/oauth2/callback"

// oidcRedirectCommands are the only Envoy format commands a redirectURL may hold: its
// scheme and host taken from the request, nothing else of the hub's.
var oidcRedirectCommands = []string{"%REQ(x-forwarded-proto)%", "%REQ(:authority)%"}

// servedOIDC is the tree of oidc fields kubelb serves (oidcUnsupported checks the fields of
// each provider.backendRefs entry).
var servedOIDC = map[string]any{
	"provider": map[string]any{
		"backendRefs":           nil,
		"issuer":                nil,
		"authorizationEndpoint": nil,
		"tokenEndpoint":         nil,
	},
	"clientID":           nil,
	"clientSecret":       map[string]any{"group": nil, "kind": nil, "name": nil, "namespace": nil},
	"scopes":             nil,
	"resources":          nil,
	"redirectURL":        nil,
	"logoutPath":         nil,
	"forwardAccessToken": nil,
	"refreshToken":       nil,
	"cookieDomain":       nil,
	"cookieNames":        map[string]any{"accessToken": nil, "idToken": nil},
	"cookieConfig":       map[string]any{"sameSite": nil},
	// Durations: checked by resolveOIDC; denyRedirect's headers: read strictly.
	"defaultTokenTTL":        nil,
	"defaultRefreshTokenTTL": nil,
	"csrfTokenTTL":           nil,
	"denyRedirect":           map[string]any{"headers": nil},
	"passThroughAuthHeader":  nil,
	"disableTokenEncryption": nil,
}

// oidcUnsupported names the fields of the oidc provider.backendRefs entries kubelb does not
// serve.
func oidcUnsupported(spec map[string]any) []string {
	o, ok := spec["oidc"].(map[string]any)
	if !ok {
		return nil
	}
	p, ok := o["provider"].(map[string]any)
	if !ok {
		return nil
	}
	var un []string
	refs, _ := p["backendRefs"].([]any)
	for i, r := range refs {
		if rm, ok := r.(map[string]any); ok {
			for _, f := range unsupported(rm, extAuthBackendRefFields) {
				un = append(un, fmt.Sprintf("spec.oidc.provider.backendRefs[%d]%s", i, f[len("spec"):]))
			}
		}
	}
	return un
}

// OIDC is a checked oidc.
type OIDC struct {
	Issuer, AuthorizationEndpoint, TokenEndpoint string
	// Discover: neither endpoint is given; they come from the issuer's discovery document,
	// which the manager reads (CheckOIDCDiscovered checks what it holds).
	Discover bool
	// Service and Port name the Service of the policy's namespace the token endpoint is
	// reached through.
	Service  string
	Port     int32
	ClientID string
	// ClientSecret is the name of the Secret (key OIDCClientSecretKey) of the policy's
	// namespace; its value is checked by CheckOIDCClientSecret where it is read.
	ClientSecret string
	// Scopes: openid first, then those asked, unique, in order.
	Scopes    []string
	Resources []string
	// RedirectURL (DefaultOIDCRedirectURL when unset) and its path, which Envoy answers.
	RedirectURL, RedirectPath string
	// LogoutPath is "" when unset.
	LogoutPath         string
	ForwardAccessToken bool
	// RefreshToken renews the tokens with the refresh token (true unless set false).
	RefreshToken bool
	// CookieDomain, AccessTokenCookie and IDTokenCookie are "" when unset (Envoy's).
	CookieDomain, AccessTokenCookie, IDTokenCookie string
	// SameSite is the cookies' SameSite attribute: "" (none set), Lax, Strict or None.
	SameSite string
	// DefaultTokenTTL, DefaultRefreshTokenTTL and CSRFTokenTTL are 0 when unset (Envoy's
	// defaults).
	DefaultTokenTTL, DefaultRefreshTokenTTL, CSRFTokenTTL time.Duration
	// DenyRedirect: requests matching one of these are answered 401, not redirected.
	DenyRedirect []HeaderMatch
	// PassThrough (passThroughAuthHeader): requests with one of these headers, its value
	// starting with ValuePrefix, skip the login; the policy's jwt verifies their token. Set
	// by ResolveSecurity from the policy's jwt.
	PassThrough           []JWTHeader
	PassThroughAuthHeader bool
	// DisableTokenEncryption keeps the tokens in their cookies in plain text (Envoy encrypts
	// them with the HMAC key otherwise).
	DisableTokenEncryption bool
}

// HeaderMatch matches a request header (lower-case Name) by Type (MatchExact, MatchPrefix,
// MatchSuffix, MatchRegex: RE2) and Value.
type HeaderMatch struct {
	Name, Type, Value string
}

// resolveOIDC checks an oidc of a policy of namespace ns.
func resolveOIDC(ns string, o *v1alpha1.SecurityOIDC) (*OIDC, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	out := &OIDC{ForwardAccessToken: o.ForwardAccessToken != nil && *o.ForwardAccessToken, RefreshToken: o.RefreshToken == nil || *o.RefreshToken}
	p := o.Provider
	if checkOIDCURL("oidc.provider.issuer", p.Issuer, false, bad) {
		out.Issuer = p.Issuer
	}
	unset := func(v *string) bool { return v == nil || *v == "" }
	endpoint := func(field string, v *string, plain bool) string {
		if unset(v) {
			bad("%s is not set: set both provider.authorizationEndpoint and provider.tokenEndpoint, or neither (the hub then reads them from the issuer's discovery document)", field)
			return ""
		}
		if checkOIDCURL(field, *v, plain, bad) {
			return *v
		}
		return ""
	}
	if out.Discover = unset(p.AuthorizationEndpoint) && unset(p.TokenEndpoint); !out.Discover {
		out.AuthorizationEndpoint = endpoint("oidc.provider.authorizationEndpoint", p.AuthorizationEndpoint, false)
		out.TokenEndpoint = endpoint("oidc.provider.tokenEndpoint", p.TokenEndpoint, true)
	}
	if len(p.BackendRefs) != 1 {
		bad("oidc.provider.backendRefs has %d entries: kubelb reaches the token endpoint through exactly one Service of the policy's namespace, never an address a policy writes", len(p.BackendRefs))
	} else {
		out.Service, out.Port = extAuthService("oidc.provider.backendRefs[0]", ns, p.BackendRefs[0], bad)
	}
	if len(o.ClientID) > MaxOIDCClientID || !headerValueOK(o.ClientID) {
		bad("oidc.clientID %q: 1 to %d printable characters without spaces", truncate(o.ClientID), MaxOIDCClientID)
	} else {
		out.ClientID = o.ClientID
	}
	if name, err := secretRef("oidc.clientSecret", ns, o.ClientSecret); err != nil {
		errs = append(errs, err)
	} else {
		out.ClientSecret = name
	}
	out.Scopes = []string{"openid"}
	if len(o.Scopes) > MaxOIDCScopes {
		bad("oidc.scopes has %d scopes, at most %d", len(o.Scopes), MaxOIDCScopes)
	} else {
		for i, s := range o.Scopes {
			switch {
			case len(s) > MaxOIDCScope || !headerValueOK(s) || strings.ContainsAny(s, `"\`):
				bad("oidc.scopes[%d] %q: 1 to %d printable characters without spaces or quotes", i, truncate(s), MaxOIDCScope)
			case !slices.Contains(out.Scopes, s):
				out.Scopes = append(out.Scopes, s)
			}
		}
	}
	if len(o.Resources) > MaxOIDCResources {
		bad("oidc.resources has %d resources, at most %d", len(o.Resources), MaxOIDCResources)
	} else {
		for i, r := range o.Resources {
			if checkOIDCURL(fmt.Sprintf("oidc.resources[%d]", i), r, false, bad) && !slices.Contains(out.Resources, r) {
				out.Resources = append(out.Resources, r)
			}
		}
	}
	out.RedirectURL = DefaultOIDCRedirectURL
	if o.RedirectURL != nil {
		out.RedirectURL = *o.RedirectURL
	}
	out.RedirectPath = redirectPath(out.RedirectURL, bad)
	if o.LogoutPath != nil {
		lp := *o.LogoutPath
		if len(lp) > MaxOIDCPath || !strings.HasPrefix(lp, "/") || !headerValueOK(lp) || strings.ContainsAny(lp, "?#%") {
			bad("oidc.logoutPath %q: a path starting with /, at most %d printable characters, without spaces, ?, # or %%", truncate(lp), MaxOIDCPath)
		} else {
			out.LogoutPath = lp
		}
	}
	if lp := out.LogoutPath; lp != "" && lp == out.RedirectPath {
		bad("oidc.logoutPath %q is the redirectURL's path", truncate(lp))
	}
	if o.CookieDomain != nil {
		if d := *o.CookieDomain; len(validation.IsDNS1123Subdomain(d)) > 0 {
			bad("oidc.cookieDomain %q is not a domain name", truncate(d))
		} else {
			out.CookieDomain = d
		}
	}
	if c := o.CookieNames; c != nil {
		cookie := func(field string, v *string) string {
			if v == nil {
				return ""
			}
			if len(*v) > MaxOIDCCookieName || !headerNameRE.MatchString(*v) {
				bad("oidc.cookieNames.%s %q is not a cookie name (a token of at most %d characters)", field, truncate(*v), MaxOIDCCookieName)
				return ""
			}
			return *v
		}
		out.AccessTokenCookie, out.IDTokenCookie = cookie("accessToken", c.AccessToken), cookie("idToken", c.IDToken)
		if out.AccessTokenCookie != "" && out.AccessTokenCookie == out.IDTokenCookie {
			bad("oidc.cookieNames: accessToken and idToken are the same cookie")
		}
	}
	if c := o.CookieConfig; c != nil && c.SameSite != nil {
		switch v := *c.SameSite; v {
		case "Lax", "Strict", "None":
			out.SameSite = v
		default:
			bad("oidc.cookieConfig.sameSite %q: use Lax, Strict or None", truncate(v))
		}
	}
	ttl := func(field string, v *string, highest time.Duration) time.Duration {
		if v == nil {
			return 0
		}
		d, err := durationIn(field, *v, MinOIDCTokenTTL, highest)
		if err != nil {
			errs = append(errs, err)
		}
		return d
	}
	out.DefaultTokenTTL = ttl("oidc.defaultTokenTTL", o.DefaultTokenTTL, MaxOIDCTokenTTL)
	out.DefaultRefreshTokenTTL = ttl("oidc.defaultRefreshTokenTTL", o.DefaultRefreshTokenTTL, MaxOIDCRefreshTokenTTL)
	out.CSRFTokenTTL = ttl("oidc.csrfTokenTTL", o.CSRFTokenTTL, MaxOIDCCSRFTokenTTL)
	if d := o.DenyRedirect; d != nil {
		if len(d.Headers) > MaxOIDCDenyRedirect {
			bad("oidc.denyRedirect.headers has %d headers, at most %d", len(d.Headers), MaxOIDCDenyRedirect)
		} else {
			for i, h := range d.Headers {
				if m, ok := headerMatch(fmt.Sprintf("oidc.denyRedirect.headers[%d]", i), h, bad); ok {
					out.DenyRedirect = append(out.DenyRedirect, m)
				}
			}
		}
	}
	out.PassThroughAuthHeader = o.PassThroughAuthHeader != nil && *o.PassThroughAuthHeader
	out.DisableTokenEncryption = o.DisableTokenEncryption != nil && *o.DisableTokenEncryption
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// headerMatch checks a header match (field names it): a header name, a type, a value of 1
// to MaxOIDCMatchValue printable characters (a regular expression Envoy accepts: re2.Check).
func headerMatch(field string, h v1alpha1.SecurityOIDCHeaderMatch, bad func(string, ...any)) (HeaderMatch, bool) {
	m := HeaderMatch{Name: strings.ToLower(h.Name), Type: MatchExact, Value: h.Value}
	if h.Type != nil && *h.Type != "" {
		m.Type = *h.Type
	}
	switch {
	case len(h.Name) > MaxNameLength || len(validation.IsHTTPHeaderName(h.Name)) > 0:
		bad("%s.name %q is not an HTTP header name", field, truncate(h.Name))
	case m.Type != MatchExact && m.Type != MatchPrefix && m.Type != MatchSuffix && m.Type != MatchRegex:
		bad("%s.type %q: use Exact, Prefix, Suffix or RegularExpression", field, truncate(m.Type))
	case h.Value == "" || len(h.Value) > MaxOIDCMatchValue || strings.ContainsFunc(h.Value, func(r rune) bool { return r < ' ' || r > '~' }):
		bad("%s.value: 1 to %d printable characters", field, MaxOIDCMatchValue)
	default:
		if m.Type == MatchRegex {
			if err := re2.Check(h.Value); err != nil {
				bad("%s.value %q: %s", field, truncate(h.Value), truncate(err.Error()))
				return m, false
			}
		}
		return m, true
	}
	return m, false
}

// oidcPassThrough sets the headers of o's passThroughAuthHeader: where j's providers read
// their tokens (a provider without extractFrom: Authorization after "Bearer "). A policy
// without jwt, or with an optional one, cannot pass requests through: nothing would verify
// their tokens.
func oidcPassThrough(o *OIDC, j *JWT) error {
	switch {
	case !o.PassThroughAuthHeader:
		return nil
	case j == nil:
		return errors.New("oidc.passThroughAuthHeader lets requests with a token skip the login: the policy needs jwt to verify their tokens")
	case j.Optional:
		return errors.New("oidc.passThroughAuthHeader with an optional jwt would let requests skip both the login and the token check: make jwt not optional")
	}
	var out []JWTHeader
	for _, p := range j.Providers {
		hs := p.FromHeaders
		if len(hs) == 0 && len(p.FromCookies) == 0 && len(p.FromParams) == 0 {
			hs = []JWTHeader{{Name: "authorization", ValuePrefix: "Bearer "}}
		}
		for _, h := range hs {
			if !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	if len(out) == 0 {
		return errors.New("oidc.passThroughAuthHeader: the policy's jwt reads tokens from no header (only cookies or query parameters)")
	}
	slices.SortFunc(out, func(a, b JWTHeader) int {
		return strings.Compare(a.Name+"\x00"+a.ValuePrefix, b.Name+"\x00"+b.ValuePrefix)
	})
	o.PassThrough = out
	return nil
}

// checkOIDCURL checks an absolute https URL (http too when plain) with a host, without user
// information or fragment, of at most MaxOIDCURL printable characters.
func checkOIDCURL(field, v string, plain bool, bad func(string, ...any)) bool {
	u, err := url.Parse(v)
	schemes := "https"
	if plain {
		schemes = "http or https"
	}
	if err != nil || len(v) > MaxOIDCURL || !headerValueOK(v) || u.Host == "" || u.User != nil || u.Fragment != "" ||
		(u.Scheme != "https" && (!plain || u.Scheme != "http")) || strings.Contains(v, "%") {
		bad("%s %q: an absolute %s URL with a host, at most %d printable characters, without user, fragment or %%", field, truncate(v), schemes, MaxOIDCURL)
		return false
	}
	return true
}

// CheckOIDCIssuer checks an issuer as a policy's: an absolute https URL with a host, at most
// MaxOIDCURL printable characters, without user, fragment or %.
func CheckOIDCIssuer(issuer string) error {
	var err error
	checkOIDCURL("issuer", issuer, false, func(format string, args ...any) { err = fmt.Errorf(format, args...) })
	return err
}

// CheckOIDCDiscovered checks the endpoints an issuer's discovery document gives, as the
// policy's own would be: the authorization endpoint an https URL, the token endpoint an http
// or https one, each at most MaxOIDCURL printable characters, without user, fragment or %.
func CheckOIDCDiscovered(authorization, token string) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	checkOIDCURL("authorization_endpoint", authorization, false, bad)
	checkOIDCURL("token_endpoint", token, true, bad)
	return errors.Join(errs...)
}

// redirectPath checks a redirectURL, an absolute http(s) URL whose only Envoy format commands
// are oidcRedirectCommands, and returns its path.
func redirectPath(v string, bad func(string, ...any)) string {
	plain := v
	for i, c := range oidcRedirectCommands {
		plain = strings.ReplaceAll(plain, c, []string{"https", "host.invalid"}[i])
	}
	u, err := url.Parse(plain)
	if err != nil || len(v) > MaxOIDCURL || !headerValueOK(v) || strings.Contains(plain, "%") || u.Host == "" ||
		u.User != nil || u.Fragment != "" || u.RawQuery != "" || (u.Scheme != "https" && u.Scheme != "http") ||
		!strings.HasPrefix(u.Path, "/") || len(u.Path) > MaxOIDCPath {
		bad("oidc.redirectURL %q: an absolute http(s) URL with a path, without query or fragment, at most %d characters; its only %% commands may be %s", truncate(v), MaxOIDCURL, strings.Join(oidcRedirectCommands, " and "))
		return ""
	}
	return u.Path
}

// CheckOIDCClientSecret checks the client secret read from a Secret: 1 to MaxOIDCClientSecret
// printable characters. Its error never shows the secret.
func CheckOIDCClientSecret(data map[string][]byte) (string, error) {
	v, ok := data[OIDCClientSecretKey]
	switch {
	case !ok:
		return "", fmt.Errorf("the Secret has no key %s", OIDCClientSecretKey)
	case len(v) == 0 || len(v) > MaxOIDCClientSecret || !headerValueOK(string(v)):
		return "", fmt.Errorf("the value of key %s is not 1 to %d printable characters without spaces", OIDCClientSecretKey, MaxOIDCClientSecret)
	}
	return string(v), nil
}
