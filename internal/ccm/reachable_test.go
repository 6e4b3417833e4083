package ccm

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelb.dev/kubelb/internal/testsupport"
)

// TestHubBackendsReachableReachesTheService: the hub LoadBalancer's BackendsReachable
// condition is copied onto the tenant Service as kubelb.k8c.io/BackendsReachable, its message
// cleaned and prefixed, with one Warning Event when it becomes False and none when it
// recovers.
func TestHubBackendsReachableReachesTheService(t *testing.T) {
	e, svc, lb := newMirroredService(t)

	waitReachable := func(st metav1.ConditionStatus, reason, msg string) {
		t.Helper()
		testsupport.Eventually(t, wait, "the Service's "+ConditionBackendsReachable, func() error {
			c := meta.FindStatusCondition(e.getService(t, svc.Namespace, svc.Name).Status.Conditions, ConditionBackendsReachable)
			if c == nil || c.Status != st || c.Reason != reason || !strings.Contains(c.Message, msg) {
				return fmt.Errorf("condition %+v", c)
			}
			return nil
		})
	}
	dead := "1 of 2 endpoints do not answer the hub's Envoy proxies: 192.0.2.12:31080"
	e.lbConditionOf(t, lb, hubBackendsReachable, metav1.ConditionFalse, "SomeBackendsUnreachable", dead)
	waitReachable(metav1.ConditionFalse, "SomeBackendsUnreachable", "kubelb: "+dead)
	e.waitCount(t, "SomeBackendsUnreachable", svc, 1)

	e.lbConditionOf(t, lb, hubBackendsReachable, metav1.ConditionTrue, "Reachable", "the hub's Envoy proxies reach all 2 endpoints")
	waitReachable(metav1.ConditionTrue, "Reachable", "all 2 endpoints")
	if n := e.recorded.count("SomeBackendsUnreachable", svc); n != 1 {
		t.Errorf("SomeBackendsUnreachable recorded %d times, want 1", n)
	}

	// Another type: no longer kubelb's; the condition goes.
	e.update(t, svc, func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Spec.Ports[0].NodePort = 0
	})
	testsupport.Eventually(t, wait, "the condition cleared", func() error {
		if c := meta.FindStatusCondition(e.getService(t, svc.Namespace, svc.Name).Status.Conditions, ConditionBackendsReachable); c != nil {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
}
