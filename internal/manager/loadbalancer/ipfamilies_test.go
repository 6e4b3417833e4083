package loadbalancer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// families is a list of IP families, for short.
func families(f ...corev1.IPFamily) []corev1.IPFamily { return f }

var (
	v4   = corev1.IPv4Protocol
	v6   = corev1.IPv6Protocol
	dual = families(v4, v6)
)

// withFamilies is a one-port LoadBalancer asking for an IP family policy and families.
func withFamilies(ns, name string, policy corev1.IPFamilyPolicy, fams ...corev1.IPFamily) *kubelbv1alpha1.LoadBalancer {
	lb := newLB(ns, name, kubelbv1alpha1.LoadBalancerPort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80})
	if policy != "" {
		lb.Spec.IPFamilyPolicy = ptr.To(policy)
	}
	lb.Spec.IPFamilies = fams
	return lb
}

// hubFamiliesAre checks a hub Service's ipFamilies (and that it has a cluster IP of each).
func hubFamiliesAre(want ...corev1.IPFamily) func(*corev1.Service) error {
	return func(s *corev1.Service) error {
		if !slices.Equal(s.Spec.IPFamilies, want) || len(s.Spec.ClusterIPs) != len(want) {
			return fmt.Errorf("ipFamilies %v, clusterIPs %v; want families %v", s.Spec.IPFamilies, s.Spec.ClusterIPs, want)
		}
		return nil
	}
}

// waitStatusFamilies waits until the LoadBalancer's status.service.ipFamilies is want.
func waitStatusFamilies(t *testing.T, c client.Client, ns, name string, want ...corev1.IPFamily) *kubelbv1alpha1.LoadBalancer {
	t.Helper()
	var lb *kubelbv1alpha1.LoadBalancer
	testsupport.Eventually(t, waitTimeout, fmt.Sprintf("status.service.ipFamilies %v of %s", want, name), func() error {
		lb = getLB(t, c, ns, name)
		if !slices.Equal(lb.Status.Service.IPFamilies, want) {
			return fmt.Errorf("status.service.ipFamilies %v", lb.Status.Service.IPFamilies)
		}
		return nil
	})
	return lb
}

