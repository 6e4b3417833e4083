// Package bootstrap renders the Envoy bootstrap of a tenant's proxies: node identity (the
// tenant in node.cluster), ADS over gRPC with mutual TLS to the manager's xDS server (the
// client certificate and CA from the mounted client Secret, see TLSFiles), the admin interface on
// loopback, optional listeners that serve only /ready and only /stats/prometheus of it, and
// the overload manager. It is
// built from the bootstrap protos and validated, and golden-tested (testdata/).
package bootstrap

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	overloadv3 "github.com/envoyproxy/go-control-plane/envoy/config/overload/v3"
	downstreamconnsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	fixedheapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// Bootstrap defaults and names.
const (
	// KeepaliveTime and KeepaliveTimeout of Envoy's gRPC connection to the xDS server; they
	// equal the server's (internal/xds), whose enforcement policy must allow them.
	KeepaliveTime    = 30 * time.Second
	KeepaliveTimeout = 10 * time.Second

	// XDSClusterName is the static cluster of the bootstrap that points at the xDS server.
	XDSClusterName = "xds_cluster"
	// DefaultAdminAddress is where Envoy's admin interface listens unless told otherwise.
	DefaultAdminAddress = "127.0.0.1:9901"
	// DefaultXDSConnectTimeout bounds connecting to the xDS server.
	DefaultXDSConnectTimeout = 5 * time.Second

	httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
)

// Protocol is the xDS protocol variant Envoy speaks on its ADS stream.
type Protocol string

// The xDS protocols (the manager's --envoy-xds-protocol). The xDS server serves both.
const (
	// ProtocolDelta is incremental xDS (api_type DELTA_GRPC): each response carries only the
	// resources that changed, so the bytes on the wire follow the change, not the tenant.
	ProtocolDelta Protocol = "delta"
	// ProtocolSotW is state of the world (api_type GRPC): every response of a type carries
	// all its resources. The fallback.
	ProtocolSotW Protocol = "sotw"
	// DefaultProtocol is the protocol when Options.Protocol is empty.
	DefaultProtocol = ProtocolDelta
)

// Protocols lists the protocols, for flag validation.
var Protocols = []string{string(ProtocolDelta), string(ProtocolSotW)}

// apiType is the ADS api_type of a protocol.
func (p Protocol) apiType() (corev3.ApiConfigSource_ApiType, error) {
	switch p {
	case "", ProtocolDelta:
		return corev3.ApiConfigSource_DELTA_GRPC, nil
	case ProtocolSotW:
		return corev3.ApiConfigSource_GRPC, nil
	}
	return 0, fmt.Errorf("unknown xDS protocol %q (want %s or %s)", p, ProtocolDelta, ProtocolSotW)
}

// Options describe one tenant's Envoy fleet.
type Options struct {
	// Tenant is the tenant namespace; it becomes node.cluster, which selects the snapshot.
	Tenant string
	// NodeID is node.id. Leave it empty in a Deployment and start Envoy with
	// "--service-node $(POD_NAME)" so every proxy has its own id.
	NodeID string
	// XDSAddress is host:port of the xDS server, e.g. "kubelb.kubelb.svc:8001".
	XDSAddress string
	// XDSServerName is the name Envoy sends as SNI and requires in the xDS server's
	// certificate (a DNS SAN, or an IP SAN for an address); default: the host of XDSAddress.
	XDSServerName string
	// TLSDir is where the client Secret (certificate, key, CA and the SDS files of TLSFiles)
	// is mounted; default DefaultTLSDir.
	TLSDir string
	// AdminAddress is ip:port of Envoy's admin interface; default 127.0.0.1:9901. Port 0 lets
	// Envoy pick one (read it back with --admin-address-path).
	AdminAddress string
	// ReadyAddress is ip:port of a listener that serves only GET /ready (forwarded to the
	// admin interface), for readiness probes from outside the pod; "" adds none. It lets the
	// admin interface itself stay on loopback.
	ReadyAddress string
	// StatsAddress is ip:port of a listener that serves only GET /stats/prometheus
	// (forwarded to the admin interface), for Prometheus; "" adds none.
	StatsAddress string
	// Protocol is the xDS protocol of the ADS stream; default DefaultProtocol (delta).
	Protocol Protocol
	// EnvoyProxy settings; only overloadManager is used (header limits belong to HTTP
	// connection managers, which layer-4 load balancing does not have).
	EnvoyProxy *v1alpha1.EnvoyProxy
}

