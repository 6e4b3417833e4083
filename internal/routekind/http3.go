package routekind

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// GatewayRoutePorts are the ports of a Gateway Route's hub Service: GatewayPortsWith (the
// Gateway's listeners and those of the ListenerSets it takes, sets), and a UDP port of the
// same number for every HTTPS port served over HTTP/3 (HTTP3Ports), sorted by port then
// protocol. The quota counts them, the planner allocates them, the translation binds them.
// clientTraffic: the tenant's bounds allow ClientTrafficPolicies (ClientTrafficAllowed).
func GatewayRoutePorts(rt *v1alpha1.Route, sets []*unstructured.Unstructured, clientTraffic bool) (ports []ListenerPort, problems []string) {
	if rt.Spec.Source.Kubernetes == nil {
		return nil, []string{"the Route embeds no object"}
	}
	ports, problems = GatewayPortsWith(&rt.Spec.Source.Kubernetes.Route, sets)
	extra := HTTP3Ports(rt, clientTraffic)
	if len(extra) == 0 {
		return ports, problems
	}
	ports = append(ports, extra...)
	slices.SortFunc(ports, func(a, b ListenerPort) int {
		return cmp.Or(cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol))
	})
	return slices.Compact(ports), problems
}

// HTTP3Ports are the UDP ports a Gateway Route's HTTP/3 needs: one for every port of the
// Gateway's own HTTPS listeners (the first MaxListeners) whose ClientTrafficPolicy, carried in
// the Route's context, asks for http3 and is one the hub can use (trafficpolicy.ResolveClient;
// clientTraffic: the tenant's bounds allow ClientTrafficPolicies) and that does not keep it
// from HTTP/3 (WhyNotHTTP3). The policy of a port is chosen as the translation chooses it: the
// first HTTPS or TLS listener on the port with a policy of its own (sectionName) the hub can
// use, else the Gateway's. Sorted by port; nothing of the Route is trusted.
func HTTP3Ports(rt *v1alpha1.Route, clientTraffic bool) []ListenerPort {
	if rt.Spec.Source.Kubernetes == nil || !clientTraffic {
		return nil
	}
	ctx := rt.Spec.Source.Kubernetes.Context
	if ctx == nil || (ctx.ClientTraffic == nil && len(ctx.PolicySections) == 0) {
		return nil
	}
	listeners, _, _ := unstructured.NestedSlice(rt.Spec.Source.Kubernetes.Route.Object, "spec", "listeners")
	if n, _ := ListenersServed(len(listeners)); n < len(listeners) {
		listeners = listeners[:n]
	}
	usable := func(ct *v1alpha1.ClientTraffic) (http3, ok bool) {
		if ct == nil {
			return false, false
		}
		s, err := trafficpolicy.ResolveClient(ct)
		if err != nil {
			return false, false
		}
		return s.HTTP3 && s.WhyNotHTTP3() == "", true
	}
	type port struct {
		https, decided, http3 bool
	}
	byPort := map[int32]*port{}
	for _, raw := range listeners {
		m, ok := raw.(map[string]any)
		if !ok {
			continue
		}
		n, ok := wholeNumber(m["port"])
		proto, _ := m["protocol"].(string)
		if !ok || n < 1 || n > 65535 || (proto != "HTTPS" && proto != "TLS") {
			continue
		}
		p := byPort[int32(n)]
		if p == nil {
			p = &port{}
			byPort[int32(n)] = p
		}
		p.https = p.https || proto == "HTTPS"
		if name, _ := m["name"].(string); !p.decided && name != "" {
			if sec := ctx.PolicySection(name); sec != nil {
				p.http3, p.decided = usable(sec.ClientTraffic)
			}
		}
	}
	gateway, _ := usable(ctx.ClientTraffic)
	var out []ListenerPort
	for n, p := range byPort {
		if p.https && (p.http3 || !p.decided && gateway) {
			out = append(out, ListenerPort{Protocol: corev1.ProtocolUDP, Port: n})
		}
	}
	slices.SortFunc(out, func(a, b ListenerPort) int { return cmp.Compare(a.Port, b.Port) })
	return out
}

// ClientTrafficAllowed reports whether the tenant's bounds b allow ClientTrafficPolicies at all
// (the one bound trafficpolicy.CheckClientBounds checks).
func ClientTrafficAllowed(b *trafficpolicy.Bounds) bool {
	return trafficpolicy.CheckClientBounds(b, &trafficpolicy.ClientSettings{}) == nil
}
