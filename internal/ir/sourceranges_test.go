package ir_test

import (
	"fmt"
	"strings"
	"testing"

	"kubelb.dev/kubelb/internal/ir"
)

// TestParseSourceRange: ranges are read as Kubernetes reads loadBalancerSourceRanges (spaces
// trimmed, host bits cleared, IPv4 leading zeros decimal) and written in one canonical form;
// anything else is refused with the entry named.
func TestParseSourceRange(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"10.0.0.0/8":          "10.0.0.0/8",
		" 203.0.113.7/24 ":    "203.0.113.0/24",
		"010.001.0.0/16":      "10.1.0.0/16",
		"2001:DB8::1/32":      "2001:db8::/32",
		"0.0.0.0/0":           "0.0.0.0/0",
		"::/0":                "::/0",
		"192.0.2.1/32":        "192.0.2.1/32",
		"::ffff:10.0.0.0/104": "::ffff:10.0.0.0/104",
	} {
		if got, err := ir.ParseSourceRange(in); err != nil || got != want {
			t.Errorf("ParseSourceRange(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "office", "10.0.0.0", "10.0.0.0/33", "192.168.1.300/24", "fe80::1%eth0/64", "10.0.0.0/8,10.1.0.0/16", "2001:db8::/129"} {
		if got, err := ir.ParseSourceRange(in); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", strings.TrimSpace(in))) {
			t.Errorf("ParseSourceRange(%q) = %q, %v; want an error naming it", in, got, err)
		}
	}
}

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
