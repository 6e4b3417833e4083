package translate

import (
	"fmt"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	matcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	udpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"
	rawbufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	corev1 "k8s.io/api/core/v1"
)

// Names of the Envoy extensions used.
const (
	FilterTCPProxy                   = "envoy.filters.network.tcp_proxy"
	FilterUDPProxy                   = "envoy.filters.udp_listener.udp_proxy"
	TransportSocketUpstreamProxyProt = "envoy.transport_sockets.upstream_proxy_protocol"
	TransportSocketRawBuffer         = "envoy.transport_sockets.raw_buffer"
)

// portResources are the Envoy resources of one LoadBalancer port.
type portResources struct {
	listener  *listenerv3.Listener
	cluster   *clusterv3.Cluster
	endpoints *endpointv3.ClusterLoadAssignment // nil for STRICT_DNS clusters
}

// validator is implemented by every generated (protoc-gen-validate) Envoy message.
type validator interface{ Validate() error }

// validate runs protoc-gen-validate on a message. Validate does not look inside Any, so every
// typed config is validated before it is packed.
func validate(m proto.Message) error {
	if v, ok := m.(validator); ok {
		return v.Validate()
	}
	return nil
}

// pack validates a typed config and wraps it in an Any, deterministically.
func pack(m proto.Message) (*anypb.Any, error) {
	if err := validate(m); err != nil {
		return nil, err
	}
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true}); err != nil {
		return nil, err
	}
	return a, nil
}

// resources builds and validates the listener, cluster and endpoints of one port.
func (t *translator) resources(ps portSpec, s lbSettings, eps []endpoint) (*portResources, error) {
	var (
		res = &portResources{}
		err error
	)
	if ps.protocol == corev1.ProtocolUDP {
		res.listener, err = t.udpListener(ps, s)
	} else {
		res.listener, err = t.tcpListener(ps, s)
	}
	if err != nil {
		return nil, fmt.Errorf("listener: %w", err)
	}
	if res.cluster, res.endpoints, err = t.cluster(ps, s, eps); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	for _, m := range []proto.Message{res.listener, res.cluster} {
		if err := validate(m); err != nil {
			return nil, err
		}
	}
	if res.endpoints != nil {
		if err := validate(res.endpoints); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func (t *translator) listenerAddress(ps portSpec) *corev3.Address {
	proto := corev3.SocketAddress_TCP
	if ps.protocol == corev1.ProtocolUDP {
		proto = corev3.SocketAddress_UDP
	}
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Protocol:      proto,
		Address:       t.opts.ListenerAddress,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(ps.listenerPort)},
	}}}
}

// tcpListener: a listener with one filter chain holding tcp_proxy to the port's cluster.
func (t *translator) tcpListener(ps portSpec, s lbSettings) (*listenerv3.Listener, error) {
	tp := &tcpproxyv3.TcpProxy{
		StatPrefix:       ps.statName,
		ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: ps.resource},
	}
	if s.sourceIP {
		tp.HashPolicy = []*typev3.HashPolicy{{
			PolicySpecifier: &typev3.HashPolicy_SourceIp_{SourceIp: &typev3.HashPolicy_SourceIp{}},
		}}
	}
	cfg, err := pack(tp)
	if err != nil {
		return nil, fmt.Errorf("tcp_proxy: %w", err)
	}
	return &listenerv3.Listener{
		Name:       ps.resource,
		StatPrefix: ps.statName,
		Address:    t.listenerAddress(ps),
		FilterChains: []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{{
				Name:       FilterTCPProxy,
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: cfg},
			}},
		}},
	}, nil
}

// udpListener: a UDP listener whose udp_proxy listener filter routes every datagram (matcher
// with only on_no_match; the deprecated "cluster" field is not used) to the port's cluster.
func (t *translator) udpListener(ps portSpec, s lbSettings) (*listenerv3.Listener, error) {
	route, err := pack(&udpproxyv3.Route{Cluster: ps.resource})
	if err != nil {
		return nil, fmt.Errorf("udp_proxy route: %w", err)
	}
	up := &udpproxyv3.UdpProxyConfig{
		StatPrefix: ps.statName,
		RouteSpecifier: &udpproxyv3.UdpProxyConfig_Matcher{Matcher: &matcherv3.Matcher{
			OnNoMatch: &matcherv3.Matcher_OnMatch{OnMatch: &matcherv3.Matcher_OnMatch_Action{
				Action: &xdscorev3.TypedExtensionConfig{Name: "route", TypedConfig: route},
			}},
		}},
		IdleTimeout: durationpb.New(t.opts.UDPSessionIdleTimeout),
	}
	if s.sourceIP {
		up.HashPolicies = []*udpproxyv3.UdpProxyConfig_HashPolicy{{
			PolicySpecifier: &udpproxyv3.UdpProxyConfig_HashPolicy_SourceIp{SourceIp: true},
		}}
	}
	cfg, err := pack(up)
	if err != nil {
		return nil, fmt.Errorf("udp_proxy: %w", err)
	}
	return &listenerv3.Listener{
		Name:       ps.resource,
		StatPrefix: ps.statName,
		Address:    t.listenerAddress(ps),
		ListenerFilters: []*listenerv3.ListenerFilter{{
			Name:       FilterUDPProxy,
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: cfg},
		}},
	}, nil
}

