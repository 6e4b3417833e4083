package translatetest

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
)

// Builders of large Layer 7 tenants for benchmarks (here to be shared by the front end's and
// the xDS server's).

// BenchRoute is a Route embedding a tenant object and its backend Services.
func BenchRoute(name string, obj map[string]any, svcs ...corev1.Service) v1alpha1.Route {
	r := v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant-bench"}}
	r.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: obj}}
	for _, s := range svcs {
		r.Spec.Source.Kubernetes.Services = append(r.Spec.Source.Kubernetes.Services, v1alpha1.UpstreamService{Service: s})
	}
	return r
}

// BenchService is a backend Service with port 80 on nodePort.
func BenchService(ns, name string, nodePort int32) corev1.Service {
	return corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: nodePort, Protocol: corev1.ProtocolTCP}}}}
}

// BenchSecret is a hub Secret synced from the tenant TLS Secret ns/name, with a
// self-signed certificate for host.
func BenchSecret(b testsupport.TB, ns, name, host string) corev1.Secret {
	crt, key := testsupport.SelfSignedPEM(b, host)
	return corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sync-" + ns + "-" + name, Namespace: "tenant-bench",
			Labels: map[string]string{v1alpha1.LabelOriginNamespace: ns, v1alpha1.LabelOriginName: name}},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
	}
}

// BenchAddresses are three node addresses (Addresses/default).
func BenchAddresses() map[string]v1alpha1.Addresses {
	return map[string]v1alpha1.Addresses{"default": {
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec:       v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}, {IP: "10.0.0.3"}}},
	}}
}

// benchGateway adds to in the Gateway "gw" of namespace apps (HTTP on 80, HTTPS on 443 with
// the wildcard certificate "wildcard", listener ports 20080 and 20443) with its Secret and hub
// Service; the Gateway's Route is the last of in.Routes.
func benchGateway(b testsupport.TB, in *translate.Input) {
	in.Secrets = append(in.Secrets, BenchSecret(b, "apps", "wildcard", "*.example.com"))
	in.RouteServices = append(in.RouteServices, corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "gateway-gw", Namespace: in.Tenant, Labels: map[string]string{v1alpha1.LabelRouteName: "gw"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "tcp-80", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(20080)},
			{Name: "tcp-443", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(20443)},
		}},
	})
	in.Routes = append(in.Routes, BenchRoute("gw", map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": "gw", "namespace": "apps"},
		"spec": map[string]any{"gatewayClassName": "kubelb", "listeners": []any{
			map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"},
			map[string]any{"name": "https", "port": int64(443), "protocol": "HTTPS", "hostname": "*.example.com",
				"tls": map[string]any{"mode": "Terminate", "certificateRefs": []any{map[string]any{"name": "wildcard"}}}},
		}},
	}))
}

// HTTPRoutesTenant is one tenant with a Gateway (HTTP on 80, HTTPS on 443 with a wildcard
// certificate) and n HTTPRoutes attached to both listeners, each with its own hostname, three
// rules (a path prefix with a header match, a method and exact path, a catch-all) and two
// weighted backend Services.
func HTTPRoutesTenant(b testsupport.TB, n int) translate.Input {
	in := translate.Input{Tenant: "tenant-bench", Addresses: BenchAddresses()}
	benchGateway(b, &in)
	for i := range n {
		name := fmt.Sprintf("app-%d", i)
		stable, canary := name+"-stable", name+"-canary"
		backends := []any{
			map[string]any{"name": stable, "port": int64(80), "weight": int64(90)},
			map[string]any{"name": canary, "port": int64(80), "weight": int64(10)},
		}
		spec := map[string]any{
			"parentRefs": []any{map[string]any{"name": "gw", "sectionName": "http"}, map[string]any{"name": "gw", "sectionName": "https"}},
			"hostnames":  []any{fmt.Sprintf("app-%d.example.com", i)},
			"rules": []any{
				map[string]any{"matches": []any{map[string]any{
					"path":    map[string]any{"type": "PathPrefix", "value": "/api"},
					"headers": []any{map[string]any{"name": "x-version", "value": "v2"}},
				}}, "backendRefs": backends},
				map[string]any{"matches": []any{map[string]any{
					"path": map[string]any{"type": "Exact", "value": "/login"}, "method": "POST",
				}}, "backendRefs": backends},
				map[string]any{"backendRefs": backends},
			},
		}
		in.Routes = append(in.Routes, BenchRoute(fmt.Sprintf("route-%d", i), map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
			"metadata": map[string]any{"name": name, "namespace": "apps"}, "spec": spec,
		}, BenchService("apps", stable, int32(30000+(2*i)%2000)), BenchService("apps", canary, int32(30001+(2*i)%2000))))
	}
	return in
}

