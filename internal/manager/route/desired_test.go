package route

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/routekind"
)

func TestAppliedCondition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		o      outcome
		status metav1.ConditionStatus
		reason string
	}{
		{outcome{kind: routekind.Gateway}, metav1.ConditionTrue, ReasonApplied},
		{outcome{kind: routekind.HTTPRoute}, metav1.ConditionTrue, ReasonApplied},
		{outcome{kind: routekind.Unsupported}, metav1.ConditionFalse, ReasonUnsupportedKind},
		{outcome{kind: routekind.Gateway, disabled: "Gateway API", exhausted: fmt.Errorf("x")}, metav1.ConditionFalse, ReasonDisabled},
		{outcome{kind: routekind.Gateway, exhausted: fmt.Errorf("x"), problems: []string{"p"}}, metav1.ConditionFalse, ReasonPortsExhausted},
		{outcome{kind: routekind.Gateway, problems: []string{"p"}}, metav1.ConditionFalse, ReasonInvalidListeners},
		{outcome{kind: routekind.Gateway, noPorts: true}, metav1.ConditionFalse, ReasonInvalidListeners},
		{outcome{kind: routekind.Gateway, invalidName: true}, metav1.ConditionFalse, ReasonInvalidName},
		{outcome{kind: routekind.Ingress, serviceErr: fmt.Errorf("x")}, metav1.ConditionFalse, ReasonServiceFailed},
	} {
		c := appliedCondition(tc.o, 3)
		if c.Status != tc.status || c.Reason != tc.reason || c.ObservedGeneration != 3 || c.Type != ConditionApplied || c.Message == "" {
			t.Errorf("%+v → %+v", tc.o, c)
		}
	}
}

// TestSetStatus: the status holds the services entry with the hub Service's status,
// keeps a condition's transition time while its status holds, and is unchanged when set
// again (so a settled Route is not written again).
func TestSetStatus(t *testing.T) {
	t.Parallel()
	rt := &kubelbv1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "r1", Generation: 2}}
	rt.Spec.Source.Kubernetes = &kubelbv1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway"}}}
	rt.Spec.Source.Kubernetes.Route.SetName("gw")
	rt.Spec.Source.Kubernetes.Route.SetNamespace("shop")
	svc := &corev1.Service{Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.7"}}}}}
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	o := outcome{kind: routekind.Gateway}
	services := []hubServiceState{{name: "gateway-r1", ports: []hubPort{{Name: "tcp-80", Protocol: corev1.ProtocolTCP, Port: 80, Target: 10001}}, svc: svc}}
	var st kubelbv1alpha1.RouteStatus
	setStatus(&st, rt, o, services, appliedCondition(o, 2), t0)
	entry := st.Resources.Services["tenant-a/gateway-r1"]
	if st.Resources.Source != "Gateway shop/gw" || entry.Name != "gateway-r1" || string(entry.Status.Raw) != `{"loadBalancer":{"ingress":[{"ip":"192.0.2.7"}]}}` ||
		entry.Ports[0].TargetPort.IntVal != 10001 || st.Resources.Route.GeneratedName != "r1" {
		t.Errorf("status %+v", st)
	}

	// Set again on the status it made, an hour later: the same (the time is kept), and the
	// other part's field stays.
	st.Resources.Route.Status = runtime.RawExtension{Raw: []byte(`{"other":"part"}`)}
	again := *st.DeepCopy()
	setStatus(&again, rt, o, services, appliedCondition(o, 2), metav1.NewTime(t0.Add(time.Hour)))
	if !equality.Semantic.DeepEqual(again, st) {
		t.Errorf("an unchanged reconcile changes the status:\n%+v\n%+v", again, st)
	}
	// The address changes: a different status.
	svc2 := svc.DeepCopy()
	svc2.Status.LoadBalancer.Ingress[0].IP = "192.0.2.8"
	changed := *st.DeepCopy()
	setStatus(&changed, rt, o, []hubServiceState{{name: "gateway-r1", ports: services[0].ports, svc: svc2}}, appliedCondition(o, 2), t0)
	if equality.Semantic.DeepEqual(changed, st) {
		t.Errorf("a new address does not change the status")
	}
}