// cluster builds the port's cluster: EDS (from ADS) when every endpoint is an IP address, or
// STRICT_DNS with the endpoints inline when any is a hostname, because Envoy rejects
// hostnames in EDS.
func (t *translator) cluster(ps portSpec, s lbSettings, eps []endpoint) (*clusterv3.Cluster, *endpointv3.ClusterLoadAssignment, error) {
	n := wrapperspb.UInt32(t.opts.MaxConnectionsPerCluster)
	c := &clusterv3.Cluster{
		Name:           ps.resource,
		AltStatName:    ps.statName,
		ConnectTimeout: durationpb.New(t.opts.ConnectTimeout),
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
	if s.sourceIP {
		// Ring hash rather than Maglev: Maglev's fixed 65537-entry table per cluster costs
		// ~0.5 MiB each, too much for tenants with hundreds of Services.
		c.LbPolicy = clusterv3.Cluster_RING_HASH
	}
	if ps.protocol == corev1.ProtocolTCP {
		if !t.opts.HealthCheck.Disabled {
			c.HealthChecks = []*corev3.HealthCheck{t.healthCheck()}
		}
		if s.proxyProtocol {
			ts, err := proxyProtocolSocket()
			if err != nil {
				return nil, nil, fmt.Errorf("proxy protocol: %w", err)
			}
			c.TransportSocket = ts
		}
	}

	cla := loadAssignment(ps.resource, eps)
	dns := false
	for _, ep := range eps {
		dns = dns || ep.hostname
	}
	if dns {
		c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS}
		c.DnsLookupFamily = clusterv3.Cluster_V4_PREFERRED
		c.LoadAssignment = cla
		return c, nil, nil
	}
	c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS}
	c.EdsClusterConfig = &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}}
	return c, cla, nil
}

func (t *translator) healthCheck() *corev3.HealthCheck {
	hc := t.opts.HealthCheck
	out := &corev3.HealthCheck{
		Timeout:            durationpb.New(hc.Timeout),
		Interval:           durationpb.New(hc.Interval),
		UnhealthyThreshold: wrapperspb.UInt32(hc.UnhealthyThreshold),
		HealthyThreshold:   wrapperspb.UInt32(hc.HealthyThreshold),
		HealthChecker:      &corev3.HealthCheck_TcpHealthCheck_{TcpHealthCheck: &corev3.HealthCheck_TcpHealthCheck{}},
	}
	if hc.NoTrafficInterval > 0 {
		out.NoTrafficInterval = durationpb.New(hc.NoTrafficInterval)
	}
	return out
}

// proxyProtocolSocket wraps raw_buffer in the upstream PROXY protocol (v2) transport socket.
func proxyProtocolSocket() (*corev3.TransportSocket, error) {
	raw, err := pack(&rawbufferv3.RawBuffer{})
	if err != nil {
		return nil, err
	}
	pp, err := pack(&proxyprotocolv3.ProxyProtocolUpstreamTransport{
		Config: &corev3.ProxyProtocolConfig{Version: corev3.ProxyProtocolConfig_V2},
		TransportSocket: &corev3.TransportSocket{
			Name:       TransportSocketRawBuffer,
			ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: raw},
		},
	})
	if err != nil {
		return nil, err
	}
	return &corev3.TransportSocket{
		Name:       TransportSocketUpstreamProxyProt,
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: pp},
	}, nil
}

// loadAssignment puts all endpoints into one locality.
func loadAssignment(cluster string, eps []endpoint) *endpointv3.ClusterLoadAssignment {
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: cluster}
	if len(eps) == 0 {
		return cla
	}
	lbeps := make([]*endpointv3.LbEndpoint, 0, len(eps))
	for _, ep := range eps {
		lbeps = append(lbeps, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Protocol:      corev3.SocketAddress_TCP,
				Address:       ep.address,
				PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(ep.port)},
			}}},
		}}})
	}
	cla.Endpoints = []*endpointv3.LocalityLbEndpoints{{LbEndpoints: lbeps}}
	return cla
}
