package framework

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestLoadBalancerAddressState: the played kube-proxy programs VIP (or unset) load balancer
// IPs of LoadBalancer Services and external IPs on the Service port, towards every node's
// NodePort (a Service without NodePorts: those of a Service of its namespace with the same
// selector); never a Proxy-mode address, a UDP port, a port without any NodePort, or an
// address off loopback.
func TestLoadBalancerAddressState(t *testing.T) {
	nodes := []string{"127.0.6.1", "127.0.6.2"}
	lb := corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{
		{Port: 18080, NodePort: 30001, Protocol: corev1.ProtocolTCP},
		{Port: 18053, NodePort: 30002, Protocol: corev1.ProtocolUDP},
	}}}
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{
		{IP: "127.0.6.1"},
		{IP: "127.0.6.2", IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)},
		{IP: "127.0.6.3", IPMode: ptr.To(corev1.LoadBalancerIPModeProxy)},
		{IP: "192.0.2.1"},
	}
	ext := corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ExternalIPs: []string{"127.0.6.9", "10.0.0.1"},
		Ports: []corev1.ServicePort{{Port: 8443, NodePort: 30003, Protocol: corev1.ProtocolTCP}}}}
	clusterIP := corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ExternalIPs: []string{"127.0.6.8"},
		Ports: []corev1.ServicePort{{Port: 9000, Protocol: corev1.ProtocolTCP}}}}
	// A 1:1 NAT shadow: no NodePorts, the selector of the LoadBalancer Service (same Pods).
	lb.Namespace, lb.Name, lb.Spec.Selector = "apps", "web", map[string]string{"app": "web"}
	shadow := corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ExternalIPs: []string{"127.0.6.7"},
		Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 18080, Protocol: corev1.ProtocolTCP}}}}
	shadow.Namespace, shadow.Name = "apps", "web-kubelb-nat"
	elsewhere := shadow
	elsewhere.Namespace, elsewhere.Spec.ExternalIPs = "other", []string{"127.0.6.6"}
	got := loadBalancerAddressState([]corev1.Service{lb, ext, clusterIP, shadow, elsewhere}, nodes)
	want := map[string][]string{
		"127.0.6.1:18080": {"127.0.6.1:30001", "127.0.6.2:30001"},
		"127.0.6.2:18080": {"127.0.6.1:30001", "127.0.6.2:30001"},
		"127.0.6.9:8443":  {"127.0.6.1:30003", "127.0.6.2:30003"},
		"127.0.6.7:18080": {"127.0.6.1:30001", "127.0.6.2:30001"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}