// HTTPRoutesTenantCached is HTTPRoutesTenant with every object given a UID and a
// resourceVersion, as an informer cache holds them (what translate.Incremental keys on).
func HTTPRoutesTenantCached(b testsupport.TB, n int) translate.Input {
	in := HTTPRoutesTenant(b, n)
	a := in.Addresses["default"]
	a.UID, a.ResourceVersion = "addresses-default", "1"
	in.Addresses["default"] = a
	for i := range in.Routes {
		in.Routes[i].UID, in.Routes[i].ResourceVersion = types.UID("route-"+in.Routes[i].Name), "1"
	}
	for i := range in.Secrets {
		in.Secrets[i].UID, in.Secrets[i].ResourceVersion = types.UID("secret-"+in.Secrets[i].Name), "1"
	}
	for i := range in.RouteServices {
		in.RouteServices[i].UID, in.RouteServices[i].ResourceVersion = types.UID("service-"+in.RouteServices[i].Name), "1"
	}
	return in
}

// ChangeOneHTTPRoute replaces HTTPRoute i of a tenant of HTTPRoutesTenantCached (mod their
// number; the Gateway is left alone) by a copy whose catch-all rule sends all requests to
// the other backend, with a new resourceVersion, as an informer does on an update.
func ChangeOneHTTPRoute(in *translate.Input, i int) {
	var idx []int
	for j := range in.Routes {
		if in.Routes[j].Spec.Source.Kubernetes.Route.GetKind() == "HTTPRoute" {
			idx = append(idx, j)
		}
	}
	j := idx[i%len(idx)]
	r := in.Routes[j].DeepCopy()
	rules := r.Spec.Source.Kubernetes.Route.Object["spec"].(map[string]any)["rules"].([]any)
	last := rules[len(rules)-1].(map[string]any)
	refs := last["backendRefs"].([]any)
	a, b := refs[0].(map[string]any), refs[1].(map[string]any)
	a["weight"], b["weight"] = b["weight"], a["weight"]
	v, _ := strconv.Atoi(r.ResourceVersion)
	r.ResourceVersion = strconv.Itoa(v + 1)
	in.Routes[j] = *r
}

// LoadBalancerTenant is one tenant ("tenant-bench") of n LoadBalancers of one TCP port each
// (80, listener port 10000+i, NodePort 30000+i%2000) with their hub Services, on three nodes
// (Addresses/default), every object with a UID and a resourceVersion as an informer cache
// holds them: the shape of a tenant with n mirrored Services.
func LoadBalancerTenant(n int) translate.Input {
	in := translate.Input{Tenant: "tenant-bench", Addresses: BenchAddresses(), HubServices: make(map[string]*corev1.Service, n)}
	a := in.Addresses["default"]
	a.UID, a.ResourceVersion = "addresses-default", "1"
	in.Addresses["default"] = a
	for i := range n {
		name := fmt.Sprintf("00000000-0000-0000-0000-%012d", i)
		lb := v1alpha1.LoadBalancer{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: in.Tenant, UID: types.UID("lb-" + name), ResourceVersion: "1",
				Labels: map[string]string{v1alpha1.LabelOriginNamespace: "default", v1alpha1.LabelOriginName: fmt.Sprintf("svc-%d", i)}},
			Spec: v1alpha1.LoadBalancerSpec{
				Endpoints: []v1alpha1.LoadBalancerEndpoints{{
					AddressesReference: &corev1.ObjectReference{Name: "default"},
					Ports:              []v1alpha1.EndpointPort{{Port: int32(30000 + i%2000), Protocol: corev1.ProtocolTCP}},
				}},
				Ports: []v1alpha1.LoadBalancerPort{{Port: 80, Protocol: corev1.ProtocolTCP}},
			},
		}
		in.LoadBalancers = append(in.LoadBalancers, lb)
		in.HubServices[name] = &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "envoy-" + name, Namespace: in.Tenant, UID: types.UID("svc-" + name), ResourceVersion: "1",
				Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue, v1alpha1.LabelLoadBalancerNS: in.Tenant, v1alpha1.LabelLoadBalancerName: name}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(int32(10000 + i))}}},
		}
	}
	return in
}

// ChangeOneLoadBalancer replaces LoadBalancer i of in (mod their number) by a copy with
// another endpoint port and resourceVersion, as an informer does on an update.
func ChangeOneLoadBalancer(in *translate.Input, i int) {
	i %= len(in.LoadBalancers)
	lbs := in.LoadBalancers
	lb := lbs[i].DeepCopy()
	lb.Spec.Endpoints[0].Ports[0].Port = 30000 + (lb.Spec.Endpoints[0].Ports[0].Port-29999)%2000
	v, _ := strconv.Atoi(lb.ResourceVersion)
	lb.ResourceVersion = strconv.Itoa(v + 1)
	lbs[i] = *lb
}
