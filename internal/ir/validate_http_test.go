package ir_test

import (
	"strings"
	"testing"
	"time"

	"kubelb.dev/kubelb/internal/ir"
)

// TestValidateHTTPRouteExtras covers what routes carry beyond matches and actions: header
// changes (of the route and of each backend), CORS policies and session persistence, and the
// listeners' CORS and stateful session filters that must run exactly where a CORS policy or
// session persistence is served.
func TestValidateHTTPRouteExtras(t *testing.T) {
	t.Parallel()
	cors := func() *ir.CORSPolicy {
		return &ir.CORSPolicy{AllowOrigins: []string{"https://www.foo.com", "https://*.bar.com", "http://*:8080"}, AllowMethods: []string{"GET"},
			AllowHeaders: []string{"x-a"}, ExposeHeaders: []string{"*"}, MaxAge: 5, AllowCredentials: true}
	}
	for name, tc := range map[string]struct {
		mutate func(*ir.Config, *ir.Route)
		want   string
	}{
		"valid": {func(*ir.Config, *ir.Route) {}, ""},
		"backend headers valid": {func(_ *ir.Config, r *ir.Route) {
			r.Backends[0].RequestHeaders = &ir.HeaderModifier{Set: []ir.Header{{Name: "backend", Value: "v1"}}, Remove: []string{"x-debug"}}
			r.Backends[0].ResponseHeaders = &ir.HeaderModifier{Add: []ir.Header{{Name: "x-by", Value: "v1"}}}
		}, ""},
		"backend sets Host": {func(_ *ir.Config, r *ir.Route) {
			r.Backends[0].RequestHeaders = &ir.HeaderModifier{Set: []ir.Header{{Name: "host", Value: "x"}}}
		}, `backend "a": "host" is not a lower-case header name`},
		"mirror with a host": {func(_ *ir.Config, r *ir.Route) {
			r.Mirrors = []ir.Mirror{{Cluster: "a", PerMillion: 1000000, Host: "copy.shop:8080"}}
		}, ""},
		"mirror host with a path": {func(_ *ir.Config, r *ir.Route) {
			r.Mirrors = []ir.Mirror{{Cluster: "a", PerMillion: 1000000, Host: "copy/x"}}
		}, `mirror host "copy/x" is not a host`},
		"route header with a newline": {func(_ *ir.Config, r *ir.Route) {
			r.RequestHeaders = &ir.HeaderModifier{Set: []ir.Header{{Name: "x-a", Value: "a\nb"}}}
		}, "control characters"},
		"upper-case header name": {func(_ *ir.Config, r *ir.Route) {
			r.ResponseHeaders = &ir.HeaderModifier{Remove: []string{"Server"}}
		}, "not a lower-case header name"},
		"too many header changes": {func(_ *ir.Config, r *ir.Route) {
			r.RequestHeaders = &ir.HeaderModifier{Remove: make([]string, ir.MaxHeaderChanges+1)}
		}, "more than 64 headers"},
		"headers on a TCP backend": {func(c *ir.Config, _ *ir.Route) {
			c.Listeners = append(c.Listeners, &ir.Listener{Name: "tcp", Address: "0.0.0.0", Port: 81, Protocol: ir.ProtocolTCP, StatPrefix: "tcp",
				Backends: []ir.WeightedCluster{{Cluster: "a", Weight: 1, RequestHeaders: &ir.HeaderModifier{Remove: []string{"x"}}}}})
		}, "only the backends of HTTP routes can"},
		"cors valid":                   {func(c *ir.Config, r *ir.Route) { r.CORS, c.Listeners[0].CORS = cors(), true }, ""},
		"cors without the filter":      {func(_ *ir.Config, r *ir.Route) { r.CORS = cors() }, "needs the CORS filter, but the listener does not run it"},
		"cors filter without policies": {func(c *ir.Config, _ *ir.Route) { c.Listeners[0].CORS = true }, "the CORS filter runs, but no route it serves needs it"},
		"cors filter on TCP": {func(c *ir.Config, _ *ir.Route) {
			c.Listeners = append(c.Listeners, &ir.Listener{Name: "tcp", Address: "0.0.0.0", Port: 81, Protocol: ir.ProtocolTCP, StatPrefix: "tcp", Cluster: "a", CORS: true})
		}, "the CORS filter on a TCP listener"},
		"cors without max age": {func(c *ir.Config, r *ir.Route) {
			r.CORS, c.Listeners[0].CORS = cors(), true
			r.CORS.MaxAge = 0
		}, "max age"},
		"cors origin of another scheme": {func(c *ir.Config, r *ir.Route) {
			r.CORS, c.Listeners[0].CORS = cors(), true
			r.CORS.AllowOrigins = []string{"ftp://x.example.com"}
		}, "not a lower-case origin"},
		"cors any origin among others": {func(c *ir.Config, r *ir.Route) {
			r.CORS, c.Listeners[0].CORS = cors(), true
			r.CORS.AllowOrigins = append(r.CORS.AllowOrigins, "*")
		}, `origin "*" with other origins`},
		"cors unknown method": {func(c *ir.Config, r *ir.Route) {
			r.CORS, c.Listeners[0].CORS = cors(), true
			r.CORS.AllowMethods = []string{"FETCH"}
		}, `method "FETCH"`},
		"cors any header among others": {func(c *ir.Config, r *ir.Route) {
			r.CORS, c.Listeners[0].CORS = cors(), true
			r.CORS.AllowHeaders = []string{"*", "x-a"}
		}, `"*" with others`},
		"cors too many origins": {func(c *ir.Config, r *ir.Route) {
			r.CORS, c.Listeners[0].CORS = cors(), true
			r.CORS.AllowOrigins = make([]string, ir.MaxCORSOrigins+1)
		}, "too many origins"},
		"session cookie valid": {func(c *ir.Config, r *ir.Route) {
			r.SessionPersistence, c.Listeners[0].StatefulSession = &ir.SessionPersistence{Cookie: &ir.SessionCookie{Name: "shop", Path: "/cart", TTL: ir.Duration(time.Hour)}}, true
		}, ""},
		"session header valid": {func(c *ir.Config, r *ir.Route) {
			r.SessionPersistence, c.Listeners[0].StatefulSession = &ir.SessionPersistence{Header: "x-session"}, true
		}, ""},
		"session without the filter": {func(_ *ir.Config, r *ir.Route) {
			r.SessionPersistence = &ir.SessionPersistence{Header: "x-session"}
		}, "needs the stateful session filter, but the listener does not run it"},
		"session filter without sessions": {func(c *ir.Config, _ *ir.Route) { c.Listeners[0].StatefulSession = true }, "the stateful session filter runs, but no route it serves needs it"},
		"session filter on TCP": {func(c *ir.Config, _ *ir.Route) {
			c.Listeners = append(c.Listeners, &ir.Listener{Name: "tcp", Address: "0.0.0.0", Port: 81, Protocol: ir.ProtocolTCP, StatPrefix: "tcp", Cluster: "a", StatefulSession: true})
		}, "the stateful session filter on a TCP listener"},
		"session without backends": {func(c *ir.Config, r *ir.Route) {
			r.Backends, r.DirectResponse = nil, &ir.DirectResponse{Status: 500}
			r.SessionPersistence, c.Listeners[0].StatefulSession = &ir.SessionPersistence{Header: "x-session"}, true
		}, "session persistence without backends"},
		"session cookie and header": {func(c *ir.Config, r *ir.Route) {
			r.SessionPersistence, c.Listeners[0].StatefulSession = &ir.SessionPersistence{Cookie: &ir.SessionCookie{Name: "a", Path: "/"}, Header: "x-a"}, true
		}, "exactly one of a cookie and a header"},
		"session neither cookie nor header": {func(c *ir.Config, r *ir.Route) {
			r.SessionPersistence, c.Listeners[0].StatefulSession = &ir.SessionPersistence{}, true
		}, "exactly one of a cookie and a header"},
		"session cookie name with a space": {func(c *ir.Config, r *ir.Route) {
			r.SessionPersistence, c.Listeners[0].StatefulSession = &ir.SessionPersistence{Cookie: &ir.SessionCookie{Name: "a b", Path: "/"}}, true
		}, `cookie name "a b" is not a token`},
		"session cookie name too long": {func(c *ir.Config, r *ir.Route) {
			r.SessionPersistence, c.Listeners[0].StatefulSession = &ir.SessionPersistence{Cookie: &ir.SessionCookie{Name: strings.Repeat("a", ir.MaxSessionName+1), Path: "/"}}, true
		}, "is not a token of at most 128 bytes"},
		"session cookie path with a semicolon": {func(c *ir.Config, r *ir.Route) {
			r.SessionPersistence, c.Listeners[0].StatefulSession = &ir.SessionPersistence{Cookie: &ir.SessionCookie{Name: "a", Path: "/a;Domain=evil"}}, true
		}, "cookie path"},
		"session cookie path relative": {func(c *ir.Config, r *ir.Route) {
			r.SessionPersistence, c.Listeners[0].StatefulSession = &ir.SessionPersistence{Cookie: &ir.SessionCookie{Name: "a", Path: "a"}}, true
		}, "cookie path"},
		"session cookie lifetime in parts of a second": {func(c *ir.Config, r *ir.Route) {
			r.SessionPersistence, c.Listeners[0].StatefulSession = &ir.SessionPersistence{Cookie: &ir.SessionCookie{Name: "a", Path: "/", TTL: ir.Duration(1500 * time.Millisecond)}}, true
		}, "want 0 or whole seconds"},
		"session cookie lifetime too long": {func(c *ir.Config, r *ir.Route) {
			r.SessionPersistence, c.Listeners[0].StatefulSession = &ir.SessionPersistence{Cookie: &ir.SessionCookie{Name: "a", Path: "/", TTL: ir.MaxSessionTTL + ir.Duration(time.Second)}}, true
		}, "want 0 or whole seconds up to"},
		"session header Host": {func(c *ir.Config, r *ir.Route) {
			r.SessionPersistence, c.Listeners[0].StatefulSession = &ir.SessionPersistence{Header: "host"}, true
		}, "may carry a session"},
		"session header upper case": {func(c *ir.Config, r *ir.Route) {
			r.SessionPersistence, c.Listeners[0].StatefulSession = &ir.SessionPersistence{Header: "X-Session"}, true
		}, "not a lower-case header name"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := &ir.Route{Name: "r", Backends: []ir.WeightedCluster{{Cluster: "a", Weight: 1}}}
			_, ca := tcp("a", 80)
			cfg := &ir.Config{
				Listeners:    []*ir.Listener{{Name: "http", Address: "0.0.0.0", Port: 80, Protocol: ir.ProtocolHTTP, StatPrefix: "http", RouteConfig: "rc"}},
				RouteConfigs: []*ir.RouteConfig{{Name: "rc", VirtualHosts: []*ir.VirtualHost{{Name: "v", Domains: []string{"*"}, Routes: []*ir.Route{r}}}}},
				Clusters:     []*ir.Cluster{ca},
			}
			tc.mutate(cfg, r)
			wantValidation(t, cfg, tc.want)
		})
	}
}

