package bootstrap

import (
	"fmt"
	"net/netip"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Names of the static listeners that expose one path of the admin interface each, and of the
// admin cluster behind them.
const (
	// ReadyListenerName is the static listener that answers readiness probes.
	ReadyListenerName = "envoy-ready"
	// ReadyPath is the only path it serves: Envoy's admin /ready.
	ReadyPath = "/ready"
	// StatsListenerName is the static listener Prometheus scrapes.
	StatsListenerName = "envoy-stats"
	// StatsPath is the only path it serves: Envoy's admin /stats/prometheus.
	StatsPath        = "/stats/prometheus"
	AdminClusterName = "envoy_admin"
)

// adminPathListener returns a listener named name on host:port that serves only path, by
// forwarding it to the admin cluster (the admin interface stays on loopback: the rest of the
// admin API can drain or stop Envoy and must not be reachable from the pod network).
func adminPathListener(name, path, host string, port uint32) (*listenerv3.Listener, error) {
	if _, err := netip.ParseAddr(host); err != nil {
		return nil, fmt.Errorf("the host must be an IP address: %w", err)
	}
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		return nil, err
	}
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix: name,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: name,
			VirtualHosts: []*routev3.VirtualHost{{
				Name:    name,
				Domains: []string{"*"},
				Routes: []*routev3.Route{{
					Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: path}},
					Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: AdminClusterName}}},
				}},
			}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	})
	if err != nil {
		return nil, err
	}
	return &listenerv3.Listener{
		Name:    name,
		Address: socketAddress(host, port),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name:       "envoy.filters.network.http_connection_manager",
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm},
		}}}},
	}, nil
}

// adminCluster is the static cluster of the admin interface at adminHost:adminPort.
func adminCluster(adminHost string, adminPort uint32) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 AdminClusterName,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(DefaultXDSConnectTimeout),
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: AdminClusterName,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: socketAddress(adminHost, adminPort)}},
			}}}},
		},
	}
}

// adminPathListeners adds to b the listeners of opts that expose one admin path each (ready,
// stats), and the admin cluster behind them when there is one.
func adminPathListeners(b *bootstrapv3.Bootstrap_StaticResources, opts Options, adminHost string, adminPort uint32) error {
	for _, l := range []struct{ what, name, path, addr string }{
		{"ready", ReadyListenerName, ReadyPath, opts.ReadyAddress},
		{"stats", StatsListenerName, StatsPath, opts.StatsAddress},
	} {
		if l.addr == "" {
			continue
		}
		host, port, err := splitHostPort(l.addr, false)
		if err != nil {
			return fmt.Errorf("%s address: %w", l.what, err)
		}
		listener, err := adminPathListener(l.name, l.path, host, port)
		if err != nil {
			return fmt.Errorf("%s address %q: %w", l.what, l.addr, err)
		}
		b.Listeners = append(b.Listeners, listener)
	}
	if len(b.Listeners) > 0 {
		b.Clusters = append(b.Clusters, adminCluster(adminHost, adminPort))
	}
	return nil
}
