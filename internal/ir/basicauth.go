package ir

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// BasicAuth asks a route's clients for a user name and password (HTTP Basic authentication,
// Envoy's basic_auth filter): a request without credentials, or with credentials of no user,
// is answered 401. From a SecurityPolicy's basicAuth or an Ingress's auth-type basic.
type BasicAuth struct {
	// Users in htpasswd format, one "user:{SHA}<base64 of the SHA-1 digest>" line per user,
	// each ending with a newline: at most MaxBasicAuthUsers users, MaxBasicAuthBytes bytes.
	// A secret of the tenant's: it is never logged.
	Users string `json:"users"`
}

// Bounds of BasicAuth.Users.
const (
	MaxBasicAuthUsers = 256
	MaxBasicAuthBytes = 64 * 1024
)

// HasBasicAuth reports whether a route of the configuration asks for basic authentication.
func (rc *RouteConfig) HasBasicAuth() bool {
	return rc.anyRoute(func(r *Route) bool { return r.BasicAuth != nil })
}

// validate checks the users' lines (nil: no basic authentication). Errors name line numbers
// only.
func (b *BasicAuth) validate() error {
	if b == nil {
		return nil
	}
	if len(b.Users) > MaxBasicAuthBytes || !strings.HasSuffix(b.Users, "\n") {
		return fmt.Errorf("basic auth: users are empty, over %d bytes or not newline-terminated", MaxBasicAuthBytes)
	}
	lines := strings.Split(strings.TrimSuffix(b.Users, "\n"), "\n")
	if len(lines) > MaxBasicAuthUsers {
		return fmt.Errorf("basic auth: %d users, at most %d", len(lines), MaxBasicAuthUsers)
	}
	seen := make(map[string]bool, len(lines))
	for i, line := range lines {
		user, sha, ok := strings.Cut(line, ":{SHA}")
		if !ok || user == "" || seen[user] || strings.ContainsFunc(user, func(r rune) bool { return r <= ' ' || r > '~' || r == ':' }) {
			return fmt.Errorf("basic auth: line %d: not a user of its own with a printable name", i+1)
		}
		seen[user] = true
		if d, err := base64.StdEncoding.DecodeString(sha); err != nil || len(d) != 20 {
			return errors.New("basic auth: line " + fmt.Sprint(i+1) + ": not a {SHA} hash")
		}
	}
	return nil
}
