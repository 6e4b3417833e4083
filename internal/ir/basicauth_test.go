package ir_test

import (
	"fmt"
	"strings"
	"testing"

	"kubelb.dev/kubelb/internal/ir"
)

// TestValidateBasicAuth: a route's users are {SHA} htpasswd lines of distinct printable names,
// at most 256, newline-terminated; a listener serving a route with basic authentication runs
// the basic_auth filter, and only then. Errors name line numbers, never a line.
func TestValidateBasicAuth(t *testing.T) {
	t.Parallel()
	const alice = "alice:{SHA}tiY7sUhYKUwI5L3866kDY+ENcrQ=\n"
	build := func(change func(c *ir.Config)) *ir.Config {
		c := &ir.Config{
			Listeners: []*ir.Listener{{Name: "http", Address: "0.0.0.0", Port: 20080, Protocol: ir.ProtocolHTTP, StatPrefix: "http", RouteConfig: "http", BasicAuth: true}},
			Clusters:  []*ir.Cluster{{Name: "web", StatName: "web", Protocol: ir.UpstreamHTTP1, ConnectTimeout: ir.Duration(1), MaxConnections: 1}},
			RouteConfigs: []*ir.RouteConfig{{Name: "http", VirtualHosts: []*ir.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*ir.Route{
				{Name: "r", Backends: []ir.WeightedCluster{{Cluster: "web", Weight: 1}}, BasicAuth: &ir.BasicAuth{Users: alice}},
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
	users := func(u string) func(c *ir.Config) {
		return func(c *ir.Config) { c.RouteConfigs[0].VirtualHosts[0].Routes[0].BasicAuth.Users = u }
	}
	var many strings.Builder
	for i := range ir.MaxBasicAuthUsers + 1 {
		fmt.Fprintf(&many, "u%d:{SHA}tiY7sUhYKUwI5L3866kDY+ENcrQ=\n", i)
	}
	for name, change := range map[string]func(c *ir.Config){
		"empty":              users(""),
		"no final newline":   users(strings.TrimSuffix(alice, "\n")),
		"bcrypt":             users(alice + "bob:$2y$05$secret\n"),
		"not a SHA-1 digest": users("bob:{SHA}c2VjcmV0\n"),
		"repeated user":      users(alice + alice),
		"space in a name":    users("a b:{SHA}tiY7sUhYKUwI5L3866kDY+ENcrQ=\n"),
		"too many":           users(many.String()),
		"filter missing":     func(c *ir.Config) { c.Listeners[0].BasicAuth = false },
		"filter not needed":  func(c *ir.Config) { c.RouteConfigs[0].VirtualHosts[0].Routes[0].BasicAuth = nil },
	} {
		err := build(change).Validate()
		if err == nil {
			t.Errorf("%s: Validate accepted it", name)
		} else if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "c2VjcmV0") {
			t.Errorf("%s: the error shows a line: %v", name, err)
		}
	}
}
