package ccm

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

func TestHubNamespace(t *testing.T) {
	for in, want := range map[string]string{
		"shroud": "tenant-shroud", "tenant-shroud": "tenant-shroud", "": "", "tenant-tenant-x": "tenant-tenant-x",
	} {
		if got := HubNamespace(in); got != want {
			t.Errorf("HubNamespace(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestClusterNameWithoutPrefix: a ccm given the tenant's name without tenant- (as KubeLB CE
// users write --cluster-name) works in the tenant's namespace tenant-<name> on the hub.
func TestClusterNameWithoutPrefix(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "shop")
	e.startCCM(t, ccmOpts{Options: Options{ClusterName: hubnames.TenantName(tenantNS)}})

	objects.Create(t, e.Tenant.Client, lbService("shop", "web"))
	svc := e.getService(t, "shop", "web")
	lb := e.mirrorOf(t, svc, nil)
	if lb.Namespace != tenantNS || lb.Labels[v1alpha1.LabelTenantName] != hubnames.TenantName(tenantNS) {
		t.Fatalf("mirror %s/%s labels %v", lb.Namespace, lb.Name, lb.Labels)
	}
	// Status flows back too: the ccm reads the hub namespace it writes to.
	e.setLBStatus(t, lb, "192.0.2.10")
	e.waitServiceIngress(t, svc, "192.0.2.10")
}

// TestExternalLoadBalancerImplementation: with --enable-cloud-provider=false another load
// balancer implementation (here played by the test, as MetalLB would) gives the Service its
// address; the hub LoadBalancer sends to that address on the Service's ports, follows it when
// it changes, and the ccm never writes the Service's status (the hub's address stays off it).
func TestExternalLoadBalancerImplementation(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "shop")
	e.startCCM(t, ccmOpts{external: true})

	svc := lbService("shop", "web")
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})
	before := serviceReconciles("shop")
	objects.Create(t, e.Tenant.Client, svc)
	svc = e.getService(t, "shop", "web")

	// No address yet: nothing to send to, so no mirror.
	waitReconciles(t, "shop", before, 1)
	e.noMirror(t, svc)

	setIngress := func(ips ...string) {
		t.Helper()
		// Another implementation writes the Service's status.
		objects.EditStatus(t, e.Tenant.Client, wait, svc, func(cur *corev1.Service) { cur.Status.LoadBalancer.Ingress = objects.Ingress(ips...) })
	}
	wantEndpoints := func(ips ...string) func(*v1alpha1.LoadBalancer) error {
		return func(lb *v1alpha1.LoadBalancer) error {
			if len(lb.Spec.Endpoints) != 1 {
				return fmt.Errorf("endpoints %+v", lb.Spec.Endpoints)
			}
			ep := lb.Spec.Endpoints[0]
			var got []string
			for _, a := range ep.Addresses {
				got = append(got, a.IP)
			}
			if fmt.Sprint(got) != fmt.Sprint(ips) || ep.AddressesReference != nil {
				return fmt.Errorf("addresses %v (reference %+v), want %v", got, ep.AddressesReference, ips)
			}
			want := fmt.Sprint([]v1alpha1.EndpointPort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}, {Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}})
			if fmt.Sprint(ep.Ports) != want {
				return fmt.Errorf("endpoint ports %v, want %s", ep.Ports, want)
			}
			if fmt.Sprint(lb.Spec.Ports) != fmt.Sprint([]v1alpha1.LoadBalancerPort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}, {Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}) {
				return fmt.Errorf("ports %v", lb.Spec.Ports)
			}
			return nil
		}
	}

	setIngress("198.51.100.7", "198.51.100.8")
	lb := e.mirrorOf(t, svc, wantEndpoints("198.51.100.7", "198.51.100.8"))

	// The hub gives the LoadBalancer its own address: it does not replace the other
	// implementation's on the Service.
	e.setLBStatus(t, lb, "192.0.2.10")
	setIngress("198.51.100.9")
	e.mirrorOf(t, svc, wantEndpoints("198.51.100.9"))
	cur := &corev1.Service{}
	if err := e.Tenant.Client.Get(e.ctx, client.ObjectKeyFromObject(svc), cur); err != nil {
		t.Fatal(err)
	}
	if len(cur.Status.LoadBalancer.Ingress) != 1 || cur.Status.LoadBalancer.Ingress[0].IP != "198.51.100.9" {
		t.Fatalf("Service status %+v, want the other implementation's 198.51.100.9 only", cur.Status.LoadBalancer)
	}
	// No node controller: no Addresses object on the hub.
	if err := e.Hub.Client.Get(e.ctx, client.ObjectKey{Namespace: tenantNS, Name: v1alpha1.DefaultAddressesName}, &v1alpha1.Addresses{}); err == nil {
		t.Error("an Addresses object was made; the endpoints are the other implementation's addresses")
	}

	// Deleting the Service releases it without touching its status first.
	if err := e.Tenant.Client.Delete(e.ctx, cur); err != nil {
		t.Fatal(err)
	}
	e.waitMirrorGone(t, svc)
}
