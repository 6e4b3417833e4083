package ir_test

import (
	"fmt"
	"testing"

	"kubelb.dev/kubelb/internal/ir"
)

// TestValidateSourceRanges: the IR holds canonical, sorted, unique ranges, at most 64, on TCP and
// UDP listeners and on routes only; a listener serving routes with ranges runs the RBAC filter,
// and only then.
func TestValidateSourceRanges(t *testing.T) {
	t.Parallel()
	build := func(change func(c *ir.Config)) *ir.Config {
		l, cl := tcp("tcp", 20001)
		l.SourceRanges = []string{"10.0.0.0/8", "192.0.2.0/24"}
		web := &ir.Cluster{Name: "web", StatName: "web", Protocol: ir.UpstreamHTTP1, ConnectTimeout: ir.Duration(1), MaxConnections: 1}
		c := &ir.Config{
			Listeners: []*ir.Listener{l, {Name: "http", Address: "0.0.0.0", Port: 20080, Protocol: ir.ProtocolHTTP, StatPrefix: "http", RouteConfig: "http", RouteSourceRanges: true}},
			Clusters:  []*ir.Cluster{cl, web},
			RouteConfigs: []*ir.RouteConfig{{Name: "http", VirtualHosts: []*ir.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*ir.Route{
				{Name: "r", Backends: []ir.WeightedCluster{{Cluster: "web", Weight: 1}}, SourceRanges: []string{"2001:db8::/32"}},
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
	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprintf("10.0.%d.0/24", i+100)
	}
	for name, change := range map[string]func(c *ir.Config){
		"not canonical":       func(c *ir.Config) { c.Listeners[1].SourceRanges = []string{"10.0.0.1/8"} },
		"not a CIDR":          func(c *ir.Config) { c.Listeners[1].SourceRanges = []string{"office"} },
		"not sorted":          func(c *ir.Config) { c.Listeners[1].SourceRanges = []string{"192.0.2.0/24", "10.0.0.0/8"} },
		"repeated":            func(c *ir.Config) { c.Listeners[1].SourceRanges = []string{"10.0.0.0/8", "10.0.0.0/8"} },
		"too many":            func(c *ir.Config) { c.Listeners[1].SourceRanges = many },
		"on an HTTP listener": func(c *ir.Config) { c.Listeners[0].SourceRanges = []string{"10.0.0.0/8"} },
		"route not canonical": func(c *ir.Config) {
			c.RouteConfigs[0].VirtualHosts[0].Routes[0].SourceRanges = []string{"2001:DB8::/32"}
		},
		"RBAC filter missing":    func(c *ir.Config) { c.Listeners[0].RouteSourceRanges = false },
		"RBAC filter not needed": func(c *ir.Config) { c.RouteConfigs[0].VirtualHosts[0].Routes[0].SourceRanges = nil },
	} {
		if err := build(change).Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
}
