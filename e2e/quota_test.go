package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/manager/tenant"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// quotaLB is a LoadBalancer as a ccm would mirror it.
func quotaLB(ns, name string) *kubelbv1alpha1.LoadBalancer {
	return &kubelbv1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kubelbv1alpha1.LoadBalancerSpec{
			Endpoints: []kubelbv1alpha1.LoadBalancerEndpoints{{Addresses: []kubelbv1alpha1.EndpointAddress{{IP: "127.0.0.11"}},
				Ports: []kubelbv1alpha1.EndpointPort{{Port: 30080, Protocol: corev1.ProtocolTCP}}}},
			Ports: []kubelbv1alpha1.LoadBalancerPort{{Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
}

// TestTenantQuotaRefusesLoadBalancersOverTheLimit: the ResourceQuota the manager writes from
// a Tenant's limits holds on a hub that runs kube-controller-manager's quota controller (as
// real clusters do): with the tenant's own credential (the kubeconfig the manager made), a
// LoadBalancer over the limit is refused by the API server ("exceeded quota"), whatever the
// manager's own checks; raising the limit lets it in.
func TestTenantQuotaRefusesLoadBalancersOverTheLimit(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{GatewayAPIChannel: "standard"})
	framework.StartControllerManagerWith(t, hub, "resourcequota-controller")
	framework.StartSystem(t, hub, framework.Options{})
	ctx := t.Context()

	if err := hub.Client.Create(ctx, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "capped"},
		Spec: kubelbv1alpha1.TenantSpec{Limits: kubelbv1alpha1.Limits{LoadBalancers: ptr.To[int32](2)}}}); err != nil {
		t.Fatal(err)
	}
	ns := kubelbv1alpha1.TenantNamespacePrefix + "capped"
	secret := &corev1.Secret{}
	testsupport.Eventually(t, time.Minute, "the ccm kubeconfig of tenant capped", func() error {
		return hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: kubelbv1alpha1.CCMKubeconfigSecretName}, secret)
	})
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[kubelbv1alpha1.CCMKubeconfigSecretKey])
	if err != nil {
		t.Fatal(err)
	}
	ccm, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	// The quota controller has computed the usage: the quota is enforced from now on.
	hard := func(want int64) {
		t.Helper()
		testsupport.Eventually(t, time.Minute, fmt.Sprintf("ResourceQuota %s/%s enforced at %d LoadBalancers", ns, tenant.ResourceQuotaName, want), func() error {
			rq := &corev1.ResourceQuota{}
			if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tenant.ResourceQuotaName}, rq); err != nil {
				return err
			}
			got, ok := rq.Status.Hard[tenant.QuotaLoadBalancers]
			if _, used := rq.Status.Used[tenant.QuotaLoadBalancers]; !ok || !used || got.Value() != want {
				return fmt.Errorf("status %+v", rq.Status)
			}
			return nil
		})
	}
	hard(2)

	for _, name := range []string{"lb-1", "lb-2"} {
		if err := ccm.Create(ctx, quotaLB(ns, name)); err != nil {
			t.Fatalf("creating LoadBalancer %s within the limit with the tenant's credential: %v", name, err)
		}
	}
	err = ccm.Create(ctx, quotaLB(ns, "lb-3"))
	if err == nil || !strings.Contains(err.Error(), "exceeded quota") {
		t.Fatalf("a third LoadBalancer over the limit of 2: %v, want the API server to refuse it (exceeded quota)", err)
	}
	t.Logf("refused: %v", err)

	// The admin raises the tenant's limit: the manager updates the quota, and it is let in.
	objects.Update(t, hub.Client, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "capped"}}, func(tn *kubelbv1alpha1.Tenant) {
		tn.Spec.Limits.LoadBalancers = ptr.To[int32](3)
	})
	hard(3)
	testsupport.Eventually(t, 30*time.Second, "the third LoadBalancer to be accepted", func() error {
		return ccm.Create(ctx, quotaLB(ns, "lb-3"))
	})
}
