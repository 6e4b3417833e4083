// Package translatetest holds test helpers for translate: the YAML form of an Input used by
// the golden files, a stable YAML rendering of an Output, and a checker that an Output is
// something Envoy accepts.
package translatetest

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	udpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/translate"
)

// LoadInput reads an Input from a golden testdata/*.in.yaml file.
func LoadInput(path string) (translate.Input, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return translate.Input{}, err
	}
	var g goldenInput
	if err := yaml.UnmarshalStrict(raw, &g); err != nil {
		return translate.Input{}, fmt.Errorf("parse %s: %w", path, err)
	}
	return g.input(), nil
}

// goldenInput is the YAML form of an Input: Addresses as a list, durations as strings.
type goldenInput struct {
	Tenant        string                  `json:"tenant"`
	Options       goldenOptions           `json:"options,omitempty"`
	Addresses     []v1alpha1.Addresses    `json:"addresses,omitempty"`
	LoadBalancers []v1alpha1.LoadBalancer `json:"loadBalancers,omitempty"`
}

type goldenOptions struct {
	ListenerAddress          string            `json:"listenerAddress,omitempty"`
	ConnectTimeout           metav1.Duration   `json:"connectTimeout,omitempty"`
	MaxConnectionsPerCluster uint32            `json:"maxConnectionsPerCluster,omitempty"`
	UDPSessionIdleTimeout    metav1.Duration   `json:"udpSessionIdleTimeout,omitempty"`
	HealthCheck              goldenHealthCheck `json:"healthCheck,omitempty"`
}

type goldenHealthCheck struct {
	Disabled           bool            `json:"disabled,omitempty"`
	Interval           metav1.Duration `json:"interval,omitempty"`
	Timeout            metav1.Duration `json:"timeout,omitempty"`
	UnhealthyThreshold uint32          `json:"unhealthyThreshold,omitempty"`
	HealthyThreshold   uint32          `json:"healthyThreshold,omitempty"`
	NoTrafficInterval  metav1.Duration `json:"noTrafficInterval,omitempty"`
}

func (g goldenInput) input() translate.Input {
	in := translate.Input{
		Tenant:        g.Tenant,
		LoadBalancers: g.LoadBalancers,
		Addresses:     map[string]v1alpha1.Addresses{},
		Options: translate.Options{
			ListenerAddress:          g.Options.ListenerAddress,
			ConnectTimeout:           g.Options.ConnectTimeout.Duration,
			MaxConnectionsPerCluster: g.Options.MaxConnectionsPerCluster,
			UDPSessionIdleTimeout:    g.Options.UDPSessionIdleTimeout.Duration,
			HealthCheck: translate.HealthCheck{
				Disabled:           g.Options.HealthCheck.Disabled,
				Interval:           g.Options.HealthCheck.Interval.Duration,
				Timeout:            g.Options.HealthCheck.Timeout.Duration,
				UnhealthyThreshold: g.Options.HealthCheck.UnhealthyThreshold,
				HealthyThreshold:   g.Options.HealthCheck.HealthyThreshold,
				NoTrafficInterval:  g.Options.HealthCheck.NoTrafficInterval.Duration,
			},
		},
	}
	for _, a := range g.Addresses {
		in.Addresses[a.Name] = a
	}
	return in
}

// Render renders an Output as YAML: every resource through protojson (snake_case field
// names, as in Envoy's docs) and then through a generic map, so key order is sorted and the
// result is byte-stable (protojson's own output deliberately is not).
func Render(out translate.Output) ([]byte, error) {
	conv := func(rs []types.Resource) ([]any, error) {
		list := make([]any, 0, len(rs))
		for _, r := range rs {
			b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(r.(proto.Message))
			if err != nil {
				return nil, err
			}
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		return list, nil
	}
	doc := map[string]any{}
	for key, rs := range map[string][]types.Resource{"listeners": out.Listeners, "clusters": out.Clusters, "endpoints": out.Endpoints} {
		list, err := conv(rs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		doc[key] = list
	}
	if len(out.Problems) > 0 {
		doc["problems"] = out.Problems
	}
	return yaml.Marshal(doc)
}

// CheckOutput fails the test unless the output is something Envoy accepts: every resource
// (and every typed config inside it) passes Validate, the snapshot is consistent, names are
// unique and sorted, no two listeners share a port, and every listener points at a cluster.
func CheckOutput(t testing.TB, out translate.Output) {
	t.Helper()
	if err := Check(out); err != nil {
		t.Fatal(err)
	}
}

// Check returns why an Output would not be accepted by Envoy, or nil.
func Check(out translate.Output) error {
	for kind, rs := range map[string][]types.Resource{"listener": out.Listeners, "cluster": out.Clusters, "endpoints": out.Endpoints} {
		prev := ""
		for i, r := range rs {
			name := cache.GetResourceName(r)
			if i > 0 && name <= prev {
				return fmt.Errorf("%s %q is not sorted after %q or not unique", kind, name, prev)
			}
			prev = name
			if err := validate(r); err != nil {
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

func validate(m proto.Message) error {
	v, ok := m.(interface{ Validate() error })
	if !ok {
		return fmt.Errorf("%T has no Validate method", m)
	}
	return v.Validate()
}
