package translate

import (
	"fmt"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	udpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// checkOutput fails the test unless the output is something Envoy accepts: every resource
// (and every typed config inside it) passes Validate, the snapshot is consistent, names are
// unique and sorted, no two listeners share a port, and every listener points at a cluster.
func checkOutput(t testing.TB, out Output) {
	t.Helper()
	if err := outputError(out); err != nil {
		t.Fatal(err)
	}
}

func outputError(out Output) error {
	for kind, rs := range map[string][]types.Resource{"listener": out.Listeners, "cluster": out.Clusters, "endpoints": out.Endpoints} {
		prev := ""
		for i, r := range rs {
			name := resourceName(r)
			if i > 0 && name <= prev {
				return fmt.Errorf("%s %q is not sorted after %q or not unique", kind, name, prev)
			}
			prev = name
			if err := r.(validator).Validate(); err != nil {
				return fmt.Errorf("%s %q: %w", kind, name, err)
			}
		}
	}
	snap, err := cache.NewSnapshot("v", out.Resources())
	if err != nil {
		return err
	}
	if err := snap.Consistent(); err != nil {
		return fmt.Errorf("inconsistent snapshot: %w", err)
	}

	clusters := map[string]*clusterv3.Cluster{}
	for _, r := range out.Clusters {
		c := r.(*clusterv3.Cluster)
		clusters[c.Name] = c
		if c.GetType() == clusterv3.Cluster_STRICT_DNS && c.LoadAssignment == nil {
			return fmt.Errorf("STRICT_DNS cluster %q without load assignment", c.Name)
		}
		if ts := c.GetTransportSocket(); ts != nil {
			if err := validateAny(ts.GetTypedConfig()); err != nil {
				return fmt.Errorf("cluster %q transport socket: %w", c.Name, err)
			}
		}
	}
	for _, r := range out.Endpoints {
		cla := r.(*endpointv3.ClusterLoadAssignment)
		if clusters[cla.ClusterName].GetType() != clusterv3.Cluster_EDS {
			return fmt.Errorf("endpoints %q belong to no EDS cluster", cla.ClusterName)
		}
	}
	ports := map[string]string{}
	for _, r := range out.Listeners {
		l := r.(*listenerv3.Listener)
		sa := l.GetAddress().GetSocketAddress()
		key := fmt.Sprintf("%s/%s/%d", sa.GetProtocol(), sa.GetAddress(), sa.GetPortValue())
		if other, ok := ports[key]; ok {
			return fmt.Errorf("listeners %q and %q both bind %s", other, l.Name, key)
		}
		ports[key] = l.Name
		var cluster string
		switch {
		case len(l.FilterChains) == 1 && len(l.FilterChains[0].Filters) == 1:
			tp := &tcpproxyv3.TcpProxy{}
			if err := l.FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(tp); err != nil {
				return fmt.Errorf("listener %q: %w", l.Name, err)
			}
			if err := tp.Validate(); err != nil {
				return fmt.Errorf("listener %q tcp_proxy: %w", l.Name, err)
			}
			cluster = tp.GetCluster()
		case len(l.ListenerFilters) == 1:
			up := &udpproxyv3.UdpProxyConfig{}
			if err := l.ListenerFilters[0].GetTypedConfig().UnmarshalTo(up); err != nil {
				return fmt.Errorf("listener %q: %w", l.Name, err)
			}
			if err := up.Validate(); err != nil {
				return fmt.Errorf("listener %q udp_proxy: %w", l.Name, err)
			}
			route := &udpproxyv3.Route{}
			if err := up.GetMatcher().GetOnNoMatch().GetAction().GetTypedConfig().UnmarshalTo(route); err != nil {
				return fmt.Errorf("listener %q udp route: %w", l.Name, err)
			}
			cluster = route.Cluster
		default:
			return fmt.Errorf("listener %q has neither one tcp_proxy nor one udp_proxy", l.Name)
		}
		if clusters[cluster] == nil {
			return fmt.Errorf("listener %q points at missing cluster %q", l.Name, cluster)
		}
	}
	if len(out.Listeners) != len(out.Clusters) {
		return fmt.Errorf("%d listeners but %d clusters", len(out.Listeners), len(out.Clusters))
	}
	return nil
}

// validateAny unpacks a typed config and validates it, and the typed configs nested in it.
func validateAny(a *anypb.Any) error {
	m, err := a.UnmarshalNew()
	if err != nil {
		return err
	}
	if err := validate(m); err != nil {
		return err
	}
	if pp, ok := m.(*proxyprotocolv3.ProxyProtocolUpstreamTransport); ok {
		return validateAny(pp.GetTransportSocket().GetTypedConfig())
	}
	return nil
}
