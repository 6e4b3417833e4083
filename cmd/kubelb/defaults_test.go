package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ccm"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/tenant"
	"kubelb.dev/kubelb/internal/ssa"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestDefaultInstallAddressesAThousandServices: the real kubelb binary on a hub with no
// Config and a Tenant that sets no limits (a default install, hub NodePorts on) gets 1000
// LoadBalancer Services of one tenant — two ports each, mirrored with the ccm's own code — and
// addresses every one of them, as KubeLB CE would (issue 31: the defaults were 500 listener
// ports and 256 NodePorts, and such a tenant got 500 addresses and 500 QuotaExceeded). The
// test plays the hub's load balancer implementation (an address in each hub Service's status).
// The Tenant warns (LimitsNearlyReached True, NearLimit): its 2000 hub NodePorts are 97 % of
// the default nodePorts limit, 2048.
func TestDefaultInstallAddressesAThousandServices(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 1000 LoadBalancers (about a minute)")
	}
	const n = 1000
	hub := testenv.Start(t, "hub", testenv.Options{})
	ctx := context.Background()
	c := hub.Client
	_, ns := startTenantHub(t, hub, testsupport.BuildBinary(t, "./cmd/kubelb"), "migrated")
	stop := playHubLoadBalancer(t, c, ns)
	defer stop()

	if err := ssa.Apply(ctx, c, ccm.DesiredAddresses(ns, []kubelbv1alpha1.EndpointAddress{{IP: "192.0.2.1"}, {IP: "192.0.2.2"}}), nil, hubnames.FieldOwnerCCM, ""); err != nil {
		t.Fatal(err)
	}
	mirrorTwoPortServices(t, c, ns, n)
	testsupport.Eventually(t, 10*time.Minute, "every LoadBalancer addressed", func() error {
		lbs := &kubelbv1alpha1.LoadBalancerList{}
		if err := c.List(ctx, lbs, client.InNamespace(ns)); err != nil {
			return err
		}
		addressed, refused := 0, 0
		var first string
		for _, lb := range lbs.Items {
			ready := meta.FindStatusCondition(lb.Status.Conditions, "Ready")
			switch {
			case ready != nil && ready.Reason == "QuotaExceeded":
				refused++
				first = ready.Message
			case ready != nil && ready.Status == metav1.ConditionTrue && len(lb.Status.LoadBalancer.Ingress) > 0 && len(lb.Status.Service.Ports) == 2:
				addressed++
			}
		}
		if refused > 0 {
			return fmt.Errorf("%d of %d LoadBalancers refused, e.g. %q", refused, n, first)
		}
		if addressed < n {
			return fmt.Errorf("%d of %d LoadBalancers addressed", addressed, n)
		}
		return nil
	})
	testsupport.Eventually(t, time.Minute, "the Tenant warned of its NodePorts", func() error {
		tn := &kubelbv1alpha1.Tenant{}
		if err := c.Get(ctx, client.ObjectKey{Name: "migrated"}, tn); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(tn.Status.Conditions, tenant.ConditionLimitsNearlyReached)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != tenant.ReasonNearLimit ||
			!strings.Contains(cond.Message, "nodePorts 2000 of 2048") || tn.Status.LoadBalancers != n {
			return fmt.Errorf("%d LoadBalancers counted, condition %+v", tn.Status.LoadBalancers, cond)
		}
		return nil
	})
}

// playHubLoadBalancer plays the hub's load balancer implementation (MetalLB, a cloud) for the
// Services of namespace ns: each Service of type LoadBalancer without an address gets one.
func playHubLoadBalancer(t *testing.T, c client.Client, ns string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	next := 0
	wg.Go(func() {
		for ctx.Err() == nil {
			var list corev1.ServiceList
			if err := c.List(ctx, &list, client.InNamespace(ns)); err == nil {
				for i := range list.Items {
					svc := &list.Items[i]
					if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Status.LoadBalancer.Ingress) > 0 {
						continue
					}
					next++
					svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: fmt.Sprintf("10.245.%d.%d", next/250, 1+next%250)}}
					if err := c.Status().Update(ctx, svc); err != nil && ctx.Err() == nil {
						t.Logf("hub load balancer player: %v", err)
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}
