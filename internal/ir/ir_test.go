package ir_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"kubelb.dev/kubelb/internal/ir"
)

func tcp(name string, port uint32) (*ir.Listener, *ir.Cluster) {
	return &ir.Listener{Name: name, Address: "0.0.0.0", Port: port, Protocol: ir.ProtocolTCP, StatPrefix: name, Cluster: name},
		&ir.Cluster{Name: name, StatName: name, Protocol: ir.UpstreamTCP, ConnectTimeout: ir.Duration(time.Second), MaxConnections: 1,
			Endpoints: []ir.Endpoint{{Address: "10.0.0.2", Port: 30000}, {Address: "10.0.0.1", Port: 30000}, {Address: "10.0.0.2", Port: 30000}}}
}

func TestValidateFindsWhatEnvoyWouldReject(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		mutate func(*ir.Config)
		want   string
	}{
		"valid":             {func(*ir.Config) {}, ""},
		"missing cluster":   {func(c *ir.Config) { c.Listeners[0].Cluster = "nope" }, `cluster "nope" does not exist`},
		"two on one port":   {func(c *ir.Config) { c.Listeners[1].Port = c.Listeners[0].Port }, "both bind tcp/0.0.0.0/80"},
		"repeated listener": {func(c *ir.Config) { c.Listeners[1].Name = c.Listeners[0].Name }, "name empty or repeated"},
		"dual-stack valid":  {func(c *ir.Config) { c.Listeners[0].AdditionalAddresses = []string{"::"} }, ""},
		"additional address taken by another listener": {func(c *ir.Config) {
			c.Listeners[0].AdditionalAddresses = []string{"::"}
			c.Listeners[1].Address, c.Listeners[1].Port = "::", c.Listeners[0].Port
		}, "both bind tcp/::/80"},
		"additional address not an IP":           {func(c *ir.Config) { c.Listeners[0].AdditionalAddresses = []string{"localhost"} }, `additional address "localhost" is not an IP address`},
		"additional address repeats the address": {func(c *ir.Config) { c.Listeners[0].AdditionalAddresses = []string{"0.0.0.0"} }, "address 0.0.0.0 is bound twice"},
		"additional address on an HTTP listener": {func(c *ir.Config) {
			c.RouteConfigs = []*ir.RouteConfig{{Name: "rc"}}
			c.Listeners[0].Protocol, c.Listeners[0].RouteConfig, c.Listeners[0].Cluster = ir.ProtocolHTTP, "rc", ""
			c.Listeners[0].AdditionalAddresses = []string{"::"}
		}, "TCP and UDP only"},
		"client traffic on a TCP listener": {func(c *ir.Config) {
			c.Listeners[0].ClientTraffic = &ir.ClientTraffic{IdleTimeout: ir.Duration(time.Minute)}
		}, "client traffic settings on a TCP listener"},
		"client connection settings on a TCP listener": {func(c *ir.Config) {
			c.Listeners[0].ClientTraffic = &ir.ClientTraffic{ProxyProtocol: &ir.ProxyProtocol{}, TCPIdleTimeout: ir.Duration(time.Minute),
				Keepalive: &ir.TCPKeepalive{Probes: 3}, BufferLimit: 32768}
		}, ""},
		"client HTTP options on a TCP listener": {func(c *ir.Config) {
			c.Listeners[0].ClientTraffic = &ir.ClientTraffic{ProxyProtocol: &ir.ProxyProtocol{}, HTTP: &ir.ClientHTTP{MergeSlashes: true}}
		}, "client traffic settings on a TCP listener other than"},
		"client buffer limit over Envoy's default": {func(c *ir.Config) {
			c.Listeners[0].ClientTraffic = &ir.ClientTraffic{BufferLimit: 2 << 20}
		}, "a buffer limit of 2097152 bytes"},
		"client HTTP/2 window under HTTP/2's": {func(c *ir.Config) {
			c.RouteConfigs = []*ir.RouteConfig{{Name: "rc"}}
			c.Listeners[0].Protocol, c.Listeners[0].RouteConfig, c.Listeners[0].Cluster = ir.ProtocolHTTP, "rc", ""
			c.Listeners[0].ClientTraffic = &ir.ClientTraffic{HTTP: &ir.ClientHTTP{HTTP2InitialStreamWindowSize: 1024}}
		}, "an HTTP/2 window of 1024 bytes"},
		"client HTTP/1.0 default host that is no name": {func(c *ir.Config) {
			c.RouteConfigs = []*ir.RouteConfig{{Name: "rc"}}
			c.Listeners[0].Protocol, c.Listeners[0].RouteConfig, c.Listeners[0].Cluster = ir.ProtocolHTTP, "rc", ""
			c.Listeners[0].ClientTraffic = &ir.ClientTraffic{HTTP: &ir.ClientHTTP{HTTP10: true, HTTP10DefaultHost: "*.example.com"}}
		}, "HTTP/1.0 default host"},
		"client traffic on an HTTP listener": {func(c *ir.Config) {
			c.RouteConfigs = []*ir.RouteConfig{{Name: "rc"}}
			c.Listeners[0].Protocol, c.Listeners[0].RouteConfig, c.Listeners[0].Cluster = ir.ProtocolHTTP, "rc", ""
			c.Listeners[0].ClientTraffic = &ir.ClientTraffic{RequestReceivedTimeout: ir.Duration(time.Second), HeadersWithUnderscores: ir.UnderscoresDrop}
		}, ""},
		"client traffic with an unknown action": {func(c *ir.Config) {
			c.RouteConfigs = []*ir.RouteConfig{{Name: "rc"}}
			c.Listeners[0].Protocol, c.Listeners[0].RouteConfig, c.Listeners[0].Cluster = ir.ProtocolHTTP, "rc", ""
			c.Listeners[0].ClientTraffic = &ir.ClientTraffic{HeadersWithUnderscores: "Ignore"}
		}, `headers with underscores action "Ignore"`},
		"client traffic with a negative timeout": {func(c *ir.Config) {
			c.RouteConfigs = []*ir.RouteConfig{{Name: "rc"}}
			c.Listeners[0].Protocol, c.Listeners[0].RouteConfig, c.Listeners[0].Cluster = ir.ProtocolHTTP, "rc", ""
			c.Listeners[0].ClientTraffic = &ir.ClientTraffic{IdleTimeout: ir.Duration(-time.Second)}
		}, "client traffic timeout -1s out of range"},
		"client traffic with a delay but no connection limit": {func(c *ir.Config) {
			c.RouteConfigs = []*ir.RouteConfig{{Name: "rc"}}
			c.Listeners[0].Protocol, c.Listeners[0].RouteConfig, c.Listeners[0].Cluster = ir.ProtocolHTTP, "rc", ""
			c.Listeners[0].ClientTraffic = &ir.ClientTraffic{ConnectionLimitDelay: ir.Duration(time.Second)}
		}, "a connection limit delay without a connection limit"},
		"client traffic with a client address header and trusted hops": {func(c *ir.Config) {
			c.RouteConfigs = []*ir.RouteConfig{{Name: "rc"}}
			c.Listeners[0].Protocol, c.Listeners[0].RouteConfig, c.Listeners[0].Cluster = ir.ProtocolHTTP, "rc", ""
			c.Listeners[0].ClientTraffic = &ir.ClientTraffic{ClientIPHeader: "x-real-ip", XFFTrustedHops: 1}
		}, "both a client address header and trusted X-Forwarded-For hops"},
		"client traffic with trusted CIDRs and trusted hops": {func(c *ir.Config) {
			c.RouteConfigs = []*ir.RouteConfig{{Name: "rc"}}
			c.Listeners[0].Protocol, c.Listeners[0].RouteConfig, c.Listeners[0].Cluster = ir.ProtocolHTTP, "rc", ""
			c.Listeners[0].ClientTraffic = &ir.ClientTraffic{XFFTrustedCIDRs: []string{"10.0.0.0/8"}, XFFTrustedHops: 1}
		}, "trusted X-Forwarded-For CIDRs with a client address header or trusted hops"},
		"client traffic with a trusted CIDR not canonical": {func(c *ir.Config) {
			c.RouteConfigs = []*ir.RouteConfig{{Name: "rc"}}
			c.Listeners[0].Protocol, c.Listeners[0].RouteConfig, c.Listeners[0].Cluster = ir.ProtocolHTTP, "rc", ""
			c.Listeners[0].ClientTraffic = &ir.ClientTraffic{XFFTrustedCIDRs: []string{"10.1.2.3/8"}}
		}, `trusted X-Forwarded-For CIDR "10.1.2.3/8" is not a canonical CIDR`},
		"client traffic with a client address header not a header name": {func(c *ir.Config) {
			c.RouteConfigs = []*ir.RouteConfig{{Name: "rc"}}
			c.Listeners[0].Protocol, c.Listeners[0].RouteConfig, c.Listeners[0].Cluster = ir.ProtocolHTTP, "rc", ""
			c.Listeners[0].ClientTraffic = &ir.ClientTraffic{ClientIPHeader: "X-Real-IP\r\n"}
		}, "is not a lower-case header name"},
		"client traffic with a TLS cipher list in one entry": {func(c *ir.Config) {
			c.RouteConfigs = []*ir.RouteConfig{{Name: "rc"}}
			c.Listeners[0].Protocol, c.Listeners[0].RouteConfig, c.Listeners[0].Cluster = ir.ProtocolHTTP, "rc", ""
			c.Listeners[0].ClientTraffic = &ir.ClientTraffic{TLS: &ir.ClientTLS{Ciphers: []string{"AES128-SHA:RC4-MD5"}}}
		}, `TLS parameter "AES128-SHA:RC4-MD5" is not a name`},
		"client traffic with TLS 1.0": {func(c *ir.Config) {
			c.RouteConfigs = []*ir.RouteConfig{{Name: "rc"}}
			c.Listeners[0].Protocol, c.Listeners[0].RouteConfig, c.Listeners[0].Cluster = ir.ProtocolHTTP, "rc", ""
			c.Listeners[0].ClientTraffic = &ir.ClientTraffic{TLS: &ir.ClientTLS{MinVersion: "1.0"}}
		}, `TLS version "1.0"`},
		"bad endpoint":       {func(c *ir.Config) { c.Clusters[0].Endpoints[0].Address = "0.0.0.0" }, "not a usable IP address"},
		"endpoint is a name": {func(c *ir.Config) { c.Clusters[0].Endpoints[0].Address = "metadata.google.internal" }, "not a usable IP address"},
		"port out of range":  {func(c *ir.Config) { c.Listeners[0].Port = 70000 }, "out of range"},
		"missing route conf": {func(c *ir.Config) { c.Listeners[0].Protocol, c.Listeners[0].RouteConfig = ir.ProtocolHTTP, "rc" }, `route config "rc" does not exist`},
		"bad regex route": {func(c *ir.Config) {
			c.RouteConfigs = []*ir.RouteConfig{{Name: "rc", VirtualHosts: []*ir.VirtualHost{{Name: "v", Domains: []string{"*"},
				Routes: []*ir.Route{{Name: "r", Match: ir.RouteMatch{PathRegex: "("}, Backends: []ir.WeightedCluster{{Cluster: "a", Weight: 1}}}}}}}}
		}, "path regex"},
		"route without action": {func(c *ir.Config) {
			c.RouteConfigs = []*ir.RouteConfig{{Name: "rc", VirtualHosts: []*ir.VirtualHost{{Name: "v", Domains: []string{"*"},
				Routes: []*ir.Route{{Name: "r"}}}}}}
		}, "exactly one of backends"},
		"https without secret": {func(c *ir.Config) {
			c.Listeners[0].Protocol = ir.ProtocolHTTPS
			c.Listeners[0].TLS = []*ir.TLSServer{{Secrets: []string{"s"}, RouteConfig: "rc"}}
		}, `secret "s" does not exist`},
		"client validation both optional and with an insecure fallback": {func(c *ir.Config) {
			c.Secrets = []*ir.Secret{{Name: "s", CertChain: []byte("c"), PrivateKey: []byte("k")}}
			c.RouteConfigs = []*ir.RouteConfig{{Name: "rc"}}
			c.Listeners[0].Protocol, c.Listeners[0].Cluster = ir.ProtocolHTTPS, ""
			c.Listeners[0].TLS = []*ir.TLSServer{{Secrets: []string{"s"}, RouteConfig: "rc",
				ClientValidation: &ir.ClientValidation{CACertificates: "ca", Optional: true, AllowInsecureFallback: true}}}
		}, "client validation both optional and with an insecure fallback"},
		"client traffic with a connection lasting more than a day": {func(c *ir.Config) {
			c.RouteConfigs = []*ir.RouteConfig{{Name: "rc"}}
			c.Listeners[0].Protocol, c.Listeners[0].RouteConfig, c.Listeners[0].Cluster = ir.ProtocolHTTP, "rc", ""
			c.Listeners[0].ClientTraffic = &ir.ClientTraffic{MaxConnectionDuration: ir.Duration(25 * time.Hour)}
		}, "client traffic timeout 25h0m0s out of range"},
		"client traffic with lifetimes on an HTTP listener": {func(c *ir.Config) {
			c.RouteConfigs = []*ir.RouteConfig{{Name: "rc"}}
			c.Listeners[0].Protocol, c.Listeners[0].RouteConfig, c.Listeners[0].Cluster = ir.ProtocolHTTP, "rc", ""
			c.Listeners[0].ClientTraffic = &ir.ClientTraffic{RequestHeadersTimeout: ir.Duration(time.Second), StreamIdleTimeout: ir.Duration(time.Minute),
				MaxConnectionDuration: ir.Duration(time.Hour), MaxRequestsPerConnection: 10, MaxStreamDuration: ir.Duration(time.Minute), TLSHandshakeTimeout: ir.Duration(time.Second)}
		}, ""},
		"client traffic lifetimes on a TCP listener": {func(c *ir.Config) {
			c.Listeners[0].ClientTraffic = &ir.ClientTraffic{MaxRequestsPerConnection: 10}
		}, "client traffic settings on a TCP listener"},
		"passthrough valid": {func(c *ir.Config) {
			c.Listeners[0].Protocol = ir.ProtocolHTTPS
			c.Listeners[0].TLS = []*ir.TLSServer{{ServerNames: []string{"db.example.com"}, Cluster: "a"}, {Cluster: "b"}}
		}, ""},
		"passthrough to missing cluster": {func(c *ir.Config) {
			c.Listeners[0].Protocol = ir.ProtocolHTTPS
			c.Listeners[0].TLS = []*ir.TLSServer{{ServerNames: []string{"db.example.com"}, Cluster: "nope"}}
		}, `cluster "nope" does not exist`},
		"terminated into tcp valid": {func(c *ir.Config) {
			c.Secrets = []*ir.Secret{{Name: "s", CertChain: []byte("c"), PrivateKey: []byte("k")}}
			c.Listeners[0].Protocol = ir.ProtocolHTTPS
			c.Listeners[0].TLS = []*ir.TLSServer{{ServerNames: []string{"db.example.com"}, Cluster: "a", Secrets: []string{"s"}},
				{Secrets: []string{"s"}, Backends: []ir.WeightedCluster{{Cluster: "a", Weight: 1}, {Cluster: "b", Weight: 2}}, FailedWeight: 1}}
		}, ""},
		"client validation on a chain terminated into tcp": {func(c *ir.Config) {
			c.Secrets = []*ir.Secret{{Name: "s", CertChain: []byte("c"), PrivateKey: []byte("k")}}
			c.Listeners[0].Protocol = ir.ProtocolHTTPS
			c.Listeners[0].TLS = []*ir.TLSServer{{ServerNames: []string{"db.example.com"}, Cluster: "a", Secrets: []string{"s"}, ClientValidation: &ir.ClientValidation{CACertificates: "ca"}}}
		}, ""},
		"client validation on a passthrough chain": {func(c *ir.Config) {
			c.Listeners[0].Protocol = ir.ProtocolHTTPS
			c.Listeners[0].TLS = []*ir.TLSServer{{ServerNames: []string{"db.example.com"}, Cluster: "a", ClientValidation: &ir.ClientValidation{CACertificates: "ca"}}}
		}, "client validation on a chain that passes TLS through"},
		"terminated into tcp without its secret": {func(c *ir.Config) {
			c.Listeners[0].Protocol = ir.ProtocolHTTPS
			c.Listeners[0].TLS = []*ir.TLSServer{{ServerNames: []string{"db.example.com"}, Cluster: "a", Secrets: []string{"s"}}}
		}, `secret "s" does not exist`},
		"terminated into both http and tcp": {func(c *ir.Config) {
			c.Secrets = []*ir.Secret{{Name: "s", CertChain: []byte("c"), PrivateKey: []byte("k")}}
			c.RouteConfigs = []*ir.RouteConfig{{Name: "rc"}}
			c.Listeners[0].Protocol = ir.ProtocolHTTPS
			c.Listeners[0].TLS = []*ir.TLSServer{{Cluster: "a", Secrets: []string{"s"}, RouteConfig: "rc"}}
		}, "serves HTTP routes or proxies TCP"},
		"chain without certificate or clusters": {func(c *ir.Config) {
			c.RouteConfigs = []*ir.RouteConfig{{Name: "rc"}}
			c.Listeners[0].Protocol = ir.ProtocolHTTPS
			c.Listeners[0].TLS = []*ir.TLSServer{{RouteConfig: "rc"}}
		}, "terminates TLS or passes it through"},
		"weighted tcp valid": {func(c *ir.Config) {
			c.Listeners[0].Cluster = ""
			c.Listeners[0].Backends = []ir.WeightedCluster{{Cluster: "a", Weight: 70}, {Cluster: "b", Weight: 30}}
			c.Listeners[0].FailedWeight = 10
		}, ""},
		"tcp with cluster and backends": {func(c *ir.Config) {
			c.Listeners[0].Backends = []ir.WeightedCluster{{Cluster: "b", Weight: 1}}
		}, "exactly one of cluster and backends"},
		"tcp weights add up to 0": {func(c *ir.Config) {
			c.Listeners[0].Cluster = ""
			c.Listeners[0].Backends = []ir.WeightedCluster{{Cluster: "a"}, {Cluster: "b"}}
		}, "weights add up to 0"},
		"tcp weighted to missing cluster": {func(c *ir.Config) {
			c.Listeners[0].Cluster = ""
			c.Listeners[0].Backends = []ir.WeightedCluster{{Cluster: "a", Weight: 1}, {Cluster: "nope", Weight: 1}}
		}, `cluster "nope" does not exist`},
		"tcp failed weight with one cluster": {func(c *ir.Config) { c.Listeners[0].FailedWeight = 1 }, "failed weight without backends"},
		"terminated chain refusing every connection valid": {func(c *ir.Config) {
			c.Secrets = []*ir.Secret{{Name: "s", CertChain: []byte("c"), PrivateKey: []byte("k")}}
			c.Listeners[0].Protocol = ir.ProtocolHTTPS
			c.Listeners[0].TLS = []*ir.TLSServer{{ServerNames: []string{"db.example.com"}, Secrets: []string{"s"}, FailedWeight: 1}}
		}, ""},
		"tcp cluster over tls valid": {func(c *ir.Config) {
			c.Clusters[0].TLS = &ir.UpstreamTLS{SNI: "db.example.com", SystemCA: true, SubjectAltNames: []ir.SubjectAltName{{Type: ir.SANDNS, Value: "db.example.com"}}}
		}, ""},
		"udp cluster over tls": {func(c *ir.Config) {
			c.Clusters[0].Protocol, c.Listeners[0].Protocol = ir.UpstreamUDP, ir.ProtocolUDP
			c.Clusters[0].TLS = &ir.UpstreamTLS{SNI: "db.example.com", SystemCA: true, SubjectAltNames: []ir.SubjectAltName{{Type: ir.SANDNS, Value: "db.example.com"}}}
		}, "upstream TLS: on a UDP cluster"},
		"udp with backends": {func(c *ir.Config) {
			c.Clusters[0].Protocol = ir.UpstreamUDP
			c.Listeners[0].Protocol = ir.ProtocolUDP
			c.Listeners[0].Backends = []ir.WeightedCluster{{Cluster: "a", Weight: 1}}
		}, "a UDP listener has one cluster"},
		"udp weighted groups valid": {func(c *ir.Config) {
			c.Clusters[0].Protocol, c.Listeners[0].Protocol = ir.UpstreamUDP, ir.ProtocolUDP
			groupsOf(c.Clusters[0], 70, 30)
		}, ""},
		"endpoint group weight 0": {func(c *ir.Config) { groupsOf(c.Clusters[0], 1, 0) }, `endpoint group "g1" has weight 0`},
		"endpoint group repeated": {func(c *ir.Config) {
			groupsOf(c.Clusters[0], 1, 1)
			c.Clusters[0].Groups[1].Name = "g0"
		}, `endpoint group "g0": name empty or repeated`},
		"endpoint group weights overflow": {func(c *ir.Config) { groupsOf(c.Clusters[0], 1<<31, 1<<31) }, "more than 2^32-1"},
		"endpoint in no group of a grouped cluster": {func(c *ir.Config) {
			groupsOf(c.Clusters[0], 1, 1)
			c.Clusters[0].Endpoints[0].Group = ""
		}, `names group ""`},
		"endpoint in an unknown group": {func(c *ir.Config) {
			groupsOf(c.Clusters[0], 1, 1)
			c.Clusters[0].Endpoints[0].Group = "nope"
		}, `names group "nope"`},
		"endpoint group without groups": {func(c *ir.Config) { c.Clusters[0].Endpoints[0].Group = "g0" }, `names group "g0"`},
		"udp http health check on its own port valid": {func(c *ir.Config) {
			c.Clusters[0].Protocol, c.Listeners[0].Protocol = ir.UpstreamUDP, ir.ProtocolUDP
			c.Clusters[0].HealthCheck = &ir.HealthCheck{Interval: 1, Timeout: 1, HealthyThreshold: 1, UnhealthyThreshold: 1, HTTPPath: "/healthz", Port: 32000}
		}, ""},
		"udp tcp health check": {func(c *ir.Config) {
			c.Clusters[0].Protocol, c.Listeners[0].Protocol = ir.UpstreamUDP, ir.ProtocolUDP
			c.Clusters[0].HealthCheck = &ir.HealthCheck{Interval: 1, Timeout: 1, HealthyThreshold: 1, UnhealthyThreshold: 1}
		}, "must be an HTTP check on its own port"},
		"health check port out of range": {func(c *ir.Config) {
			c.Clusters[0].HealthCheck = &ir.HealthCheck{Interval: 1, Timeout: 1, HealthyThreshold: 1, UnhealthyThreshold: 1, HTTPPath: "/healthz", Port: 70000}
		}, "health check port 70000"},
		"health check path not absolute": {func(c *ir.Config) {
			c.Clusters[0].HealthCheck = &ir.HealthCheck{Interval: 1, Timeout: 1, HealthyThreshold: 1, UnhealthyThreshold: 1, HTTPPath: "healthz\r\n"}
		}, "not a plain absolute path"},
		"weighted passthrough valid": {func(c *ir.Config) {
			c.Listeners[0].Protocol = ir.ProtocolHTTPS
			c.Listeners[0].TLS = []*ir.TLSServer{{ServerNames: []string{"db.example.com"}, Backends: []ir.WeightedCluster{{Cluster: "a", Weight: 1}, {Cluster: "b", Weight: 2}}}}
		}, ""},
		"weighted passthrough to missing cluster": {func(c *ir.Config) {
			c.Listeners[0].Protocol = ir.ProtocolHTTPS
			c.Listeners[0].TLS = []*ir.TLSServer{{Backends: []ir.WeightedCluster{{Cluster: "a", Weight: 1}, {Cluster: "nope", Weight: 2}}}}
		}, `cluster "nope" does not exist`},
		"passthrough and terminate on one name": {func(c *ir.Config) {
			c.Secrets = []*ir.Secret{{Name: "s", CertChain: []byte("c"), PrivateKey: []byte("k")}}
			c.RouteConfigs = []*ir.RouteConfig{{Name: "rc"}}
			c.Listeners[0].Protocol = ir.ProtocolHTTPS
			c.Listeners[0].TLS = []*ir.TLSServer{{ServerNames: []string{"x.example.com"}, Cluster: "a"}, {ServerNames: []string{"x.example.com"}, Secrets: []string{"s"}, RouteConfig: "rc"}}
		}, `server name "x.example.com" is in two TLS servers`},
		// HTTP/3: an HTTP3 listener serves HTTP routes over QUIC only, binds UDP, takes the
		// HTTP settings of a ClientTrafficPolicy only; alt-svc advertises only what it serves.
		"http3 valid": {func(c *ir.Config) { http3(c, 443) }, ""},
		"http3 next to a UDP listener on its port": {func(c *ir.Config) {
			http3(c, 443)
			c.Listeners[0].Protocol, c.Listeners[0].Port = ir.ProtocolUDP, 8443
		}, "both bind udp/0.0.0.0/8443"},
		"http3 next to a TCP listener on its port": {func(c *ir.Config) {
			http3(c, 443)
			c.Listeners[0].Port = 8443
		}, ""},
		"http3 chain that proxies": {func(c *ir.Config) {
			http3(c, 443)
			c.Listeners[1].TLS = append(c.Listeners[1].TLS, &ir.TLSServer{ServerNames: []string{"db.example.com"}, Cluster: "a"})
		}, "of an HTTP3 listener proxies or validates client certificates"},
		"http3 chain with client validation": {func(c *ir.Config) {
			http3(c, 443)
			c.Listeners[1].TLS[0].ClientValidation = &ir.ClientValidation{CACertificates: "ca"}
		}, "of an HTTP3 listener proxies or validates client certificates"},
		"http3 connection limit": {func(c *ir.Config) {
			http3(c, 443)
			c.Listeners[1].ClientTraffic = &ir.ClientTraffic{IdleTimeout: ir.Duration(time.Minute), ConnectionLimit: 10}
		}, "client traffic settings on an HTTP3 listener that act on TCP connections"},
		"http3 HTTP settings": {func(c *ir.Config) {
			http3(c, 443)
			c.Listeners[1].ClientTraffic = &ir.ClientTraffic{IdleTimeout: ir.Duration(time.Minute), HTTP: &ir.ClientHTTP{MergeSlashes: true}}
		}, ""},
		"http3 advertised but not served": {func(c *ir.Config) {
			http3(c, 443)
			c.Listeners = c.Listeners[:1]
		}, `route config "rc" advertises HTTP/3, but no HTTP3 listener serves it`},
		"http3 port out of range": {func(c *ir.Config) {
			http3(c, 70000)
		}, "HTTP/3 port 70000 out of range"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			la, ca := tcp("a", 80)
			lb, cb := tcp("b", 81)
			cfg := &ir.Config{Listeners: []*ir.Listener{la, lb}, Clusters: []*ir.Cluster{ca, cb}}
			tc.mutate(cfg)
			wantValidation(t, cfg, tc.want)
		})
	}
}

