package ir

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// JWT asks a route's clients for a JSON Web Token (Envoy's jwt_authn filter, a SecurityPolicy's
// jwt): a request without one (unless AllowMissing) or with one that none of the providers
// verifies is answered 401, one whose audience is not the provider's 403. The providers
// themselves (their keys) are the listener's (Listener.JWT): Envoy's filter holds them, a
// route only names those it requires.
type JWT struct {
	// Providers names the providers of which one must verify the token: providers of every
	// listener serving the route, sorted, unique, 1 to MaxRouteJWTProviders.
	Providers []string `json:"providers"`
	// AllowMissing serves requests without a token (one with a bad token is still refused).
	AllowMissing bool `json:"allowMissing,omitempty"`
}

// ListenerJWT is what Envoy's jwt_authn filter of a listener holds: the providers and the
// requirements of the routes it serves, exactly those.
type ListenerJWT struct {
	// Providers sorted by name, unique, at most MaxListenerJWTProviders.
	Providers []*JWTProvider `json:"providers"`
	// Requirements of the routes, sorted (by Key), unique.
	Requirements []JWT `json:"requirements"`
}

// Key names the requirement: its providers, and whether a token may be missing.
func (j *JWT) Key() string {
	k := strings.Join(j.Providers, " ")
	if j.AllowMissing {
		k += " (allow missing)"
	}
	return k
}

// JWTProvider is a JWT provider of a listener: the keys verifying its tokens, the issuer and
// audiences they must name, and the claims copied to request headers.
type JWTProvider struct {
	// Name is unique in the listener ("<policy namespace>/<policy>/<provider>", prefixed
	// with "<Route>/" when its keys are fetched).
	Name string `json:"name"`
	// Issuer the tokens must name ("": any).
	Issuer string `json:"issuer,omitempty"`
	// Audiences of which a token must name one (none: any); at most MaxJWTAudiences.
	Audiences []string `json:"audiences,omitempty"`
	// JWKS is the JSON Web Key Set verifying the tokens (public keys), at most MaxJWKSBytes;
	// "" when Remote is set.
	JWKS string `json:"jwks,omitempty"`
	// Remote is the key server the key set is fetched from (nil when JWKS is set).
	Remote *RemoteJWKS `json:"remote,omitempty"`
	// ClaimToHeaders copy claims of a verified token to request headers (lower-case names).
	ClaimToHeaders []ClaimToHeader `json:"claimToHeaders,omitempty"`
	// FromHeaders, FromCookies and FromParams are where the token is read, at most
	// MaxJWTExtractFrom of each; none: the Authorization header (Bearer).
	FromHeaders []JWTHeader `json:"fromHeaders,omitempty"`
	FromCookies []string    `json:"fromCookies,omitempty"`
	FromParams  []string    `json:"fromParams,omitempty"`
}

// RemoteJWKS is a key server: Envoy fetches the key set through Cluster (the URI gives the
// requests' Host and path) when the listener starts, without holding it (a key server that
// does not answer never keeps a listener from serving: requests are refused until a key set
// is fetched), and again every CacheDuration; after a failed fetch, FailedRefetch later.
type RemoteJWKS struct {
	Cluster       string   `json:"cluster"`
	URI           string   `json:"uri"`
	CacheDuration Duration `json:"cacheDuration"`
	FailedRefetch Duration `json:"failedRefetch"`
}

// JWTHeader is a request header (lower case) holding the token after ValuePrefix.
type JWTHeader struct {
	Name        string `json:"name"`
	ValuePrefix string `json:"valuePrefix,omitempty"`
}

// ClaimToHeader copies a claim (nested as "a.b") of a verified token to a request header.
type ClaimToHeader struct {
	Claim  string `json:"claim"`
	Header string `json:"header"`
}

// Bounds of JWT authentication.
const (
	MaxRouteJWTProviders    = 4
	MaxListenerJWTProviders = 64
	MaxJWKSBytes            = 16 * 1024
	MaxJWTAudiences         = 8
	MaxJWTClaimToHeaders    = 8
	MaxJWTExtractFrom       = 4
	maxJWTName              = 253 + 63 + 253 + 253 + 3 // [<Route>/]<namespace>/<policy>/<provider>
	maxJWTString            = 256
)

