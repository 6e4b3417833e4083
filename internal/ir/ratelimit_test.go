package ir_test

import (
	"testing"
	"time"

	"kubelb.dev/kubelb/internal/ir"
)

// TestValidateGlobalRateLimit: a route's global rate limit needs the Config's rate-limit
// service (with an existing cluster), which is there only for such routes; the listeners
// serving it run the filter with that service; its key is printable, its rules have no burst
// and intervals of a second to a day; two routes of one key have the same rules.
func TestValidateGlobalRateLimit(t *testing.T) {
	t.Parallel()
	build := func(change func(c *ir.Config)) *ir.Config {
		svc := ir.RateLimitService{Domain: "tenant-a", Cluster: "kubelb/ratelimit"}
		limit := func(key string) *ir.GlobalRateLimit {
			return &ir.GlobalRateLimit{Key: key, Rules: []ir.RateLimitRule{{Requests: 6, Interval: ir.Duration(time.Minute)},
				{Requests: 1000, Interval: ir.Duration(24 * time.Hour), ClientCIDR: "10.0.0.0/8", Headers: []ir.RateLimitHeader{{Name: "x-user", Distinct: true}}}}}
		}
		c := &ir.Config{
			Listeners: []*ir.Listener{{Name: "http", Address: "0.0.0.0", Port: 20080, Protocol: ir.ProtocolHTTP, StatPrefix: "http", RouteConfig: "http", GlobalRateLimit: &svc}},
			Clusters: []*ir.Cluster{
				{Name: "web", StatName: "web", Protocol: ir.UpstreamHTTP1, ConnectTimeout: ir.Duration(1), MaxConnections: 1},
				{Name: "kubelb/ratelimit", StatName: "ratelimit", Protocol: ir.UpstreamHTTP2, ConnectTimeout: ir.Duration(1), MaxConnections: 1},
			},
			RouteConfigs: []*ir.RouteConfig{{Name: "http", VirtualHosts: []*ir.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*ir.Route{
				{Name: "a", Backends: []ir.WeightedCluster{{Cluster: "web", Weight: 1}}, GlobalRateLimit: limit("http/all/a")},
				{Name: "b", Backends: []ir.WeightedCluster{{Cluster: "web", Weight: 1}}, GlobalRateLimit: limit("http/all/b")},
			}}}}},
			RateLimitService: &ir.RateLimitService{Domain: "tenant-a", Cluster: "kubelb/ratelimit"},
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
	first := func(c *ir.Config) *ir.GlobalRateLimit {
		return c.RouteConfigs[0].VirtualHosts[0].Routes[0].GlobalRateLimit
	}
	for name, change := range map[string]func(c *ir.Config){
		"no service": func(c *ir.Config) { c.RateLimitService = nil },
		"service not needed": func(c *ir.Config) {
			c.RouteConfigs[0].VirtualHosts[0].Routes = c.RouteConfigs[0].VirtualHosts[0].Routes[:0]
		},
		"no cluster": func(c *ir.Config) {
			c.RateLimitService.Cluster = "gone"
			c.Listeners[0].GlobalRateLimit.Cluster = "gone"
		},
		"no domain":      func(c *ir.Config) { c.RateLimitService.Domain = ""; c.Listeners[0].GlobalRateLimit.Domain = "" },
		"filter missing": func(c *ir.Config) { c.Listeners[0].GlobalRateLimit = nil },
		"another service": func(c *ir.Config) {
			c.Listeners[0].GlobalRateLimit = &ir.RateLimitService{Domain: "tenant-b", Cluster: "kubelb/ratelimit"}
		},
		"no key":            func(c *ir.Config) { first(c).Key = "" },
		"key with a space":  func(c *ir.Config) { first(c).Key = "a b" },
		"a burst":           func(c *ir.Config) { first(c).Rules[0].Burst = 10 },
		"a week":            func(c *ir.Config) { first(c).Rules[0].Interval = ir.Duration(7 * 24 * time.Hour) },
		"no requests":       func(c *ir.Config) { first(c).Rules[0].Requests = 0 },
		"no rules":          func(c *ir.Config) { first(c).Rules = nil },
		"uncanonical range": func(c *ir.Config) { first(c).Rules[1].ClientCIDR = "10.1.2.3/8" },
		"one key, two limits": func(c *ir.Config) {
			c.RouteConfigs[0].VirtualHosts[0].Routes[1].GlobalRateLimit.Key = first(c).Key
			first(c).Rules[0].Requests = 7
		},
	} {
		if err := build(change).Validate(); err == nil {
			t.Errorf("%s: valid", name)
		}
	}
}