// http3 makes listener b of c an HTTP3 listener on UDP port 8443 serving route config rc,
// which advertises HTTP/3 on port.
func http3(c *ir.Config, port uint32) {
	c.Secrets = []*ir.Secret{{Name: "s", CertChain: []byte("c"), PrivateKey: []byte("k")}}
	c.RouteConfigs = []*ir.RouteConfig{{Name: "rc", HTTP3Port: port}}
	l := c.Listeners[1]
	l.Protocol, l.Port, l.Cluster = ir.ProtocolHTTP3, 8443, ""
	l.TLS = []*ir.TLSServer{{ServerNames: []string{"www.example.com"}, Secrets: []string{"s"}, RouteConfig: "rc"}}
}

// groupsOf gives c one group "g<i>" per weight and puts its endpoints in them in turn.
func groupsOf(c *ir.Cluster, weights ...uint32) {
	c.Groups = nil
	for i, w := range weights {
		c.Groups = append(c.Groups, ir.EndpointGroup{Name: fmt.Sprintf("g%d", i), Weight: w})
	}
	for i := range c.Endpoints {
		c.Endpoints[i].Group = c.Groups[i%len(c.Groups)].Name
	}
}

func TestNormalizeGivesOneOrder(t *testing.T) {
	t.Parallel()
	la, ca := tcp("a", 80)
	lb, cb := tcp("b", 81)
	x := &ir.Config{Listeners: []*ir.Listener{lb, la}, Clusters: []*ir.Cluster{cb, ca}}
	la2, ca2 := tcp("a", 80)
	lb2, cb2 := tcp("b", 81)
	y := &ir.Config{Listeners: []*ir.Listener{la2, lb2}, Clusters: []*ir.Cluster{ca2, cb2}}
	groupsOf(cb, 1, 2)
	groupsOf(cb2, 1, 2)
	slices.Reverse(cb2.Groups)
	x.Normalize()
	y.Normalize()
	if !x.Equal(y) {
		t.Fatal("the same config in another order is not Equal after Normalize")
	}
	if got := x.Clusters[0].Endpoints; len(got) != 2 || got[0].Address != "10.0.0.1" {
		t.Fatalf("endpoints %v, want sorted and unique", got)
	}
	y.Clusters[0].MaxConnections = 2
	if x.Equal(y) {
		t.Fatal("different configs are Equal")
	}
}

