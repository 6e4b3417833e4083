package ipam

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/loadbalancer"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestHubLoadBalancerTakesPoolAddress runs the manager's LoadBalancer controller with the
// address pools and nothing playing MetalLB: a tenant's LoadBalancer gets a hub Service of
// type LoadBalancer, the pools give it an address, and the LoadBalancer's status carries that
// address with Ready=True — the address its tenant Service will show.
func TestHubLoadBalancerTakesPoolAddress(t *testing.T) {
	e := newEnv(t, false, "kubelb")
	if err := e.c.Client.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a",
		Labels: map[string]string{kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue}}}); err != nil {
		t.Fatal(err)
	}
	e.pool(t, "hub", true, "10.96.0.0/30")
	e.startWith(t, func(mgr ctrl.Manager) error {
		if err := loadbalancer.SetupWithManager(mgr, loadbalancer.Options{Namespace: "kubelb"}); err != nil {
			return err
		}
		return Setup(mgr, HubOptions(settings.Reader{Client: mgr.GetClient(), ManagerNamespace: "kubelb"}.AddressPool, ""))
	})
	lb := hubLoadBalancer("web")
	if err := e.c.Client.Create(e.ctx, lb); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, wait, "the LoadBalancer to show the pool's address", func() error {
		cur := &kubelbv1alpha1.LoadBalancer{}
		if err := e.c.Client.Get(e.ctx, client.ObjectKeyFromObject(lb), cur); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(cur.Status.Conditions, loadbalancer.ConditionReady)
		if in := cur.Status.LoadBalancer.Ingress; len(in) != 1 || in[0].IP != "10.96.0.0" || ready == nil || ready.Status != metav1.ConditionTrue {
			return fmt.Errorf("ingress %v, Ready %+v", in, ready)
		}
		return nil
	})
	hub := e.waitAddrs(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: hubnames.LoadBalancerServiceName("web")}}, "10.96.0.0")
	if hub.Labels[kubelbv1alpha1.LabelManagedBy] != kubelbv1alpha1.LabelManagedByValue {
		t.Errorf("hub Service labels %v", hub.Labels)
	}
}

// hubLoadBalancer is a tenant-a LoadBalancer of type LoadBalancer on port 80, as a ccm mirrors it.
func hubLoadBalancer(name string) *kubelbv1alpha1.LoadBalancer {
	return &kubelbv1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: name},
		Spec: kubelbv1alpha1.LoadBalancerSpec{
			Endpoints: []kubelbv1alpha1.LoadBalancerEndpoints{{
				AddressesReference: &corev1.ObjectReference{Name: kubelbv1alpha1.DefaultAddressesName},
				Ports:              []kubelbv1alpha1.EndpointPort{{Name: "http", Port: 30080, Protocol: corev1.ProtocolTCP}},
			}},
			Ports: []kubelbv1alpha1.LoadBalancerPort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
			Type:  corev1.ServiceTypeLoadBalancer,
		},
	}
}

// TestHubLoadBalancerTellsWhyNoAddress: when the pools cannot address a hub Service, the
// LoadBalancer's Ready condition (WaitingForAddress) carries the pools' reason, so the
// platform team reading the LoadBalancer sees why.
func TestHubLoadBalancerTellsWhyNoAddress(t *testing.T) {
	e := newEnv(t, false, "kubelb")
	if err := e.c.Client.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a",
		Labels: map[string]string{kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue}}}); err != nil {
		t.Fatal(err)
	}
	e.pool(t, "tiny", true, "10.96.0.9/32")
	e.startWith(t, func(mgr ctrl.Manager) error {
		if err := loadbalancer.SetupWithManager(mgr, loadbalancer.Options{Namespace: "kubelb"}); err != nil {
			return err
		}
		return Setup(mgr, HubOptions(settings.Reader{Client: mgr.GetClient(), ManagerNamespace: "kubelb"}.AddressPool, ""))
	})
	for _, name := range []string{"first", "second"} {
		if err := e.c.Client.Create(e.ctx, hubLoadBalancer(name)); err != nil {
			t.Fatal(err)
		}
		if name == "first" {
			waitReady(t, e, name, loadbalancer.ReasonAddressAssigned, "")
		}
	}
	waitReady(t, e, "second", loadbalancer.ReasonWaitingForAddress, `AddressPool "tiny" has no free IPv4 address`)
}

// waitReady waits until LoadBalancer tenant-a/name has Ready with reason and a message that
// contains want.
func waitReady(t *testing.T, e *env, name, reason, want string) {
	t.Helper()
	testsupport.Eventually(t, wait, fmt.Sprintf("LoadBalancer %s Ready/%s %q", name, reason, want), func() error {
		cur := &kubelbv1alpha1.LoadBalancer{}
		if err := e.c.Client.Get(e.ctx, client.ObjectKey{Namespace: "tenant-a", Name: name}, cur); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(cur.Status.Conditions, loadbalancer.ConditionReady)
		if ready == nil || ready.Reason != reason || !strings.Contains(ready.Message, want) {
			return fmt.Errorf("Ready %+v", ready)
		}
		return nil
	})
}
