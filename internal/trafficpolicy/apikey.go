package trafficpolicy

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// API keys (a SecurityPolicy's apiKeyAuth): the policy names Secrets of its namespace, each
// key of a Secret a client ID and its value the client's API key. The Route carries the
// Secrets' names only; the ccm mirrors the Secrets to the hub, where the manager reads the
// keys (ParseAPIKeys).

// Bounds of an apiKeyAuth.
const (
	// MaxAPIKeySecrets bounds credentialRefs, MaxAPIKeySources the places a key is read from.
	MaxAPIKeySecrets = 4
	MaxAPIKeySources = 8
	// MaxAPIKeyClients bounds the clients of one policy (all its Secrets), MaxAPIKeyLength
	// one key.
	MaxAPIKeyClients = 1000
	MaxAPIKeyLength  = 256
)

// servedAPIKeyAuth is the tree of apiKeyAuth fields kubelb serves.
var servedAPIKeyAuth = map[string]any{
	"credentialRefs":        nil,
	"extractFrom":           nil,
	"forwardClientIDHeader": nil,
	"sanitize":              nil,
}

// APIKeyAuth is a checked apiKeyAuth: the Secrets of the keys, where requests carry them (in
// order), the header the client ID is forwarded in ("" none), and whether the key is removed
// before the backend.
type APIKeyAuth struct {
	Secrets               []string
	Sources               []APIKeySource
	ForwardClientIDHeader string
	Sanitize              bool
}

// APIKeySource is one place a request carries its key: exactly one of a header (lower case),
// a query parameter or a cookie.
type APIKeySource struct {
	Header, Param, Cookie string
}

// resolveAPIKeyAuth checks an apiKeyAuth of a policy of namespace ns.
func resolveAPIKeyAuth(ns string, a *v1alpha1.SecurityAPIKeyAuth) (*APIKeyAuth, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	out := &APIKeyAuth{Sanitize: a.Sanitize != nil && *a.Sanitize}
	switch n := len(a.CredentialRefs); {
	case n == 0:
		bad("apiKeyAuth.credentialRefs is empty")
	case n > MaxAPIKeySecrets:
		bad("apiKeyAuth.credentialRefs has %d Secrets, at most %d", n, MaxAPIKeySecrets)
	}
	for i, ref := range a.CredentialRefs {
		name, err := secretRef(fmt.Sprintf("apiKeyAuth.credentialRefs[%d]", i), ns, ref)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !slices.Contains(out.Secrets, name) {
			out.Secrets = append(out.Secrets, name)
		}
	}
	for i, e := range a.ExtractFrom {
		field := fmt.Sprintf("apiKeyAuth.extractFrom[%d]", i)
		kinds := 0
		for _, l := range [][]string{e.Headers, e.Params, e.Cookies} {
			if len(l) > 0 {
				kinds++
			}
		}
		if kinds != 1 {
			bad("%s: exactly one of headers, params or cookies", field)
			continue
		}
		add := func(kind, name string, src APIKeySource) {
			if !headerNameRE.MatchString(name) || len(name) > MaxNameLength {
				bad("%s.%s %q is not a name (a token of at most %d characters)", field, kind, truncate(name), MaxNameLength)
				return
			}
			if !slices.Contains(out.Sources, src) {
				out.Sources = append(out.Sources, src)
			}
		}
		for _, h := range e.Headers {
			add("headers", h, APIKeySource{Header: strings.ToLower(h)})
		}
		for _, p := range e.Params {
			add("params", p, APIKeySource{Param: p})
		}
		for _, c := range e.Cookies {
			add("cookies", c, APIKeySource{Cookie: c})
		}
	}
	switch n := len(out.Sources); {
	case n == 0 && len(a.ExtractFrom) == 0:
		bad("apiKeyAuth.extractFrom is empty: say where requests carry the key")
	case n > MaxAPIKeySources:
		bad("apiKeyAuth.extractFrom names %d places, at most %d", n, MaxAPIKeySources)
	}
	if h := a.ForwardClientIDHeader; h != "" {
		l := strings.ToLower(h)
		switch {
		case len(h) > MaxNameLength || len(validation.IsHTTPHeaderName(h)) > 0:
			bad("apiKeyAuth.forwardClientIDHeader %q is not an HTTP header name", truncate(h))
		case slices.Contains(hopByHop, l) || strings.HasPrefix(l, "x-envoy-"):
			bad("apiKeyAuth.forwardClientIDHeader %q cannot be set by a policy (a connection's header, Host or Envoy's own)", truncate(h))
		default:
			out.ForwardClientIDHeader = l
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// APIKey is one client's key.
type APIKey struct {
	Client, Key string
}

// ParseAPIKeys reads the API keys of a Secret (its data: client ID → key), sorted by client.
// Its errors name client IDs, never keys.
func ParseAPIKeys(data map[string][]byte) ([]APIKey, error) {
	var errs []error
	out := make([]APIKey, 0, len(data))
	for client, key := range data {
		switch {
		case !headerValueOK(client) || len(client) > MaxNameLength:
			errs = append(errs, fmt.Errorf("client ID %q: printable characters, at most %d", truncate(client), MaxNameLength))
		case len(key) == 0 || len(key) > MaxAPIKeyLength || !headerValueOK(string(key)):
			errs = append(errs, fmt.Errorf("the key of client %s: 1 to %d printable characters without spaces", truncate(client), MaxAPIKeyLength))
		default:
			out = append(out, APIKey{Client: client, Key: string(key)})
		}
	}
	if len(data) == 0 {
		errs = append(errs, errors.New("the Secret holds no key"))
	}
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return nil, errors.Join(errs...)
	}
	slices.SortFunc(out, func(a, b APIKey) int { return strings.Compare(a.Client, b.Client) })
	return out, nil
}

// headerValueOK tells whether s can travel in a header or query string as it is: visible
// ASCII without spaces.
func headerValueOK(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r > '~' {
			return false
		}
	}
	return true
}
