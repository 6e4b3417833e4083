package ipam

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/lbaddress"
	"kubelb.dev/kubelb/internal/metrics"
)

// TestPoolStatus: counts per family (a family the pool lacks is absent), Ready False naming
// the unreadable entries, and Default True on the oldest default pool, False on the others.
func TestPoolStatus(t *testing.T) {
	older := addressPool("older", true, "10.0.0.0/30", "fd00::/64", "bogus")
	older.CreationTimestamp = metav1.NewTime(epoch)
	newer := addressPool("newer", true, "10.1.0.0/30")
	newer.CreationTimestamp = metav1.NewTime(epoch.Add(time.Minute))
	plain := addressPool("plain", false, "fd01::/120")
	out := Allocate(Input{Pools: []kubelbv1alpha1.AddressPool{older, newer, plain}, Services: requests(svc("a", 1), svc("b", 2))})

	st := PoolStatus(&older, out)
	if st.IPv4 == nil || st.IPv4.Size != "4" || st.IPv4.Allocated != 2 || st.IPv6 == nil || st.IPv6.Size != "18446744073709551616" || st.IPv6.Allocated != 0 {
		t.Errorf("older counts %+v %+v", st.IPv4, st.IPv6)
	}
	if c := meta.FindStatusCondition(st.Conditions, "Ready"); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "InvalidAddresses" || !strings.Contains(c.Message, `"bogus"`) {
		t.Errorf("older Ready %+v", c)
	}
	if c := meta.FindStatusCondition(st.Conditions, "Default"); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("older Default %+v", c)
	}
	st = PoolStatus(&newer, out)
	if c := meta.FindStatusCondition(st.Conditions, "Default"); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "AnotherDefaultPool" || !strings.Contains(c.Message, `"older"`) {
		t.Errorf("newer Default %+v", c)
	}
	if c := meta.FindStatusCondition(st.Conditions, "Ready"); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("newer Ready %+v", c)
	}
	st = PoolStatus(&plain, out)
	if st.IPv4 != nil || st.IPv6 == nil || st.IPv6.Size != "256" || meta.FindStatusCondition(st.Conditions, "Default") != nil {
		t.Errorf("plain %+v", st)
	}

	// The pools' metrics: the same counts, per pool and family present.
	want := []metrics.PoolUsage{{Pool: "older", Family: "IPv4", Size: 4, Allocated: 2}, {Pool: "older", Family: "IPv6", Size: 1 << 64},
		{Pool: "newer", Family: "IPv4", Size: 4}, {Pool: "plain", Family: "IPv6", Size: 256}}
	if got := PoolUsage([]kubelbv1alpha1.AddressPool{older, newer, plain}, out); !slices.Equal(got, want) {
		t.Errorf("PoolUsage %+v, want %+v", got, want)
	}
	if got := lbaddress.CountByReason(out.Verdicts); len(got) != 1 || got[lbaddress.ReasonAssigned] != 2 {
		t.Errorf("Services by reason %v, want 2 Assigned", got)
	}
}

func TestPoolFromAnnotation(t *testing.T) {
	for v, want := range map[string]string{"": "", "gold": "gold", " gold ": "gold", "Not_A_Name": "error"} {
		s := svc("a", 1, annotate(kubelbv1alpha1.AnnotationAddressPool, v))
		got, err := PoolFromAnnotation(context.Background(), s)
		var pe *PoolError
		if want == "error" {
			if !errors.As(err, &pe) || !strings.Contains(pe.Message, "is not an AddressPool name") {
				t.Errorf("%q: err %v, want a PoolError", v, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", v, got, err, want)
		}
	}
}

// TestHubOwns: the hub pools serve kubelb's hub Services of type LoadBalancer in tenant
// namespaces, of the configured class only.
func TestHubOwns(t *testing.T) {
	hub := func(opts ...func(*corev1.Service)) *corev1.Service {
		return svc("x", 1, append([]func(*corev1.Service){inNamespace("tenant-a"), func(s *corev1.Service) {
			s.Labels = map[string]string{kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue}
		}}, opts...)...)
	}
	classless := HubOptions(nil, "").Owns
	classy := HubOptions(nil, "pools").Owns
	withClass := func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("pools") }
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		owns func(*corev1.Service) bool
		want bool
	}{
		{"hub Service without class", hub(), classless, true},
		{"hub Service of a class, provider without", hub(withClass), classless, false},
		{"hub Service of the provider's class", hub(withClass), classy, true},
		{"not labelled by kubelb", hub(func(s *corev1.Service) { s.Labels = nil }), classless, false},
		{"outside tenant namespaces", hub(inNamespace("kube-system")), classless, false},
		{"not a LoadBalancer", hub(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }), classless, false},
	} {
		if got := tc.owns(tc.svc); got != tc.want {
			t.Errorf("%s: owns %v, want %v", tc.name, got, tc.want)
		}
	}
}
