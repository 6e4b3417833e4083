package ir_test

import (
	"strings"
	"testing"
	"time"

	"kubelb.dev/kubelb/internal/ir"
)

// TestValidateJWT: a listener holds exactly the JWT providers and requirements of the routes
// it serves, each provider bounded (audiences, claims to headers with lower-case header
// names, a key set of 1 to 16 KiB with keys); a route requires 1 to 4 providers, sorted.
func TestValidateJWT(t *testing.T) {
	t.Parallel()
	const jwks = `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`
	build := func(change func(c *ir.Config)) *ir.Config {
		c := &ir.Config{
			Listeners: []*ir.Listener{{Name: "http", Address: "0.0.0.0", Port: 20080, Protocol: ir.ProtocolHTTP, StatPrefix: "http", RouteConfig: "http",
				JWT: &ir.ListenerJWT{
					Providers:    []*ir.JWTProvider{{Name: "ns/p/a", JWKS: jwks, Audiences: []string{"shop"}, FromHeaders: []ir.JWTHeader{{Name: "x-token", ValuePrefix: "Token "}}, FromParams: []string{"access_token"}}, {Name: "ns/p/b", JWKS: jwks, ClaimToHeaders: []ir.ClaimToHeader{{Claim: "sub", Header: "x-user"}}}},
					Requirements: []ir.JWT{{Providers: []string{"ns/p/a"}}, {Providers: []string{"ns/p/a", "ns/p/b"}, AllowMissing: true}},
				}}},
			Clusters: []*ir.Cluster{{Name: "web", StatName: "web", Protocol: ir.UpstreamHTTP1, ConnectTimeout: ir.Duration(1), MaxConnections: 1}},
			RouteConfigs: []*ir.RouteConfig{{Name: "http", VirtualHosts: []*ir.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*ir.Route{
				{Name: "a", Backends: []ir.WeightedCluster{{Cluster: "web", Weight: 1}}, JWT: &ir.JWT{Providers: []string{"ns/p/a"}}},
				{Name: "b", Backends: []ir.WeightedCluster{{Cluster: "web", Weight: 1}}, JWT: &ir.JWT{Providers: []string{"ns/p/a", "ns/p/b"}, AllowMissing: true}},
				{Name: "c", Backends: []ir.WeightedCluster{{Cluster: "web", Weight: 1}}, JWT: &ir.JWT{Providers: []string{"ns/p/a"}}},
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
	if err := build(func(c *ir.Config) { setRemote(c, remote("web", "http://keys.example.com/jwks")) }).Validate(); err != nil {
		t.Fatalf("a provider with a key server: %v", err)
	}
	for name, change := range map[string]func(c *ir.Config){
		"no providers on the listener": func(c *ir.Config) { c.Listeners[0].JWT = nil },
		"not needed": func(c *ir.Config) {
			for _, r := range c.RouteConfigs[0].VirtualHosts[0].Routes {
				r.JWT = nil
			}
		},
		"a provider no route requires": func(c *ir.Config) {
			c.Listeners[0].JWT.Providers = append(c.Listeners[0].JWT.Providers, &ir.JWTProvider{Name: "ns/p/c", JWKS: jwks})
		},
		"a requirement missing": func(c *ir.Config) { c.Listeners[0].JWT.Requirements = c.Listeners[0].JWT.Requirements[:1] },
		"providers not sorted": func(c *ir.Config) {
			c.RouteConfigs[0].VirtualHosts[0].Routes[1].JWT.Providers = []string{"ns/p/b", "ns/p/a"}
		},
		"a route with no providers": func(c *ir.Config) { c.RouteConfigs[0].VirtualHosts[0].Routes[0].JWT.Providers = nil },
		"key set not JSON":          func(c *ir.Config) { c.Listeners[0].JWT.Providers[0].JWKS = "nope" },
		"key set without keys":      func(c *ir.Config) { c.Listeners[0].JWT.Providers[0].JWKS = `{"keys":[]}` },
		"key set too large":         func(c *ir.Config) { c.Listeners[0].JWT.Providers[0].JWKS = strings.Repeat(" ", ir.MaxJWKSBytes) + jwks },
		"upper-case header": func(c *ir.Config) {
			c.Listeners[0].JWT.Providers[1].ClaimToHeaders[0].Header = "X-User"
		},
		"pseudo-header": func(c *ir.Config) {
			c.Listeners[0].JWT.Providers[1].ClaimToHeaders[0].Header = ":path"
		},
		"a token header in upper case": func(c *ir.Config) {
			c.Listeners[0].JWT.Providers[0].FromHeaders = []ir.JWTHeader{{Name: "X-Token"}}
		},
		"a token parameter that is no name": func(c *ir.Config) { c.Listeners[0].JWT.Providers[0].FromParams = []string{"a=b"} },
		"audience with a space":             func(c *ir.Config) { c.Listeners[0].JWT.Providers[0].Audiences = []string{"a b"} },
		"on a TCP listener": func(c *ir.Config) {
			c.Listeners = append(c.Listeners, &ir.Listener{Name: "tcp", Address: "0.0.0.0", Port: 20081, Protocol: ir.ProtocolTCP, StatPrefix: "tcp", Cluster: "web", JWT: c.Listeners[0].JWT})
		},
		"a key server and a key set":     func(c *ir.Config) { c.Listeners[0].JWT.Providers[0].Remote = remote("web", "https://k/jwks") },
		"a key server of no cluster":     func(c *ir.Config) { setRemote(c, remote("keys", "https://k/jwks")) },
		"a key server at a relative URI": func(c *ir.Config) { setRemote(c, remote("web", "/jwks")) },
		"a key server at a file URI":     func(c *ir.Config) { setRemote(c, remote("web", "file:///etc/passwd")) },
		"a key server kept for 10 seconds": func(c *ir.Config) {
			r := remote("web", "https://k/jwks")
			r.CacheDuration = ir.Duration(10 * time.Second)
			setRemote(c, r)
		},
		"a key server retried every 100 ms": func(c *ir.Config) {
			r := remote("web", "https://k/jwks")
			r.FailedRefetch = ir.Duration(100 * time.Millisecond)
			setRemote(c, r)
		},
	} {
		if err := build(change).Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
}

// remote is a key server through cluster at uri, kept 5 minutes, retried after a second.
func remote(cluster, uri string) *ir.RemoteJWKS {
	return &ir.RemoteJWKS{Cluster: cluster, URI: uri, CacheDuration: ir.Duration(5 * time.Minute), FailedRefetch: ir.Duration(time.Second)}
}

// setRemote makes the listener's first provider fetch its keys from r.
func setRemote(c *ir.Config, r *ir.RemoteJWKS) {
	c.Listeners[0].JWT.Providers[0].JWKS, c.Listeners[0].JWT.Providers[0].Remote = "", r
}
