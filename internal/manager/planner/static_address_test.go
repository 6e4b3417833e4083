package planner

import (
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestStaticAddressFree: a hub Service holding an address keeps it; with no holder, the
// oldest Service asking for it takes it, whichever reconciles first.
func TestStaticAddressFree(t *testing.T) {
	t.Parallel()
	ip := netip.MustParseAddr("192.0.2.5")
	at := func(ns, name string, sec int, asks bool, shows bool) corev1.Service {
		s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(time.Unix(int64(1000+sec), 0))}}
		if asks {
			s.Spec.LoadBalancerIP = ip.String()
		}
		if shows {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip.String()}}
		}
		return s
	}
	self := types.NamespacedName{Namespace: "tenant-b", Name: "gateway-b"}
	for _, c := range []struct {
		name   string
		own    *corev1.Service
		others []corev1.Service
		want   bool
	}{
		{name: "nobody else", others: nil, want: true},
		{name: "only itself in the index", own: svcPtr(at("tenant-b", "gateway-b", 5, true, false)), others: []corev1.Service{at("tenant-b", "gateway-b", 5, true, false)}, want: true},
		{name: "another tenant's LoadBalancer holds it", own: svcPtr(at("tenant-b", "gateway-b", 1, false, false)), others: []corev1.Service{at("tenant-a", "envoy-x", 9, false, true)}, want: false},
		{name: "an older Service asks for it", own: svcPtr(at("tenant-b", "gateway-b", 5, true, false)), others: []corev1.Service{at("tenant-a", "gateway-a", 1, true, false)}, want: false},
		{name: "a newer Service asks for it", own: svcPtr(at("tenant-b", "gateway-b", 1, true, false)), others: []corev1.Service{at("tenant-a", "gateway-a", 5, true, false)}, want: true},
		{name: "not made yet, another asks", others: []corev1.Service{at("tenant-a", "gateway-a", 5, true, false)}, want: false},
		{name: "it holds it, an older one asks", own: svcPtr(at("tenant-b", "gateway-b", 5, true, true)), others: []corev1.Service{at("tenant-a", "gateway-a", 1, true, false)}, want: true},
		{name: "both hold it, the other is older", own: svcPtr(at("tenant-b", "gateway-b", 5, true, true)), others: []corev1.Service{at("tenant-a", "gateway-a", 1, true, true)}, want: false},
	} {
		if got := staticAddressFree(ip, self, c.own, c.others); got != c.want {
			t.Errorf("%s: free %v, want %v", c.name, got, c.want)
		}
	}
}

func svcPtr(s corev1.Service) *corev1.Service { return &s }
