package xds

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/translator"
	"kubelb.dev/kubelb/internal/xds/xdstest"
)

const waitTimeout = 30 * time.Second

// startXDS serves a new Server on a free loopback port until the test ends.
func startXDS(t *testing.T) (*Server, string) {
	t.Helper()
	return startXDSLimits(t, DefaultLimits())
}

// startXDSLimits is startXDS with the limits l.
func startXDSLimits(t *testing.T, l Limits) (*Server, string) {
	t.Helper()
	srv := NewServer(testr.NewWithOptions(t, testr.Options{Verbosity: 1}), xdstest.New(t).ServerTLS())
	if err := srv.SetLimits(l); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return within 10s of cancellation")
		}
	})
	return srv, lis.Addr().String()
}

// startEnvoy starts a real Envoy for tenant with the bootstrap Bootstrap generates and a
// client certificate of the tenant. The server refuses a tenant without a snapshot, so an
// empty one is set first when there is none (as the manager does for every tenant namespace).
func startEnvoy(t *testing.T, srv *Server, tenant, xdsAddr, node string) *testsupport.Envoy {
	t.Helper()
	return startEnvoyProtocol(t, srv, tenant, xdsAddr, node, bootstrap.DefaultProtocol)
}

// startEnvoyProtocol is startEnvoy with the xDS protocol of the bootstrap.
func startEnvoyProtocol(t *testing.T, srv *Server, tenant, xdsAddr, node string, protocol bootstrap.Protocol) *testsupport.Envoy {
	t.Helper()
	if srv.Version(tenant) == "" {
		if _, err := srv.SetTenant(context.Background(), tenant, nil); err != nil {
			t.Fatal(err)
		}
	}
	b := xdstest.New(t).Bootstrap(t, bootstrap.Options{Tenant: tenant, XDSAddress: xdsAddr, AdminAddress: "127.0.0.1:0", Protocol: protocol})
	return testsupport.StartEnvoy(t, node, b, testsupport.EnvoyOptions{Node: node, Concurrency: 1})
}

// lbBuilder makes LoadBalancers as the ccm and the port allocator would leave them.
type lbBuilder struct{ v1alpha1.LoadBalancer }

func newLB(name string) *lbBuilder {
	return &lbBuilder{v1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant-x", Annotations: map[string]string{}},
		Spec: v1alpha1.LoadBalancerSpec{Endpoints: []v1alpha1.LoadBalancerEndpoints{{
			AddressesReference: &corev1.ObjectReference{Name: v1alpha1.DefaultAddressesName},
		}}},
	}}
}

// port adds a port whose NodePort is nodePort and whose allocated listener port is listener.
func (b *lbBuilder) port(proto corev1.Protocol, port, nodePort, listener int) *lbBuilder {
	b.Spec.Ports = append(b.Spec.Ports, v1alpha1.LoadBalancerPort{Protocol: proto, Port: int32(port)})
	b.Spec.Endpoints[0].Ports = append(b.Spec.Endpoints[0].Ports, v1alpha1.EndpointPort{Protocol: proto, Port: int32(nodePort)})
	sp := v1alpha1.ServicePort{UpstreamTargetPort: int32(listener)}
	sp.Protocol, sp.Port = proto, int32(port)
	b.Status.Service.Ports = append(b.Status.Service.Ports, sp)
	return b
}

func (b *lbBuilder) annotate(k, v string) *lbBuilder { b.Annotations[k] = v; return b }

func (b *lbBuilder) sourceIP() *lbBuilder {
	b.Spec.Persistence = &v1alpha1.Persistence{Type: v1alpha1.PersistenceSourceIP}
	return b
}

// loopbackAllowed is the endpoint policy of tests whose tenant nodes are loopback addresses,
// which the policy denies by default.
var loopbackAllowed = translate.EndpointPolicy{Allow: []translate.PolicyRule{
	{Prefix: netip.MustParsePrefix("127.0.0.0/8"), Source: translate.SourceConfigAllow},
}}

func addresses(ips ...string) map[string]v1alpha1.Addresses {
	a := v1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultAddressesName}}
	for _, ip := range ips {
		a.Spec.Addresses = append(a.Spec.Addresses, v1alpha1.EndpointAddress{IP: ip})
	}
	return map[string]v1alpha1.Addresses{a.Name: a}
}

