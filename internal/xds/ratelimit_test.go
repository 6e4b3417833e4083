package xds

import (
	"context"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds/xdstest"
)

// askRateLimitConfig asks for the rate-limit configuration as Envoy's ratelimit does: an ADS
// stream, a node with an id and no cluster; it returns the domains of what the server
// answered, or the stream's error.
func askRateLimitConfig(conn *grpc.ClientConn) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "ratelimit-0"}, TypeUrl: resource.RateLimitConfigType}); err != nil {
		return nil, err
	}
	resp, err := s.Recv()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range resp.GetResources() {
		c := &rlsconfv3.RateLimitConfig{}
		if err := r.UnmarshalTo(c); err != nil {
			return nil, err
		}
		out = append(out, c.GetDomain())
	}
	return out, nil
}

// TestRateLimitServiceGetsItsTenantsConfig: a tenant's rate-limit service, which sends no
// node.cluster, gets the rate-limit configuration of the tenant its client certificate names,
// and only that; it is no proxy: Applied does not wait for it to apply listeners. A
// configuration without a domain is refused.
func TestRateLimitServiceGetsItsTenantsConfig(t *testing.T) {
	const tenantA, tenantB = "tenant-rls-a", "tenant-rls-b"
	p := xdstest.New(t)
	srv, addr := startXDS(t)
	rlc := func(domain string) Resources {
		return Resources{resource.RateLimitConfigType: []types.Resource{&rlsconfv3.RateLimitConfig{Name: domain, Domain: domain,
			Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "route", Value: "r", Descriptors: []*rlsconfv3.RateLimitDescriptor{
				{Key: "rule", Value: "0", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_MINUTE, RequestsPerUnit: 6}}}}}}}}
	}
	// Tenant a also has a listener, which its proxies apply.
	lb := newLB("web").port(corev1.ProtocolTCP, 80, 30080, 20080).LoadBalancer
	lb.Namespace = tenantA
	resA := mustTranslate(t, translate.Input{Tenant: tenantA, LoadBalancers: []v1alpha1.LoadBalancer{lb}, Addresses: addresses("10.0.0.1"),
		Options: translate.Options{ListenerAddress: "127.0.0.1"}})
	resA[resource.RateLimitConfigType] = rlc(tenantA)[resource.RateLimitConfigType]
	if _, err := srv.SetTenant(context.Background(), tenantA, resA); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.SetTenant(context.Background(), tenantB, rlc(tenantB)); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{tenantA, tenantB} {
		got, err := askRateLimitConfig(dial(t, addr, p.ClientTLS(t, tenant)))
		if err != nil || len(got) != 1 || got[0] != tenant {
			t.Errorf("the rate-limit service of %s: %v, %v; want its own configuration only", tenant, got, err)
		}
	}
	// A stream that stays open: the rate-limit service is connected, and no proxy.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(dial(t, addr, p.ClientTLS(t, tenantA))).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "ratelimit-0"}, TypeUrl: resource.RateLimitConfigType}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	versions := map[string]string{resource.ListenerType: srv.TypeVersion(tenantA, resource.ListenerType),
		resource.RateLimitConfigType: srv.TypeVersion(tenantA, resource.RateLimitConfigType)}
	if !srv.Applied(tenantA, versions) {
		t.Error("Applied waits for the rate-limit service to apply listeners")
	}

	if _, err := srv.SetTenant(context.Background(), tenantA, Resources{resource.RateLimitConfigType: []types.Resource{&rlsconfv3.RateLimitConfig{Name: "x"}}}); err == nil {
		t.Error("a rate-limit configuration without a domain was accepted")
	}
}
