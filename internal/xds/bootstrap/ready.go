package bootstrap

import (
	"fmt"
	"net/netip"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Names of the readiness listener and the admin cluster behind it.
const (
	// ReadyListenerName is the static listener that answers readiness probes.
	ReadyListenerName = "envoy-ready"
	// ReadyPath is the only path it serves: Envoy's admin /ready.
	ReadyPath        = "/ready"
	AdminClusterName = "envoy_admin"
)

// readyResources returns a listener on readyHost:readyPort that serves only GET /ready, by
// forwarding it to the admin interface (which stays on loopback: the rest of the admin API
// can drain or stop Envoy and must not be reachable from the pod network).
func readyResources(readyHost string, readyPort uint32, adminHost string, adminPort uint32) (*listenerv3.Listener, *clusterv3.Cluster, error) {
	if _, err := netip.ParseAddr(readyHost); err != nil {
		return nil, nil, fmt.Errorf("the host must be an IP address: %w", err)
	}
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		return nil, nil, err
	}
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix: ReadyListenerName,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: ReadyListenerName,
			VirtualHosts: []*routev3.VirtualHost{{
				Name:    ReadyListenerName,
				Domains: []string{"*"},
				Routes: []*routev3.Route{{
					Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: ReadyPath}},
					Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: AdminClusterName}}},
				}},
			}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	})
	if err != nil {
		return nil, nil, err
	}
	l := &listenerv3.Listener{
		Name:    ReadyListenerName,
		Address: socketAddress(readyHost, readyPort),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name:       "envoy.filters.network.http_connection_manager",
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm},
		}}}},
	}
	c := &clusterv3.Cluster{
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
	return l, c, nil
}
