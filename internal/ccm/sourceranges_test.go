package ccm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// TestSourceRanges: the LoadBalancer carries the Service's loadBalancerSourceRanges, or the
// annotation Kubernetes honours when that list is empty, canonical, sorted and unique; entries
// that are not CIDRs are kept as written (the hub then refuses the traffic, never serves more
// clients) and named in the Warning; past 64 entries the last valid ones are left out.
func TestSourceRanges(t *testing.T) {
	svc := func(spec []string, annotation string) *corev1.Service {
		s := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerSourceRanges: spec}}
		if annotation != "" {
			s.Annotations = map[string]string{v1alpha1.AnnotationLoadBalancerSourceRanges: annotation}
		}
		return s
	}
	many := make([]string, 70)
	for i := range many {
		many[i] = fmt.Sprintf("10.%d.0.0/16", i)
	}
	for _, tc := range []struct {
		name        string
		svc         *corev1.Service
		want        []string
		problem     string // a part of the Warning; "" for none
		wantDropped int
	}{
		{name: "none", svc: svc(nil, "")},
		{name: "spec", svc: svc([]string{"203.0.113.7/24", " 10.0.0.0/8", "10.0.0.0/8", "010.2.0.0/16"}, ""),
			want: []string{"10.0.0.0/8", "10.2.0.0/16", "203.0.113.0/24"}},
		{name: "spec wins over the annotation", svc: svc([]string{"192.0.2.0/24"}, "198.51.100.0/24"), want: []string{"192.0.2.0/24"}},
		{name: "annotation", svc: svc(nil, " 198.51.100.0/24, 2001:db8::/32 ,,"), want: []string{"198.51.100.0/24", "2001:db8::/32"}},
		{name: "invalid entries kept", svc: svc(nil, "10.0.0.0/8,office,"+strings.Repeat("x", 100)),
			want:    []string{"10.0.0.0/8", "office", strings.Repeat("x", v1alpha1.MaxSourceRangeLength-3) + "…"},
			problem: `the annotation service.beta.kubernetes.io/load-balancer-source-ranges has entries that are not CIDRs (such as 203.0.113.0/24): "office", "xxx`},
		{name: "too many", svc: svc(many, ""), wantDropped: 6, problem: "more than 64 distinct entries: the last 6 are left out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := SourceRanges(tc.svc)
			if tc.want != nil || tc.wantDropped == 0 {
				if diff := cmp.Diff(tc.want, got.Ranges); diff != "" {
					t.Errorf("ranges (-want +got):\n%s", diff)
				}
			}
			if tc.wantDropped > 0 && (len(got.Ranges) != v1alpha1.MaxSourceRanges || got.Dropped != tc.wantDropped) {
				t.Errorf("%d ranges, %d dropped; want %d, %d", len(got.Ranges), got.Dropped, v1alpha1.MaxSourceRanges, tc.wantDropped)
			}
			for _, r := range got.Ranges {
				if len(r) > v1alpha1.MaxSourceRangeLength {
					t.Errorf("entry %q is longer than the CRD allows", r)
				}
			}
			if p := got.Problem(); (tc.problem == "") != (p == "") || !strings.Contains(p, tc.problem) {
				t.Errorf("problem %q, want one containing %q", p, tc.problem)
			}
			lb, _ := DesiredLoadBalancer(tc.svc, "tenant-a")
			if diff := cmp.Diff(got.Ranges, lb.Spec.SourceRanges); diff != "" {
				t.Errorf("LoadBalancer spec.sourceRanges (-want +got):\n%s", diff)
			}
		})
	}
}

// TestServiceSourceRangesMirrored: against real API servers, a Service's
// loadBalancerSourceRanges reach its LoadBalancer on the hub (canonical, sorted), a switch to
// the annotation Kubernetes honours (spec list emptied) is followed, and a Service with more
// ranges than the LoadBalancer carries gets a Warning Event saying which are left out.
func TestServiceSourceRangesMirrored(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "shop")
	e.startCCM(t, ccmOpts{})

	svc := lbService("shop", "office")
	svc.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24", "10.0.0.0/8"}
	objects.Create(t, e.Tenant.Client, svc)
	want := func(ranges ...string) func(*v1alpha1.LoadBalancer) error {
		return func(lb *v1alpha1.LoadBalancer) error {
			if diff := cmp.Diff(ranges, lb.Spec.SourceRanges); diff != "" {
				return fmt.Errorf("spec.sourceRanges (-want +got):\n%s", diff)
			}
			return nil
		}
	}
	e.mirrorOf(t, svc, want("10.0.0.0/8", "203.0.113.0/24"))

	svc = e.update(t, svc, func(s *corev1.Service) {
		s.Spec.LoadBalancerSourceRanges = nil
		s.Annotations = map[string]string{v1alpha1.AnnotationLoadBalancerSourceRanges: "198.51.100.0/24, 2001:db8::/32"}
	})
	e.mirrorOf(t, svc, want("198.51.100.0/24", "2001:db8::/32"))

	many := make([]string, 66)
	for i := range many {
		many[i] = fmt.Sprintf("10.%d.0.0/16", i)
	}
	svc = e.update(t, svc, func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = many })
	e.mirrorOf(t, svc, func(lb *v1alpha1.LoadBalancer) error {
		if len(lb.Spec.SourceRanges) != v1alpha1.MaxSourceRanges {
			return fmt.Errorf("%d source ranges, want %d", len(lb.Spec.SourceRanges), v1alpha1.MaxSourceRanges)
		}
		return nil
	})
	ev := e.waitEvent(t, svc, corev1.EventTypeWarning, ReasonInvalidSourceRanges)
	if !strings.Contains(ev.Note, "the last 2 are left out") {
		t.Errorf("Warning %q does not say which ranges are left out", ev.Note)
	}
}
