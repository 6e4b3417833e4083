package checkhub

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/process"
)

func lbService(ns, name, class string, address bool, targetPort int) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(int32(targetPort))}}},
	}
	if class != "" {
		s.Spec.LoadBalancerClass = ptr.To(class)
	}
	if address {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
	}
	return s
}

// TestAddressesAndPorts: waiting hub Services are grouped by class; a class is served by the
// manager's address provider or by whoever gave a Service of it an address (in any
// namespace), else nobody serves it; ports left are the range minus the tenant namespaces'
// target ports in it.
func TestAddressesAndPorts(t *testing.T) {
	objs := []client.Object{
		lbService("tenant-a", "x1", "x", false, 10000),
		lbService("tenant-a", "x2", "x", false, 10001),
		lbService("tenant-b", "y1", "y", false, 10002),
		lbService("tenant-b", "none", "", false, 10003),
		lbService("tenant-b", "ok", "", true, 10003),
		lbService("tenant-b", "outside", "", true, 30000),
		lbService("other", "y-served", "y", true, 10004), // not a tenant's: evidence only
	}
	c := fake.NewClientBuilder().WithScheme(process.Scheme()).WithObjects(objs...).Build()
	h := &hub{c: c, args: []string{"--envoy-port-range=10000-10009", "--address-provider=ipam", "--address-provider-class=x"},
		tenants: []kubelbv1alpha1.Tenant{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "b"}}}}
	var lines []string
	for _, ch := range h.checkAddresses(context.Background()) {
		lines = append(lines, ch.Detail)
	}
	want := []string{
		"1 hub Service without a loadBalancerClass waiting for an address (tenant-b/none); served by whoever gave tenant-b/ok its address",
		"2 hub Services of class x waiting for an address (tenant-a/x1, tenant-a/x2); served by the manager's --address-provider=ipam",
		"1 hub Service of class y waiting for an address (tenant-b/y1); served by whoever gave other/y-served its address",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("addresses:\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	h.args = h.args[:1]
	if got := h.checkAddresses(context.Background())[1]; !strings.Contains(got.Detail, "nobody serves Services of class x") {
		t.Errorf("without the address provider: %q", got.Detail)
	}
	if got := h.checkPorts(context.Background()); got.Detail != "6 of 10 left in 10000-10009" || got.Status != Pass {
		t.Errorf("ports: %+v", got)
	}

	// With MetalLB's CRD installed, Services without a class are MetalLB's.
	h.c = fake.NewClientBuilder().WithScheme(process.Scheme()).WithObjects(lbService("tenant-b", "none", "", false, 10003),
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "ipaddresspools.metallb.io"}}).Build()
	if got := h.checkAddresses(context.Background())[0]; !strings.HasSuffix(got.Detail, "; served by MetalLB (its CRD ipaddresspools.metallb.io is installed)") {
		t.Errorf("with MetalLB: %q", got.Detail)
	}
}
