package quota

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/settings"
)

// BenchmarkAdmission1000 is what every LoadBalancer and Route reconcile of a tenant with
// 1000 LoadBalancers (two ports each) and 1000 Gateway Routes adds: Objects and Admit over
// all of them.
func BenchmarkAdmission1000(b *testing.B) {
	lbs := make([]kubelbv1alpha1.LoadBalancer, 1000)
	routes := make([]kubelbv1alpha1.Route, 1000)
	for i := range lbs {
		lbs[i] = hubLB(fmt.Sprintf("lb-%d", i), t0.Add(time.Duration(i)*time.Second),
			kubelbv1alpha1.LoadBalancerPort{Name: "http", Port: 80}, kubelbv1alpha1.LoadBalancerPort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})
		routes[i] = hubRoute(fmt.Sprintf("gw-%d", i), t0.Add(time.Duration(i)*time.Second), gateway(
			map[string]any{"name": "a", "port": int64(80), "protocol": "HTTP"}))
	}
	t := settings.Tenant{Limits: settings.Limits{LoadBalancers: 1000, Routes: 1000, ListenerPorts: 500, EndpointsPerCluster: 1000, ObjectBytes: settings.DefaultLimitObjectBytes}}
	b.ReportAllocs()
	for b.Loop() {
		Admission("tenant-a", lbs, routes, t)
	}
}

// BenchmarkAdmissionLoadBalancers1000 is the same for a tenant of 1000 one-port
// LoadBalancers (kubelb's L4 scale test).
func BenchmarkAdmissionLoadBalancers1000(b *testing.B) {
	lbs := make([]kubelbv1alpha1.LoadBalancer, 1000)
	for i := range lbs {
		lbs[i] = hubLB(fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i), t0.Add(time.Duration(i)*time.Second),
			kubelbv1alpha1.LoadBalancerPort{Port: 80, Protocol: corev1.ProtocolTCP})
	}
	t := settings.Tenant{Limits: settings.Limits{LoadBalancers: 1000, Routes: 1000, ListenerPorts: 1000, EndpointsPerCluster: 1000, ObjectBytes: settings.DefaultLimitObjectBytes}}
	b.ReportAllocs()
	for b.Loop() {
		Admission("tenant-a", lbs, nil, t)
	}
}
