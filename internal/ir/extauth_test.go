package ir_test

import (
	"strings"
	"testing"

	"kubelb.dev/kubelb/internal/ir"
)

// TestValidateExtAuth: a listener runs exactly the external authorization services its routes
// ask, sorted, at most 8, each with an existing cluster, a path and lower-case header names;
// a gRPC service has no path nor headers to the backend.
func TestValidateExtAuth(t *testing.T) {
	t.Parallel()
	build := func(change func(c *ir.Config)) *ir.Config {
		c := &ir.Config{
			Listeners: []*ir.Listener{{Name: "http", Address: "0.0.0.0", Port: 20080, Protocol: ir.ProtocolHTTP, StatPrefix: "http", RouteConfig: "http",
				ExtAuth: []ir.ExtAuthService{{Name: "a", Cluster: "auth", Path: "/check", HeadersToExtAuth: []string{"x-tenant"}, HeadersToBackend: []string{"x-user"}}}}},
			Clusters: []*ir.Cluster{
				{Name: "web", StatName: "web", Protocol: ir.UpstreamHTTP1, ConnectTimeout: ir.Duration(1), MaxConnections: 1},
				{Name: "auth", StatName: "auth", Protocol: ir.UpstreamHTTP1, ConnectTimeout: ir.Duration(1), MaxConnections: 1},
			},
			RouteConfigs: []*ir.RouteConfig{{Name: "http", VirtualHosts: []*ir.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*ir.Route{
				{Name: "r", Backends: []ir.WeightedCluster{{Cluster: "web", Weight: 1}}, ExtAuth: "a"},
			}}}}},
		}
		c.Normalize()
		if change != nil {
			change(c)
		}
		return c
	}
	if err := build(nil).Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	if err := build(func(c *ir.Config) {
		c.Listeners[0].ExtAuth[0].Path, c.Listeners[0].ExtAuth[0].PathOverride = "", "/oauth2/auth"
	}).Validate(); err != nil {
		t.Fatalf("a path override (auth-url): %v", err)
	}
	// The longest name a translation makes: a Route, a namespace and a policy of the longest
	// Kubernetes names.
	longest := build(func(c *ir.Config) {
		n := strings.Repeat("r", 253) + "/" + strings.Repeat("n", 63) + "/" + strings.Repeat("p", 253)
		c.Listeners[0].ExtAuth[0].Name, c.RouteConfigs[0].VirtualHosts[0].Routes[0].ExtAuth = n, n
	})
	if err := longest.Validate(); err != nil {
		t.Fatalf("the longest name: %v", err)
	}
	svc := func(f func(s *ir.ExtAuthService)) func(c *ir.Config) {
		return func(c *ir.Config) { f(&c.Listeners[0].ExtAuth[0]) }
	}
	for name, change := range map[string]func(c *ir.Config){
		"filter missing":          func(c *ir.Config) { c.Listeners[0].ExtAuth = nil },
		"filter not needed":       func(c *ir.Config) { c.RouteConfigs[0].VirtualHosts[0].Routes[0].ExtAuth = "" },
		"another service asked":   func(c *ir.Config) { c.RouteConfigs[0].VirtualHosts[0].Routes[0].ExtAuth = "b" },
		"no cluster":              svc(func(s *ir.ExtAuthService) { s.Cluster = "gone" }),
		"path without /":          svc(func(s *ir.ExtAuthService) { s.Path = "check" }),
		"path with a query":       svc(func(s *ir.ExtAuthService) { s.Path = "/check?x=1" }),
		"path and path override":  svc(func(s *ir.ExtAuthService) { s.PathOverride = "/auth" }),
		"path override without /": svc(func(s *ir.ExtAuthService) { s.Path, s.PathOverride = "", "auth" }),
		"upper-case header":       svc(func(s *ir.ExtAuthService) { s.HeadersToBackend = []string{"X-User"} }),
		"header with a colon":     svc(func(s *ir.ExtAuthService) { s.HeadersToExtAuth = []string{":path"} }),
		"gRPC with a path":        svc(func(s *ir.ExtAuthService) { s.GRPC = true }),
		"repeated":                func(c *ir.Config) { c.Listeners[0].ExtAuth = append(c.Listeners[0].ExtAuth, c.Listeners[0].ExtAuth[0]) },
		"too many": func(c *ir.Config) {
			for i := range ir.MaxListenerExtAuths {
				c.Listeners[0].ExtAuth = append(c.Listeners[0].ExtAuth, ir.ExtAuthService{Name: "b" + string(rune('a'+i)), Cluster: "auth"})
			}
		},
		"on a TCP listener": func(c *ir.Config) { c.Listeners[0].Protocol = ir.ProtocolTCP },
		"name too long": func(c *ir.Config) {
			long := strings.Repeat("n", 641)
			c.Listeners[0].ExtAuth[0].Name, c.RouteConfigs[0].VirtualHosts[0].Routes[0].ExtAuth = long, long
		},
	} {
		if err := build(change).Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
}
