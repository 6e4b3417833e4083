package translatetest

import (
	"errors"
	"fmt"
	"testing"

	xdsmatcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	udpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/re2"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds/translator"
)

// CheckResources fails the test unless the resources are something Envoy accepts.
func CheckResources(t testing.TB, res translator.Resources) {
	t.Helper()
	if err := Check(res); err != nil {
		t.Fatal(err)
	}
}

// Check returns why a set of resources would not be accepted by Envoy, or nil: every
// resource (and every typed config inside it) passes Validate, names are unique and sorted,
// the snapshot is consistent, no two listeners share an address and port, and every
// listener's cluster, route configuration and secret exists.
func Check(res translator.Resources) error {
	for _, tf := range TypeFiles {
		prev := ""
		for i, r := range res[tf.TypeURL] {
			name := cache.GetResourceName(r)
			if i > 0 && name <= prev {
				return fmt.Errorf("%s %q is not sorted after %q or not unique", tf.Suffix, name, prev)
			}
			prev = name
			if err := validate(r); err != nil {
				return fmt.Errorf("%s %q: %w", tf.Suffix, name, err)
			}
		}
	}
	snap, err := cache.NewSnapshot("v", map[resource.Type][]types.Resource(res))
	if err != nil {
		return err
	}
	if err := snap.Consistent(); err != nil {
		return fmt.Errorf("inconsistent snapshot: %w", err)
	}
	names := func(typeURL string) map[string]bool {
		m := map[string]bool{}
		for _, r := range res[typeURL] {
			m[cache.GetResourceName(r)] = true
		}
		return m
	}
	routes, secrets := names(resource.RouteType), names(resource.SecretType)
	for _, r := range res[resource.RouteType] {
		if err := checkRegexes(r.(proto.Message).ProtoReflect()); err != nil {
			return fmt.Errorf("route configuration %q: %w", cache.GetResourceName(r), err)
		}
	}

	clusters := map[string]*clusterv3.Cluster{}
	for _, r := range res[resource.ClusterType] {
		c := r.(*clusterv3.Cluster)
		clusters[c.Name] = c
		if c.GetType() != clusterv3.Cluster_EDS || c.LoadAssignment != nil {
			return fmt.Errorf("cluster %q is not an EDS cluster: Envoy must never resolve a tenant's name", c.Name)
		}
		if ts := c.GetTransportSocket(); ts != nil {
			if err := validateAny(ts.GetTypedConfig()); err != nil {
				return fmt.Errorf("cluster %q transport socket: %w", c.Name, err)
			}
		}
		for k, a := range c.GetTypedExtensionProtocolOptions() {
			if err := validateAny(a); err != nil {
				return fmt.Errorf("cluster %q %s: %w", c.Name, k, err)
			}
		}
	}
	for _, r := range res[resource.EndpointType] {
		cla := r.(*endpointv3.ClusterLoadAssignment)
		if clusters[cla.ClusterName].GetType() != clusterv3.Cluster_EDS {
			return fmt.Errorf("endpoints %q belong to no EDS cluster", cla.ClusterName)
		}
	}
	ports := map[string]string{}
	for _, r := range res[resource.ListenerType] {
		l := r.(*listenerv3.Listener)
		sa := l.GetAddress().GetSocketAddress()
		key := fmt.Sprintf("%s/%s/%d", sa.GetProtocol(), sa.GetAddress(), sa.GetPortValue())
		if other, ok := ports[key]; ok {
			return fmt.Errorf("listeners %q and %q both bind %s", other, l.Name, key)
		}
		ports[key] = l.Name
		if ir.IsFleetPort(sa.GetPortValue()) {
			return fmt.Errorf("listener %q binds port %d, one of the Envoy pods' own ports", l.Name, sa.GetPortValue())
		}
		if err := checkListener(l, clusters, routes, secrets); err != nil {
			return fmt.Errorf("listener %q: %w", l.Name, err)
		}
	}
	return nil
}

