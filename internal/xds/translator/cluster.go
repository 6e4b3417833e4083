package translator

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"
	rawbufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"kubelb.dev/kubelb/internal/ir"
)

// Names of the Envoy extensions used by clusters.
const (
	TransportSocketUpstreamProxyProt = "envoy.transport_sockets.upstream_proxy_protocol"
	TransportSocketRawBuffer         = "envoy.transport_sockets.raw_buffer"
	httpProtocolOptionsKey           = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
)

// healthCheckJitterPercent is the random share of its interval added to each health check's
// interval.
const healthCheckJitterPercent = 20

// cluster builds a cluster, its endpoints served over EDS (ADS). No cluster ever makes Envoy
// resolve a name: IR endpoints are IP addresses.
func cluster(c *ir.Cluster) (*clusterv3.Cluster, error) {
	var errs []error
	n := wrapperspb.UInt32(c.MaxConnections)
	out := &clusterv3.Cluster{
		Name:           c.Name,
		AltStatName:    c.StatName,
		ConnectTimeout: durationpb.New(c.ConnectTimeout.D()),
		LbPolicy:       clusterv3.Cluster_ROUND_ROBIN,
		// A node the tenant no longer lists must stop getting traffic even while its NodePort
		// still passes health checks (Envoy keeps such hosts by default).
		IgnoreHealthOnHostRemoval: true,
		CircuitBreakers: &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
			Priority:           corev3.RoutingPriority_DEFAULT,
			MaxConnections:     n,
			MaxPendingRequests: n,
			MaxRequests:        n,
		}}},
	}
	if c.HashSourceIP {
		// Ring hash rather than Maglev: Maglev's fixed 65537-entry table per cluster costs
		// ~0.5 MiB each, too much for tenants with hundreds of Services.
		out.LbPolicy = clusterv3.Cluster_RING_HASH
	}
	if hc := c.HealthCheck; hc != nil {
		check := &corev3.HealthCheck{
			Timeout:  durationpb.New(hc.Timeout.D()),
			Interval: durationpb.New(hc.Interval.D()),
			// Up to a fifth more on each interval, at random: the checks of a cluster's
			// endpoints, all started together when it warms, drift apart instead of opening
			// a socket each at the same moment every interval (descriptors:
			// docs/performance.md). No initial jitter: a cluster warms only after its first
			// checks.
			IntervalJitterPercent: healthCheckJitterPercent,
			UnhealthyThreshold:    wrapperspb.UInt32(hc.UnhealthyThreshold),
			HealthyThreshold:      wrapperspb.UInt32(hc.HealthyThreshold),
			HealthChecker:         &corev3.HealthCheck_TcpHealthCheck_{TcpHealthCheck: &corev3.HealthCheck_TcpHealthCheck{}},
		}
		if hc.HTTPPath != "" {
			// HTTP/1.1 GET; Envoy's default expected status is 200 only. The Host header is
			// the cluster name, which kube-proxy's health server ignores.
			check.HealthChecker = &corev3.HealthCheck_HttpHealthCheck_{HttpHealthCheck: &corev3.HealthCheck_HttpHealthCheck{
				Path: hc.HTTPPath,
			}}
			// A connection per check, closed after it: Envoy would otherwise keep one open
			// to every checked endpoint (a TCP connect check closes its own anyway).
			check.ReuseConnection = wrapperspb.Bool(false)
		}
		// A cluster that has seen no traffic checks its healthy endpoints every
		// NoTrafficInterval (Envoy's 60 s by default), its unhealthy ones at the cluster's
		// interval: a LoadBalancer whose pods become ready a moment after its first check
		// (the Service and its Deployment created together) is healthy at the next check, not
		// a minute later. The health-check budget already counts every endpoint at the
		// shorter of the two intervals (translate's healthbudget.go).
		idleHealthy := ir.EnvoyNoTrafficInterval
		if hc.NoTrafficInterval > 0 {
			idleHealthy = hc.NoTrafficInterval.D()
		}
		check.NoTrafficHealthyInterval = durationpb.New(idleHealthy)
		check.NoTrafficInterval = durationpb.New(min(hc.Interval.D(), idleHealthy))
		out.HealthChecks = []*corev3.HealthCheck{check}
		if hc.NoPanic {
			out.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 0}}
		}
	}
	if len(c.Groups) > 0 {
		// The localities of the endpoint groups share the connections by their weights
		// before an endpoint is picked in the chosen one (loadAssignment).
		if out.CommonLbConfig == nil {
			out.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{}
		}
		out.CommonLbConfig.LocalityConfigSpecifier = &clusterv3.Cluster_CommonLbConfig_LocalityWeightedLbConfig_{
			LocalityWeightedLbConfig: &clusterv3.Cluster_CommonLbConfig_LocalityWeightedLbConfig{},
		}
	}
	switch {
	case c.ProxyProtocol:
		out.TransportSocket = proxyProtocolSocket(&errs, c)
	case c.TLS != nil:
		out.TransportSocket = upstreamTLS(c, &errs)
	}
	common := clusterTraffic(out, c, nil)
	switch c.Protocol {
	case ir.UpstreamHTTP1, ir.UpstreamHTTP2:
		opts := &httpv3.HttpProtocolOptions{CommonHttpProtocolOptions: common}
		if c.Protocol == ir.UpstreamHTTP2 {
			opts.UpstreamProtocolOptions = &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}},
			}}
		} else {
			opts.UpstreamProtocolOptions = &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &corev3.Http1ProtocolOptions{}},
			}}
		}
		out.TypedExtensionProtocolOptions = map[string]*anypb.Any{httpProtocolOptionsKey: mustPack(&errs, opts)}
	}

	out.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS}
	out.EdsClusterConfig = &clusterv3.Cluster_EdsClusterConfig{EdsConfig: adsSource()}
	return out, joined(errs)
}

