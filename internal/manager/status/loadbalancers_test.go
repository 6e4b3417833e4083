package status

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/process"
	"kubelb.dev/kubelb/internal/translate"
)

// TestTransientPortNotAllocated: a PortNotAllocated verdict is written only when it is real:
// not before the LoadBalancer controller reported (no Ready), not when its status already
// holds every port (the translation lags the allocation), and never carried by the
// LoadBalancer controller itself; with a port the controller could not allocate, it is.
func TestTransientPortNotAllocated(t *testing.T) {
	t.Parallel()
	lb := &v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "lb", Generation: 1}}
	lb.Spec.Ports = []v1alpha1.LoadBalancerPort{{Port: 80, Protocol: corev1.ProtocolTCP}, {Port: 443, Protocol: corev1.ProtocolTCP}}
	ref := ir.ObjectRef{Kind: translate.KindLoadBalancer, Namespace: "tenant-a", Name: "lb"}
	notAllocated := []ir.Problem{{Object: ref, Severity: ir.SeverityError, Reason: translate.ReasonPortNotAllocated, Message: "no listener port"}}
	denied := []ir.Problem{{Object: ref, Severity: ir.SeverityError, Reason: translate.ReasonNoEndpoints, Message: "denied"}}

	if !transient(lb, notAllocated, false) {
		t.Error("PortNotAllocated before the LoadBalancer controller reported is written")
	}
	lb.Status.Conditions = []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: "PortsExhausted"}}
	sp := v1alpha1.ServicePort{UpstreamTargetPort: 10000}
	sp.Port = 80
	lb.Status.Service.Ports = []v1alpha1.ServicePort{sp}
	if transient(lb, notAllocated, false) {
		t.Error("PortNotAllocated of a port the controller could not allocate is not written")
	}
	if !transient(lb, notAllocated, true) {
		t.Error("the LoadBalancer controller carries a PortNotAllocated verdict")
	}
	sp.Port, sp.UpstreamTargetPort = 443, 10001
	lb.Status.Service.Ports = append(lb.Status.Service.Ports, sp)
	if !transient(lb, notAllocated, false) {
		t.Error("PortNotAllocated while the status holds every port is written")
	}
	if transient(lb, denied, false) || transient(lb, append(denied, notAllocated...), true) || transient(lb, nil, false) {
		t.Error("a verdict with another error, or none, is transient")
	}
}

// TestLoadBalancerProgrammed: the LoadBalancer controller gets the verdict the Writer would
// write, only for the generation the Report describes, with the rejections of the TenantState.
func TestLoadBalancerProgrammed(t *testing.T) {
	t.Parallel()
	const lds = "type.googleapis.com/envoy.config.listener.v3.Listener"
	ref := ir.ObjectRef{Kind: translate.KindLoadBalancer, Namespace: "tenant-a", Name: "lb"}
	ts := &v1alpha1.TenantState{ObjectMeta: metav1.ObjectMeta{Name: TenantStateName, Namespace: "tenant-a"}}
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
	s.Publish("tenant-a", &Report{Objects: map[ir.ObjectRef]int64{ref: 2},
		Problems: ir.Problems{{Object: port, Severity: ir.SeverityError, Reason: translate.ReasonPortNotAllocated, Message: "no port yet"}}})
	if cond, ok, _ := s.LoadBalancerProgrammed(ctx, c, lb); ok {
		t.Errorf("the LoadBalancer controller carries a PortNotAllocated verdict: %+v", cond)
	}
}
