package ir

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"kubelb.dev/kubelb/internal/re2"
)

// OIDC is an OpenID Connect login (a SecurityPolicy's oidc) that the listeners serving its
// routes run (Envoy's oauth2 filter, one per login: its provider cannot change per route): a
// request without a valid session is redirected to AuthorizationEndpoint; the code the
// provider sends back to RedirectPath is exchanged at TokenEndpoint, reached through Cluster,
// for tokens kept in cookies signed with the HMACSecret.
type OIDC struct {
	// Name is unique in the listener; routes name it (Route.OIDC).
	Name string `json:"name"`
	// Cluster reaches the token endpoint; TokenEndpoint gives the requests' Host and path.
	Cluster               string `json:"cluster"`
	TokenEndpoint         string `json:"tokenEndpoint"`
	AuthorizationEndpoint string `json:"authorizationEndpoint"`
	ClientID              string `json:"clientID"`
	// ClientSecret and HMACSecret name generic Secrets of the Config.
	ClientSecret string   `json:"clientSecret"`
	HMACSecret   string   `json:"hmacSecret"`
	Scopes       []string `json:"scopes"`
	Resources    []string `json:"resources,omitempty"`
	// RedirectURL may hold %REQ(x-forwarded-proto)% and %REQ(:authority)%; RedirectPath is its
	// path.
	RedirectURL  string `json:"redirectURL"`
	RedirectPath string `json:"redirectPath"`
	// LogoutPath ends the session ("" none).
	LogoutPath         string `json:"logoutPath,omitempty"`
	ForwardAccessToken bool   `json:"forwardAccessToken,omitempty"`
	// RefreshToken renews the tokens with the provider's refresh token when they expire.
	RefreshToken bool   `json:"refreshToken,omitempty"`
	CookieDomain string `json:"cookieDomain,omitempty"`
	// CookieSuffix makes the cookies of this login its own; AccessTokenCookie and
	// IDTokenCookie, when set, name those cookies instead.
	CookieSuffix      string `json:"cookieSuffix"`
	AccessTokenCookie string `json:"accessTokenCookie,omitempty"`
	IDTokenCookie     string `json:"idTokenCookie,omitempty"`
	// SameSite is the SameSite attribute of every cookie of the login: "" (none), Lax,
	// Strict or None.
	SameSite string `json:"sameSite,omitempty"`
	// DefaultTokenTTL, DefaultRefreshTokenTTL and CSRFTokenTTL: 0 is Envoy's default.
	DefaultTokenTTL        Duration `json:"defaultTokenTTL,omitempty"`
	DefaultRefreshTokenTTL Duration `json:"defaultRefreshTokenTTL,omitempty"`
	CSRFTokenTTL           Duration `json:"csrfTokenTTL,omitempty"`
	// DenyRedirect: requests matching one are answered 401 instead of being redirected.
	DenyRedirect []HeaderMatch `json:"denyRedirect,omitempty"`
	// PassThrough: requests with one of these headers (its value starting with ValuePrefix)
	// skip the login; the route's JWT requirement verifies their token.
	PassThrough []JWTHeader `json:"passThrough,omitempty"`
	// DisableTokenEncryption keeps the tokens in their cookies in plain text.
	DisableTokenEncryption bool `json:"disableTokenEncryption,omitempty"`
}

// HeaderMatch matches a request header (lower-case Name) by Type and Value.
type HeaderMatch struct {
	Name string `json:"name"`
	// Type is MatchExact, MatchPrefix, MatchSuffix or MatchRegex (Value an RE2 expression).
	Type  string `json:"type"`
	Value string `json:"value"`
}

// Header match types.
const (
	MatchExact  = "Exact"
	MatchPrefix = "Prefix"
	MatchSuffix = "Suffix"
	MatchRegex  = "Regex"
)

// Bounds of OIDC logins: those of one listener, their strings.
const (
	MaxListenerOIDCs = 8
	maxOIDCString    = 1024
	maxOIDCList      = 17 // openid and 16 more
	maxOIDCMatches   = 16
	maxOIDCTTL       = 30 * 24 * time.Hour
)

// OIDCNames are the OIDC logins the routes of the configuration run.
func (rc *RouteConfig) OIDCNames() []string {
	var out []string
	rc.anyRoute(func(r *Route) bool {
		if r.OIDC != "" && !slices.Contains(out, r.OIDC) {
			out = append(out, r.OIDC)
		}
		return false
	})
	slices.Sort(out)
	return out
}

