package xds

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
)

// BenchmarkSetTenant1000 measures validating, hashing and setting the snapshot of a tenant
// with 1000 LoadBalancers (1 TCP port, 3 node addresses each); every iteration changes one
// endpoint so the snapshot is really set.
func BenchmarkSetTenant1000(b *testing.B) {
	in := translate.Input{Tenant: "tenant-bench", Addresses: addresses("10.0.0.1", "10.0.0.2", "10.0.0.3")}
	for i := range 1000 {
		in.LoadBalancers = append(in.LoadBalancers, newLB(fmt.Sprintf("lb-%d", i)).port(corev1.ProtocolTCP, 80, 30000+i, 20000+i).LoadBalancer)
	}
	in.HubServices = translatetest.HubServicesFromStatus(in.LoadBalancers)
	outs := make([]Resources, 2)
	for i := range outs {
		in.Addresses = addresses("10.0.0.1", "10.0.0.2", fmt.Sprintf("10.0.1.%d", i+1))
		_, _, out, err := translatetest.Pipeline(in)
		if err != nil {
			b.Fatal(err)
		}
		outs[i] = out
	}
	srv := NewServer(logr.Discard(), nil)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := srv.SetTenant(context.Background(), "tenant-bench", outs[i%2]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkSetTenantHTTPRoutes1000 is the same for a tenant with a Gateway (HTTP and HTTPS)
// and 1000 HTTPRoutes (translatetest.HTTPRoutesTenant): one route configuration per listener
// with 1000 virtual hosts, 2000 clusters.
func BenchmarkSetTenantHTTPRoutes1000(b *testing.B) {
	in := translatetest.HTTPRoutesTenant(b, 1000)
	outs := make([]Resources, 2)
	for i := range outs {
		in.Addresses = addresses("10.0.0.1", "10.0.0.2", fmt.Sprintf("10.0.1.%d", i+1))
		_, _, out, err := translatetest.Pipeline(in)
		if err != nil {
			b.Fatal(err)
		}
		outs[i] = out
	}
	srv := NewServer(logr.Discard(), nil)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := srv.SetTenant(context.Background(), "tenant-bench", outs[i%2]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