func TestProblemsFoldDuplicates(t *testing.T) {
	t.Parallel()
	var set ir.ProblemSet
	obj := ir.ObjectRef{Kind: "LoadBalancer", Namespace: "tenant-a", Name: "b", Section: "TCP/80"}
	set.Add(obj, ir.SeverityError, "NoEndpoints", "no endpoints")
	set.Add(obj, ir.SeverityError, "NoEndpoints", "no endpoints")
	set.Add(ir.ObjectRef{Kind: "LoadBalancer", Namespace: "tenant-a", Name: "a"}, ir.SeverityWarning, "InvalidAddress", "left out")
	ps := set.List()
	if len(ps) != 2 || ps[0].Object.Name != "a" {
		t.Fatalf("problems %v", ps)
	}
	if by := ps.ByObject(); len(by[obj.Object()]) != 1 {
		t.Fatalf("by object %v", by)
	}
	if s := ps[1].String(); s != "TCP/80: NoEndpoints: no endpoints" {
		t.Fatalf("String() = %q", s)
	}
}

// TestProblemsCompactAsProblemSet: sorting and compacting a list gives what a ProblemSet
// given the same problems in the same order lists: each problem once, the first of its
// repeats, grouped by object in the order found.
func TestProblemsCompactAsProblemSet(t *testing.T) {
	t.Parallel()
	a := ir.ObjectRef{Kind: "LoadBalancer", Namespace: "tenant-a", Name: "a"}
	b := ir.ObjectRef{Kind: "LoadBalancer", Namespace: "tenant-a", Name: "b"}
	b80, b443 := b, b
	b80.Section, b443.Section = "TCP/80", "TCP/443"
	in := ir.Problems{
		{Object: b80, Severity: ir.SeverityWarning, Reason: "X", Message: "one"},
		{Object: a, Severity: ir.SeverityWarning, Reason: "X", Message: "one"},
		{Object: b443, Severity: ir.SeverityWarning, Reason: "X", Message: "one"},
		{Object: b80, Severity: ir.SeverityWarning, Reason: "X", Message: "one"},
		{Object: b, Severity: ir.SeverityError, Reason: "Y", Message: "two"},
		{Object: a, Severity: ir.SeverityWarning, Reason: "X", Message: "one"},
		{Object: b443, Severity: ir.SeverityWarning, Reason: "X", Message: "other"},
	}
	var set ir.ProblemSet
	for _, p := range in {
		set.AddProblem(p)
	}
	want := set.List()
	got := slices.Clone(in)
	got.Sort()
	got = got.Compact()
	if !slices.Equal(got, want) {
		t.Fatalf("compacted:\n%v\nProblemSet:\n%v", got, want)
	}
	if len(got) != 5 {
		t.Fatalf("%d problems, want 5: %v", len(got), got)
	}
}

