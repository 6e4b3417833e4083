package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ccm"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ssa"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// startTenantHub starts the kubelb binary bin (with its admission webhook) on hub, with its
// namespace "kubelb" and a Tenant named tenant that sets nothing, and returns the running
// manager and the tenant's namespace once the manager made it.
func startTenantHub(t *testing.T, hub *testenv.Cluster, bin, tenant string) (managerProcess, string) {
	t.Helper()
	ctx := context.Background()
	c := hub.Client
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubelb"}},
		&kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: tenant}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	m := startWithWebhook(t, hub, bin)
	ns := hubnames.TenantNamespace(tenant)
	testsupport.Eventually(t, time.Minute, "the Tenant's namespace", func() error {
		return c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
	})
	return m, ns
}

// mirrorTwoPortServices writes into the tenant namespace ns, with the ccm's own code and field
// owner, the LoadBalancers of n tenant Services of type LoadBalancer in namespace "apps", each
// with ports http 80 and https 443 (and their tenant NodePorts).
func mirrorTwoPortServices(t *testing.T, c client.Client, ns string, n int) {
	t.Helper()
	for i := range n {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: "apps", UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
				Ports: []corev1.ServicePort{
					{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, NodePort: int32(30000 + 2*(i%1000))},
					{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, NodePort: int32(30001 + 2*(i%1000))},
				}},
		}
		lb, _ := ccm.DesiredLoadBalancer(svc, ns)
		if err := ssa.Apply(context.Background(), c, lb, nil, hubnames.FieldOwnerCCM, ""); err != nil {
			t.Fatal(err)
		}
	}
}