// JWTRequirements is the requirements of the routes of the configuration, sorted by Key,
// unique.
func (rc *RouteConfig) JWTRequirements() []JWT {
	var out []JWT
	rc.anyRoute(func(r *Route) bool {
		if r.JWT != nil {
			out = append(out, *r.JWT)
		}
		return false
	})
	return sortJWT(out)
}

// sortJWT sorts requirements by Key and removes repeated ones.
func sortJWT(l []JWT) []JWT {
	slices.SortFunc(l, func(a, b JWT) int { return strings.Compare(a.Key(), b.Key()) })
	return slices.CompactFunc(l, func(a, b JWT) bool { return a.Key() == b.Key() })
}

// validate checks a route's requirement (nil: none).
func (j *JWT) validate() error {
	if j == nil {
		return nil
	}
	if len(j.Providers) == 0 || len(j.Providers) > MaxRouteJWTProviders || !slices.IsSorted(j.Providers) || len(slices.Compact(slices.Clone(j.Providers))) != len(j.Providers) {
		return fmt.Errorf("jwt: %d providers, want 1 to %d, sorted and unique", len(j.Providers), MaxRouteJWTProviders)
	}
	return nil
}

// validateJWT checks that a listener holds exactly the requirements of the route
// configurations it serves (needs: by route configuration) and exactly the providers they
// name, each usable (a key server's cluster among clusters).
func (l *Listener) validateJWT(clusters map[string]bool, needs map[string][]JWT) error {
	var want []JWT
	want = append(want, needs[l.RouteConfig]...)
	for _, t := range l.TLS {
		want = append(want, needs[t.RouteConfig]...)
	}
	want = sortJWT(want)
	if l.JWT == nil {
		if len(want) > 0 {
			return errors.New("a route it serves has JWT authentication, but the listener has no JWT providers")
		}
		return nil
	}
	var names []string
	for _, r := range want {
		names = append(names, r.Providers...)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	have := make([]string, 0, len(l.JWT.Providers))
	for _, p := range l.JWT.Providers {
		have = append(have, p.Name)
	}
	switch {
	case !l.Protocol.ServesHTTP():
		return fmt.Errorf("JWT authentication on a %s listener (HTTP, HTTPS and HTTP3 only)", l.Protocol)
	case len(have) > MaxListenerJWTProviders:
		return fmt.Errorf("%d JWT providers, at most %d", len(have), MaxListenerJWTProviders)
	case !slices.Equal(have, names):
		return fmt.Errorf("JWT providers %v, but its routes require %v (sorted, unique)", have, names)
	case !slices.EqualFunc(l.JWT.Requirements, want, func(a, b JWT) bool { return a.Key() == b.Key() }):
		return errors.New("its JWT requirements are not exactly those of its routes (sorted, unique)")
	}
	for _, p := range l.JWT.Providers {
		if err := p.validate(clusters); err != nil {
			return fmt.Errorf("JWT provider %q: %w", p.Name, err)
		}
	}
	return nil
}

// validate checks a provider's bounds, its key set's shape and its header names (the keys
// themselves were checked where the policy was read: trafficpolicy.CheckJWKS).
func (p *JWTProvider) validate(clusters map[string]bool) error {
	printable := func(s string, max int) bool {
		return s != "" && len(s) <= max && !strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r > '~' })
	}
	switch {
	case !printable(p.Name, maxJWTName):
		return errors.New("the name is empty, too long or not printable")
	case p.Issuer != "" && !printable(p.Issuer, maxJWTString):
		return errors.New("the issuer is too long or not printable")
	case len(p.Audiences) > MaxJWTAudiences:
		return fmt.Errorf("%d audiences, at most %d", len(p.Audiences), MaxJWTAudiences)
	case p.Remote != nil && p.JWKS != "":
		return errors.New("both a key set and a key server")
	case p.Remote == nil && (len(p.JWKS) == 0 || len(p.JWKS) > MaxJWKSBytes):
		return fmt.Errorf("a key set of %d bytes, want 1 to %d", len(p.JWKS), MaxJWKSBytes)
	case p.Remote != nil:
		if err := p.Remote.validate(clusters); err != nil {
			return fmt.Errorf("key server: %w", err)
		}
	case len(p.ClaimToHeaders) > MaxJWTClaimToHeaders:
		return fmt.Errorf("%d claims to headers, at most %d", len(p.ClaimToHeaders), MaxJWTClaimToHeaders)
	}
	for _, a := range p.Audiences {
		if !printable(a, maxJWTString) {
			return errors.New("an audience is empty, too long or not printable")
		}
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal([]byte(p.JWKS), &set); p.Remote == nil && (err != nil || len(set.Keys) == 0) {
		return errors.New("the key set is not a JSON Web Key Set with keys")
	}
	if len(p.FromHeaders) > MaxJWTExtractFrom || len(p.FromCookies) > MaxJWTExtractFrom || len(p.FromParams) > MaxJWTExtractFrom {
		return fmt.Errorf("over %d token headers, cookies or query parameters", MaxJWTExtractFrom)
	}
	for _, h := range p.FromHeaders {
		if len(h.Name) > maxJWTString || len(validation.IsHTTPHeaderName(h.Name)) > 0 || h.Name != strings.ToLower(h.Name) || len(h.ValuePrefix) > 64 ||
			strings.ContainsFunc(h.ValuePrefix, func(r rune) bool { return r < ' ' || r > '~' }) {
			return fmt.Errorf("token header %q: not a lower-case header name and a printable prefix", h.Name)
		}
	}
	for _, n := range append(slices.Clone(p.FromCookies), p.FromParams...) {
		if !printable(n, maxJWTString) || strings.ContainsAny(n, `"(),/:;<=>?@[\]{}`) {
			return fmt.Errorf("token cookie or query parameter %q is not a name", n)
		}
	}
	for _, c := range p.ClaimToHeaders {
		if !printable(c.Claim, maxJWTString) || len(c.Header) > maxJWTString || len(validation.IsHTTPHeaderName(c.Header)) > 0 || c.Header != strings.ToLower(c.Header) {
			return fmt.Errorf("claim to header %q: not a claim and a lower-case header name", c.Header)
		}
	}
	return nil
}

