package xds

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/translator"
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
	benchSetTenant(b, in)
}

// benchSetTenant measures SetTenant of in's tenant, alternating between two translations
// of in that differ in one node address, so that every call really sets a snapshot.
func benchSetTenant(b *testing.B, in translate.Input) {
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
		if _, err := srv.SetTenant(context.Background(), in.Tenant, outs[i%2]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkSetTenantHTTPRoutes1000 is the same for a tenant with a Gateway (HTTP and HTTPS)
// and 1000 HTTPRoutes (translatetest.HTTPRoutesTenant): one route configuration per listener
// with 1000 virtual hosts, 2000 clusters.
func BenchmarkSetTenantHTTPRoutes1000(b *testing.B) {
	benchSetTenant(b, translatetest.HTTPRoutesTenant(b, 1000))
}

// BenchmarkRebuild measures what the Envoy control plane does to rebuild one tenant's
// snapshot — front end, IR comparison, back end, resource owners, setting the snapshot — for
// a tenant of n single-port LoadBalancers on 3 nodes (translatetest.LoadBalancerTenant),
// after one LoadBalancer changed: "full" translates, builds and hashes everything anew (as
// every rebuild did before incremental translation); "one-change" keeps the caches of the
// previous rebuild (translate.Incremental, translator.Cache, the server's digests), as
// envoycp does. ns/lb is the time per LoadBalancer of the tenant.
func BenchmarkRebuild(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1000, 3000, 10000} {
		for _, incremental := range []bool{false, true} {
			name := fmt.Sprintf("full/%d", n)
			if incremental {
				name = fmt.Sprintf("one-change/%d", n)
			}
			b.Run(name, func(b *testing.B) {
				in := translatetest.LoadBalancerTenant(n)
				srv := NewServer(logr.Discard(), nil)
				var front translate.Incremental
				var back translator.Cache
				var last *ir.Config
				rebuild := func() {
					var r translate.Result
					var res Resources
					var err error
					if incremental {
						r, err = front.Run(in)
					} else {
						r, err = translate.Run(in)
					}
					if err != nil {
						b.Fatal(err)
					}
					if last != nil && last.Equal(r.Config) {
						b.Fatal("the IR did not change")
					}
					if incremental {
						res, _, err = back.Translate(r.Config)
					} else {
						res, _, err = translator.Translate(r.Config)
					}
					if err != nil {
						b.Fatal(err)
					}
					if incremental {
						_ = back.Owners(r.Config)
					} else {
						_ = translator.Owners(r.Config)
					}
					if changed, err := srv.SetTenant(ctx, in.Tenant, res); err != nil || !changed {
						b.Fatalf("SetTenant: %v, %v", changed, err)
					}
					last = r.Config
				}
				rebuild()
				i := 0
				b.ReportAllocs()
				for b.Loop() {
					i += 7919 // a prime: a different LoadBalancer every time
					translatetest.ChangeOneLoadBalancer(&in, i)
					rebuild()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/lb")
			})
		}
	}
}

// BenchmarkRebuildHTTPRoutes is BenchmarkRebuild for a tenant with one Gateway (HTTP and
// HTTPS) and n HTTPRoutes (translatetest.HTTPRoutesTenantCached) after one HTTPRoute changed
// (its catch-all's weights swapped): "full" translates, builds and hashes everything anew (as
// every change did before Layer 7 was incremental); "one-change" keeps the caches of the
// previous rebuild, as envoycp does. It reports the process's CPU per rebuild (cpu-ms/op,
// garbage collection included), the time per HTTPRoute of the tenant (ns/route), and the
// Envoy resources the back end built and reused per rebuild.
func BenchmarkRebuildHTTPRoutes(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1000, 5000} {
		for _, incremental := range []bool{false, true} {
			name := fmt.Sprintf("full/%d", n)
			if incremental {
				name = fmt.Sprintf("one-change/%d", n)
			}
			b.Run(name, func(b *testing.B) {
				in := translatetest.HTTPRoutesTenantCached(b, n)
				srv := NewServer(logr.Discard(), nil)
				var front translate.Incremental
				var back translator.Cache
				var last *ir.Config
				built, reused := 0, 0
				rebuild := func() {
					var r translate.Result
					var res Resources
					var err error
					if incremental {
						r, err = front.Run(in)
					} else {
						r, err = translate.Run(in)
					}
					if err != nil {
						b.Fatal(err)
					}
					if last != nil && last.Equal(r.Config) {
						b.Fatal("the IR did not change")
					}
					if incremental {
						res, _, err = back.Translate(r.Config)
						built, reused = built+back.Built, reused+back.Reused
					} else {
						res, _, err = translator.Translate(r.Config)
						for _, rs := range res {
							built += len(rs)
						}
					}
					if err != nil {
						b.Fatal(err)
					}
					if incremental {
						_ = back.Owners(r.Config)
					} else {
						_ = translator.Owners(r.Config)
					}
					if changed, err := srv.SetTenant(ctx, in.Tenant, res); err != nil || !changed {
						b.Fatalf("SetTenant: %v, %v", changed, err)
					}
					last = r.Config
				}
				rebuild()
				built, reused = 0, 0
				i := 0
				b.ReportAllocs()
				cpu := cpuSeconds(b)
				for b.Loop() {
					i += 7919 // a prime: a different HTTPRoute every time
					translatetest.ChangeOneHTTPRoute(&in, i)
					rebuild()
				}
				b.ReportMetric((cpuSeconds(b)-cpu)*1000/float64(b.N), "cpu-ms/op")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/route")
				b.ReportMetric(float64(built)/float64(b.N), "built/op")
				b.ReportMetric(float64(reused)/float64(b.N), "reused/op")
			})
		}
	}
}
