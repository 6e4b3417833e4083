package xds

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"kubelb.dev/kubelb/internal/reach"
	"kubelb.dev/kubelb/internal/translate"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	healthv3 "github.com/envoyproxy/go-control-plane/envoy/service/health/v3"
)

func health(ip string, port uint32, h corev3.HealthStatus) *healthv3.EndpointHealth {
	return &healthv3.EndpointHealth{HealthStatus: h, Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
		SocketAddress: &corev3.SocketAddress{Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}}}
}

// TestReadReportKeepsOnlyWhatWasAsked: a report is read only for the clusters (by their
// health discovery name) and endpoints the proxy was asked about, without verdict for
// UNKNOWN, and at most maxReportEndpoints entries of it.
func TestReadReportKeepsOnlyWhatWasAsked(t *testing.T) {
	asked := map[string][]string{"web-tcp-80": {"10.0.0.1:30080", "10.0.0.2:30080"}}
	cluster := func(name string, eps ...*healthv3.EndpointHealth) *healthv3.ClusterEndpointsHealth {
		return &healthv3.ClusterEndpointsHealth{ClusterName: name, LocalityEndpointsHealth: []*healthv3.LocalityEndpointsHealth{{EndpointsHealth: eps}}}
	}
	r := &healthv3.EndpointHealthResponse{ClusterEndpointsHealth: []*healthv3.ClusterEndpointsHealth{
		cluster("hds.web-tcp-80", health("10.0.0.1", 30080, corev3.HealthStatus_HEALTHY), health("10.0.0.2", 30080, corev3.HealthStatus_TIMEOUT),
			health("10.0.0.3", 30080, corev3.HealthStatus_UNHEALTHY), health("10.0.0.1", 30081, corev3.HealthStatus_UNHEALTHY)),
		cluster("web-tcp-80", health("10.0.0.1", 30080, corev3.HealthStatus_UNHEALTHY)),       // not the health discovery name
		cluster("hds.other-tcp-80", health("10.0.0.1", 30080, corev3.HealthStatus_UNHEALTHY)), // not asked
	}}
	got := readReport(r, asked)
	if len(got) != 1 || len(got["web-tcp-80"]) != 2 || !got["web-tcp-80"]["10.0.0.1:30080"] || got["web-tcp-80"]["10.0.0.2:30080"] {
		t.Errorf("read %v, want web-tcp-80: 10.0.0.1:30080 healthy, 10.0.0.2:30080 not", got)
	}
	unknown := &healthv3.EndpointHealthResponse{ClusterEndpointsHealth: []*healthv3.ClusterEndpointsHealth{
		cluster("hds.web-tcp-80", health("10.0.0.1", 30080, corev3.HealthStatus_UNKNOWN))}}
	if got := readReport(unknown, asked); len(got) != 0 {
		t.Errorf("read %v of an UNKNOWN health, want nothing", got)
	}

	// A flood: the asked endpoints come after maxReportEndpoints made-up ones and are not read.
	var flood []*healthv3.EndpointHealth
	for i := range maxReportEndpoints {
		flood = append(flood, health(fmt.Sprintf("10.1.%d.%d", i/250, i%250), 1, corev3.HealthStatus_UNHEALTHY))
	}
	flood = append(flood, health("10.0.0.2", 30080, corev3.HealthStatus_UNHEALTHY))
	if got := readReport(&healthv3.EndpointHealthResponse{ClusterEndpointsHealth: []*healthv3.ClusterEndpointsHealth{cluster("hds.web-tcp-80", flood...)}}, asked); len(got) != 0 {
		t.Errorf("read %v past the bound", got)
	}
}

// TestHealthCheckCapFollowsPlanChecks: a tenant whose clusters have more endpoints than
// reach.MaxCheckedEndpoints has its proxies asked about exactly the clusters reach.PlanChecks
// takes of ClusterEndpoints (what the leader judges with), within the cap, and no others.
func TestHealthCheckCapFollowsPlanChecks(t *testing.T) {
	const tenant = "tenant-hds-cap"
	nodes := reach.MaxCheckedEndpoints * 3 / 8 // three LoadBalancers: 9/8 of the cap
	ips := make([]string, nodes)
	for i := range ips {
		ips[i] = fmt.Sprintf("10.2.%d.%d", i/250, i%250+1)
	}
	in := translate.Input{Tenant: tenant, Addresses: addresses(ips...)}
	for i, name := range []string{"a", "b", "c"} {
		in.LoadBalancers = append(in.LoadBalancers, newLB(name).port(corev1.ProtocolTCP, 80, 31080+i, 20001+i).LoadBalancer)
	}
	srv := NewServer(logr.Discard(), nil)
	if _, err := srv.SetTenant(context.Background(), tenant, mustTranslate(t, in)); err != nil {
		t.Fatal(err)
	}
	endpoints := srv.ClusterEndpoints(tenant).All()
	checks := reach.PlanChecks(endpoints)
	names := slices.Sorted(maps.Keys(endpoints))
	if len(names) != 3 || checks.Endpoints != 3*nodes || !maps.Equal(checks.Skipped, map[string]bool{names[2]: true}) {
		t.Fatalf("clusters %v, checks %+v: want the last of 3 clusters skipped of %d endpoints", names, checks, 3*nodes)
	}

	spec, asked := srv.specifier(tenant, DefaultHealthChecking())
	n := 0
	for _, c := range spec.GetClusterHealthChecks() {
		for _, l := range c.GetLocalityEndpoints() {
			n += len(l.GetEndpoints())
		}
	}
	if len(spec.GetClusterHealthChecks()) != 2 || n != 2*nodes || n > reach.MaxCheckedEndpoints {
		t.Errorf("asked to check %d clusters, %d endpoints; want 2 clusters, %d endpoints", len(spec.GetClusterHealthChecks()), n, 2*nodes)
	}
	want := maps.Clone(endpoints)
	maps.DeleteFunc(want, func(c string, _ []string) bool { return checks.Skipped[c] })
	if !maps.EqualFunc(asked, want, slices.Equal) {
		t.Errorf("asked about %v, want %v", slices.Sorted(maps.Keys(asked)), slices.Sorted(maps.Keys(want)))
	}
}
