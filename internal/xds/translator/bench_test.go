package translator_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/xds/translator"
)

// tenantIR is the IR of one tenant with n LoadBalancers of one TCP port each and three node
// addresses, as the Layer 4 front end makes it.
func tenantIR(n int) *ir.Config {
	cfg := &ir.Config{}
	for i := range n {
		name := fmt.Sprintf("00000000-0000-0000-0000-%012d-tcp-80", i)
		owner := []ir.ObjectRef{{Kind: "LoadBalancer", Namespace: "tenant-bench", Name: name[:36], Section: "TCP/80"}}
		cfg.Listeners = append(cfg.Listeners, &ir.Listener{Name: name, Address: "0.0.0.0", Port: uint32(20000 + i),
			Protocol: ir.ProtocolTCP, StatPrefix: fmt.Sprintf("default/svc-%d/tcp-80", i), Cluster: name, Owners: owner})
		c := &ir.Cluster{Name: name, StatName: fmt.Sprintf("default/svc-%d/tcp-80", i), Protocol: ir.UpstreamTCP, Owners: owner,
			ConnectTimeout: ir.Duration(5 * time.Second), MaxConnections: 1 << 20,
			HealthCheck: &ir.HealthCheck{Interval: ir.Duration(5 * time.Second), Timeout: ir.Duration(2 * time.Second), UnhealthyThreshold: 2, HealthyThreshold: 1}}
		for _, a := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"} {
			c.Endpoints = append(c.Endpoints, ir.Endpoint{Address: a, Port: uint32(30000 + i%2000)})
		}
		cfg.Clusters = append(cfg.Clusters, c)
	}
	cfg.Normalize()
	return cfg
}

// BenchmarkBackEnd1000 turns the IR of a tenant with 1000 LoadBalancers into Envoy resources
// (build, validate, pack). The figure is in docs/translate.md.
func BenchmarkBackEnd1000(b *testing.B) {
	cfg := tenantIR(1000)
	b.ReportAllocs()
	for b.Loop() {
		res, _, err := translator.Translate(cfg)
		if err != nil || len(res[resource.ListenerType]) != 1000 {
			b.Fatalf("got %d listeners, %v", len(res[resource.ListenerType]), err)
		}
	}
}

// BenchmarkIREqual1000 compares two equal IRs of 1000 LoadBalancers: the cost of finding
// that a tenant did not change.
func BenchmarkIREqual1000(b *testing.B) {
	x, y := tenantIR(1000), tenantIR(1000)
	b.ReportAllocs()
	for b.Loop() {
		if !x.Equal(y) {
			b.Fatal("not equal")
		}
	}
}