// TestIPFamilies: the hub Service follows the IP families the LoadBalancer asks for (the
// tenant Service's), on real API servers, one dual-stack and one IPv4 single-stack hub; the
// status tells the families the hub Service got and every address, of both families, the
// hub's load balancer gave it.
func TestIPFamilies(t *testing.T) {
	ctx := context.Background()
	opts := Options{Namespace: managerNS, PortRange: portalloc.Range{Min: 10000, Max: 10099}}

	t.Run("DualStackHub", func(t *testing.T) {
		hub := testenv.Start(t, "hub", testenv.Options{DualStack: true})
		c := hub.Client
		objects.Create(t, c, objects.Namespace(managerNS, nil))
		ns := "tenant-dual"
		objects.Create(t, c, objects.ManagedNamespace(ns))
		startController(t, hub, opts, 200, 400)

		t.Run("RequireDualStack in the tenant's order, both addresses in status", func(t *testing.T) {
			if err := c.Create(ctx, withFamilies(ns, "require", corev1.IPFamilyPolicyRequireDualStack, v6, v4)); err != nil {
				t.Fatal(err)
			}
			svc := waitService(t, c, ns, "require", hubFamiliesAre(v6, v4))
			if ptr.Deref(svc.Spec.IPFamilyPolicy, "") != corev1.IPFamilyPolicyRequireDualStack {
				t.Errorf("hub ipFamilyPolicy %v", ptr.Deref(svc.Spec.IPFamilyPolicy, ""))
			}
			waitStatusFamilies(t, c, ns, "require", v6, v4)
			playLoadBalancerIPs(t, c, ns, "require", "fd00:99::1", "127.0.0.30")
			lb := waitReady(t, c, ns, "require", metav1.ConditionTrue, ReasonAddressAssigned)
			var ips []string
			for _, in := range lb.Status.LoadBalancer.Ingress {
				ips = append(ips, in.IP)
			}
			if !slices.Equal(ips, []string{"fd00:99::1", "127.0.0.30"}) {
				t.Errorf("status.loadBalancer.ingress %v, want both families' addresses", ips)
			}
		})

		t.Run("PreferDualStack gets both families", func(t *testing.T) {
			if err := c.Create(ctx, withFamilies(ns, "prefer", corev1.IPFamilyPolicyPreferDualStack, v4, v6)); err != nil {
				t.Fatal(err)
			}
			waitService(t, c, ns, "prefer", hubFamiliesAre(v4, v6))
			waitStatusFamilies(t, c, ns, "prefer", v4, v6)
		})

		t.Run("without the fields the hub's default", func(t *testing.T) {
			if err := c.Create(ctx, withFamilies(ns, "ce", "")); err != nil {
				t.Fatal(err)
			}
			waitService(t, c, ns, "ce", hubFamiliesAre(v4))
			waitStatusFamilies(t, c, ns, "ce", v4)
		})

		t.Run("family changes: added in place, another primary family recreates", func(t *testing.T) {
			if err := c.Create(ctx, withFamilies(ns, "change", corev1.IPFamilyPolicySingleStack, v4)); err != nil {
				t.Fatal(err)
			}
			before := waitService(t, c, ns, "change", hubFamiliesAre(v4))
			listener := before.Spec.Ports[0].TargetPort.IntVal
			setFamilies := func(policy corev1.IPFamilyPolicy, fams ...corev1.IPFamily) {
				t.Helper()
				updateLB(t, c, ns, "change", func(lb *kubelbv1alpha1.LoadBalancer) {
					lb.Spec.IPFamilyPolicy, lb.Spec.IPFamilies = ptr.To(policy), fams
				})
			}

			// SingleStack → PreferDualStack: the API server adds the second family.
			setFamilies(corev1.IPFamilyPolicyPreferDualStack, dual...)
			svc := waitService(t, c, ns, "change", hubFamiliesAre(v4, v6))
			if svc.UID != before.UID || svc.Spec.ClusterIPs[0] != before.Spec.ClusterIPs[0] {
				t.Errorf("the hub Service was made anew (uid %s, cluster IPs %v; was %s, %v)", svc.UID, svc.Spec.ClusterIPs, before.UID, before.Spec.ClusterIPs)
			}
			waitStatusFamilies(t, c, ns, "change", v4, v6)

			// Back to SingleStack IPv4: the API server drops the second family in place.
			setFamilies(corev1.IPFamilyPolicySingleStack, v4)
			svc = waitService(t, c, ns, "change", hubFamiliesAre(v4))
			if svc.UID != before.UID {
				t.Errorf("the hub Service was made anew on a downgrade")
			}
			waitStatusFamilies(t, c, ns, "change", v4)

			// SingleStack IPv6: ipFamilies[0] is immutable, so the Service is made anew,
			// with the same listener port.
			setFamilies(corev1.IPFamilyPolicySingleStack, v6)
			svc = waitService(t, c, ns, "change", hubFamiliesAre(v6))
			if svc.UID == before.UID {
				t.Errorf("the hub Service was not made anew")
			}
			if got := svc.Spec.Ports[0].TargetPort.IntVal; got != listener {
				t.Errorf("listener port %d, was %d", got, listener)
			}
			waitStatusFamilies(t, c, ns, "change", v6)
			waitReady(t, c, ns, "change", metav1.ConditionFalse, ReasonWaitingForAddress)
		})
	})

	t.Run("SingleStackHub", func(t *testing.T) {
		hub := testenv.Start(t, "hub", testenv.Options{})
		c := hub.Client
		objects.Create(t, c, objects.Namespace(managerNS, nil))
		ns := "tenant-single"
		objects.Create(t, c, objects.ManagedNamespace(ns))
		m := startController(t, hub, opts, 200, 400)

		refused := func(t *testing.T, name string) {
			t.Helper()
			lb := waitReady(t, c, ns, name, metav1.ConditionFalse, ReasonIPFamilyUnavailable)
			msg := meta.FindStatusCondition(lb.Status.Conditions, ConditionReady).Message
			for _, want := range []string{"cannot give the IP families", "PreferDualStack"} {
				if !strings.Contains(msg, want) {
					t.Errorf("Ready message %q does not say %q", msg, want)
				}
			}
			objects.WaitEvent(t, c, waitTimeout, lbWarning(ns, name, ReasonIPFamilyUnavailable))
			svc := &corev1.Service{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: hubnames.LoadBalancerServiceName(name)}, svc); err == nil {
				t.Errorf("a hub Service exists: %+v", svc.Spec)
			}
		}

		t.Run("RequireDualStack is refused with a condition and an Event", func(t *testing.T) {
			if err := c.Create(ctx, withFamilies(ns, "require", corev1.IPFamilyPolicyRequireDualStack, v4, v6)); err != nil {
				t.Fatal(err)
			}
			refused(t, "require")
		})

		t.Run("IPv6 is refused", func(t *testing.T) {
			if err := c.Create(ctx, withFamilies(ns, "v6", corev1.IPFamilyPolicySingleStack, v6)); err != nil {
				t.Fatal(err)
			}
			refused(t, "v6")
		})

		t.Run("PreferDualStack gets what the hub has", func(t *testing.T) {
			if err := c.Create(ctx, withFamilies(ns, "prefer", corev1.IPFamilyPolicyPreferDualStack, v6, v4)); err != nil {
				t.Fatal(err)
			}
			waitService(t, c, ns, "prefer", hubFamiliesAre(v4))
			waitStatusFamilies(t, c, ns, "prefer", v4)
			waitReady(t, c, ns, "prefer", metav1.ConditionFalse, ReasonWaitingForAddress)
		})

		t.Run("a refused LoadBalancer asking for PreferDualStack is served", func(t *testing.T) {
			updateLB(t, c, ns, "require", func(lb *kubelbv1alpha1.LoadBalancer) {
				lb.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
			})
			waitService(t, c, ns, "require", hubFamiliesAre(v4))
			waitReady(t, c, ns, "require", metav1.ConditionFalse, ReasonWaitingForAddress)
			if got := objects.CountEvents(t, c, lbWarning(ns, "require", ReasonIPFamilyUnavailable)); got != 1 {
				t.Errorf("%d %s Events, want 1 (one per transition)", got, ReasonIPFamilyUnavailable)
			}
		})

		// A refusal the user must act on is a condition, not an error retried with
		// backoff into the log.
		for msg := range m.Errors() {
			if strings.Contains(msg, "ipFamil") {
				t.Errorf("the refusal was returned as a reconcile error: %s", msg)
			}
		}
	})
}

// updateLB changes a LoadBalancer's spec, again on a conflict (the controller adds its
// finalizer).
func updateLB(t *testing.T, c client.Client, ns, name string, change func(*kubelbv1alpha1.LoadBalancer)) {
	t.Helper()
	objects.Edit(t, c, waitTimeout, &kubelbv1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, change)
}

// playLoadBalancerIPs plays the hub's load balancer implementation giving the hub Service
// of lbName these addresses.
func playLoadBalancerIPs(t testing.TB, c client.Client, ns, lbName string, ips ...string) {
	t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hubnames.LoadBalancerServiceName(lbName)}}
	objects.EditStatus(t, c, waitTimeout, svc, func(svc *corev1.Service) { svc.Status.LoadBalancer.Ingress = objects.Ingress(ips...) })
}