// mustTranslate translates in with the hub Services the LoadBalancer controller makes for
// the allocations these tests record in the LoadBalancers' status (the tests play the port
// allocator there; translation reads only the hub Services).
func mustTranslate(t *testing.T, in translate.Input) Resources {
	t.Helper()
	in.HubServices = translatetest.HubServicesFromStatus(in.LoadBalancers)
	_, problems, out, err := translatetest.Pipeline(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("unexpected problems: %v", problems)
	}
	return out
}

// listenerNames lists Envoy's active listeners.
func listenerNames(e *testsupport.Envoy) ([]string, error) {
	listeners, err := e.Listeners()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, l := range listeners {
		names = append(names, l.Name)
	}
	slices.Sort(names)
	return names, nil
}

// clusterHosts returns the hosts ("ip:port") of a cluster with whether Envoy considers them
// healthy.
func clusterHosts(e *testsupport.Envoy, cluster string) (map[string]bool, error) {
	hosts, err := e.ClusterHosts(func(name string) bool { return name == cluster })
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", cluster, err)
	}
	out := map[string]bool{}
	for addr, h := range hosts {
		out[addr] = h.Healthy
	}
	return out, nil
}

// configVersions returns the version_info Envoy last accepted for listeners and clusters.
func configVersions(e *testsupport.Envoy) (lds, cds string, err error) {
	v, err := acceptedVersions(e)
	return v[resource.ListenerType], v[resource.ClusterType], err
}

// acceptedVersions returns the versions Envoy last accepted for listeners and clusters, by
// type URL. Envoy's dump has no version for endpoints; see endpointCounts.
func acceptedVersions(e *testsupport.Envoy) (map[string]string, error) {
	var doc struct {
		Configs []struct {
			Type        string `json:"@type"`
			VersionInfo string `json:"version_info"`
		} `json:"configs"`
	}
	v := map[string]string{}
	if err := e.ConfigDump("", &doc); err != nil {
		return v, err
	}
	for _, c := range doc.Configs {
		switch c.Type {
		case "type.googleapis.com/envoy.admin.v3.ListenersConfigDump":
			v[resource.ListenerType] = c.VersionInfo
		case "type.googleapis.com/envoy.admin.v3.ClustersConfigDump":
			v[resource.ClusterType] = c.VersionInfo
		}
	}
	return v, nil
}

// endpointCounts returns the number of hosts of every dynamic cluster Envoy has endpoints
// for, by cluster name.
func endpointCounts(e *testsupport.Envoy) (map[string]int, error) {
	var doc struct {
		Configs []struct {
			DynamicEndpointConfigs []struct {
				EndpointConfig struct {
					ClusterName string `json:"cluster_name"`
					Endpoints   []struct {
						LbEndpoints []json.RawMessage `json:"lb_endpoints"`
					} `json:"endpoints"`
				} `json:"endpoint_config"`
			} `json:"dynamic_endpoint_configs"`
		} `json:"configs"`
	}
	counts := map[string]int{}
	if err := e.ConfigDump("?include_eds", &doc); err != nil {
		return nil, err
	}
	for _, c := range doc.Configs {
		for _, d := range c.DynamicEndpointConfigs {
			n := 0
			for _, l := range d.EndpointConfig.Endpoints {
				n += len(l.LbEndpoints)
			}
			counts[d.EndpointConfig.ClusterName] = n
		}
	}
	return counts, nil
}

// connectedProxies checks the gauge of proxies connected for tenant.
func connectedProxies(tenant string, want float64) error {
	if n := testutil.ToFloat64(metrics.ManagerXDSConnectedProxies.WithLabelValues(tenant)); n != want {
		return fmt.Errorf("%v connected proxies", n)
	}
	return nil
}

func waitHosts(t *testing.T, e *testsupport.Envoy, cluster string, want ...string) {
	t.Helper()
	testsupport.Eventually(t, waitTimeout, "cluster "+cluster+" to have healthy hosts "+strings.Join(want, ","), func() error {
		hosts, err := clusterHosts(e, cluster)
		if err != nil {
			return err
		}
		if len(hosts) != len(want) {
			return fmt.Errorf("%v", hosts)
		}
		for _, h := range want {
			if !hosts[h] {
				return fmt.Errorf("%v", hosts)
			}
		}
		return nil
	})
}

