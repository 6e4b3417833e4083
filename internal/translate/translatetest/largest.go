package translatetest

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
)

// The largest tenant (docs/performance.md "The largest tenant"): what one tenant can make the
// manager translate within the CRDs' bounds (api/v1alpha1's maxItems) and the default
// per-tenant limits (settings.DefaultLimit*, which this package does not import, for it is
// below settings: settings' TestLargestTenantAtDefaultLimits checks they agree).
const (
	// LargestAddresses is the number of Addresses objects the endpoint groups reference (a
	// LoadBalancer or Route has at most 4 groups) and LargestAddressesItems their size
	// (Addresses.spec.addresses maxItems).
	LargestAddresses      = 4
	LargestAddressesItems = 5000
	// LargestLBPorts is the most ports of one LoadBalancer (spec.ports maxItems).
	LargestLBPorts = 128
	// LargestListenerPorts is the tenant's listener ports (spec.limits.listenerPorts); the
	// Gateway takes two (80, 443), the LoadBalancers the rest.
	LargestListenerPorts = 500
	// LargestEndpointsPerCluster is spec.limits.endpointsPerCluster.
	LargestEndpointsPerCluster = 1000
	// LargestHTTPRoutes HTTPRoutes at the Gateway API's bounds that make clusters: 16
	// hostnames, 16 rules of 16 backends (256 clusters per route). The Routes limit (1000)
	// allows more; see docs/performance.md for why the benchmark stops here.
	LargestHTTPRoutes     = 4
	LargestRouteHostnames = 16
	LargestRouteRules     = 16
	LargestRouteBackends  = 16
)

// LargestTenant is the largest tenant scaled to quarters/4 of it (4: all of it): the
// LoadBalancers' listener ports and the HTTPRoutes are scaled, the Addresses objects (shared
// by every endpoint group) are always at their maximum. Options.MaxEndpointsPerCluster is the
// default limit. Every cluster has 4 × 5000 candidate endpoints, cut to 1000.
func LargestTenant(b testsupport.TB, quarters int) translate.Input {
	in := translate.Input{
		Tenant:    "tenant-bench",
		Addresses: map[string]v1alpha1.Addresses{},
		Options:   translate.Options{MaxEndpointsPerCluster: LargestEndpointsPerCluster},
	}
	var groups []v1alpha1.LoadBalancerEndpoints // the Routes' endpoint groups
	for a := range LargestAddresses {
		name := fmt.Sprintf("nodes-%d", a)
		addrs := make([]v1alpha1.EndpointAddress, LargestAddressesItems)
		for i := range addrs {
			addrs[i] = v1alpha1.EndpointAddress{IP: fmt.Sprintf("10.%d.%d.%d", 16+a, i/250, i%250+1)}
		}
		in.Addresses[name] = v1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: in.Tenant}, Spec: v1alpha1.AddressesSpec{Addresses: addrs}}
		groups = append(groups, v1alpha1.LoadBalancerEndpoints{AddressesReference: &corev1.ObjectReference{Name: name}})
	}

	// Layer 4: the listener ports left by the Gateway, on LoadBalancers of 128 ports; every
	// endpoint group has its own NodePorts, so no two groups give the same endpoints.
	ports := (LargestListenerPorts - 2) * quarters / 4
	for l := 0; ports > 0; l++ {
		n := min(ports, LargestLBPorts)
		ports -= n
		lb := v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("00000000-0000-0000-0000-%012d", l), Namespace: in.Tenant,
			Labels: map[string]string{v1alpha1.LabelOriginNamespace: "apps", v1alpha1.LabelOriginName: fmt.Sprintf("svc-%d", l)},
		}}
		for g := range LargestAddresses {
			eg := v1alpha1.LoadBalancerEndpoints{Name: fmt.Sprintf("group-%d", g), AddressesReference: &corev1.ObjectReference{Name: fmt.Sprintf("nodes-%d", g)}}
			for p := range n {
				eg.Ports = append(eg.Ports, v1alpha1.EndpointPort{Name: fmt.Sprintf("port-%d", p), Port: int32(30000 + g*LargestLBPorts + p), Protocol: corev1.ProtocolTCP})
			}
			lb.Spec.Endpoints = append(lb.Spec.Endpoints, eg)
		}
		for p := range n {
			name := fmt.Sprintf("port-%d", p)
			lb.Spec.Ports = append(lb.Spec.Ports, v1alpha1.LoadBalancerPort{Name: name, Port: int32(1000 + p), Protocol: corev1.ProtocolTCP})
			sp := v1alpha1.ServicePort{UpstreamTargetPort: int32(10000 + l*LargestLBPorts + p)}
			sp.Name, sp.Port, sp.Protocol = name, int32(1000+p), corev1.ProtocolTCP
			lb.Status.Service.Ports = append(lb.Status.Service.Ports, sp)
		}
		in.LoadBalancers = append(in.LoadBalancers, lb)
	}

	// Layer 7: a Gateway (HTTP 80, HTTPS 443 with a wildcard certificate) and HTTPRoutes.
	benchGateway(b, &in)
	in.Routes[len(in.Routes)-1].Spec.Endpoints = groups
	for i := range LargestHTTPRoutes * quarters / 4 {
		name := fmt.Sprintf("app-%d", i)
		var hostnames, rules []any
		for h := range LargestRouteHostnames {
			hostnames = append(hostnames, fmt.Sprintf("h%d.app-%d.example.com", h, i))
		}
		var svcs []corev1.Service
		for rl := range LargestRouteRules {
			var backends []any
			for bk := range LargestRouteBackends {
				svc := fmt.Sprintf("%s-r%d-b%d", name, rl, bk)
				backends = append(backends, map[string]any{"name": svc, "port": int64(80), "weight": int64(1 + bk)})
				svcs = append(svcs, BenchService("apps", svc, int32(30000+len(svcs))))
			}
			rules = append(rules, map[string]any{"matches": []any{map[string]any{
				"path": map[string]any{"type": "PathPrefix", "value": fmt.Sprintf("/r%d", rl)},
			}}, "backendRefs": backends})
		}
		r := BenchRoute(fmt.Sprintf("route-%d", i), map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
			"metadata": map[string]any{"name": name, "namespace": "apps"},
			"spec": map[string]any{
				"parentRefs": []any{map[string]any{"name": "gw", "sectionName": "http"}, map[string]any{"name": "gw", "sectionName": "https"}},
				"hostnames":  hostnames,
				"rules":      rules,
			},
		}, svcs...)
		r.Spec.Endpoints = groups
		in.Routes = append(in.Routes, r)
	}
	in.HubServices = HubServicesFromStatus(in.LoadBalancers)
	return in
}
