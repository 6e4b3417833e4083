package ir

import (
	"errors"
	"fmt"
	"strings"
)

// APIKeyAuth asks a route's clients for an API key (Envoy's api_key_auth filter): a request
// without a key where Sources say, or with a key of no client, is answered 401. From a
// SecurityPolicy's apiKeyAuth.
type APIKeyAuth struct {
	// Credentials: each client's key, sorted by client, clients and keys unique. The keys are
	// secrets of the tenant's: they are never logged, and errors name clients only.
	Credentials []APIKeyCredential `json:"credentials"`
	// Sources are where a request carries its key, in order: the first found is used.
	Sources []APIKeySource `json:"sources"`
	// ForwardClientIDHeader (lower case) is the request header the client of a verified key
	// is written to ("" none).
	ForwardClientIDHeader string `json:"forwardClientIDHeader,omitempty"`
	// Sanitize removes the key from the request before the backend.
	Sanitize bool `json:"sanitize,omitempty"`
}

// APIKeyCredential is one client's key.
type APIKeyCredential struct {
	Client string `json:"client"`
	Key    string `json:"key"`
}

// APIKeySource is one place a request carries its key: exactly one of a header (lower case),
// a query parameter or a cookie.
type APIKeySource struct {
	Header string `json:"header,omitempty"`
	Param  string `json:"param,omitempty"`
	Cookie string `json:"cookie,omitempty"`
}

// Bounds of APIKeyAuth.
const (
	MaxAPIKeyCredentials = 4000
	MaxAPIKeySources     = 8
	maxAPIKeyString      = 256
)

// HasAPIKeyAuth reports whether a route of the configuration asks for an API key.
func (rc *RouteConfig) HasAPIKeyAuth() bool {
	return rc.anyRoute(func(r *Route) bool { return r.APIKeyAuth != nil })
}

// validate checks the credentials and sources (nil: no API keys). Errors name clients only.
func (a *APIKeyAuth) validate() error {
	if a == nil {
		return nil
	}
	printable := func(s string) bool {
		return s != "" && len(s) <= maxAPIKeyString && !strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r > '~' })
	}
	if len(a.Credentials) == 0 || len(a.Credentials) > MaxAPIKeyCredentials {
		return fmt.Errorf("API keys: %d credentials, want 1 to %d", len(a.Credentials), MaxAPIKeyCredentials)
	}
	clients, keys := make(map[string]bool, len(a.Credentials)), make(map[string]bool, len(a.Credentials))
	for i, c := range a.Credentials {
		if !printable(c.Client) || clients[c.Client] || (i > 0 && a.Credentials[i-1].Client > c.Client) {
			return fmt.Errorf("API keys: client %d: a printable name of its own, in order", i)
		}
		if !printable(c.Key) || keys[c.Key] {
			return fmt.Errorf("API keys: the key of client %q is empty, not printable or another client's", c.Client)
		}
		clients[c.Client], keys[c.Key] = true, true
	}
	if len(a.Sources) == 0 || len(a.Sources) > MaxAPIKeySources {
		return fmt.Errorf("API keys: %d sources, want 1 to %d", len(a.Sources), MaxAPIKeySources)
	}
	for i, s := range a.Sources {
		n := 0
		for _, v := range []string{s.Header, s.Param, s.Cookie} {
			if v != "" {
				n++
				if !printable(v) {
					return fmt.Errorf("API keys: source %d: not a name", i)
				}
			}
		}
		if n != 1 || s.Header != strings.ToLower(s.Header) {
			return fmt.Errorf("API keys: source %d: exactly one of a header (lower case), a parameter or a cookie", i)
		}
	}
	if h := a.ForwardClientIDHeader; h != "" && (!printable(h) || h != strings.ToLower(h) || strings.HasPrefix(h, ":")) {
		return errors.New("API keys: the client ID header is not a lower-case header name")
	}
	return nil
}
