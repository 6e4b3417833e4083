package xds

import (
	"fmt"
	"testing"

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
