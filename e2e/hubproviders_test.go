package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/lbaddress"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
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
		objects.Update(t, pair.Hub.Client, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, func(tenant *kubelbv1alpha1.Tenant) {
			tenant.Spec.LoadBalancer.AddressPool = ptr.To("blue")
		})
		waitTenantAddress(t, a, "web", "127.0.7.16")
		framework.WaitServes(t, "127.0.7.16:18080", "a-node-0", "a-node-1")
	})

	t.Run("the manager dashboard's address provider panels show the pools", func(t *testing.T) {
		checkAddressProviderPanels(t, "kubelb", sys.MetricsAddr, managerProvidersRow)
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

// TestL4HubNodeIP runs the L4 path with the hub in node-IP mode (kubelb
// --address-provider=node-ip) instead of the harness playing MetalLB: the hub Services get the
// addresses of the Ready hub nodes of their tenant's node set, the harness plays only the
// hub's kube-proxy (a node address:port goes to the Envoy listener), and real TCP traffic sent
// to the hub nodes' addresses goes through the real Envoy to the tenant nodes. Two tenants on
// disjoint node sets serve the same port; a hub node that is not Ready stops being an address;
// a second Service on a held port shows the app team why it waits, on its own Service.
func TestL4HubNodeIP(t *testing.T) {
	pair := testenv.StartPair(t)
	tenantB := testenv.Start(t, "tenant-b", testenv.Options{GatewayAPIChannel: "standard", WithoutKubelbCRDs: true})
	hub := pair.Hub.Client
	for name, n := range map[string]struct{ ip, set string }{
		"hub-0": {"127.0.8.1", "true"}, "hub-1": {"127.0.8.2", ""}, "hub-edge": {"127.0.8.9", "edge"},
	} {
		framework.AddNodeWith(t, hub, name, []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.ip}},
			map[string]string{"kubelb.k8c.io/use-as-loadbalancer": n.set})
	}
	framework.AddNodeWith(t, hub, "hub-unlabelled", []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.8.5"}}, nil)
	sys := framework.StartSystem(t, pair.Hub, framework.Options{
		ExtraManagerArgs: []string{"--address-provider=node-ip"},
		HubLB:            framework.HubLBOptions{KubeProxyOnly: true, ForwardTo: "127.0.0.1"},
	})
	a := sys.AddTenant("a", pair.Tenant, 2)
	web := a.CreateService(framework.LBService{Name: "web", Ports: []corev1.ServicePort{framework.TCPPort("http", 18080)}})
	a.StartBackends(web)
	a.StartEnvoy(framework.EnvoyBootstrap)

	t.Run("the tenant Service shows the default set's hub node addresses and traffic to each goes through Envoy", func(t *testing.T) {
		if got := a.WaitAddresses("web", 2, addressTimeout); got[0] != "127.0.8.1" || got[1] != "127.0.8.2" {
			t.Fatalf("addresses %v, want the default set's hub nodes 127.0.8.1, 127.0.8.2", got)
		}
		framework.WaitServes(t, "127.0.8.1:18080", "a-node-0", "a-node-1")
		framework.WaitServes(t, "127.0.8.2:18080", "a-node-0", "a-node-1")
	})

	t.Run("a tenant on another node set serves the same port on its own hub node", func(t *testing.T) {
		b := sys.AddTenant("b", tenantB, 1)
		objects.Update(t, hub, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, func(tn *kubelbv1alpha1.Tenant) {
			tn.Spec.LoadBalancer.NodeSet = ptr.To("edge")
		})
		webB := b.CreateService(framework.LBService{Name: "web", Ports: []corev1.ServicePort{framework.TCPPort("http", 18080)}})
		b.StartBackends(webB)
		b.StartEnvoy(framework.EnvoyBootstrap)
		waitTenantAddress(t, b, "web", "127.0.8.9")
		framework.WaitServes(t, "127.0.8.9:18080", "b-node-0")
		framework.WaitServes(t, "127.0.8.1:18080", "a-node-0", "a-node-1") // tenant a is unaffected
	})

	t.Run("a hub node that is not Ready is no longer an address", func(t *testing.T) {
		framework.SetNodeReady(t, hub, "hub-0", false)
		waitTenantAddress(t, a, "web", "127.0.8.2")
		framework.WaitServes(t, "127.0.8.2:18080", "a-node-0", "a-node-1")
	})

	t.Run("a second Service on a held port tells the app team why it waits, and is served once the port is free", func(t *testing.T) {
		a.CreateService(framework.LBService{Name: "api", Ports: []corev1.ServicePort{framework.TCPPort("http", 18080)}})
		waitTenantCondition(t, a, "api", metav1.ConditionFalse, "WaitingForAddress", "is held by")
		if err := a.Cluster.Client.Delete(context.Background(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}); err != nil {
			t.Fatal(err)
		}
		waitTenantAddress(t, a, "api", "127.0.8.2")
		waitTenantCondition(t, a, "api", metav1.ConditionTrue, lbaddress.ReasonAssigned, "1 address(es)")
	})

	t.Run("the manager dashboard's address provider panels show the node-IP mode", func(t *testing.T) {
		checkAddressProviderPanels(t, "kubelb", sys.MetricsAddr, managerProvidersRow, "Address pool usage")
	})
}

// waitTenantCondition waits until the tenant Service has the condition
// kubelb.k8c.io/AddressAssigned with status and reason, and a message containing want.
func waitTenantCondition(t *testing.T, tn *framework.Tenant, name string, status metav1.ConditionStatus, reason, want string) {
	t.Helper()
	testsupport.Eventually(t, addressTimeout, fmt.Sprintf("Service %s condition %s/%s", name, status, reason), func() error {
		svc := &corev1.Service{}
		if err := tn.Cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, svc); err != nil {
			return err
		}
		c := meta.FindStatusCondition(svc.Status.Conditions, lbaddress.ConditionAddressAssigned)
		if c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, want) {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
}
