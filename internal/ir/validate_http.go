package ir

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Bounds of what a route may carry in headers and CORS policies; the front ends bound their
// input below them.
const (
	MaxHeaderChanges = 64   // headers set, added or removed per list of a HeaderModifier
	MaxCORSOrigins   = 64   // allowed origins of a CORS policy
	MaxCORSHeaders   = 64   // allowed or exposed headers of a CORS policy
	MaxHeaderValue   = 4096 // bytes of a header value
	// MaxSessionName bounds the name of a session's cookie or header (Gateway API's own
	// bound of sessionName).
	MaxSessionName = 128
	// MaxSessionPath bounds the Path attribute of a session cookie.
	MaxSessionPath = 1024
	// MaxSessionTTL bounds a session cookie's lifetime: browsers cap Max-Age at 400 days
	// (RFC 6265bis).
	MaxSessionTTL = Duration(400 * 24 * time.Hour)
)

var (
	headerNameRE = regexp.MustCompile("^[a-z0-9!#$%&'*+.^_`|~-]{1,256}$")
	// cookieNameRE is an RFC 6265 cookie name (a token).
	cookieNameRE = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
	// sessionHeadersReserved are headers that cannot carry a session: they frame the
	// request or the connection, name the host, or carry cookies.
	sessionHeadersReserved = []string{"host", "connection", "keep-alive", "proxy-connection", "transfer-encoding",
		"upgrade", "te", "trailer", "content-length", "content-type", "cookie", "set-cookie", "authorization"}
	// originRE is the form of a CORS origin in the IR (CORSPolicy.AllowOrigins, "*" aside).
	originRE = regexp.MustCompile(`^https?://(\*|(\*\.)?[a-z0-9-]+(\.[a-z0-9-]+)*)(:[0-9]{1,5})?$`)
	// corsMethods are the methods a CORS policy may allow, besides "*".
	corsMethods = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}
)

// validate checks a header modifier: lower-case header names (never Host or a
// pseudo-header), values without control characters, bounded lists.
func (h *HeaderModifier) validate() error {
	if h == nil {
		return nil
	}
	if len(h.Set) > MaxHeaderChanges || len(h.Add) > MaxHeaderChanges || len(h.Remove) > MaxHeaderChanges {
		return fmt.Errorf("more than %d headers in a list", MaxHeaderChanges)
	}
	names := slices.Clone(h.Remove)
	for _, hd := range slices.Concat(h.Set, h.Add) {
		if len(hd.Value) > MaxHeaderValue || strings.ContainsFunc(hd.Value, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) {
			return fmt.Errorf("the value of header %q is too long or has control characters", hd.Name)
		}
		names = append(names, hd.Name)
	}
	for _, n := range names {
		if !headerNameRE.MatchString(n) || n == "host" {
			return fmt.Errorf("%q is not a lower-case header name that may be changed", n)
		}
	}
	return nil
}

// validate checks a CORS policy (nil: none).
func (c *CORSPolicy) validate() error {
	if c == nil {
		return nil
	}
	if len(c.AllowOrigins) > MaxCORSOrigins || len(c.AllowHeaders) > MaxCORSHeaders || len(c.ExposeHeaders) > MaxCORSHeaders || len(c.AllowMethods) > len(corsMethods) {
		return errors.New("too many origins, methods or headers")
	}
	if c.MaxAge == 0 {
		return errors.New("max age must be at least 1 second")
	}
	for _, o := range c.AllowOrigins {
		if o == "*" {
			if len(c.AllowOrigins) > 1 {
				return errors.New(`origin "*" with other origins`)
			}
			continue
		}
		if !originRE.MatchString(o) {
			return fmt.Errorf("%q is not a lower-case origin scheme://host[:port]", o)
		}
	}
	for _, m := range c.AllowMethods {
		if m == "*" && len(c.AllowMethods) > 1 || m != "*" && !slices.Contains(corsMethods, m) {
			return fmt.Errorf("method %q is not an HTTP method, or \"*\" with others", m)
		}
	}
	for _, list := range [][]string{c.AllowHeaders, c.ExposeHeaders} {
		for _, n := range list {
			if n == "*" && len(list) > 1 || n != "*" && !headerNameRE.MatchString(n) {
				return fmt.Errorf("%q is not a lower-case header name, or \"*\" with others", n)
			}
		}
	}
	return nil
}

// Validate checks a route's session persistence (nil: none): exactly one of a cookie (an
// RFC 6265 name, a path from "/" without control characters or ";", a lifetime of 0 or whole
// seconds up to MaxSessionTTL) and a header (a lower-case name that frames nothing), names of
// at most MaxSessionName bytes.
func (p *SessionPersistence) Validate() error {
	if p == nil {
		return nil
	}
	switch c := p.Cookie; {
	case (c == nil) == (p.Header == ""):
		return errors.New("want exactly one of a cookie and a header")
	case c != nil:
		if len(c.Name) > MaxSessionName || !cookieNameRE.MatchString(c.Name) {
			return fmt.Errorf("cookie name %q is not a token of at most %d bytes", c.Name, MaxSessionName)
		}
		if len(c.Path) > MaxSessionPath || !strings.HasPrefix(c.Path, "/") || strings.ContainsFunc(c.Path, func(r rune) bool { return r < 0x21 || r == 0x7f || r == ';' || r == ',' }) {
			return fmt.Errorf("cookie path %q is not a path of at most %d bytes without spaces, control characters, \";\" or \",\"", c.Path, MaxSessionPath)
		}
		if c.TTL < 0 || c.TTL > MaxSessionTTL || c.TTL%Duration(time.Second) != 0 {
			return fmt.Errorf("cookie lifetime %s; want 0 or whole seconds up to %s", c.TTL.D(), MaxSessionTTL.D())
		}
	default:
		if len(p.Header) > MaxSessionName || !headerNameRE.MatchString(p.Header) || slices.Contains(sessionHeadersReserved, p.Header) {
			return fmt.Errorf("%q is not a lower-case header name of at most %d bytes that may carry a session", p.Header, MaxSessionName)
		}
	}
	return nil
}
