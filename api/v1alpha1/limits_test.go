package v1alpha1_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testenv"
)

// ceFixtures reads what a KubeLB CE ccm and manager really wrote into a hub (the wire
// fixtures), status included; the redacted key material becomes valid base64.
func ceFixtures(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw = bytes.ReplaceAll(raw, []byte("<redacted base64>"), []byte("AA=="))
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}

func addrs(n int) []kubelbv1alpha1.EndpointAddress {
	out := make([]kubelbv1alpha1.EndpointAddress, n)
	for i := range out {
		out[i] = kubelbv1alpha1.EndpointAddress{IP: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)}
	}
	return out
}

func lbPorts(n int) []kubelbv1alpha1.LoadBalancerPort {
	out := make([]kubelbv1alpha1.LoadBalancerPort, n)
	for i := range out {
		out[i] = kubelbv1alpha1.LoadBalancerPort{Name: fmt.Sprintf("p%d", i), Port: int32(1000 + i), Protocol: corev1.ProtocolTCP}
	}
	return out
}

func endpointPorts(n int) []kubelbv1alpha1.EndpointPort {
	out := make([]kubelbv1alpha1.EndpointPort, n)
	for i := range out {
		out[i] = kubelbv1alpha1.EndpointPort{Name: fmt.Sprintf("p%d", i), Port: int32(30000 + i), Protocol: corev1.ProtocolTCP}
	}
	return out
}

func conditions(n int) []metav1.Condition {
	out := make([]metav1.Condition, n)
	for i := range out {
		out[i] = metav1.Condition{Type: fmt.Sprintf("C%d", i), Status: metav1.ConditionTrue, Reason: "R",
			LastTransitionTime: metav1.Now()}
	}
	return out
}

func services(n int) []kubelbv1alpha1.UpstreamService {
	out := make([]kubelbv1alpha1.UpstreamService, n)
	for i := range out {
		out[i].APIVersion, out[i].Kind = "v1", "Service"
		out[i].Name, out[i].Namespace = fmt.Sprintf("s%d", i), "shop"
	}
	return out
}

func route(name string) *kubelbv1alpha1.Route {
	rt := &kubelbv1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	rt.Spec.Source.Kubernetes = &kubelbv1alpha1.KubernetesSource{}
	rt.Spec.Source.Kubernetes.Route.SetAPIVersion("networking.k8s.io/v1")
	rt.Spec.Source.Kubernetes.Route.SetKind("Ingress")
	rt.Spec.Source.Kubernetes.Route.SetName(name)
	rt.Spec.Source.Kubernetes.Route.SetNamespace("shop")
	return rt
}

