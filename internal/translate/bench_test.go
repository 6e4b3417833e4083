package translate_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
)

// tenantOf builds one tenant with n LoadBalancers of one TCP port each and three node
// addresses, the shape of a tenant with n mirrored Services.
func tenantOf(n int) translate.Input {
	in := translate.Input{
		Tenant: "tenant-bench",
		Addresses: map[string]v1alpha1.Addresses{"default": {
			ObjectMeta: metav1.ObjectMeta{Name: "default"},
			Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{
				{IP: "10.0.0.1"}, {IP: "10.0.0.2"}, {IP: "10.0.0.3"},
			}},
		}},
	}
	for i := range n {
		lb := v1alpha1.LoadBalancer{
			ObjectMeta: metav1.ObjectMeta{
				Name:   fmt.Sprintf("00000000-0000-0000-0000-%012d", i),
				Labels: map[string]string{v1alpha1.LabelOriginNamespace: "default", v1alpha1.LabelOriginName: fmt.Sprintf("svc-%d", i)},
			},
			Spec: v1alpha1.LoadBalancerSpec{
				Endpoints: []v1alpha1.LoadBalancerEndpoints{{
					AddressesReference: &corev1.ObjectReference{Name: "default"},
					Ports:              []v1alpha1.EndpointPort{{Port: int32(30000 + i%2000), Protocol: corev1.ProtocolTCP}},
				}},
				Ports: []v1alpha1.LoadBalancerPort{{Port: 80, Protocol: corev1.ProtocolTCP}},
			},
		}
		sp := v1alpha1.ServicePort{UpstreamTargetPort: int32(20000 + i)}
		sp.Port, sp.Protocol = 80, corev1.ProtocolTCP
		lb.Status.Service.Ports = []v1alpha1.ServicePort{sp}
		in.LoadBalancers = append(in.LoadBalancers, lb)
	}
	in.HubServices = translatetest.HubServicesFromStatus(in.LoadBalancers)
	return in
}

// BenchmarkTranslate1000 translates one tenant with 1000 LoadBalancers (1 TCP port each,
// 3 node addresses). The figure is in docs/translate.md.
func BenchmarkTranslate1000(b *testing.B) {
	in := tenantOf(1000)
	b.ReportAllocs()
	for b.Loop() {
		cfg, _, err := translate.Translate(in)
		if err != nil || len(cfg.Listeners) != 1000 {
			b.Fatalf("got %d listeners, %v", len(cfg.Listeners), err)
		}
	}
}

// BenchmarkFrontEnd translates a tenant of n single-port LoadBalancers on 3 nodes
// (translatetest.LoadBalancerTenant) after one LoadBalancer changed: "full" with Run (the
// whole tenant), "one-change" with an Incremental that translated the tenant before (the
// changed LoadBalancer only). ns/lb is the time per LoadBalancer of the tenant.
func BenchmarkFrontEnd(b *testing.B) {
	for _, n := range []int{1000, 3000, 10000} {
		for _, incremental := range []bool{false, true} {
			name := fmt.Sprintf("full/%d", n)
			if incremental {
				name = fmt.Sprintf("one-change/%d", n)
			}
			b.Run(name, func(b *testing.B) {
				in := translatetest.LoadBalancerTenant(n)
				var inc translate.Incremental
				run := func() {
					var err error
					if incremental {
						_, err = inc.Run(in)
					} else {
						_, err = translate.Run(in)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				run()
				i := 0
				b.ReportAllocs()
				for b.Loop() {
					i += 7919
					translatetest.ChangeOneLoadBalancer(&in, i)
					run()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/lb")
			})
		}
	}
}

// BenchmarkFrontEndOverHealthBudget is BenchmarkFrontEnd's "one-change" for a tenant whose
// active health checks exceed its budget (3 proxies, 100 probes/s: every cluster's checks
// are stretched, and each owner is told), as a large tenant's are on a default hub.
func BenchmarkFrontEndOverHealthBudget(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("one-change/%d", n), func(b *testing.B) {
			in := translatetest.LoadBalancerTenant(n)
			in.Options.HealthCheckProbesPerSecond, in.Options.HealthCheckProxies = 100, 3
			var inc translate.Incremental
			r, err := inc.Run(in)
			if err != nil {
				b.Fatal(err)
			}
			throttled := 0
			for _, p := range r.Problems {
				if p.Reason == translate.ReasonHealthCheckThrottled {
					throttled++
				}
			}
			if throttled != n {
				b.Fatalf("%d LoadBalancers told of throttled health checks, want %d", throttled, n)
			}
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				i += 7919
				translatetest.ChangeOneLoadBalancer(&in, i)
				if _, err := inc.Run(in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/lb")
		})
	}
}
