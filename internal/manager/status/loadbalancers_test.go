package status

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/process"
	"kubelb.dev/kubelb/internal/translate"
)

// TestLoadBalancerProgrammed: the LoadBalancer controller gets the verdict the Writer would
// write, only for the generation the Report describes, with the rejections of the TenantState.
func TestLoadBalancerProgrammed(t *testing.T) {
	t.Parallel()
	const lds = "type.googleapis.com/envoy.config.listener.v3.Listener"
	ref := ir.ObjectRef{Kind: translate.KindLoadBalancer, Namespace: "tenant-a", Name: "lb"}
	ts := &v1alpha1.TenantState{ObjectMeta: metav1.ObjectMeta{Name: hubnames.TenantStateName, Namespace: "tenant-a"}}
	c := fake.NewClientBuilder().WithScheme(process.Scheme()).WithObjects(ts).Build()
	s := NewStore()
	lb := &v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "lb", Generation: 2}}
	ctx := context.Background()
	if _, ok, err := s.LoadBalancerProgrammed(ctx, c, lb); ok || err != nil {
		t.Fatalf("known without a Report (err %v)", err)
	}
	s.Publish("tenant-a", &Report{Objects: map[ir.ObjectRef]int64{ref: 1}})
	if _, ok, _ := s.LoadBalancerProgrammed(ctx, c, lb); ok {
		t.Error("a Report of an older generation gives a verdict")
	}
	s.Publish("tenant-a", &Report{Objects: map[ir.ObjectRef]int64{ref: 2}, Versions: map[string]string{lds: "v1"},
		Owners: map[string]map[string][]ir.ObjectRef{lds: {"lb-tcp-80": {ref}}}})
	cond, ok, err := s.LoadBalancerProgrammed(ctx, c, lb)
	if err != nil || !ok || cond.Status != metav1.ConditionTrue || cond.Reason != ReasonProgrammed || cond.ObservedGeneration != 2 {
		t.Fatalf("verdict %+v %v %v, want True/Programmed at generation 2", cond, ok, err)
	}
	ts.Status.Rejections = []v1alpha1.ConfigRejection{{Proxy: "p", TypeURL: lds, Version: "v1", Message: "lb-tcp-80: cannot bind"}}
	c = fake.NewClientBuilder().WithScheme(process.Scheme()).WithObjects(ts).Build()
	if cond, ok, _ := s.LoadBalancerProgrammed(ctx, c, lb); !ok || cond.Status != metav1.ConditionFalse || cond.Reason != ReasonRejected {
		t.Errorf("verdict with a rejection %+v %v, want False/Rejected", cond, ok)
	}
	// A problem of one port (a section of the object) is the object's.
	port := ref
	port.Section = "http"
	s.Publish("tenant-a", &Report{Objects: map[ir.ObjectRef]int64{ref: 2},
		Problems: ir.Problems{{Object: port, Severity: ir.SeverityError, Reason: translate.ReasonNoEndpoints, Message: "denied"}}})
	if cond, ok, _ := s.LoadBalancerProgrammed(ctx, c, lb); !ok || cond.Status != metav1.ConditionFalse || cond.Reason != translate.ReasonNoEndpoints {
		t.Errorf("verdict with a port's problem %+v %v, want False/NoEndpoints", cond, ok)
	}
	s.Publish("tenant-a", &Report{Objects: map[ir.ObjectRef]int64{}}) // waiting for a port: left out
	if cond, ok, _ := s.LoadBalancerProgrammed(ctx, c, lb); ok {
		t.Errorf("the LoadBalancer controller carries a verdict while a port is pending: %+v", cond)
	}
	s.Publish("tenant-a", &Report{Objects: map[ir.ObjectRef]int64{ref: 2},
		Problems: ir.Problems{{Object: port, Severity: ir.SeverityError, Reason: translate.ReasonPortNotAllocated, Message: "none left"}}})
	if cond, ok, _ := s.LoadBalancerProgrammed(ctx, c, lb); !ok || cond.Status != metav1.ConditionFalse || cond.Reason != translate.ReasonPortNotAllocated {
		t.Errorf("verdict with a port the range had none for %+v %v, want False/PortNotAllocated", cond, ok)
	}
}