// TestCRDListBounds checks, on a real kube-apiserver, that every list and map a tenant (or the
// manager on its behalf) writes is bounded, so that no object makes the translator's cost
// unbounded, and that what KubeLB CE really writes stays within the bounds.
func TestCRDListBounds(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	ctx := context.Background()
	c := hub.Client

	t.Run("KubeLB CE's objects are accepted, status included", func(t *testing.T) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-probe"}}
		if err := c.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		var objs []*unstructured.Unstructured
		for _, f := range []string{"hub-routes.yaml", "hub-syncsecrets.yaml"} {
			objs = append(objs, ceFixtures(t, "/work/shared/fixtures/kubelb-ce/"+f)...)
		}
		if len(objs) < 5 {
			t.Fatalf("read %d fixture objects, want the Routes and SyncSecrets", len(objs))
		}
		for _, u := range objs {
			status, hasStatus := u.Object["status"]
			u.SetResourceVersion("")
			u.SetUID("")
			if err := c.Create(ctx, u.DeepCopy()); err != nil {
				t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
			}
			if !hasStatus {
				continue
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(u.GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKeyFromObject(u), got); err != nil {
				t.Fatal(err)
			}
			got.Object["status"] = status
			if err := c.Status().Update(ctx, got); err != nil {
				t.Fatalf("writing the status of %s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
	})

	t.Run("objects at the bounds are accepted", func(t *testing.T) {
		a := &kubelbv1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Name: "at-bound", Namespace: "default"},
			Spec: kubelbv1alpha1.AddressesSpec{Addresses: addrs(5000)}}
		if err := c.Create(ctx, a); err != nil {
			t.Fatalf("Addresses with 5000 addresses: %v", err)
		}
		lb := validLB("at-bound")
		lb.Spec.Ports = lbPorts(128)
		lb.Spec.Endpoints = make([]kubelbv1alpha1.LoadBalancerEndpoints, 4)
		for i := range lb.Spec.Endpoints {
			lb.Spec.Endpoints[i] = kubelbv1alpha1.LoadBalancerEndpoints{Addresses: addrs(1000), Ports: endpointPorts(128)}
		}
		if err := c.Create(ctx, lb); err != nil {
			t.Fatalf("LoadBalancer at every bound: %v", err)
		}
		rt := route("at-bound")
		rt.Spec.Endpoints = make([]kubelbv1alpha1.LoadBalancerEndpoints, 4)
		rt.Spec.Source.Kubernetes.Services = services(512)
		for i := range rt.Spec.Source.Kubernetes.Services {
			for p := range 4 {
				rt.Spec.Source.Kubernetes.Services[i].Spec.Ports = append(rt.Spec.Source.Kubernetes.Services[i].Spec.Ports,
					corev1.ServicePort{Name: fmt.Sprintf("p%d", p), Port: int32(80 + p), NodePort: int32(30000 + p)})
			}
		}
		if err := c.Create(ctx, rt); err != nil {
			t.Fatalf("Route with 512 Services: %v", err)
		}
	})

	many := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("k%d", i)] = "v"
		}
		return m
	}
	manyBytes := func(n int) map[string][]byte {
		m := map[string][]byte{}
		for i := range n {
			m[fmt.Sprintf("k%d", i)] = []byte("v")
		}
		return m
	}

	specs := []struct {
		name string
		obj  client.Object
		want string
	}{
		{"Addresses with 5001 addresses", &kubelbv1alpha1.Addresses{
			ObjectMeta: metav1.ObjectMeta{Name: "over", Namespace: "default"},
			Spec:       kubelbv1alpha1.AddressesSpec{Addresses: addrs(5001)},
		}, "spec.addresses: Too many: 5001: must have at most 5000 items"},
		{"LoadBalancer with 129 ports", func() client.Object {
			lb := validLB("ports")
			lb.Spec.Ports = lbPorts(129)
			return lb
		}(), "spec.ports: Too many: 129: must have at most 128 items"},
		{"LoadBalancer with 5 endpoint groups", func() client.Object {
			lb := validLB("groups")
			for range 4 {
				lb.Spec.Endpoints = append(lb.Spec.Endpoints, lb.Spec.Endpoints[0])
			}
			return lb
		}(), "spec.endpoints: Too many: 5: must have at most 4 items"},
		{"LoadBalancer endpoint group with 1001 addresses", func() client.Object {
			lb := validLB("addresses")
			lb.Spec.Endpoints[0].Addresses = addrs(1001)
			return lb
		}(), "spec.endpoints[0].addresses: Too many: 1001: must have at most 1000 items"},
		{"LoadBalancer endpoint group with 129 ports", func() client.Object {
			lb := validLB("endpoint-ports")
			lb.Spec.Endpoints[0].Ports = endpointPorts(129)
			return lb
		}(), "spec.endpoints[0].ports: Too many: 129: must have at most 128 items"},
		{"LoadBalancer hostname of 254 characters", func() client.Object {
			lb := validLB("hostname")
			lb.Spec.Hostname = strings.Repeat("a", 254)
			return lb
		}(), "spec.hostname: Too long: may not be more than 253"},
		{"endpoint address of 65 characters", func() client.Object {
			lb := validLB("long-ip")
			lb.Spec.Endpoints[0].Addresses = []kubelbv1alpha1.EndpointAddress{{IP: strings.Repeat("1", 65)}}
			return lb
		}(), "spec.endpoints[0].addresses[0].ip: Too long: may not be more than 64"},
		{"Route with 5 endpoint groups", func() client.Object {
			rt := route("groups")
			rt.Spec.Endpoints = make([]kubelbv1alpha1.LoadBalancerEndpoints, 5)
			return rt
		}(), "spec.endpoints: Too many: 5: must have at most 4 items"},
		{"Route with 513 Services", func() client.Object {
			rt := route("services")
			rt.Spec.Source.Kubernetes.Services = services(513)
			return rt
		}(), "spec.source.kubernetes.services: Too many: 513: must have at most 512 items"},
		{"Route Service with 129 ports", func() client.Object {
			rt := route("service-ports")
			rt.Spec.Source.Kubernetes.Services = services(1)
			for i := range 129 {
				rt.Spec.Source.Kubernetes.Services[0].Spec.Ports = append(rt.Spec.Source.Kubernetes.Services[0].Spec.Ports,
					corev1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: int32(i + 1), NodePort: int32(30000 + i)})
			}
			return rt
		}(), "a Service has at most 128 ports"},
		{"SyncSecret with 1025 data keys", &kubelbv1alpha1.SyncSecret{
			ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"}, Data: manyBytes(1025),
		}, "data: Too many: 1025: must have at most 1024 items"},
		{"SyncSecret with 1025 stringData keys", &kubelbv1alpha1.SyncSecret{
			ObjectMeta: metav1.ObjectMeta{Name: "stringdata", Namespace: "default"}, StringData: many(1025),
		}, "stringData: Too many: 1025: must have at most 1024 items"},
		{"Tenant with 257 denied annotations", &kubelbv1alpha1.Tenant{
			ObjectMeta: metav1.ObjectMeta{Name: "denied"},
			Spec: kubelbv1alpha1.TenantSpec{AnnotationSettings: kubelbv1alpha1.AnnotationSettings{
				DeniedAnnotations: strings.Split(strings.Repeat("a,", 256)+"a", ",")}},
		}, "spec.deniedAnnotations: Too many: 257: must have at most 256 items"},
		{"Tenant with 257 propagated annotations", func() client.Object {
			m := many(257)
			return &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "propagated"},
				Spec: kubelbv1alpha1.TenantSpec{AnnotationSettings: kubelbv1alpha1.AnnotationSettings{PropagatedAnnotations: &m}}}
		}(), "spec.propagatedAnnotations: Too many: 257: must have at most 256 items"},
		{"Config with 257 default annotations for Services", &kubelbv1alpha1.Config{
			ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: "default"},
			Spec: kubelbv1alpha1.ConfigSpec{AnnotationSettings: kubelbv1alpha1.AnnotationSettings{
				DefaultAnnotations: map[kubelbv1alpha1.AnnotatedResource]kubelbv1alpha1.Annotations{"service": many(257)}}},
		}, "spec.defaultAnnotations.service: Too many: 257: must have at most 256 items"},
		{"Config with 65 tolerations", &kubelbv1alpha1.Config{
			ObjectMeta: metav1.ObjectMeta{Name: "tolerations", Namespace: "default"},
			Spec: kubelbv1alpha1.ConfigSpec{EnvoyProxy: kubelbv1alpha1.EnvoyProxy{
				Tolerations: make([]corev1.Toleration, 65)}},
		}, "spec.envoyProxy.tolerations: Too many: 65: must have at most 64 items"},
		{"Config with 65 node selector labels", &kubelbv1alpha1.Config{
			ObjectMeta: metav1.ObjectMeta{Name: "nodeselector", Namespace: "default"},
			Spec:       kubelbv1alpha1.ConfigSpec{EnvoyProxy: kubelbv1alpha1.EnvoyProxy{NodeSelector: many(65)}},
		}, "spec.envoyProxy.nodeSelector: Too many: 65: must have at most 64 items"},
	}
	for _, tc := range specs {
		t.Run("rejects "+tc.name, func(t *testing.T) { wantRejected(t, c.Create(ctx, tc.obj), tc.want) })
	}

	// Status lists: the tenant's kubeconfig may reach the status subresource too.
	statuses := []struct {
		name   string
		obj    client.Object
		mutate func(client.Object)
		want   string
	}{
		{"LoadBalancer status with 129 Service ports", validLB("status-ports"), func(o client.Object) {
			lb := o.(*kubelbv1alpha1.LoadBalancer)
			lb.Status.Service.Ports = make([]kubelbv1alpha1.ServicePort, 129)
			for i := range lb.Status.Service.Ports {
				lb.Status.Service.Ports[i].Port = int32(i + 1)
			}
		}, "status.service.ports: Too many: 129: must have at most 128 items"},
		{"LoadBalancer status with 17 ingress addresses", validLB("status-ingress"), func(o client.Object) {
			lb := o.(*kubelbv1alpha1.LoadBalancer)
			lb.Status.LoadBalancer.Ingress = make([]corev1.LoadBalancerIngress, 17)
			for i := range lb.Status.LoadBalancer.Ingress {
				lb.Status.LoadBalancer.Ingress[i].IP = fmt.Sprintf("192.0.2.%d", i)
			}
		}, "at most 16 ingress addresses"},
		{"LoadBalancer status with 33 conditions", validLB("status-conditions"), func(o client.Object) {
			o.(*kubelbv1alpha1.LoadBalancer).Status.Conditions = conditions(33)
		}, "status.conditions: Too many: 33: must have at most 32 items"},
		{"Route status with 513 Services", route("status-services"), func(o client.Object) {
			rt := o.(*kubelbv1alpha1.Route)
			rt.Status.Resources.Services = map[string]kubelbv1alpha1.RouteServiceStatus{}
			for i := range 513 {
				rt.Status.Resources.Services[fmt.Sprintf("shop/s%d", i)] = kubelbv1alpha1.RouteServiceStatus{}
			}
		}, "status.resources.services: Too many: 513: must have at most 512 items"},
		{"Route status with 33 route conditions", route("status-conditions"), func(o client.Object) {
			o.(*kubelbv1alpha1.Route).Status.Resources.Route.Conditions = conditions(33)
		}, "status.resources.route.conditions: Too many: 33: must have at most 32 items"},
		{"Route status Service with 129 ports", route("status-service-ports"), func(o client.Object) {
			rt := o.(*kubelbv1alpha1.Route)
			ports := make([]corev1.ServicePort, 129)
			for i := range ports {
				ports[i].Port = int32(i + 1)
			}
			rt.Status.Resources.Services = map[string]kubelbv1alpha1.RouteServiceStatus{"shop/web": {Ports: ports}}
		}, "Too many: 129: must have at most 128 items"},
		{"SyncSecret status with 33 conditions", &kubelbv1alpha1.SyncSecret{
			ObjectMeta: metav1.ObjectMeta{Name: "status-conditions", Namespace: "default"},
		}, func(o client.Object) {
			o.(*kubelbv1alpha1.SyncSecret).Status.Conditions = conditions(33)
		}, "status.conditions: Too many: 33: must have at most 32 items"},
		{"TenantState status with 33 conditions", &kubelbv1alpha1.TenantState{
			ObjectMeta: metav1.ObjectMeta{Name: "status-conditions", Namespace: "default"},
		}, func(o client.Object) {
			o.(*kubelbv1alpha1.TenantState).Status.Conditions = conditions(33)
		}, "status.conditions: Too many: 33: must have at most 32 items"},
		{"Tenant status with 33 conditions", &kubelbv1alpha1.Tenant{
			ObjectMeta: metav1.ObjectMeta{Name: "status-conditions"},
		}, func(o client.Object) {
			o.(*kubelbv1alpha1.Tenant).Status.Conditions = conditions(33)
		}, "status.conditions: Too many: 33: must have at most 32 items"},
	}
	for _, tc := range statuses {
		t.Run("rejects "+tc.name, func(t *testing.T) {
			if err := c.Create(ctx, tc.obj); err != nil {
				t.Fatalf("creating: %v", err)
			}
			tc.mutate(tc.obj)
			wantRejected(t, c.Status().Update(ctx, tc.obj), tc.want)
		})
	}
}
