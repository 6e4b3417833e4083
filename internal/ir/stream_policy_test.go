package ir_test

import (
	"strings"
	"testing"

	"kubelb.dev/kubelb/internal/ir"
)

// TestValidateStreamPolicies: an authorization on a TCP listener or a chain that proxies
// (never on a UDP listener, nor a chain serving HTTP), a hash on a chain that proxies; TCP
// clusters take the traffic settings that act on connections, UDP clusters a load balancer
// only.
func TestValidateStreamPolicies(t *testing.T) {
	t.Parallel()
	allow := &ir.Authorization{Rules: []ir.AuthorizationRule{{Allow: true, SourceRanges: []string{"10.0.0.0/8"}}}}
	build := func(change func(c *ir.Config)) *ir.Config {
		l, cl := tcp("tcp", 20001)
		l.Authorization = allow
		cl.Traffic = &ir.ClusterTraffic{LB: ir.LBMaglev, MaxPendingRequests: 1, MaxRequests: 1, MaxRetries: 1,
			Outlier: &ir.OutlierDetection{ConsecutiveLocalOriginFailures: new(uint32(2))}}
		udp := &ir.Cluster{Name: "udp", StatName: "udp", Protocol: ir.UpstreamUDP, ConnectTimeout: ir.Duration(1), MaxConnections: 1,
			Traffic: &ir.ClusterTraffic{LB: ir.LBRandom}}
		c := &ir.Config{
			Listeners: []*ir.Listener{l,
				{Name: "udp", Address: "0.0.0.0", Port: 20053, Protocol: ir.ProtocolUDP, StatPrefix: "udp", Cluster: "udp"},
				{Name: "tls", Address: "0.0.0.0", Port: 20443, Protocol: ir.ProtocolHTTPS, StatPrefix: "tls",
					TLS: []*ir.TLSServer{{ServerNames: []string{"db.example.com"}, Cluster: cl.Name, Authorization: allow, HashSourceIP: true}}}},
			Clusters: []*ir.Cluster{cl, udp},
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
	for name, change := range map[string]func(c *ir.Config){
		"authorization on a UDP listener": func(c *ir.Config) { c.Listeners[2].Authorization = allow },
		"with source ranges":              func(c *ir.Config) { c.Listeners[0].SourceRanges = []string{"10.0.0.0/8"} },
		"authorization without ranges": func(c *ir.Config) {
			c.Listeners[0].Authorization = &ir.Authorization{Rules: []ir.AuthorizationRule{{Allow: true}}}
		},
		"a chain's range not canonical": func(c *ir.Config) {
			c.Listeners[1].TLS[0].Authorization = &ir.Authorization{Rules: []ir.AuthorizationRule{{SourceRanges: []string{"10.0.0.1/8"}}}}
		},
		"TCP idle timeout":     func(c *ir.Config) { c.Clusters[0].Traffic.IdleTimeout = ir.Duration(1) },
		"TCP requests/conn":    func(c *ir.Config) { c.Clusters[0].Traffic.MaxRequestsPerConnection = 1 },
		"UDP outlier":          func(c *ir.Config) { c.Clusters[1].Traffic.Outlier = &ir.OutlierDetection{} },
		"UDP pending requests": func(c *ir.Config) { c.Clusters[1].Traffic.MaxPendingRequests = 1 },
	} {
		if err := build(change).Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
	// A chain serving HTTP routes takes neither.
	c := build(nil)
	c.Listeners[1].TLS[0] = &ir.TLSServer{Secrets: []string{"s"}, RouteConfig: "r", HashSourceIP: true}
	c.Secrets = []*ir.Secret{{Name: "s"}}
	c.RouteConfigs = []*ir.RouteConfig{{Name: "r"}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "a hash on a chain that serves HTTP routes") {
		t.Errorf("a hash on an HTTP chain: %v", err)
	}
}
