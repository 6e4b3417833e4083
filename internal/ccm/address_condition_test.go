package ccm

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/lbaddress"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestAddressCondition: the condition a tenant Service gets from its LoadBalancer's Ready
// condition — nothing before the hub has judged the current spec, True only with an address,
// the hub's reason made a valid reason and its message cleaned and prefixed.
func TestAddressCondition(t *testing.T) {
	t.Parallel()
	ingress := corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}, {Hostname: "lb.example"}}}
	for _, tc := range []struct {
		name    string
		ready   *metav1.Condition
		status  corev1.LoadBalancerStatus
		want    metav1.ConditionStatus // "" means no condition
		reason  string
		message string // a prefix of the message
	}{
		{name: "no Ready yet", want: ""},
		{name: "stale Ready", ready: &metav1.Condition{Status: metav1.ConditionFalse, Reason: "PortsExhausted", ObservedGeneration: 1}, want: ""},
		{name: "Unknown", ready: &metav1.Condition{Status: metav1.ConditionUnknown, Reason: "Pending", ObservedGeneration: 2}, want: ""},
		{name: "ready with addresses", ready: &metav1.Condition{Status: metav1.ConditionTrue, Reason: "AddressAssigned", ObservedGeneration: 2},
			status: ingress, want: metav1.ConditionTrue, reason: lbaddress.ReasonAssigned, message: "The Service has 2 address(es)."},
		{name: "ready, type ClusterIP on the hub", ready: &metav1.Condition{Status: metav1.ConditionTrue, Reason: "NoExternalAddress",
			Message: "spec.type ClusterIP", ObservedGeneration: 2}, want: metav1.ConditionFalse, reason: "NoExternalAddress", message: "kubelb: spec.type ClusterIP"},
		{name: "ready without address nor reason", ready: &metav1.Condition{Status: metav1.ConditionTrue, Reason: "AddressAssigned", ObservedGeneration: 2},
			want: metav1.ConditionFalse, reason: lbaddress.ReasonNoAddress, message: "kubelb: the management cluster has given this load balancer no address"},
		{name: "pending", ready: &metav1.Condition{Status: metav1.ConditionFalse, Reason: "WaitingForAddress",
			Message: "port 80 is held by a Service of another tenant", ObservedGeneration: 2},
			status: ingress, want: metav1.ConditionFalse, reason: "WaitingForAddress", message: "kubelb: port 80 is held by a Service of another tenant"},
		{name: "hostile reason and message", ready: &metav1.Condition{Status: metav1.ConditionFalse, Reason: "42 Ports\x1bExhausted!",
			Message: "line\nbreak\u202e", ObservedGeneration: 2}, want: metav1.ConditionFalse, reason: "PortsExhausted", message: "kubelb: line break"},
		{name: "reason of digits only", ready: &metav1.Condition{Status: metav1.ConditionFalse, Reason: "404", ObservedGeneration: 2},
			want: metav1.ConditionFalse, reason: lbaddress.ReasonNoAddress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb := &v1alpha1.LoadBalancer{}
			lb.Generation = 2
			if tc.ready != nil {
				c := *tc.ready
				c.Type = ConditionReady
				lb.Status.Conditions = []metav1.Condition{c}
			}
			got, ok := addressCondition(lb, 7, tc.status)
			if tc.want == "" {
				if ok {
					t.Fatalf("condition %+v, want none", got)
				}
				return
			}
			if !ok || got.Type != lbaddress.ConditionAddressAssigned || got.Status != tc.want || got.Reason != tc.reason ||
				!strings.HasPrefix(got.Message, tc.message) || got.ObservedGeneration != 7 {
				t.Fatalf("condition %+v (%v), want %s/%s %q...", got, ok, tc.want, tc.reason, tc.message)
			}
			if strings.ContainsAny(got.Message, "\n\x1b\u202e") {
				t.Errorf("message not cleaned: %q", got.Message)
			}
		})
	}
}

// TestHubReadyReachesTheService: an app team sees on its own Service why the management
// cluster gives it no address — the condition kubelb.k8c.io/AddressAssigned with the hub's
// reason and message, and a Warning Event once per change — and the condition turns True
// with the address; a condition someone else rewrites is put back; a Service that stops
// being kubelb's loses the condition with its address.
func TestHubReadyReachesTheService(t *testing.T) {
	e, svc, lb := newMirroredService(t)

	e.lbConditionOf(t, lb, ConditionReady, metav1.ConditionFalse, "PortsExhausted", "the listener port range 20000-20001 is full")
	e.waitAddressCondition(t, svc, metav1.ConditionFalse, "PortsExhausted", "kubelb: the listener port range 20000-20001 is full")
	e.waitCount(t, "PortsExhausted", svc, 1)

	// The hub's message changes: news, one more Warning.
	e.lbConditionOf(t, lb, ConditionReady, metav1.ConditionFalse, "WaitingForAddress", "port 80 is held by a Service of another tenant")
	e.waitAddressCondition(t, svc, metav1.ConditionFalse, "WaitingForAddress", "a Service of another tenant")
	e.waitCount(t, "WaitingForAddress", svc, 1)

	// The address arrives.
	e.setLBStatus(t, lb, "127.0.0.42")
	e.lbConditionOf(t, lb, ConditionReady, metav1.ConditionTrue, "AddressAssigned", "")
	e.waitServiceIngress(t, svc, "127.0.0.42")
	e.waitAddressCondition(t, svc, metav1.ConditionTrue, lbaddress.ReasonAssigned, "1 address(es)")
	if n := e.recorded.count("WaitingForAddress", svc); n != 1 {
		t.Errorf("WaitingForAddress recorded %d times, want 1", n)
	}

	// Someone else rewrites the condition: it is put back.
	testsupport.Eventually(t, wait, "rewriting the condition", func() error {
		cur := e.getService(t, svc.Namespace, svc.Name)
		orig := cur.DeepCopy()
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: lbaddress.ConditionAddressAssigned,
			Status: metav1.ConditionFalse, Reason: "Tampered", Message: "not kubelb"})
		return e.Tenant.Client.Status().Patch(context.Background(), cur, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	})
	e.waitAddressCondition(t, svc, metav1.ConditionTrue, lbaddress.ReasonAssigned, "1 address(es)")

	// Another class: no longer kubelb's; the address and the condition go.
	e.update(t, svc, func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Spec.Ports[0].NodePort = 0
	})
	testsupport.Eventually(t, wait, "status and condition cleared", func() error {
		cur := e.getService(t, svc.Namespace, svc.Name)
		if c := meta.FindStatusCondition(cur.Status.Conditions, lbaddress.ConditionAddressAssigned); c != nil || len(cur.Status.LoadBalancer.Ingress) > 0 {
			return fmt.Errorf("condition %+v, ingress %v", c, cur.Status.LoadBalancer.Ingress)
		}
		return nil
	})
}