// BenchmarkProblemSet100k adds 100 000 problems, half of them repeated: folding duplicates
// must stay linear (a slice scan per Add made this quadratic).
func BenchmarkProblemSet100k(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var set ir.ProblemSet
		for i := range 100_000 {
			obj := ir.ObjectRef{Kind: "LoadBalancer", Namespace: "tenant-a", Name: fmt.Sprintf("lb-%d", i/2)}
			set.Add(obj, ir.SeverityWarning, "InvalidAddress", "left out")
		}
		if n := len(set.List()); n != 50_000 {
			b.Fatalf("%d problems", n)
		}
	}
}

// TestFleetPortsAreNeverListeners: the Envoy pods' own ports (admin, shutdown manager,
// readiness, stats) lie outside the default listener port range, a range that includes one is
// refused, and a listener on one does not validate (Envoy would fail to bind it, or take the
// readiness probe's port).
func TestFleetPortsAreNeverListeners(t *testing.T) {
	for _, p := range ir.FleetPorts {
		if p >= 10000 && p <= 19999 {
			t.Errorf("fleet port %d is inside the default listener port range 10000-19999", p)
		}
	}
	if err := ir.CheckPortRange(10000, 19999); err != nil {
		t.Errorf("default range: %v", err)
	}
	for _, r := range [][2]int32{{9903, 9903}, {9904, 9904}, {1, 65535}, {9000, 9901}} {
		if err := ir.CheckPortRange(r[0], r[1]); err == nil {
			t.Errorf("range %d-%d includes a fleet port and was accepted", r[0], r[1])
		}
	}
	cfg := &ir.Config{
		Clusters:  []*ir.Cluster{{Name: "c", StatName: "c", Protocol: ir.UpstreamTCP, ConnectTimeout: ir.Duration(time.Second), MaxConnections: 1}},
		Listeners: []*ir.Listener{{Name: "l", Address: "0.0.0.0", Port: ir.EnvoyReadyPort, Protocol: ir.ProtocolTCP, StatPrefix: "l", Cluster: "c"}},
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "one of the Envoy pods' own ports") {
		t.Errorf("a listener on the readiness port: %v", err)
	}
	cfg.Listeners[0].Port = 10000
	if err := cfg.Validate(); err != nil {
		t.Errorf("a listener on 10000: %v", err)
	}
}

// wantValidation checks that cfg is valid (want "") or that its validation fails with an
// error containing want.
func wantValidation(t *testing.T, cfg *ir.Config, want string) {
	t.Helper()
	err := cfg.Validate()
	if want == "" {
		if err != nil {
			t.Fatalf("valid config: %v", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want an error containing %q", err, want)
	}
}
