package translator

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	statefulsessionv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/stateful_session/v3"
	cookiev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/stateful_session/cookie/v3"
	headerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/stateful_session/header/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/type/http/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"kubelb.dev/kubelb/internal/ir"
)

// FilterStatefulSession is Envoy's stateful session filter: in the HTTP connection managers
// of listeners with ir.Listener.StatefulSession it has no session state of its own (it does
// nothing), and the routes with session persistence give it theirs
// (typed_per_filter_config), so only they keep sessions.
const FilterStatefulSession = "envoy.filters.http.stateful_session"

// Envoy's session state extensions.
const (
	sessionStateCookie = "envoy.http.stateful_session.cookie"
	sessionStateHeader = "envoy.http.stateful_session.header"
)

// statefulSessionPerRoute is a route's session persistence for the stateful session filter.
// The session is not strict: a request naming an endpoint the route no longer has goes to
// another (and gets a new session), as Gateway API asks.
func statefulSessionPerRoute(p *ir.SessionPersistence, errs *[]error) *statefulsessionv3.StatefulSessionPerRoute {
	state := &corev3.TypedExtensionConfig{Name: sessionStateHeader}
	if c := p.Cookie; c != nil {
		cookie := &httpv3.Cookie{Name: c.Name, Path: c.Path}
		if c.TTL > 0 {
			cookie.Ttl = durationpb.New(c.TTL.D())
		}
		state.Name, state.TypedConfig = sessionStateCookie, mustPack(errs, &cookiev3.CookieBasedSessionState{Cookie: cookie})
	} else {
		state.TypedConfig = mustPack(errs, &headerv3.HeaderBasedSessionState{Name: p.Header})
	}
	return &statefulsessionv3.StatefulSessionPerRoute{Override: &statefulsessionv3.StatefulSessionPerRoute_StatefulSession{
		StatefulSession: &statefulsessionv3.StatefulSession{SessionState: state},
	}}
}
