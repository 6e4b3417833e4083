package xds

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	corev1 "k8s.io/api/core/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/pki"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdstest"
)

// dial connects a raw gRPC client to the xDS server with the TLS configuration cfg.
func dial(t *testing.T, addr string, cfg *tls.Config) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// askADS opens a state-of-the-world ADS stream as node.cluster = cluster, asks for listeners
// and returns what the server answered: the listeners, or the stream's error.
func askADS(conn *grpc.ClientConn, cluster string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "raw", Cluster: cluster}, TypeUrl: resource.ListenerType}); err != nil {
		return nil, err
	}
	resp, err := s.Recv()
	if err != nil {
		return nil, err
	}
	return names(resp.GetResources()), nil
}

// askDeltaADS is askADS on a delta stream.
func askDeltaADS(conn *grpc.ClientConn, cluster string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "raw", Cluster: cluster}, TypeUrl: resource.ListenerType}); err != nil {
		return nil, err
	}
	resp, err := s.Recv()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range resp.GetResources() {
		out = append(out, r.GetName())
	}
	return out, nil
}

// askLDS asks the per-type listener service (a stream, then a unary fetch).
func askLDS(conn *grpc.ClientConn, cluster string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lds := listenerservice.NewListenerDiscoveryServiceClient(conn)
	s, err := lds.StreamListeners(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "raw", Cluster: cluster}}); err != nil {
		return nil, err
	}
	resp, err := s.Recv()
	if err != nil {
		return nil, err
	}
	got := names(resp.GetResources())
	fetched, err := lds.FetchListeners(ctx, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "raw", Cluster: cluster}})
	if err != nil {
		return got, err
	}
	return append(got, names(fetched.GetResources())...), nil
}

// names are the names of the resources of a response.
func names(res []*anypb.Any) []string {
	var out []string
	for _, r := range res {
		m, err := r.UnmarshalNew()
		if err != nil {
			out = append(out, "undecodable "+r.GetTypeUrl())
			continue
		}
		out = append(out, cache.GetResourceName(m))
	}
	return out
}

// tenantSeries counts the series of the tenant-labelled xDS metrics that name tenant.
func tenantSeries(t *testing.T, tenant string) int {
	t.Helper()
	n := 0
	for _, c := range []prometheus.Collector{metrics.ManagerXDSConnectedProxies, metrics.ManagerXDSNacks,
		metrics.ManagerSnapshotUpdates, metrics.ManagerSnapshotListeners} {
		ch := make(chan prometheus.Metric, 64)
		go func() { c.Collect(ch); close(ch) }()
		for m := range ch {
			var pb dto.Metric
			if err := m.Write(&pb); err != nil {
				t.Fatal(err)
			}
			for _, l := range pb.GetLabel() {
				if l.GetName() == "tenant" && l.GetValue() == tenant {
					n++
				}
			}
		}
	}
	return n
}