// adsSource points a resource at the aggregated (ADS) stream of the bootstrap.
func adsSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}
}

// proxyProtocolSocket wraps raw_buffer (or the cluster's upstream TLS) in the upstream PROXY
// protocol (v2) transport socket.
func proxyProtocolSocket(errs *[]error, c *ir.Cluster) *corev3.TransportSocket {
	inner := &corev3.TransportSocket{
		Name:       TransportSocketRawBuffer,
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustPack(errs, &rawbufferv3.RawBuffer{})},
	}
	if c.TLS != nil {
		inner = upstreamTLS(c, errs)
	}
	pp := mustPack(errs, &proxyprotocolv3.ProxyProtocolUpstreamTransport{
		Config:          &corev3.ProxyProtocolConfig{Version: corev3.ProxyProtocolConfig_V2},
		TransportSocket: inner,
	})
	return &corev3.TransportSocket{
		Name:       TransportSocketUpstreamProxyProt,
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: pp},
	}
}

// loadAssignment puts all endpoints of a cluster into one locality, or, for a cluster with
// endpoint groups, each group's endpoints into a locality of the group's weight (sub-zone:
// the group's name); a group without endpoints has no locality, so no share.
func loadAssignment(c *ir.Cluster) *endpointv3.ClusterLoadAssignment {
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: c.Name}
	if len(c.Endpoints) == 0 {
		return cla
	}
	var hcPort uint32
	if c.HealthCheck != nil {
		hcPort = c.HealthCheck.Port
	}
	byGroup := map[string][]*endpointv3.LbEndpoint{}
	for _, ep := range c.Endpoints {
		e := &endpointv3.Endpoint{Address: socketAddress(corev3.SocketAddress_TCP, ep.Address, ep.Port)}
		if hcPort != 0 {
			// Envoy's HealthCheck has no port of its own: each endpoint says where it is checked.
			e.HealthCheckConfig = &endpointv3.Endpoint_HealthCheckConfig{PortValue: hcPort}
		}
		byGroup[ep.Group] = append(byGroup[ep.Group], &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: e}})
	}
	if len(c.Groups) == 0 {
		cla.Endpoints = []*endpointv3.LocalityLbEndpoints{{LbEndpoints: byGroup[""]}}
		return cla
	}
	for _, g := range c.Groups {
		if lbeps := byGroup[g.Name]; len(lbeps) > 0 {
			cla.Endpoints = append(cla.Endpoints, &endpointv3.LocalityLbEndpoints{
				Locality:            &corev3.Locality{SubZone: g.Name},
				LoadBalancingWeight: wrapperspb.UInt32(g.Weight),
				LbEndpoints:         lbeps,
			})
		}
	}
	return cla
}

func socketAddress(p corev3.SocketAddress_Protocol, addr string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Protocol:      p,
		Address:       addr,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

// upstreamTLS encrypts a cluster's connections: the SNI, the backend's certificate verified
// against the CA certificates (inline, or the system bundle's file) and required to carry one
// of the subject alternative names, ALPN for the cluster's HTTP version (h2 or http/1.1: the
// protocol is chosen, not negotiated; none for TCP); the client certificate, when there is
// one, over SDS.
func upstreamTLS(c *ir.Cluster, errs *[]error) *corev3.TransportSocket {
	t := c.TLS
	ca := &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: ir.SystemCABundle}}
	if !t.SystemCA {
		ca = &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: t.CACertificates}}
	}
	vc := &tlsv3.CertificateValidationContext{TrustedCa: ca}
	for _, n := range t.SubjectAltNames {
		typ := tlsv3.SubjectAltNameMatcher_DNS
		if n.Type == ir.SANURI {
			typ = tlsv3.SubjectAltNameMatcher_URI
		}
		vc.MatchTypedSubjectAltNames = append(vc.MatchTypedSubjectAltNames, &tlsv3.SubjectAltNameMatcher{
			SanType: typ,
			Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: n.Value}},
		})
	}
	var alpn []string // a TCP cluster (a TLSRoute's backend) negotiates none
	switch c.Protocol {
	case ir.UpstreamHTTP1:
		alpn = []string{"http/1.1"}
	case ir.UpstreamHTTP2:
		alpn = []string{"h2"}
	}
	ctx := &tlsv3.UpstreamTlsContext{
		Sni: t.SNI,
		CommonTlsContext: &tlsv3.CommonTlsContext{
			AlpnProtocols:         alpn,
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc},
		},
	}
	if t.ClientCertificate != "" { // the Gateway's client certificate (spec.tls.backend)
		ctx.CommonTlsContext.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{{Name: t.ClientCertificate, SdsConfig: adsSource()}}
	}
	return &corev3.TransportSocket{
		Name:       TransportSocketTLS,
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustPack(errs, ctx)},
	}
}