// validateOIDC checks the listener's OIDC logins: existing clusters and secrets, sane
// fields, sorted by name, exactly those its routes run (routes: OIDCNames by route
// configuration).
func (l *Listener) validateOIDC(clusters, secrets map[string]bool, routes map[string][]string) error {
	var want []string
	for _, rc := range append([]string{l.RouteConfig}, tlsRouteConfigs(l)...) {
		want = append(want, routes[rc]...)
	}
	slices.Sort(want)
	want = slices.Compact(want)
	if len(l.OIDC) > 0 && !l.Protocol.ServesHTTP() {
		return fmt.Errorf("OIDC on a %s listener (HTTP, HTTPS and HTTP3 only)", l.Protocol)
	}
	if len(l.OIDC) > MaxListenerOIDCs {
		return fmt.Errorf("%d OIDC logins, at most %d", len(l.OIDC), MaxListenerOIDCs)
	}
	var have []string
	for i := range l.OIDC {
		o := &l.OIDC[i]
		if err := o.validate(clusters, secrets); err != nil {
			return fmt.Errorf("OIDC %q: %w", o.Name, err)
		}
		have = append(have, o.Name)
	}
	if !slices.IsSorted(have) || len(slices.Compact(slices.Clone(have))) != len(have) {
		return errors.New("OIDC logins not sorted by name, or repeated")
	}
	if !slices.Equal(have, want) {
		return fmt.Errorf("OIDC logins %v, but its routes run %v", have, want)
	}
	return nil
}

func (o *OIDC) validate(clusters, secrets map[string]bool) error {
	printable := func(v string) bool {
		return v != "" && len(v) <= maxOIDCString && !strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r > '~' })
	}
	absolute := func(v string) bool {
		u, err := url.Parse(v)
		return printable(v) && err == nil && u.Host != "" && (u.Scheme == "https" || u.Scheme == "http")
	}
	switch {
	case !printable(o.Name) || len(o.Name) > maxExtAuthName:
		return errors.New("name empty, too long or not printable")
	case !clusters[o.Cluster]:
		return fmt.Errorf("cluster %q does not exist", o.Cluster)
	case !secrets[o.ClientSecret] || !secrets[o.HMACSecret]:
		return fmt.Errorf("secrets %q and %q must exist", o.ClientSecret, o.HMACSecret)
	case !absolute(o.TokenEndpoint) || !absolute(o.AuthorizationEndpoint):
		return errors.New("token or authorization endpoint is not an absolute URL")
	case !printable(o.ClientID) || !printable(o.RedirectURL) || !printable(o.CookieSuffix):
		return errors.New("client ID, redirect URL or cookie suffix empty or not printable")
	case !strings.HasPrefix(o.RedirectPath, "/") || !printable(o.RedirectPath):
		return fmt.Errorf("redirect path %q is not a path", o.RedirectPath)
	case o.LogoutPath != "" && (!strings.HasPrefix(o.LogoutPath, "/") || !printable(o.LogoutPath)):
		return fmt.Errorf("logout path %q is not a path", o.LogoutPath)
	case len(o.Scopes) == 0 || len(o.Scopes) > maxOIDCList || len(o.Resources) > maxOIDCList:
		return errors.New("no scope, or too many scopes or resources")
	}
	for _, s := range append(slices.Clone(o.Scopes), o.Resources...) {
		if !printable(s) {
			return fmt.Errorf("scope or resource %q is not printable", s)
		}
	}
	switch o.SameSite {
	case "", "Lax", "Strict", "None":
	default:
		return fmt.Errorf("SameSite %q, want Lax, Strict or None", o.SameSite)
	}
	for _, d := range []Duration{o.DefaultTokenTTL, o.DefaultRefreshTokenTTL, o.CSRFTokenTTL} {
		if d < 0 || d.D() > maxOIDCTTL {
			return fmt.Errorf("a lifetime of %s, want 0 to %s", d.D(), maxOIDCTTL)
		}
	}
	if len(o.DenyRedirect) > maxOIDCMatches || len(o.PassThrough) > maxOIDCMatches {
		return fmt.Errorf("over %d deny-redirect or pass-through headers", maxOIDCMatches)
	}
	lowerName := func(n string) bool {
		return len(n) <= maxJWTString && len(validation.IsHTTPHeaderName(n)) == 0 && n == strings.ToLower(n)
	}
	for _, m := range o.DenyRedirect {
		reErr := re2.Check(m.Value)
		if !lowerName(m.Name) || !printable(strings.ReplaceAll(m.Value, " ", "x")) ||
			(m.Type != MatchExact && m.Type != MatchPrefix && m.Type != MatchSuffix && m.Type != MatchRegex) || (m.Type == MatchRegex && reErr != nil) {
			return fmt.Errorf("deny-redirect header %q: a lower-case name, a known type and a printable value (an RE2 expression for %s)", m.Name, MatchRegex)
		}
	}
	for _, h := range o.PassThrough {
		if !lowerName(h.Name) || strings.ContainsFunc(h.ValuePrefix, func(r rune) bool { return r < ' ' || r > '~' }) {
			return fmt.Errorf("pass-through header %q: a lower-case name and a printable prefix", h.Name)
		}
	}
	return nil
}