// Generate returns the Envoy bootstrap configuration (YAML) of a tenant's proxies: ADS over
// gRPC (delta or state of the world, see Options.Protocol) to the xDS server for listeners
// and clusters (endpoints come through ADS as well, see
// translate), the admin interface, and the overload manager when enabled. It is built from the
// bootstrap protos and validated, so it is valid by construction.
func Generate(opts Options) ([]byte, error) {
	b, err := bootstrapProto(opts)
	if err != nil {
		return nil, err
	}
	if err := b.Validate(); err != nil {
		return nil, fmt.Errorf("invalid bootstrap: %w", err)
	}
	return toYAML(b)
}

func bootstrapProto(opts Options) (*bootstrapv3.Bootstrap, error) {
	if opts.Tenant == "" {
		return nil, errors.New("bootstrap: tenant must not be empty")
	}
	apiType, err := opts.Protocol.apiType()
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	xdsHost, xdsPort, err := splitHostPort(opts.XDSAddress, false)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: xDS address: %w", err)
	}
	if opts.XDSServerName == "" {
		opts.XDSServerName = xdsHost
	}
	xdsTLS, err := xdsTransportSocket(opts.TLSDir, opts.XDSServerName)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: xDS TLS: %w", err)
	}
	if opts.AdminAddress == "" {
		opts.AdminAddress = DefaultAdminAddress
	}
	adminHost, adminPort, err := splitHostPort(opts.AdminAddress, true)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: admin address: %w", err)
	}
	if _, err := netip.ParseAddr(adminHost); err != nil {
		return nil, fmt.Errorf("bootstrap: admin address %q: the host must be an IP address", opts.AdminAddress)
	}

	http2, err := anypb.New(&httpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{
				// Matches the server's keepalive enforcement (pings at most every 10s).
				ConnectionKeepalive: &corev3.KeepaliveSettings{
					Interval: durationpb.New(KeepaliveTime),
					Timeout:  durationpb.New(KeepaliveTimeout),
				},
			}},
		}},
	})
	if err != nil {
		return nil, err
	}
	ads := &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}
	b := &bootstrapv3.Bootstrap{
		Node: &corev3.Node{Id: opts.NodeID, Cluster: opts.Tenant},
		Admin: &bootstrapv3.Admin{
			Address: socketAddress(adminHost, adminPort),
		},
		DynamicResources: &bootstrapv3.Bootstrap_DynamicResources{
			AdsConfig: &corev3.ApiConfigSource{
				ApiType:             apiType,
				TransportApiVersion: corev3.ApiVersion_V3,
				GrpcServices: []*corev3.GrpcService{{
					TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: XDSClusterName}},
				}},
				SetNodeOnFirstMessageOnly: true,
			},
			LdsConfig: ads,
			CdsConfig: proto.Clone(ads).(*corev3.ConfigSource),
		},
		// Health discovery over the same connection: the manager asks the proxy to check
		// the tenant's endpoints and hears what it found (internal/xds, hds.go).
		HdsConfig: &corev3.ApiConfigSource{
			ApiType:             corev3.ApiConfigSource_GRPC,
			TransportApiVersion: corev3.ApiVersion_V3,
			GrpcServices: []*corev3.GrpcService{{
				TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: XDSClusterName}},
			}},
		},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{
			Clusters: []*clusterv3.Cluster{{
				Name:                 XDSClusterName,
				ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS},
				DnsLookupFamily:      clusterv3.Cluster_V4_PREFERRED,
				ConnectTimeout:       durationpb.New(DefaultXDSConnectTimeout),
				TypedExtensionProtocolOptions: map[string]*anypb.Any{
					httpProtocolOptionsKey: http2,
				},
				UpstreamConnectionOptions: &clusterv3.UpstreamConnectionOptions{TcpKeepalive: &corev3.TcpKeepalive{}},
				TransportSocket:           xdsTLS,
				LoadAssignment: &endpointv3.ClusterLoadAssignment{
					ClusterName: XDSClusterName,
					Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
						HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
							Address: socketAddress(xdsHost, xdsPort),
						}},
					}}}},
				},
			}},
		},
	}
	if err := adminPathListeners(b.StaticResources, opts, adminHost, adminPort); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	if opts.EnvoyProxy != nil {
		if b.OverloadManager, err = overloadManager(opts.EnvoyProxy.OverloadManager); err != nil {
			return nil, fmt.Errorf("bootstrap: overload manager: %w", err)
		}
	}
	return b, nil
}