// TestXDSRequiresTenantCertificate: the xDS server serves a tenant's configuration only to a
// client whose certificate (from the manager's CA) names that tenant, on every kind of
// stream. A client without a certificate, with a certificate of another CA, or with another
// tenant's certificate gets nothing; a request for a tenant without configuration leaves no
// cache entry and no metric series.
func TestXDSRequiresTenantCertificate(t *testing.T) {
	const tenantA, tenantB, unknown = "tenant-mtls-a", "tenant-mtls-b", "tenant-mtls-unknown"
	p := xdstest.New(t)
	srv, addr := startXDS(t)
	lb := newLB("secret").port(corev1.ProtocolTCP, 80, 30080, 20080).LoadBalancer
	lb.Namespace = tenantA
	res := mustTranslate(t, translate.Input{Tenant: tenantA, LoadBalancers: []v1alpha1.LoadBalancer{lb}, Addresses: addresses("10.0.0.1"),
		Options: translate.Options{ListenerAddress: "127.0.0.1"}})
	if _, err := srv.SetTenant(context.Background(), tenantA, res); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.SetTenant(context.Background(), tenantB, nil); err != nil {
		t.Fatal(err)
	}
	asks := map[string]func(*grpc.ClientConn, string) ([]string, error){"ADS": askADS, "delta ADS": askDeltaADS, "LDS": askLDS}

	t.Run("the right certificate is served", func(t *testing.T) {
		conn := dial(t, addr, p.ClientTLS(t, tenantA))
		for kind, ask := range asks {
			got, err := ask(conn, tenantA)
			if err != nil || len(got) == 0 {
				t.Errorf("%s as %s with its own certificate: %v, %v; want its listeners", kind, tenantA, got, err)
			}
		}
	})

	t.Run("no client certificate", func(t *testing.T) {
		cfg := p.ClientTLS(t, tenantA)
		cfg.Certificates = nil
		conn := dial(t, addr, cfg)
		for kind, ask := range asks {
			got, err := ask(conn, tenantA)
			if err == nil || len(got) > 0 {
				t.Errorf("%s without a client certificate: %v, %v; want the handshake refused", kind, got, err)
			}
			if c := status.Code(err); c != codes.Unavailable {
				t.Errorf("%s without a client certificate: code %v (%v), want Unavailable (no TLS session)", kind, c, err)
			}
		}
	})

	t.Run("a certificate of another CA", func(t *testing.T) {
		other, err := pki.NewCA(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		certPEM, keyPEM, err := other.IssueClient(tenantA, time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg := p.ClientTLS(t, tenantA)
		cfg.Certificates = []tls.Certificate{cert}
		conn := dial(t, addr, cfg)
		for kind, ask := range asks {
			if got, err := ask(conn, tenantA); err == nil || len(got) > 0 {
				t.Errorf("%s with a foreign CA's certificate naming %s: %v, %v; want nothing", kind, tenantA, got, err)
			}
		}
	})

	t.Run("another tenant's certificate", func(t *testing.T) {
		conn := dial(t, addr, p.ClientTLS(t, tenantB))
		for kind, ask := range asks {
			got, err := ask(conn, tenantA)
			if len(got) > 0 || status.Code(err) != codes.PermissionDenied {
				t.Errorf("%s as %s with %s's certificate: %v, %v; want PermissionDenied and nothing", kind, tenantA, tenantB, got, err)
			}
		}
		// Its own tenant it may read, but not switch to another on the same stream.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "raw", Cluster: tenantB}, TypeUrl: resource.ListenerType}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil {
			t.Fatalf("%s with its own certificate: %v", tenantB, err)
		}
		if err := s.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "raw", Cluster: tenantA}, TypeUrl: resource.ClusterType}); err != nil {
			t.Fatal(err)
		}
		if resp, err := s.Recv(); status.Code(err) != codes.PermissionDenied {
			t.Errorf("switching the stream to node.cluster %s: %v, %v; want PermissionDenied", tenantA, names(resp.GetResources()), err)
		}
	})

	t.Run("an unknown tenant leaves no trace", func(t *testing.T) {
		before := tenantSeries(t, unknown)
		conn := dial(t, addr, p.ClientTLS(t, unknown))
		for kind, ask := range asks {
			got, err := ask(conn, unknown)
			if len(got) > 0 || status.Code(err) != codes.PermissionDenied {
				t.Errorf("%s for a tenant without configuration: %v, %v; want PermissionDenied", kind, got, err)
			}
		}
		for _, c := range []cache.SnapshotCache{srv.ordered, srv.endpoints} {
			if slices.Contains(c.GetStatusKeys(), unknown) {
				t.Errorf("a snapshot cache has an entry for %s", unknown)
			}
		}
		if n := tenantSeries(t, unknown); n != before || n != 0 {
			t.Errorf("%d metric series name %s, want 0", n, unknown)
		}
	})
}

// TestEnvoyReloadsRotatedCertificate: a running Envoy takes a new client certificate and CA
// from its mounted Secret without a restart. The CA is rotated (the server trusts and presents
// only the new one), the Secret's files are swapped as the kubelet swaps them, and the server
// restarts: the same Envoy process connects again, which needs both the new client
// certificate and the new CA.
func TestEnvoyReloadsRotatedCertificate(t *testing.T) {
	const tenant = "tenant-rotate"
	var (
		mu      sync.Mutex
		current = xdstest.NewPKI(t)
	)
	creds := pki.ServerTLS(func() (*pki.CA, *tls.Certificate) {
		mu.Lock()
		defer mu.Unlock()
		return current.ServerCredentials()
	})
	srv := NewServer(testr.NewWithOptions(t, testr.Options{Verbosity: 1}), creds)
	if _, err := srv.SetTenant(context.Background(), tenant, nil); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	stop := serveOn(t, srv, lis)

	b, err := bootstrap.Generate(bootstrap.Options{Tenant: tenant, XDSAddress: addr, XDSServerName: xdstest.ServerName, AdminAddress: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	mount := xdstest.MountSecret(t, current.ClientSecretData(t, tenant))
	e := testsupport.StartEnvoy(t, "rotating-proxy", mount.Bootstrap(b), testsupport.EnvoyOptions{Node: "rotating-proxy", Concurrency: 1})
	connected := func(what string) {
		t.Helper()
		testsupport.Eventually(t, time.Minute, what, func() error {
			if got := testutil.ToFloat64(metrics.ManagerXDSConnectedProxies.WithLabelValues(tenant)); got != 1 {
				return fmt.Errorf("%v proxies of %s connected", got, tenant)
			}
			return nil
		})
	}
	connected("Envoy connected with the first CA")

	// Rotate: a new CA on the server, the Secret's files swapped, connections dropped.
	next := xdstest.NewPKI(t)
	mu.Lock()
	current = next
	mu.Unlock()
	mount.Update(t, next.ClientSecretData(t, tenant))
	stop()
	if got := testutil.ToFloat64(metrics.ManagerXDSConnectedProxies.WithLabelValues(tenant)); got != 0 {
		t.Fatalf("%v proxies still connected after the server stopped", got)
	}
	lis, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer serveOn(t, srv, lis)()
	connected("the same Envoy connected again with the new certificate and CA")
	if e.Exited() {
		t.Fatal("Envoy exited")
	}
}
