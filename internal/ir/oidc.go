package ir

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
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
}

// Bounds of OIDC logins: those of one listener, their strings.
const (
	MaxListenerOIDCs = 8
	maxOIDCString    = 1024
	maxOIDCList      = 17 // openid and 16 more
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
	if len(l.OIDC) > 0 && l.Protocol != ProtocolHTTP && l.Protocol != ProtocolHTTPS {
		return fmt.Errorf("OIDC on a %s listener (HTTP and HTTPS only)", l.Protocol)
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
	return nil
}