// overloadManager caps active downstream connections and heap size when asked to. On heap
// pressure Envoy first shrinks its heap, then stops accepting connections and requests.
func overloadManager(o *v1alpha1.OverloadManager) (*overloadv3.OverloadManager, error) {
	if o == nil || !o.Enabled || (o.MaxActiveDownstreamConnections == nil && o.MaxHeapSizeBytes == nil) {
		return nil, nil
	}
	om := &overloadv3.OverloadManager{RefreshInterval: durationpb.New(250 * time.Millisecond)}
	if n := o.MaxActiveDownstreamConnections; n != nil {
		if *n == 0 || *n > 1<<62 {
			return nil, fmt.Errorf("maxActiveDownstreamConnections %d is out of range", *n)
		}
		cfg, err := anypb.New(&downstreamconnsv3.DownstreamConnectionsConfig{MaxActiveDownstreamConnections: int64(*n)})
		if err != nil {
			return nil, err
		}
		om.ResourceMonitors = append(om.ResourceMonitors, &overloadv3.ResourceMonitor{
			Name:       "envoy.resource_monitors.global_downstream_max_connections",
			ConfigType: &overloadv3.ResourceMonitor_TypedConfig{TypedConfig: cfg},
		})
	}
	if n := o.MaxHeapSizeBytes; n != nil {
		if *n == 0 {
			return nil, errors.New("maxHeapSizeBytes must be positive")
		}
		const monitor = "envoy.resource_monitors.fixed_heap"
		cfg, err := anypb.New(&fixedheapv3.FixedHeapConfig{MaxHeapSizeBytes: *n})
		if err != nil {
			return nil, err
		}
		om.ResourceMonitors = append(om.ResourceMonitors, &overloadv3.ResourceMonitor{
			Name:       monitor,
			ConfigType: &overloadv3.ResourceMonitor_TypedConfig{TypedConfig: cfg},
		})
		for _, a := range []struct {
			name      string
			threshold float64
		}{
			{"envoy.overload_actions.shrink_heap", 0.95},
			{"envoy.overload_actions.stop_accepting_connections", 0.98},
			{"envoy.overload_actions.stop_accepting_requests", 0.98},
		} {
			om.Actions = append(om.Actions, &overloadv3.OverloadAction{
				Name: a.name,
				Triggers: []*overloadv3.Trigger{{
					Name:         monitor,
					TriggerOneof: &overloadv3.Trigger_Threshold{Threshold: &overloadv3.ThresholdTrigger{Value: a.threshold}},
				}},
			})
		}
	}
	return om, nil
}

// splitHostPort splits host:port; port 0 ("pick one") is allowed only when zeroOK.
func splitHostPort(addr string, zeroOK bool) (string, uint32, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if host == "" {
		return "", 0, fmt.Errorf("%q has no host", addr)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || (n == 0 && !zeroOK) {
		return "", 0, fmt.Errorf("%q has no valid port", addr)
	}
	return host, uint32(n), nil
}

func socketAddress(host string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       host,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}
