package trafficpolicy

import (
	"crypto/ecdh"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// JWT authentication (a SecurityPolicy's jwt): a provider's keys are given in the policy
// (localJWKS of type Inline: public key material, carried in the Route context), checked and
// bounded here before they reach a hub object or Envoy, or fetched by the hub's Envoy from a
// key server (remoteJWKS). Tenants are untrusted, so the hub's Envoy never connects to an
// address the endpoint policy has not allowed: the key server is reached through a Service of
// the policy's namespace (remoteJWKS.backendRefs), which the ccm embeds in the Route as it
// embeds backends, and which the hub reaches as any backend (the tenant's nodes × its
// NodePort, under the endpoint policy), the URI giving only the requests' Host and path; or,
// without backendRefs, at the URI itself: an https URL whose host is a DNS name, which the
// manager resolves (bounded, cached, re-resolved, as endpoint hostnames) into addresses each
// checked by the endpoint policy, the host's certificate verified.

// servedJWT is the tree of the jwt fields kubelb serves; each provider's: jwtProviderFields.
var servedJWT = map[string]any{"optional": nil, "providers": nil}

// jwtProviderFields are the fields of a JWT provider kubelb serves.
var jwtProviderFields = map[string]any{
	"name": nil, "issuer": nil, "audiences": nil, "claimToHeaders": nil,
	"localJWKS":   map[string]any{"type": nil, "inline": nil},
	"remoteJWKS":  map[string]any{"backendRefs": nil, "uri": nil, "cacheDuration": nil, "failedRefetchDuration": nil},
	"extractFrom": map[string]any{"headers": nil, "cookies": nil, "params": nil},
}

// Bounds of a policy's JWT authentication.
const (
	MaxJWTProviders      = 4
	MaxJWKSBytes         = 16 * 1024
	MaxJWKSKeys          = 16
	MaxJWTAudiences      = 8
	MaxJWTClaimToHeaders = 8
	MaxJWTExtractFrom    = 4 // headers, cookies, query parameters: each
	maxJWTValuePrefix    = 64
	maxJWTString         = 253 // an issuer, an audience
	maxJWTClaim          = 256 // a claim's or a header's name
	minRSABits           = 2048
	maxRSABits           = 8192
	MaxJWKSURI           = 253
)

// Bounds of a remoteJWKS's durations: a key set is fetched again at most once a minute and
// at least once a day; a failed fetch is retried after 1 s to 1 h.
const (
	MinJWKSCacheDuration     = time.Minute
	MaxJWKSCacheDuration     = 24 * time.Hour
	DefaultJWKSCacheDuration = 5 * time.Minute // Envoy Gateway's CRD default, 300s
	MinJWKSFailedRefetch     = time.Second
	MaxJWKSFailedRefetch     = time.Hour
	DefaultJWKSFailedRefetch = time.Second // Envoy's default
)

// JWT is a checked jwt: a request must carry a token that one of the providers verifies
// (without one, it is served when Optional).
type JWT struct {
	Optional  bool
	Providers []JWTProvider
}

// JWTProvider is a checked provider.
type JWTProvider struct {
	// Name is unique in the policy (a DNS subdomain).
	Name string
	// Issuer the tokens must name ("": any).
	Issuer string
	// Audiences of which a token must name one (none: any).
	Audiences []string
	// JWKS is the JSON Web Key Set as written, every key checked ("" when Remote is set).
	JWKS string
	// Remote is where the key set is fetched (nil when JWKS is set).
	Remote *RemoteJWKS
	// ClaimToHeaders in the policy's order.
	ClaimToHeaders []ClaimToHeader
	// FromHeaders, FromCookies and FromParams are where the token is read (extractFrom);
	// none: the Authorization header (Bearer). Header names lower case.
	FromHeaders []JWTHeader
	FromCookies []string
	FromParams  []string
}

// RemoteJWKS is a checked remoteJWKS: the Service port of the policy's namespace the key
// server is reached through, the URI giving the requests' Host and path, and how long a
// fetched key set is kept (CacheDuration) or a failed fetch waited on (FailedRefetch).
type RemoteJWKS struct {
	// Service and Port: the Service port the key server is reached through; "" and 0 for a
	// key server reached at the URI itself (Host, HostPort).
	Service string
	Port    int32
	URI     string
	// Host (a DNS name, lower case, without a trailing dot) and HostPort (443 unless the URI
	// gives one) of a key server reached at the URI itself; "" and 0 with a Service.
	Host                         string
	HostPort                     int32
	CacheDuration, FailedRefetch time.Duration
}

// JWTHeader is a request header holding the token after ValuePrefix.
type JWTHeader struct {
	Name, ValuePrefix string
}

// ClaimToHeader copies a claim of a verified token to a request header.
type ClaimToHeader struct {
	Claim, Header string
}

// jwtUnsupported names the fields of spec.jwt's providers kubelb does not serve.
func jwtUnsupported(spec map[string]any) []string {
	j, ok := spec["jwt"].(map[string]any)
	if !ok {
		return nil
	}
	var un []string
	providers, _ := j["providers"].([]any)
	for i, p := range providers {
		m, ok := p.(map[string]any)
		if !ok {
			continue
		}
		for _, f := range unsupported(m, jwtProviderFields) {
			un = append(un, fmt.Sprintf("spec.jwt.providers[%d]%s", i, f[len("spec"):]))
		}
		if l, ok := m["localJWKS"].(map[string]any); ok {
			if t, _ := l["type"].(string); t != "" && t != "Inline" {
				un = append(un, fmt.Sprintf("spec.jwt.providers[%d].localJWKS.type %s", i, truncate(t)))
			}
		}
		if r, ok := m["remoteJWKS"].(map[string]any); ok {
			refs, _ := r["backendRefs"].([]any)
			for k, ref := range refs {
				if rm, ok := ref.(map[string]any); ok {
					for _, f := range unsupported(rm, extAuthBackendRefFields) {
						un = append(un, fmt.Sprintf("spec.jwt.providers[%d].remoteJWKS.backendRefs[%d]%s", i, k, f[len("spec"):]))
					}
				}
			}
		}
	}
	return un
}

// hopByHop are the request headers a claim may not be copied to: those of one connection
// (RFC 9110, 7.6.1) and Host (the :authority pseudo-header).
var hopByHop = []string{"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer", "host", "content-length"}

// resolveJWT checks a jwt of a policy of namespace ns.
func resolveJWT(ns string, j *v1alpha1.SecurityJWT) (*JWT, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	out := &JWT{Optional: j.Optional != nil && *j.Optional}
	switch {
	case len(j.Providers) == 0:
		return nil, errors.New("jwt.providers is empty")
	case len(j.Providers) > MaxJWTProviders:
		return nil, fmt.Errorf("jwt has %d providers, at most %d", len(j.Providers), MaxJWTProviders)
	}
	names := map[string]bool{}
	for i, p := range j.Providers {
		field := fmt.Sprintf("jwt.providers[%d]", i)
		if errs := validation.IsDNS1123Subdomain(p.Name); len(errs) > 0 {
			bad("%s.name %q is not a DNS subdomain (lower case letters, digits, '-' and '.')", field, truncate(p.Name))
		} else if names[p.Name] {
			bad("%s.name %q is repeated: provider names are unique", field, p.Name)
		}
		names[p.Name] = true
		field = fmt.Sprintf("jwt.providers[%d] (%s)", i, truncate(p.Name))
		prov := JWTProvider{Name: p.Name, Issuer: p.Issuer}
		if p.Issuer != "" && !jwtString(p.Issuer, maxJWTString) {
			bad("%s issuer: at most %d printable characters without spaces", field, maxJWTString)
		}
		if len(p.Audiences) > MaxJWTAudiences {
			bad("%s has %d audiences, at most %d", field, len(p.Audiences), MaxJWTAudiences)
		}
		for k, a := range p.Audiences {
			if !jwtString(a, maxJWTString) {
				bad("%s audiences[%d]: at most %d printable characters without spaces, not empty", field, k, maxJWTString)
			} else if !slices.Contains(prov.Audiences, a) {
				prov.Audiences = append(prov.Audiences, a)
			}
		}
		switch l := p.LocalJWKS; {
		case l != nil && p.RemoteJWKS != nil:
			bad("%s has both localJWKS and remoteJWKS: give one", field)
		case p.RemoteJWKS != nil:
			prov.Remote = resolveRemoteJWKS(field, ns, p.RemoteJWKS, bad)
		case l == nil:
			bad("%s has neither localJWKS nor remoteJWKS", field)
		case l.Type != "" && l.Type != "Inline":
			bad("%s localJWKS.type %q: only Inline is supported by kubelb", field, truncate(l.Type))
		case l.Inline == nil:
			bad("%s localJWKS.inline is not set", field)
		default:
			if err := CheckJWKS(*l.Inline); err != nil {
				bad("%s localJWKS.inline: %w", field, err)
			}
			prov.JWKS = *l.Inline
		}
		if len(p.ClaimToHeaders) > MaxJWTClaimToHeaders {
			bad("%s has %d claimToHeaders, at most %d", field, len(p.ClaimToHeaders), MaxJWTClaimToHeaders)
		}
		headers := map[string]bool{}
		for k, c := range p.ClaimToHeaders {
			h := strings.ToLower(c.Header)
			switch {
			case !jwtString(c.Claim, maxJWTClaim):
				bad("%s claimToHeaders[%d].claim: at most %d printable characters without spaces, not empty", field, k, maxJWTClaim)
			case len(c.Header) > maxJWTClaim || len(validation.IsHTTPHeaderName(c.Header)) > 0:
				bad("%s claimToHeaders[%d].header %q is not an HTTP header name", field, k, truncate(c.Header))
			case slices.Contains(hopByHop, h) || strings.HasPrefix(h, "x-envoy-"):
				bad("%s claimToHeaders[%d].header %q cannot be set by a policy (a connection's header, Host or Envoy's own)", field, k, truncate(c.Header))
			case headers[h]:
				bad("%s claimToHeaders[%d].header %q is repeated", field, k, truncate(c.Header))
			default:
				headers[h] = true
				prov.ClaimToHeaders = append(prov.ClaimToHeaders, ClaimToHeader{Claim: c.Claim, Header: h})
			}
		}
		if e := p.ExtractFrom; e != nil {
			if len(e.Headers) > MaxJWTExtractFrom || len(e.Cookies) > MaxJWTExtractFrom || len(e.Params) > MaxJWTExtractFrom {
				bad("%s extractFrom: at most %d headers, %d cookies and %d params", field, MaxJWTExtractFrom, MaxJWTExtractFrom, MaxJWTExtractFrom)
			}
			for k, h := range e.Headers {
				prefix := ""
				if h.ValuePrefix != nil {
					prefix = *h.ValuePrefix
				}
				switch {
				case len(h.Name) > maxJWTClaim || len(validation.IsHTTPHeaderName(h.Name)) > 0:
					bad("%s extractFrom.headers[%d].name %q is not an HTTP header name", field, k, truncate(h.Name))
				case slices.Contains(hopByHop, strings.ToLower(h.Name)):
					bad("%s extractFrom.headers[%d].name %q is a connection's header or Host", field, k, truncate(h.Name))
				case len(prefix) > maxJWTValuePrefix || strings.ContainsFunc(prefix, func(r rune) bool { return r < ' ' || r > '~' }):
					bad("%s extractFrom.headers[%d].valuePrefix: at most %d printable characters", field, k, maxJWTValuePrefix)
				default:
					prov.FromHeaders = append(prov.FromHeaders, JWTHeader{Name: strings.ToLower(h.Name), ValuePrefix: prefix})
				}
			}
			for _, l := range []struct {
				what  string
				names []string
			}{{"cookies", e.Cookies}, {"params", e.Params}} {
				what := l.what
				for k, n := range l.names {
					if n == "" || len(n) > maxJWTClaim || strings.ContainsFunc(n, func(r rune) bool { return !isTokenChar(r) }) {
						bad("%s extractFrom.%s[%d] %q is not a name (letters, digits and !#$%%&'*+-.^_`|~)", field, what, k, truncate(n))
					}
				}
			}
			prov.FromCookies, prov.FromParams = slices.Clone(e.Cookies), slices.Clone(e.Params)
		}
		out.Providers = append(out.Providers, prov)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// resolveRemoteJWKS checks the remoteJWKS of provider field (of a policy of namespace ns).
func resolveRemoteJWKS(field, ns string, r *v1alpha1.SecurityRemoteJWKS, bad func(string, ...any)) *RemoteJWKS {
	out := &RemoteJWKS{URI: r.URI}
	if len(r.BackendRefs) > 1 {
		bad("%s remoteJWKS.backendRefs has %d entries: kubelb reaches the key server through exactly one Service of the policy's namespace", field, len(r.BackendRefs))
	} else if len(r.BackendRefs) == 1 {
		out.Service, out.Port = extAuthService(field+" remoteJWKS.backendRefs[0]", ns, r.BackendRefs[0], bad)
	}
	switch {
	case len(r.URI) > MaxJWKSURI:
		bad("%s remoteJWKS.uri is over %d characters", field, MaxJWKSURI)
	case len(r.BackendRefs) > 0:
		checkOIDCURL(field+" remoteJWKS.uri", r.URI, true, bad)
	case checkOIDCURL(field+" remoteJWKS.uri", r.URI, false, bad):
		out.Host, out.HostPort = keyServerHost(field, r.URI, bad)
	}
	dur := func(what string, v *string, lowest, highest, def time.Duration) time.Duration {
		if v == nil {
			return def
		}
		d, err := durationIn(field+" remoteJWKS."+what, *v, lowest, highest)
		if err != nil {
			bad("%w", err)
		}
		return d
	}
	out.CacheDuration = dur("cacheDuration", r.CacheDuration, MinJWKSCacheDuration, MaxJWKSCacheDuration, DefaultJWKSCacheDuration)
	out.FailedRefetch = dur("failedRefetchDuration", r.FailedRefetchDuration, MinJWKSFailedRefetch, MaxJWKSFailedRefetch, DefaultJWKSFailedRefetch)
	return out
}

// KeyServerHost is the host the hub fetches a remoteJWKS without backendRefs from, as its
// check gives it (a DNS name, lower case, without a trailing dot); "" when uri is not one the
// hub fetches. The manager resolves these hosts (translate.EndpointHostnames).
func KeyServerHost(uri string) string {
	ok := len(uri) <= MaxJWKSURI
	bad := func(string, ...any) { ok = false }
	if !ok || !checkOIDCURL("", uri, false, bad) {
		return ""
	}
	host, _ := keyServerHost("", uri, bad)
	if !ok {
		return ""
	}
	return host
}

// keyServerHost is the host and port of an https key server URL (checked by checkOIDCURL)
// reached without a Service: a DNS name (an IP address is refused: the server's certificate
// is verified against the name, and the manager resolves it and checks every address against
// the endpoint policy), lower case without a trailing dot, and the URL's port (443 unless
// given).
func keyServerHost(field, uri string, bad func(string, ...any)) (string, int32) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", 0
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if _, err := netip.ParseAddr(host); err == nil || strings.Contains(u.Hostname(), ":") {
		bad("%s remoteJWKS.uri %q: without backendRefs the key server is named by a DNS name, not an IP address (its certificate is verified against the name)", field, truncate(uri))
		return "", 0
	}
	if errs := validation.IsDNS1123Subdomain(host); len(errs) > 0 || !strings.Contains(host, ".") {
		bad("%s remoteJWKS.uri %q: the host is not a DNS name with a domain", field, truncate(uri))
		return "", 0
	}
	port := int32(443)
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			bad("%s remoteJWKS.uri %q: the port is not 1 to 65535", field, truncate(uri))
			return "", 0
		}
		port = int32(n)
	}
	return host, port
}