// Bounds of a key server: its URI, how long a key set is kept, how long a failed fetch waited
// on.
const (
	maxJWKSURI     = 253
	minJWKSCache   = time.Minute
	maxJWKSCache   = 24 * time.Hour
	minJWKSRefetch = time.Second
	maxJWKSRefetch = time.Hour
)

// validate checks a key server: an existing cluster, an absolute http(s) URL, durations in
// their bounds.
func (r *RemoteJWKS) validate(clusters map[string]bool) error {
	u, err := url.Parse(r.URI)
	switch {
	case !clusters[r.Cluster]:
		return fmt.Errorf("cluster %q does not exist", r.Cluster)
	case err != nil || len(r.URI) > maxJWKSURI || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") ||
		strings.ContainsFunc(r.URI, func(c rune) bool { return c <= ' ' || c > '~' }):
		return fmt.Errorf("URI %q is not an absolute http(s) URL of at most %d characters", r.URI, maxJWKSURI)
	case r.CacheDuration.D() < minJWKSCache || r.CacheDuration.D() > maxJWKSCache:
		return fmt.Errorf("cache duration %s, want %s to %s", r.CacheDuration.D(), minJWKSCache, maxJWKSCache)
	case r.FailedRefetch.D() < minJWKSRefetch || r.FailedRefetch.D() > maxJWKSRefetch:
		return fmt.Errorf("wait after a failed fetch %s, want %s to %s", r.FailedRefetch.D(), minJWKSRefetch, maxJWKSRefetch)
	}
	return nil
}
