package routekind

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// TestGatewayRoutePortsHTTP3: a Gateway Route whose ClientTrafficPolicy asks for http3 gets a
// UDP port of the same number for each HTTPS port it applies to (its hub Service carries both,
// the quota counts both); a listener's own policy decides for its port, the Gateway's for
// the others. No UDP port for HTTP or TLS-only ports, for a policy the hub cannot use (out
// of bounds), for one that keeps HTTPS from HTTP/3 (the PROXY protocol), or when the tenant's
// bounds refuse ClientTrafficPolicies.
func TestGatewayRoutePortsHTTP3(t *testing.T) {
	t.Parallel()
	h3 := &v1alpha1.ClientTrafficHTTP3{}
	yes := true
	route := func(gw *v1alpha1.ClientTraffic, sections ...v1alpha1.PolicySection) *v1alpha1.Route {
		return &v1alpha1.Route{Spec: v1alpha1.RouteSpec{Source: v1alpha1.RouteSource{Kubernetes: &v1alpha1.KubernetesSource{
			Route: *gatewayObject([]any{
				map[string]any{"name": "https", "port": int64(443), "protocol": "HTTPS"},
				map[string]any{"name": "tls", "port": int64(443), "protocol": "TLS"},
				map[string]any{"name": "api", "port": int64(8443), "protocol": "HTTPS"},
				map[string]any{"name": "db", "port": int64(6443), "protocol": "TLS"},
				map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"},
			}),
			Context: &v1alpha1.SourceContext{ClientTraffic: gw, PolicySections: sections},
		}}}}
	}
	tcp := func(p int32) ListenerPort { return ListenerPort{Protocol: corev1.ProtocolTCP, Port: p} }
	udp := func(p int32) ListenerPort { return ListenerPort{Protocol: corev1.ProtocolUDP, Port: p} }
	without := []ListenerPort{tcp(80), tcp(443), tcp(6443), tcp(8443)}
	for name, tc := range map[string]struct {
		rt            *v1alpha1.Route
		clientTraffic bool
		want          []ListenerPort
	}{
		"no policy": {route(nil), true, without},
		"the Gateway's http3: every HTTPS port": {route(&v1alpha1.ClientTraffic{HTTP3: h3}), true,
			[]ListenerPort{tcp(80), tcp(443), udp(443), tcp(6443), tcp(8443), udp(8443)}},
		"bounds refuse ClientTrafficPolicies": {route(&v1alpha1.ClientTraffic{HTTP3: h3}), false, without},
		"a listener's own policy without http3 wins on its port": {
			route(&v1alpha1.ClientTraffic{HTTP3: h3}, v1alpha1.PolicySection{Name: "api", ClientTraffic: &v1alpha1.ClientTraffic{}}), true,
			[]ListenerPort{tcp(80), tcp(443), udp(443), tcp(6443), tcp(8443)}},
		"a listener's own http3 on its port only": {
			route(nil, v1alpha1.PolicySection{Name: "api", ClientTraffic: &v1alpha1.ClientTraffic{HTTP3: h3}},
				v1alpha1.PolicySection{Name: "http", ClientTraffic: &v1alpha1.ClientTraffic{HTTP3: h3}},
				v1alpha1.PolicySection{Name: "db", ClientTraffic: &v1alpha1.ClientTraffic{HTTP3: h3}}), true,
			[]ListenerPort{tcp(80), tcp(443), tcp(6443), tcp(8443), udp(8443)}},
		"a TLS listener's policy decides for the HTTPS port it shares": {
			route(nil, v1alpha1.PolicySection{Name: "tls", ClientTraffic: &v1alpha1.ClientTraffic{HTTP3: h3}}), true,
			[]ListenerPort{tcp(80), tcp(443), udp(443), tcp(6443), tcp(8443)}},
		"a listener's policy the hub cannot use: the Gateway's applies": {
			route(&v1alpha1.ClientTraffic{HTTP3: h3}, v1alpha1.PolicySection{Name: "api", ClientTraffic: &v1alpha1.ClientTraffic{
				Timeout: &v1alpha1.ClientTrafficTimeout{HTTP: &v1alpha1.ClientTrafficHTTPTimeout{IdleTimeout: "2h"}}}}), true,
			[]ListenerPort{tcp(80), tcp(443), udp(443), tcp(6443), tcp(8443), udp(8443)}},
		"a policy that reads the PROXY protocol": {
			route(&v1alpha1.ClientTraffic{HTTP3: h3, EnableProxyProtocol: &yes}), true, without},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, problems := GatewayRoutePorts(tc.rt, nil, tc.clientTraffic)
			if len(problems) > 0 {
				t.Errorf("problems %v", problems)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
		})
	}
}
