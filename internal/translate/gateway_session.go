package translate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/internal/ir"
)

// sessionRule is a rule's session persistence as sessionPersistence reads it: the IR's, but
// for the cookie's path, which each match of the rule gives (at).
type sessionRule struct{ p *ir.SessionPersistence }

// sessionPersistence reads a rule's sessionPersistence (nil: none). name is the session's name
// when the rule gives none. What Envoy cannot do is reported through warn (Warnings
// UnsupportedPersistence) and left out; a session that cannot be kept at all (an unknown
// type, a name that is no cookie or header name, a timeout that is no duration) is off for
// the rule, which is still served.
func sessionPersistence(sp *gwv1.SessionPersistence, name string, warn func(format string, args ...any)) sessionRule {
	if sp == nil {
		return sessionRule{}
	}
	off := func(format string, args ...any) sessionRule {
		warn("sessionPersistence: "+format+"; session persistence is off for the rule", args...)
		return sessionRule{}
	}
	if sp.SessionName != nil {
		name = *sp.SessionName
	}
	if len(name) > ir.MaxSessionName {
		return off("sessionName is longer than %d bytes", ir.MaxSessionName)
	}
	ttl, err := gatewayDuration(sp.AbsoluteTimeout)
	if err != "" {
		return off("absoluteTimeout: %s", err)
	}
	typ := gwv1.CookieBasedSessionPersistence
	if sp.Type != nil {
		typ = *sp.Type
	}
	switch typ {
	case gwv1.HeaderBasedSessionPersistence:
		p := &ir.SessionPersistence{Header: strings.ToLower(name)}
		if p.Validate() != nil {
			return off("sessionName %q is not a header name that may carry a session (a token; not Host, Cookie, Authorization or one that frames the request)", truncate(name))
		}
		if ttl > 0 {
			warn("sessionPersistence: absoluteTimeout is not yet supported for Header sessions (Envoy's header sessions have no lifetime); ignored")
		}
		if sp.CookieConfig != nil {
			warn("sessionPersistence: cookieConfig applies to Cookie sessions only; ignored")
		}
		return sessionRule{p}
	case gwv1.CookieBasedSessionPersistence:
	default:
		return off("type %q is not supported (use Cookie or Header)", truncate(string(typ)))
	}
	cookie := &ir.SessionCookie{Name: name, Path: "/"}
	if (&ir.SessionPersistence{Cookie: cookie}).Validate() != nil {
		return off("sessionName %q is not a cookie name (a token: letters, digits and !#$%%&'*+-.^_`|~)", truncate(name))
	}
	lifetime := gwv1.SessionCookieLifetimeType
	if sp.CookieConfig != nil && sp.CookieConfig.LifetimeType != nil {
		lifetime = *sp.CookieConfig.LifetimeType
	}
	switch lifetime {
	case gwv1.PermanentCookieLifetimeType:
		if ttl == 0 {
			warn("sessionPersistence: a Permanent cookie needs absoluteTimeout; the cookie is a session cookie")
			break
		}
		if ttl > ir.MaxSessionTTL.D() {
			warn("sessionPersistence: absoluteTimeout %s is longer than browsers keep cookies; %s is used", ttl, ir.MaxSessionTTL.D())
			ttl = ir.MaxSessionTTL.D()
		}
		// Max-Age counts whole seconds: a part of a second is rounded up.
		if r := ttl % time.Second; r != 0 {
			ttl += time.Second - r
		}
		cookie.TTL = ir.Duration(ttl)
	case gwv1.SessionCookieLifetimeType:
		if ttl > 0 {
			warn("sessionPersistence: absoluteTimeout with lifetimeType Session is not yet supported (Envoy bounds a session only by the cookie's Max-Age, which makes it Permanent); the cookie is a session cookie without a limit")
		}
	default:
		return off("cookieConfig.lifetimeType %q is not supported (use Session or Permanent)", truncate(string(lifetime)))
	}
	return sessionRule{&ir.SessionPersistence{Cookie: cookie}}
}

// at is the session persistence of the rule's match m: a cookie's Path is the match's exact
// path or path prefix (GEP-1619), "/" for other matches and for paths a cookie cannot carry.
func (s sessionRule) at(m ir.RouteMatch) *ir.SessionPersistence {
	if s.p == nil || s.p.Cookie == nil {
		return s.p
	}
	c := *s.p.Cookie
	if path := m.PathExact + m.PathPrefix; path != "" {
		c.Path = path
		if (&ir.SessionPersistence{Cookie: &c}).Validate() != nil {
			c.Path = "/"
		}
	}
	return &ir.SessionPersistence{Cookie: &c}
}

// defaultSessionName is the session name of rule i of a route that gives none: kubelb-session-
// and 8 hex digits of the route's namespace, name and the rule, so that rules do not share
// sessions by accident.
func defaultSessionName(namespace, name string, rule int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%d", namespace, name, rule))
	return "kubelb-session-" + hex.EncodeToString(sum[:4])
}
