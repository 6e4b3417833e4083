package e2e

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestL4HubAddressPool runs the L4 path with the hub's Envoy Services addressed by kubelb's
// own address pools (kubelb --address-provider=ipam) instead of the harness playing MetalLB:
// the harness plays only the hub's kube-proxy (a pool address:port goes to the Envoy
// listener). The tenant Service shows the pool address, and real TCP traffic sent to it goes
// through the real Envoy to both tenant nodes; switching the tenant to another pool moves the
// address and the traffic.
func TestL4HubAddressPool(t *testing.T) {
	pair := testenv.StartPair(t)
	ctx := context.Background()
	for _, p := range []*kubelbv1alpha1.AddressPool{
		{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: kubelbv1alpha1.AddressPoolSpec{Default: true, Addresses: []string{"127.0.7.1-127.0.7.4"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "blue"}, Spec: kubelbv1alpha1.AddressPoolSpec{Addresses: []string{"127.0.7.16/30"}}},
	} {
		if err := pair.Hub.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	sys := framework.StartSystem(t, pair.Hub, framework.Options{
		ExtraManagerArgs: []string{"--address-provider=ipam"},
		HubLB:            framework.HubLBOptions{KubeProxyOnly: true, ForwardTo: "127.0.0.1"},
	})
	a := sys.AddTenant("a", pair.Tenant, 2)
	web := a.CreateService(framework.LBService{Name: "web", Ports: []corev1.ServicePort{framework.TCPPort("http", 18080)}})
	a.StartBackends(web)
	a.StartEnvoy(framework.EnvoyBootstrap)

	t.Run("the tenant Service shows the default pool's first address and traffic to it goes through Envoy", func(t *testing.T) {
		if ip := a.WaitAddress("web", addressTimeout); ip != "127.0.7.1" {
			t.Fatalf("address %q, want the default pool's first, 127.0.7.1", ip)
		}
		framework.WaitServes(t, "127.0.7.1:18080", "a-node-0", "a-node-1")
	})

	t.Run("the tenant's pool set on its Tenant moves the address and the traffic", func(t *testing.T) {
		tenant := &kubelbv1alpha1.Tenant{}
		if err := pair.Hub.Client.Get(ctx, client.ObjectKey{Name: "a"}, tenant); err != nil {
			t.Fatal(err)
		}
		tenant.Spec.LoadBalancer.AddressPool = ptr.To("blue")
		if err := pair.Hub.Client.Update(ctx, tenant); err != nil {
			t.Fatal(err)
		}
		waitTenantAddress(t, a, "web", "127.0.7.16")
		framework.WaitServes(t, "127.0.7.16:18080", "a-node-0", "a-node-1")
	})
}

// waitTenantAddress waits until the tenant Service's first address is want.
func waitTenantAddress(t *testing.T, tn *framework.Tenant, name, want string) {
	t.Helper()
	testsupport.Eventually(t, addressTimeout, fmt.Sprintf("Service %s addressed %s", name, want), func() error {
		svc := &corev1.Service{}
		if err := tn.Cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, svc); err != nil {
			return err
		}
		if in := svc.Status.LoadBalancer.Ingress; len(in) == 0 || in[0].IP != want {
			return fmt.Errorf("status.loadBalancer.ingress %v", in)
		}
		return nil
	})
}