// durationIn reads a Gateway API duration (GEP-2257) from lowest to highest.
func durationIn(field, v string, lowest, highest time.Duration) (time.Duration, error) {
	if !durationRE.MatchString(v) {
		return 0, fmt.Errorf("%s %q is not a duration such as 30s, 5m or 1h", field, truncate(v))
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%s %q: %v", field, truncate(v), err)
	case d < lowest || d > highest:
		return 0, fmt.Errorf("%s %s is out of range; use %s to %s", field, v, shortDuration(lowest), shortDuration(highest))
	}
	return d, nil
}

// isTokenChar: a character of an HTTP token (RFC 9110 tchar), which cookie and query
// parameter names are kept to.
func isTokenChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}

// jwtString: 1 to max printable ASCII characters, no spaces.
func jwtString(s string, max int) bool {
	return s != "" && len(s) <= max && !strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r > '~' })
}

// jwk is the part of a JSON Web Key checked.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
	Y   string `json:"y"`
	D   string `json:"d"`
	K   string `json:"k"`
}

// CheckJWKS checks a JSON Web Key Set given inline: at most MaxJWKSBytes, 1 to MaxJWKSKeys
// public signing keys Envoy can use (RSA of 2048 to 8192 bits, EC on P-256, P-384 or P-521,
// Ed25519). A symmetric key or a private key is refused: the policy travels to the hub in
// the clear. Errors name the key's index, never its content.
func CheckJWKS(s string) error {
	if len(s) > MaxJWKSBytes {
		return fmt.Errorf("the key set is %d bytes, at most %d", len(s), MaxJWKSBytes)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal([]byte(s), &set); err != nil {
		return errors.New(`not a JSON Web Key Set ({"keys": [...]})`)
	}
	switch {
	case len(set.Keys) == 0:
		return errors.New("the key set has no keys")
	case len(set.Keys) > MaxJWKSKeys:
		return fmt.Errorf("the key set has %d keys, at most %d", len(set.Keys), MaxJWKSKeys)
	}
	for i, raw := range set.Keys {
		var k jwk
		if err := json.Unmarshal(raw, &k); err != nil {
			return fmt.Errorf("key %d is not a JSON Web Key", i)
		}
		if err := checkJWK(&k); err != nil {
			return fmt.Errorf("key %d: %w", i, err)
		}
	}
	return nil
}

// checkJWK checks one key.
func checkJWK(k *jwk) error {
	switch {
	case len(k.Kid) > maxJWTClaim:
		return fmt.Errorf("kid is over %d characters", maxJWTClaim)
	case k.Use != "" && k.Use != "sig":
		return fmt.Errorf("use %q: only signing keys (sig) verify tokens", truncate(k.Use))
	case k.D != "" || k.K != "" || k.Kty == "oct":
		return errors.New("a private or symmetric key is a secret: give only public keys (the policy is not one)")
	}
	algs := map[string][]string{
		"RSA": {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"},
		"EC":  {"ES256", "ES384", "ES512"}, "OKP": {"EdDSA"},
	}
	ok, known := algs[k.Kty]
	if !known {
		return fmt.Errorf("kty %q: use RSA, EC or OKP (Ed25519)", truncate(k.Kty))
	}
	if k.Alg != "" && !slices.Contains(ok, k.Alg) {
		return fmt.Errorf("alg %q is not one of %s for a %s key", truncate(k.Alg), strings.Join(ok, ", "), k.Kty)
	}
	b64 := func(field, v string) ([]byte, error) {
		b, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("%s is not base64url without padding", field)
		}
		return b, nil
	}
	switch k.Kty {
	case "RSA":
		n, err := b64("n", k.N)
		if err != nil {
			return err
		}
		e, err := b64("e", k.E)
		if err != nil {
			return err
		}
		if bits := new(big.Int).SetBytes(n).BitLen(); bits < minRSABits || bits > maxRSABits {
			return fmt.Errorf("an RSA modulus of %d bits: use %d to %d", bits, minRSABits, maxRSABits)
		}
		if ev := new(big.Int).SetBytes(e); len(e) > 4 || ev.Cmp(big.NewInt(3)) < 0 || ev.Bit(0) == 0 {
			return errors.New("the RSA exponent e is not an odd number of at most 32 bits")
		}
	case "EC":
		curves := map[string]struct {
			c    ecdh.Curve
			size int
			alg  string
		}{"P-256": {ecdh.P256(), 32, "ES256"}, "P-384": {ecdh.P384(), 48, "ES384"}, "P-521": {ecdh.P521(), 66, "ES512"}}
		c, ok := curves[k.Crv]
		if !ok {
			return fmt.Errorf("crv %q: use P-256, P-384 or P-521", truncate(k.Crv))
		}
		if k.Alg != "" && k.Alg != c.alg {
			return fmt.Errorf("alg %q does not fit curve %s (%s)", truncate(k.Alg), k.Crv, c.alg)
		}
		x, err := b64("x", k.X)
		if err != nil {
			return err
		}
		y, err := b64("y", k.Y)
		if err != nil {
			return err
		}
		if len(x) != c.size || len(y) != c.size {
			return fmt.Errorf("x and y of a %s key are %d bytes each", k.Crv, c.size)
		}
		if _, err := c.c.NewPublicKey(append(append([]byte{4}, x...), y...)); err != nil {
			return fmt.Errorf("the point (x, y) is not on curve %s", k.Crv)
		}
	case "OKP":
		if k.Crv != "Ed25519" {
			return fmt.Errorf("crv %q: use Ed25519", truncate(k.Crv))
		}
		x, err := b64("x", k.X)
		if err != nil {
			return err
		}
		if len(x) != 32 {
			return errors.New("x of an Ed25519 key is 32 bytes")
		}
	}
	return nil
}