// checkListener checks the listener's typed configs and that what they reference exists.
func checkListener(l *listenerv3.Listener, clusters map[string]*clusterv3.Cluster, routes, secrets map[string]bool) error {
	for _, lf := range l.ListenerFilters {
		m, err := unpack(lf.GetTypedConfig())
		if err != nil {
			return err
		}
		if up, ok := m.(*udpproxyv3.UdpProxyConfig); ok {
			// Every datagram routed (on_no_match), or only those of the source ranges (an IP
			// matcher on the source address, nothing on no match).
			action := up.GetMatcher().GetOnNoMatch().GetAction()
			if tree := up.GetMatcher().GetMatcherTree(); tree != nil {
				if action != nil {
					return errors.New("udp proxy: a source-range matcher routes datagrams from elsewhere too")
				}
				ipm := &xdsmatcherv3.IPMatcher{}
				if err := tree.GetCustomMatch().GetTypedConfig().UnmarshalTo(ipm); err != nil {
					return fmt.Errorf("udp source matcher: %w", err)
				}
				if len(ipm.RangeMatchers) != 1 || len(ipm.RangeMatchers[0].Ranges) == 0 {
					return errors.New("udp source matcher: want one range matcher with ranges")
				}
				action = ipm.RangeMatchers[0].GetOnMatch().GetAction()
			}
			route := &udpproxyv3.Route{}
			if err := action.GetTypedConfig().UnmarshalTo(route); err != nil {
				return fmt.Errorf("udp route: %w", err)
			}
			if clusters[route.Cluster] == nil {
				return fmt.Errorf("points at missing cluster %q", route.Cluster)
			}
		}
	}
	if len(l.FilterChains) == 0 && len(l.ListenerFilters) == 0 {
		return fmt.Errorf("has neither filter chains nor listener filters")
	}
	for _, fc := range l.FilterChains {
		if ts := fc.GetTransportSocket(); ts != nil {
			m, err := unpack(ts.GetTypedConfig())
			if err != nil {
				return err
			}
			if tc, ok := m.(*tlsv3.DownstreamTlsContext); ok {
				for _, s := range tc.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs() {
					if !secrets[s.Name] {
						return fmt.Errorf("points at missing secret %q", s.Name)
					}
				}
			}
		}
		for _, f := range fc.Filters {
			m, err := unpack(f.GetTypedConfig())
			if err != nil {
				return err
			}
			switch c := m.(type) {
			case *tcpproxyv3.TcpProxy:
				if wc := c.GetWeightedClusters(); wc != nil {
					for _, w := range wc.GetClusters() {
						if clusters[w.GetName()] == nil && w.GetName() != translator.FailedBackendCluster {
							return fmt.Errorf("points at missing cluster %q", w.GetName())
						}
					}
				} else if clusters[c.GetCluster()] == nil {
					return fmt.Errorf("points at missing cluster %q", c.GetCluster())
				}
			case *hcmv3.HttpConnectionManager:
				if !routes[c.GetRds().GetRouteConfigName()] {
					return fmt.Errorf("points at missing route configuration %q", c.GetRds().GetRouteConfigName())
				}
				for _, hf := range c.HttpFilters {
					if _, err := unpack(hf.GetTypedConfig()); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// unpack unpacks and validates a typed config.
func unpack(a *anypb.Any) (proto.Message, error) {
	m, err := a.UnmarshalNew()
	if err != nil {
		return nil, err
	}
	if err := validate(m); err != nil {
		return nil, fmt.Errorf("%T: %w", m, err)
	}
	return m, nil
}

// validateAny unpacks a typed config and validates it, and the typed configs nested in it.
func validateAny(a *anypb.Any) error {
	m, err := unpack(a)
	if err != nil {
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

// checkRegexes finds every RegexMatcher in m and checks that Envoy's RE2 parses it with a
// program within Envoy's default limit (re2.ProgramSize, re2.EnvoyMaxProgramSize): Envoy would
// refuse the whole resource otherwise.
func checkRegexes(m protoreflect.Message) error {
	if rm, ok := m.Interface().(*matcherv3.RegexMatcher); ok {
		n, err := re2.ProgramSize(rm.GetRegex())
		if err != nil {
			return fmt.Errorf("regex %q: %w", rm.GetRegex(), err)
		}
		if n > re2.EnvoyMaxProgramSize {
			return fmt.Errorf("regex %q: RE2 program size %d, Envoy refuses above %d", rm.GetRegex(), n, re2.EnvoyMaxProgramSize)
		}
		return nil
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len() && err == nil; i++ {
				err = checkRegexes(v.List().Get(i).Message())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				err = checkRegexes(mv.Message())
				return err == nil
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			err = checkRegexes(v.Message())
		}
		return err == nil
	})
	return err
}

// Resources translates the tenant (translate.Run, then the back end) into its Envoy
// resources, failing the test on an error.
func Resources(t testing.TB, in translate.Input) translator.Resources {
	t.Helper()
	r, err := translate.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := translator.Translate(r.Config)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