// TestValidateWithChecksWhatChanged checks that ValidateWith, given what it found valid in
// the last Config, finds what Validate finds in a Config sharing that one's elements: a new
// virtual host with an invalid route beside kept ones, a kept virtual host whose cluster is
// gone, a new route configuration asking for a filter its listener lacks.
func TestValidateWithChecksWhatChanged(t *testing.T) {
	t.Parallel()
	_, ca := tcp("a", 80)
	_, cb := tcp("b", 81)
	route := func(name, cluster string) *ir.Route {
		return &ir.Route{Name: name, Backends: []ir.WeightedCluster{{Cluster: cluster, Weight: 1}}}
	}
	vhA := &ir.VirtualHost{Name: "a", Domains: []string{"a.example"}, Routes: []*ir.Route{route("ra", "a")}}
	vhB := &ir.VirtualHost{Name: "b", Domains: []string{"b.example"}, Routes: []*ir.Route{route("rb", "b")}}
	rc := &ir.RouteConfig{Name: "rc", VirtualHosts: []*ir.VirtualHost{vhA, vhB}}
	listener := &ir.Listener{Name: "http", Address: "0.0.0.0", Port: 80, Protocol: ir.ProtocolHTTP, StatPrefix: "http", RouteConfig: "rc"}
	first := &ir.Config{Listeners: []*ir.Listener{listener}, RouteConfigs: []*ir.RouteConfig{rc}, Clusters: []*ir.Cluster{ca, cb}}
	for name, next := range map[string]*ir.Config{
		"a new virtual host with a route to no cluster": {Listeners: first.Listeners, Clusters: first.Clusters, RouteConfigs: []*ir.RouteConfig{{Name: "rc",
			VirtualHosts: []*ir.VirtualHost{vhA, vhB, {Name: "c", Domains: []string{"c.example"}, Routes: []*ir.Route{route("rc", "missing")}}}}}},
		"a new virtual host repeating a kept one's domain": {Listeners: first.Listeners, Clusters: first.Clusters, RouteConfigs: []*ir.RouteConfig{{Name: "rc",
			VirtualHosts: []*ir.VirtualHost{vhA, vhB, {Name: "c", Domains: []string{"a.example"}, Routes: []*ir.Route{route("rc", "a")}}}}}},
		"a kept virtual host's cluster gone":        {Listeners: first.Listeners, Clusters: []*ir.Cluster{ca}, RouteConfigs: first.RouteConfigs},
		"a kept route configuration's cluster gone": {Listeners: first.Listeners, Clusters: []*ir.Cluster{cb}, RouteConfigs: []*ir.RouteConfig{rc}},
		"a route with CORS on a listener without the filter": {Listeners: first.Listeners, Clusters: first.Clusters, RouteConfigs: []*ir.RouteConfig{{Name: "rc",
			VirtualHosts: []*ir.VirtualHost{vhA, {Name: "b", Domains: []string{"b.example"}, Routes: []*ir.Route{{Name: "rb", CORS: &ir.CORSPolicy{AllowOrigins: []string{"*"}},
				Backends: []ir.WeightedCluster{{Cluster: "b", Weight: 1}}}}}}}}},
	} {
		var memo ir.ValidationMemo
		if err := first.ValidateWith(&memo); err != nil {
			t.Fatalf("%s: the first Config: %v", name, err)
		}
		want := next.Validate()
		if want == nil {
			t.Fatalf("%s: Validate finds nothing; the case must be invalid", name)
		}
		if got := next.ValidateWith(&memo); got == nil || got.Error() != want.Error() {
			t.Errorf("%s: ValidateWith: %v, want %v", name, got, want)
		}
		// After a failure nothing is kept: the first Config is checked whole again.
		if err := first.ValidateWith(&memo); err != nil {
			t.Errorf("%s: the first Config again: %v", name, err)
		}
	}
}
