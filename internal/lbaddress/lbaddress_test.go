package lbaddress

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestVerdictStatus(t *testing.T) {
	v := Verdict{Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")}}
	lb := v.LoadBalancer()
	if len(lb.Ingress) != 2 || lb.Ingress[0].IP != "10.0.0.1" || lb.Ingress[1].IP != "fd00::1" || *lb.Ingress[0].IPMode != corev1.LoadBalancerIPModeVIP {
		t.Fatalf("assigned verdict gives %+v", lb)
	}
	if c := v.condition(3); c.Status != metav1.ConditionTrue || c.Reason != ReasonAssigned || c.ObservedGeneration != 3 {
		t.Fatalf("assigned condition %+v", c)
	}
	// A pending verdict shows no address, even if addresses were computed before the reason.
	p := Verdict{Addresses: v.Addresses, Reason: "PortConflict", Message: "Port 80/TCP is held."}
	if len(p.LoadBalancer().Ingress) != 0 || !p.Pending() {
		t.Fatalf("pending verdict gives %+v", p.LoadBalancer())
	}
	if c := p.condition(1); c.Status != metav1.ConditionFalse || c.Reason != "PortConflict" || c.Message != "Port 80/TCP is held." {
		t.Fatalf("pending condition %+v", c)
	}
	if c := (Verdict{}).condition(1); c.Status != metav1.ConditionFalse || c.Reason == "" {
		t.Fatalf("a verdict without addresses nor reason must still be a valid False condition: %+v", c)
	}
}