// TestEnvoy drives a real Envoy through the xDS server: it checks that TCP and UDP traffic
// flows, that both nodes get traffic, that SourceIP persistence and PROXY protocol work, that
// an invalid snapshot is refused while Envoy keeps serving, that endpoint updates take
// effect, that identical updates are not pushed, and that the metrics follow.
//
// It runs for both protocols: delta, the fleets' default, and state of the world, the
// fallback (--envoy-xds-protocol=sotw).
func TestEnvoy(t *testing.T) {
	for _, p := range []bootstrap.Protocol{bootstrap.ProtocolDelta, bootstrap.ProtocolSotW} {
		t.Run(string(p), func(t *testing.T) { testEnvoy(t, p) })
	}
}

func testEnvoy(t *testing.T, protocol bootstrap.Protocol) {
	tenant := "tenant-envoy-" + string(protocol)
	srv, xdsAddr := startXDS(t)

	// Two tenant "nodes", 127.0.0.1 and 127.0.0.2, with the same NodePorts.
	nodes := []string{"127.0.0.1", "127.0.0.2"}
	tcpNodePort := testsupport.FreePort(t, nodes...)
	udpNodePort := testsupport.FreePort(t, nodes...)
	tcpBackends := map[string]*testsupport.Backend{}
	for i, ip := range nodes {
		id := testsupport.Identity{Node: fmt.Sprintf("node%d", i+1), Pod: fmt.Sprintf("echo-%d", i+1)}
		tcpBackends[id.Node] = testsupport.StartTCPBackend(t, net.JoinHostPort(ip, fmt.Sprint(tcpNodePort)), id)
		testsupport.StartUDPBackend(t, net.JoinHostPort(ip, fmt.Sprint(udpNodePort)), id)
	}
	hosts := func(port int, ips ...string) []string {
		var out []string
		for _, ip := range ips {
			out = append(out, net.JoinHostPort(ip, fmt.Sprint(port)))
		}
		return out
	}

	// Listener ports, as the port allocator would hand them out.
	echoPort := testsupport.FreePort(t)
	dnsPort := testsupport.FreePort(t)
	stickyPort := testsupport.FreePort(t)
	ppPort := testsupport.FreePort(t)
	lbs := []v1alpha1.LoadBalancer{
		newLB("echo").port(corev1.ProtocolTCP, 80, tcpNodePort, echoPort).LoadBalancer,
		newLB("dns").port(corev1.ProtocolUDP, 53, udpNodePort, dnsPort).LoadBalancer,
		newLB("sticky").sourceIP().port(corev1.ProtocolTCP, 80, tcpNodePort, stickyPort).LoadBalancer,
		newLB("pp").annotate(v1alpha1.AnnotationProxyProtocol, "v2").port(corev1.ProtocolTCP, 80, tcpNodePort, ppPort).LoadBalancer,
	}
	opts := translate.Options{ListenerAddress: "127.0.0.1"}
	in := translate.Input{Tenant: tenant, LoadBalancers: lbs, Addresses: addresses(nodes...), Options: opts, Policy: loopbackAllowed}
	out := mustTranslate(t, in)

	// The snapshot may be set before Envoy connects; Envoy gets it on connect.
	changed, err := srv.SetTenant(context.Background(), tenant, out)
	if err != nil || !changed {
		t.Fatalf("SetTenant = %v, %v; want true, nil", changed, err)
	}
	e := startEnvoyProtocol(t, srv, tenant, xdsAddr, "test-proxy", protocol)
	at := func(port int) string { return net.JoinHostPort("127.0.0.1", fmt.Sprint(port)) }

	testsupport.Eventually(t, waitTimeout, "Envoy to have the tenant's listeners", func() error {
		names, err := listenerNames(e)
		if err != nil {
			return err
		}
		if want := []string{"dns-udp-53", "echo-tcp-80", "pp-tcp-80", "sticky-tcp-80"}; !slices.Equal(names, want) {
			return fmt.Errorf("listeners %v", names)
		}
		return nil
	})
	for _, c := range []string{"echo-tcp-80", "sticky-tcp-80", "pp-tcp-80"} {
		waitHosts(t, e, c, hosts(tcpNodePort, nodes...)...)
	}
	testsupport.Eventually(t, waitTimeout, "one connected proxy", func() error {
		return connectedProxies(tenant, 1)
	})

	t.Run("tcp echo", func(t *testing.T) {
		testsupport.Eventually(t, waitTimeout, "a TCP answer through Envoy", func() error {
			_, err := testsupport.TCPRoundTrip(at(echoPort), "hello")
			return err
		})
	})

	t.Run("both nodes get connections", func(t *testing.T) {
		seen := map[string]int{}
		for i := range 20 {
			r, err := testsupport.TCPRoundTrip(at(echoPort), fmt.Sprintf("req-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			seen[r.Node]++
		}
		if len(seen) != 2 {
			t.Fatalf("connections went to %v; want both nodes", seen)
		}
	})

	t.Run("udp echo", func(t *testing.T) {
		seen := map[string]int{}
		testsupport.Eventually(t, waitTimeout, "UDP answers from both nodes", func() error {
			r, err := testsupport.UDPRoundTrip(at(dnsPort), "ping")
			if err != nil {
				return err
			}
			seen[r.Node]++
			if len(seen) != 2 {
				return fmt.Errorf("answers from %v", seen)
			}
			return nil
		})
	})

	t.Run("source ip persistence", func(t *testing.T) {
		// One client address always lands on the same node...
		first := ""
		for i := range 20 {
			r, err := testsupport.TCPRoundTripFrom("127.0.0.1", at(stickyPort), fmt.Sprintf("sticky-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			id := r.Node
			if first == "" {
				first = id
			} else if id != first {
				t.Fatalf("request %d from 127.0.0.1 went to %s, earlier ones to %s", i, id, first)
			}
		}
		// ...while many client addresses spread over both.
		seen := map[string]bool{}
		for i := 3; i < 60 && len(seen) < 2; i++ {
			ip := fmt.Sprintf("127.0.0.%d", i)
			r, err := testsupport.TCPRoundTripFrom(ip, at(stickyPort), "spread")
			if err != nil {
				t.Fatal(err)
			}
			again, err := testsupport.TCPRoundTripFrom(ip, at(stickyPort), "spread")
			if err != nil {
				t.Fatal(err)
			}
			if again.Node != r.Node {
				t.Fatalf("client %s went to %s, then to %s", ip, r.Node, again.Node)
			}
			seen[r.Node] = true
		}
		if len(seen) != 2 {
			t.Fatalf("57 client addresses all hashed to %v", seen)
		}
	})

	t.Run("proxy protocol v2", func(t *testing.T) {
		before := map[string]int{}
		for id, b := range tcpBackends {
			before[id] = len(b.ProxySources())
		}
		r, err := testsupport.TCPRoundTripFrom("127.0.0.7", at(ppPort), "with-header")
		if err != nil {
			t.Fatal(err)
		}
		id := r.Node
		proxied := tcpBackends[id].ProxySources()
		if len(proxied) != before[id]+1 {
			t.Fatalf("backend %s saw %d PROXY headers, want %d", id, len(proxied), before[id]+1)
		}
		if got := proxied[len(proxied)-1]; got != r.Local {
			t.Fatalf("PROXY header carries source %s; the client was %s", got, r.Local)
		}
		// Listeners without the annotation send no header.
		plainBefore := tcpBackends["node1"].Unproxied()
		plainBefore2 := tcpBackends["node2"].Unproxied()
		if _, err := testsupport.TCPRoundTrip(at(echoPort), "no-header"); err != nil {
			t.Fatal(err)
		}
		plainAfter := tcpBackends["node1"].Unproxied()
		plainAfter2 := tcpBackends["node2"].Unproxied()
		if plainAfter+plainAfter2 != plainBefore+plainBefore2+1 {
			t.Fatal("a request through a listener without PROXY protocol did not arrive without a header")
		}
	})

	t.Run("cluster-only change", func(t *testing.T) {
		// Turning PROXY protocol on changes the cluster but not its endpoints. Envoy re-creates
		// the cluster and waits for its endpoints; if they are not re-sent the cluster stays
		// warming for initial_fetch_timeout (15s) and the old one keeps serving.
		withPP := in
		withPP.LoadBalancers = slices.Clone(in.LoadBalancers)
		withPP.LoadBalancers[0] = newLB("echo").annotate(v1alpha1.AnnotationProxyProtocol, "true").port(corev1.ProtocolTCP, 80, tcpNodePort, echoPort).LoadBalancer
		sentBefore := testutil.ToFloat64(metrics.ManagerXDSSentBytes.WithLabelValues(tenant)) // the initial sync, at least
		start := time.Now()
		if changed, err := srv.SetTenant(context.Background(), tenant, mustTranslate(t, withPP)); err != nil || !changed {
			t.Fatalf("SetTenant = %v, %v", changed, err)
		}
		testsupport.Eventually(t, waitTimeout, "a PROXY header through the echo listener", func() error {
			r, err := testsupport.TCPRoundTripFrom("127.0.0.9", at(echoPort), "pp-now")
			if err != nil {
				return err
			}
			if proxied := tcpBackends[r.Node].ProxySources(); len(proxied) == 0 || proxied[len(proxied)-1] != r.Local {
				return fmt.Errorf("PROXY sources %v, the client was %s", proxied, r.Local)
			}
			return nil
		})
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the changed cluster took %s to serve (waiting for endpoints?)", d)
		}
		// The manager counts what it sent; on delta, one changed cluster is a fraction of the
		// tenant's configuration (state of the world re-sends every cluster).
		sent := testutil.ToFloat64(metrics.ManagerXDSSentBytes.WithLabelValues(tenant)) - sentBefore
		if sent <= 0 || (protocol == bootstrap.ProtocolDelta && sent >= sentBefore/2) {
			t.Errorf("xDS bytes sent for one changed cluster: %v (%v before it), want more than 0 and, on delta, less than half", sent, sentBefore)
		}
		t.Logf("%s: %v xDS bytes sent for one changed cluster, %v before it", protocol, sent, sentBefore)
		if _, err := srv.SetTenant(context.Background(), tenant, mustTranslate(t, in)); err != nil {
			t.Fatal(err)
		}
		waitHosts(t, e, "echo-tcp-80", hosts(tcpNodePort, nodes...)...)
	})

	t.Run("identical snapshot is not pushed", func(t *testing.T) {
		// Envoy may still be taking the previous step's update (on delta a type's version
		// moves with each response): start from versions that stay put for half a second.
		var lds, cds string
		testsupport.Eventually(t, 10*time.Second, "Envoy's accepted versions to settle", func() error {
			l1, c1, err := configVersions(e)
			if err != nil {
				return err
			}
			time.Sleep(500 * time.Millisecond)
			if lds, cds, err = configVersions(e); err != nil {
				return err
			}
			if l1 != lds || c1 != cds {
				return fmt.Errorf("versions moved from %q/%q to %q/%q", l1, c1, lds, cds)
			}
			return nil
		})
		updates := testutil.ToFloat64(metrics.ManagerSnapshotUpdates.WithLabelValues(tenant))
		again := mustTranslate(t, in) // a fresh translation of the same state
		changed, err := srv.SetTenant(context.Background(), tenant, again)
		if err != nil || changed {
			t.Fatalf("SetTenant = %v, %v; want false, nil", changed, err)
		}
		if u := testutil.ToFloat64(metrics.ManagerSnapshotUpdates.WithLabelValues(tenant)); u != updates {
			t.Fatalf("snapshot updates went from %v to %v", updates, u)
		}
		lds2, cds2, err := configVersions(e)
		if err != nil {
			t.Fatal(err)
		}
		if lds2 != lds || cds2 != cds || lds == "" {
			t.Fatalf("Envoy versions changed from %q/%q to %q/%q", lds, cds, lds2, cds2)
		}
	})

	t.Run("invalid snapshot is refused", func(t *testing.T) {
		version := srv.Version(tenant)
		lds, _, _ := configVersions(e)

		invalid := mustTranslate(t, in)
		bad := clone(invalid[resource.ClusterType][0].(*clusterv3.Cluster))
		bad.ConnectTimeout.Seconds = -1 // fails proto validation
		invalid[resource.ClusterType] = append(slices.Clone(invalid[resource.ClusterType][1:]), bad)
		if _, err := srv.SetTenant(context.Background(), tenant, invalid); err == nil {
			t.Fatal("SetTenant accepted a cluster with a negative connect timeout")
		}

		inconsistent := mustTranslate(t, in)
		inconsistent[resource.EndpointType] = append(slices.Clone(inconsistent[resource.EndpointType]), &endpointv3.ClusterLoadAssignment{ClusterName: "nobody-refers-to-me"})
		if _, err := srv.SetTenant(context.Background(), tenant, inconsistent); err == nil {
			t.Fatal("SetTenant accepted endpoints of no cluster")
		}

		if v := srv.Version(tenant); v != version {
			t.Fatalf("version changed from %s to %s", version, v)
		}
		if _, err := testsupport.TCPRoundTrip(at(echoPort), "still-serving"); err != nil {
			t.Fatalf("Envoy stopped serving after refused snapshots: %v", err)
		}
		if lds2, _, _ := configVersions(e); lds2 != lds {
			t.Fatalf("Envoy listener version changed from %s to %s", lds, lds2)
		}
	})

	t.Run("removed node stops getting traffic", func(t *testing.T) {
		less := in
		less.Addresses = addresses("127.0.0.1")
		changed, err := srv.SetTenant(context.Background(), tenant, mustTranslate(t, less))
		if err != nil || !changed {
			t.Fatalf("SetTenant = %v, %v; want true, nil", changed, err)
		}
		// node2 still answers health checks, yet Envoy must drop it.
		waitHosts(t, e, "echo-tcp-80", hosts(tcpNodePort, "127.0.0.1")...)
		for i := range 10 {
			r, err := testsupport.TCPRoundTrip(at(echoPort), fmt.Sprintf("after-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			if r.Node != "node1" {
				t.Fatalf("request %d went to %s after it was removed", i, r.Node)
			}
		}
		for i := range 10 {
			r, err := testsupport.UDPRoundTrip(at(dnsPort), fmt.Sprintf("udp-after-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			if r.Node != "node1" {
				t.Fatalf("datagram %d went to %s after it was removed", i, r.Node)
			}
		}
		in = less
	})

	t.Run("nack is counted", func(t *testing.T) {
		// Not re-sent while this test looks (TestEnvoyRetriesRejectedListener covers that).
		after := RetryRejectedAfter
		RetryRejectedAfter = time.Hour
		defer func() { RetryRejectedAfter = after }()
		// A listener port some other process holds: valid config, but Envoy cannot bind it.
		busy, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer busy.Close()
		busyPort := busy.Addr().(*net.TCPAddr).Port
		withBusy := in
		withBusy.LoadBalancers = append(slices.Clone(in.LoadBalancers), newLB("busy").port(corev1.ProtocolTCP, 80, tcpNodePort, busyPort).LoadBalancer)
		nacks := func() float64 {
			return testutil.ToFloat64(metrics.ManagerXDSNacks.WithLabelValues(tenant, resource.ListenerType))
		}
		rejections := make(chan Rejection, 16)
		srv.OnRejection(func(r Rejection) {
			select {
			case rejections <- r:
			default:
			}
		})
		defer srv.OnRejection(nil)
		before := nacks()
		if _, err := srv.SetTenant(context.Background(), tenant, mustTranslate(t, withBusy)); err != nil {
			t.Fatal(err)
		}
		testsupport.Eventually(t, waitTimeout, "a NACK for the listener Envoy cannot bind", func() error {
			if n := nacks(); n <= before {
				return fmt.Errorf("%v NACKs", n)
			}
			return nil
		})
		// The hook hears the rejected version of the listeners, and Envoy's message names the
		// listener, so the manager can tell which object's configuration was refused.
		select {
		case r := <-rejections:
			if r.Resolved || r.Tenant != tenant || r.Proxy != "test-proxy" || r.TypeURL != resource.ListenerType ||
				r.Version != srv.TypeVersion(tenant, resource.ListenerType) || !strings.Contains(r.Message, "busy-tcp-80") {
				t.Fatalf("rejection %+v; want the listener version %s naming busy-tcp-80", r, srv.TypeVersion(tenant, resource.ListenerType))
			}
		case <-time.After(waitTimeout):
			t.Fatal("no rejection reported")
		}
		// The tenant's other listeners keep working; the fix is accepted.
		if _, err := testsupport.TCPRoundTrip(at(echoPort), "after-nack"); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.SetTenant(context.Background(), tenant, mustTranslate(t, in)); err != nil {
			t.Fatal(err)
		}
		testsupport.Eventually(t, waitTimeout, "Envoy to accept the fixed snapshot", func() error {
			lds, _, err := configVersions(e)
			if err == nil && lds != srv.TypeVersion(tenant, resource.ListenerType) {
				err = fmt.Errorf("listeners at %q", lds)
			}
			return err
		})
		select {
		case r := <-rejections:
			if !r.Resolved || r.TypeURL != resource.ListenerType || r.Proxy != "test-proxy" {
				t.Fatalf("after the fix: %+v; want the rejection resolved", r)
			}
		case <-time.After(waitTimeout):
			t.Fatal("the accepted fix did not resolve the rejection")
		}
		// The rejected snapshot was not resent over and over (a NACK storm).
		if n := nacks() - before; n != 1 {
			t.Fatalf("%v NACKs for one rejected snapshot", n)
		}
	})

	t.Run("snapshot gauges", func(t *testing.T) {
		for name, want := range map[string]float64{
			"listeners": 4, "clusters": 4, "endpoints": 4,
		} {
			g := map[string]float64{
				"listeners": testutil.ToFloat64(metrics.ManagerSnapshotListeners.WithLabelValues(tenant)),
				"clusters":  testutil.ToFloat64(metrics.ManagerSnapshotClusters.WithLabelValues(tenant)),
				"endpoints": testutil.ToFloat64(metrics.ManagerSnapshotEndpoints.WithLabelValues(tenant)),
			}[name]
			if g != want {
				t.Errorf("%s gauge = %v, want %v", name, g, want)
			}
		}
	})

	t.Run("removed tenant", func(t *testing.T) {
		srv.RemoveTenant(tenant)
		testsupport.Eventually(t, waitTimeout, "Envoy to drop the tenant's listeners", func() error {
			names, err := listenerNames(e)
			if err == nil && len(names) > 0 {
				err = fmt.Errorf("listeners %v", names)
			}
			return err
		})
		if srv.Version(tenant) != "" {
			t.Error("removed tenant still has a version")
		}
	})

	t.Run("disconnect", func(t *testing.T) {
		e.Kill()
		testsupport.Eventually(t, waitTimeout, "no connected proxy", func() error {
			return connectedProxies(tenant, 0)
		})
	})
}

// TestEnvoyAcceptsGoldenScenarios pushes the translation of every golden input of the
// translate package to a real Envoy and checks Envoy accepts all of it (no NACK, no rejected
// update). Listener ports are moved to free loopback ports so nothing binds outside.
func TestEnvoyAcceptsGoldenScenarios(t *testing.T) {
	const tenant = "tenant-golden"
	srv, xdsAddr := startXDS(t)
	e := startEnvoy(t, srv, tenant, xdsAddr, "golden-proxy")
	files, err := filepath.Glob("../translate/testdata/*.in.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".in.yaml"), func(t *testing.T) {
			in, err := translatetest.LoadInput(file)
			if err != nil {
				t.Fatal(err)
			}
			in.Tenant = tenant
			in.Options.ListenerAddress = "127.0.0.1"
			// Every port a listener binds is remapped to a free one: the Envoy listener ports
			// of LoadBalancers and of the Ingress and Gateway (their hub Services' targetPorts),
			// so that no golden binds a fixed port such as 20080.
			remap := map[int32]int32{}
			free := func(p int32) int32 {
				if _, ok := remap[p]; !ok {
					remap[p] = int32(testsupport.FreePort(t))
				}
				return remap[p]
			}
			svcs := []*corev1.Service{}
			for i := range in.RouteServices {
				svcs = append(svcs, &in.RouteServices[i])
			}
			for _, name := range slices.Sorted(maps.Keys(in.HubServices)) {
				svcs = append(svcs, in.HubServices[name])
			}
			for _, svc := range svcs {
				for j := range svc.Spec.Ports {
					tp := &svc.Spec.Ports[j].TargetPort
					if v := tp.IntValue(); tp.Type == intstr.Int && v >= 1 && v <= 65535 {
						*tp = intstr.FromInt32(free(int32(v)))
					}
				}
			}
			_, _, out, err := translatetest.Pipeline(in)
			if err != nil {
				t.Fatal(err)
			}
			freePorts := map[uint32]bool{}
			for _, p := range remap {
				freePorts[uint32(p)] = true
			}
			for _, r := range out[resource.ListenerType] {
				l := r.(*listenerv3.Listener)
				if p := l.GetAddress().GetSocketAddress().GetPortValue(); !freePorts[p] {
					t.Fatalf("listener %s binds port %d, which the test did not remap to a free port", l.Name, p)
				}
			}
			nacks := func() float64 {
				n := 0.0
				for _, typ := range []string{resource.ListenerType, resource.RouteType, resource.ClusterType, resource.EndpointType} {
					n += testutil.ToFloat64(metrics.ManagerXDSNacks.WithLabelValues(tenant, typ))
				}
				return n
			}
			before := nacks()
			if _, err := srv.SetTenant(context.Background(), tenant, out); err != nil {
				t.Fatal(err)
			}
			// Envoy reports a version as accepted only after it applied it (an ACK).
			testsupport.Eventually(t, waitTimeout, "Envoy to accept the snapshot", func() error {
				got, err := acceptedVersions(e)
				if err != nil {
					return err
				}
				for _, typ := range []string{resource.ListenerType, resource.ClusterType} {
					if want := srv.TypeVersion(tenant, typ); got[typ] != want {
						return fmt.Errorf("%s at %q, want %q", typ, got[typ], want)
					}
				}
				counts, err := endpointCounts(e)
				if err != nil {
					return err
				}
				for _, r := range out[resource.EndpointType] {
					cla := r.(*endpointv3.ClusterLoadAssignment)
					want := 0
					for _, l := range cla.Endpoints {
						want += len(l.LbEndpoints)
					}
					if n, ok := counts[cla.ClusterName]; !ok || n != want {
						return fmt.Errorf("cluster %s has %d endpoints (known: %v), want %d", cla.ClusterName, n, ok, want)
					}
				}
				return nil
			})
			var want []string
			for _, l := range out[resource.ListenerType] {
				want = append(want, cacheName(l))
			}
			slices.Sort(want)
			if names, err := listenerNames(e); err != nil || !slices.Equal(names, want) {
				t.Fatalf("Envoy listeners %v (%v), want %v", names, err, want)
			}
			if n := nacks(); n != before {
				t.Fatalf("Envoy rejected the configuration (%v NACKs)", n-before)
			}
			for _, s := range []string{"listener_manager.lds.update_rejected", "cluster_manager.cds.update_rejected"} {
				if v, err := e.Stat(s); err != nil || v != 0 {
					t.Fatalf("%s = %d (%v)", s, v, err)
				}
			}
		})
	}
}

// TestEnvoyAcceptsBackEndGoldenCases sends every IR case of the back end's golden files —
// Layer 4, HTTP routes over RDS, HTTPS with SNI chains and SDS secrets — to a real Envoy and
// checks that every listener becomes active with no NACK. Listeners move to free loopback
// ports.
func TestEnvoyAcceptsBackEndGoldenCases(t *testing.T) {
	const tenant = "tenant-backend"
	srv, xdsAddr := startXDS(t)
	e := startEnvoy(t, srv, tenant, xdsAddr, "backend-proxy")
	files, err := filepath.Glob("translator/testdata/in/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no back-end golden inputs: %v", err)
	}
	nacks := func() float64 {
		n := 0.0
		for _, typ := range TypeURLs {
			n += testutil.ToFloat64(metrics.ManagerXDSNacks.WithLabelValues(tenant, typ))
		}
		return n
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			cfg, err := translatetest.LoadIR(file)
			if err != nil {
				t.Fatal(err)
			}
			// Distinct ports: a port just freed can be handed out again, and two listeners
			// on one port are invalid IR.
			used := map[int]bool{}
			for _, l := range cfg.Listeners {
				p := testsupport.FreePort(t)
				for used[p] {
					p = testsupport.FreePort(t)
				}
				used[p] = true
				l.Address, l.Port = "127.0.0.1", uint32(p)
			}
			cfg.Normalize()
			res, _, err := translator.Translate(cfg)
			if err != nil {
				t.Fatal(err)
			}
			before := nacks()
			if _, err := srv.SetTenant(context.Background(), tenant, res); err != nil {
				t.Fatal(err)
			}
			want := map[string]bool{}
			for _, l := range res[resource.ListenerType] {
				want[cacheName(l)] = true
			}
			testsupport.Eventually(t, waitTimeout, "every listener active", func() error {
				var doc struct {
					Configs []struct {
						DynamicListeners []struct {
							Name        string          `json:"name"`
							ActiveState json.RawMessage `json:"active_state"`
							ErrorState  json.RawMessage `json:"error_state"`
						} `json:"dynamic_listeners"`
					} `json:"configs"`
				}
				if err := e.ConfigDump("", &doc); err != nil {
					return err
				}
				active := map[string]bool{}
				for _, c := range doc.Configs {
					for _, l := range c.DynamicListeners {
						if len(l.ErrorState) > 0 {
							return fmt.Errorf("listener %s in error: %s", l.Name, l.ErrorState)
						}
						if len(l.ActiveState) > 0 {
							active[l.Name] = true
						}
					}
				}
				if !maps.Equal(active, want) {
					return fmt.Errorf("active listeners %v, want %v", active, want)
				}
				return nil
			})
			if n := nacks() - before; n != 0 {
				t.Fatalf("%v NACKs", n)
			}
		})
	}
}

func clone[T proto.Message](m T) T { return proto.Clone(m).(T) }

func cacheName(r types.Resource) string { return cache.GetResourceName(r) }

// serveOn serves srv on lis until the returned stop is called, which waits for Serve to
// return and reports its error.
func serveOn(t *testing.T, srv *Server, lis net.Listener) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx, lis) }()
	return func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
}
