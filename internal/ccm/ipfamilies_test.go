package ccm

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// mirrorFamilies checks the IP family fields of a mirror.
func mirrorFamilies(policy corev1.IPFamilyPolicy, fams ...corev1.IPFamily) func(*v1alpha1.LoadBalancer) error {
	return func(lb *v1alpha1.LoadBalancer) error {
		if ptr.Deref(lb.Spec.IPFamilyPolicy, "") != policy || !slices.Equal(lb.Spec.IPFamilies, fams) {
			return fmt.Errorf("ipFamilyPolicy %q, ipFamilies %v; want %q, %v", ptr.Deref(lb.Spec.IPFamilyPolicy, ""), lb.Spec.IPFamilies, policy, fams)
		}
		return nil
	}
}

// TestServiceMirrorIPFamilies: on a dual-stack tenant cluster, the mirror carries the IP
// family policy and the families the tenant API server gave the Service (so that the hub
// Service follows them), follows their changes, and the Service shows every address of the
// hub, of both families.
func TestServiceMirrorIPFamilies(t *testing.T) {
	e := newEnvWith(t, testenv.PairOptions{DualStack: true})
	e.namespace(t, "shop")
	e.startCCM(t, ccmOpts{})
	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol

	// Nothing asked: the API server fills SingleStack and its primary family.
	plain := lbService("shop", "plain")
	objects.Create(t, e.Tenant.Client, plain)
	e.mirrorOf(t, e.getService(t, "shop", "plain"), mirrorFamilies(corev1.IPFamilyPolicySingleStack, v4))

	// PreferDualStack, IPv6 first: the API server gives both, in that order.
	svc := lbService("shop", "dual")
	svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
	svc.Spec.IPFamilies = []corev1.IPFamily{v6}
	objects.Create(t, e.Tenant.Client, svc)
	svc = e.getService(t, "shop", "dual")
	if !slices.Equal(svc.Spec.IPFamilies, []corev1.IPFamily{v6, v4}) {
		t.Fatalf("the tenant API server gave ipFamilies %v, want [IPv6 IPv4]", svc.Spec.IPFamilies)
	}
	lb := e.mirrorOf(t, svc, mirrorFamilies(corev1.IPFamilyPolicyPreferDualStack, v6, v4))

	// The hub's addresses of both families come back onto the Service.
	e.setLBStatus(t, lb, "fd00:99::7", "127.0.0.40")
	e.waitServiceIngress(t, svc, "fd00:99::7", "127.0.0.40")

	// Down to SingleStack: the API server keeps the primary family, and so does the mirror.
	svc = e.update(t, svc, func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
		s.Spec.IPFamilies = s.Spec.IPFamilies[:1]
		s.Spec.ClusterIPs = s.Spec.ClusterIPs[:1]
	})
	e.mirrorOf(t, svc, mirrorFamilies(corev1.IPFamilyPolicySingleStack, v6))

	// Up to RequireDualStack again.
	svc = e.update(t, svc, func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
	})
	e.mirrorOf(t, svc, func(lb *v1alpha1.LoadBalancer) error {
		if err := mirrorFamilies(corev1.IPFamilyPolicyRequireDualStack, v6, v4)(lb); err != nil {
			return err
		}
		return wantMirror(e.getService(t, "shop", "dual"), lb)
	})
}
