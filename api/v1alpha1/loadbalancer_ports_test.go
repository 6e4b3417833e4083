package v1alpha1

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestStatusPortFor(t *testing.T) {
	t.Parallel()
	sp := func(name string, proto corev1.Protocol, port, listener int32) ServicePort {
		p := ServicePort{UpstreamTargetPort: listener}
		p.Name, p.Protocol, p.Port = name, proto, port
		return p
	}
	st := LoadBalancerStatus{}
	st.Service.Ports = []ServicePort{sp("", "", 80, 20001), sp("dns", corev1.ProtocolUDP, 53, 20002), sp("web", corev1.ProtocolTCP, 8080, 20003)}
	for name, tc := range map[string]struct {
		port LoadBalancerPort
		want int32
	}{
		"by number, empty protocol is TCP": {LoadBalancerPort{Port: 80, Protocol: corev1.ProtocolTCP}, 20001},
		"by name before number":            {LoadBalancerPort{Name: "web", Port: 80}, 20003},
		"named, no such name: by number":   {LoadBalancerPort{Name: "other", Port: 80}, 20001},
		"protocol must match":              {LoadBalancerPort{Name: "dns", Protocol: corev1.ProtocolTCP, Port: 53}, 0},
		"UDP by name":                      {LoadBalancerPort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 5353}, 20002},
		"none":                             {LoadBalancerPort{Port: 443}, 0},
	} {
		got, _ := st.StatusPortFor(tc.port)
		if got.UpstreamTargetPort != tc.want {
			t.Errorf("%s: listener port %d, want %d", name, got.UpstreamTargetPort, tc.want)
		}
	}
}
