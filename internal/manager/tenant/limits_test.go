package tenant

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestLimitsNearlyReached: on a real API server, a Tenant whose platform team set
// spec.limits.listenerPorts 5 is warned before its tenant reaches it — condition
// LimitsNearlyReached True (NearLimit) with the numbers and a Warning Event at 4 ports of 5
// (80 %), LimitReached with another Event once the newest LoadBalancer is refused — the
// limit metrics follow, and raising the limit ends the warning.
func TestLimitsNearlyReached(t *testing.T) {
	s := startHubWith(t, func(o *Options, hub *testenv.Cluster) {
		o.HubAPIServerURL, o.countsInterval = hub.Config.Host, 500*time.Millisecond
	})
	c := s.hub.Client
	tn := tenantObj("near")
	tn.Spec.Limits.ListenerPorts = ptr.To[int32](5)
	create(t, c, tn)
	waitReady(t, c, "near")
	ns := "tenant-near"

	waitLimits := func(status metav1.ConditionStatus, reason string, words ...string) {
		t.Helper()
		testsupport.Eventually(t, 30*time.Second, "LimitsNearlyReached "+reason, func() error {
			if err := c.Get(bg, client.ObjectKeyFromObject(tn), tn); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(tn.Status.Conditions, ConditionLimitsNearlyReached)
			if cond == nil || cond.Status != status || cond.Reason != reason {
				return fmt.Errorf("condition %+v", cond)
			}
			for _, w := range words {
				if !strings.Contains(cond.Message, w) {
					return fmt.Errorf("message %q lacks %q", cond.Message, w)
				}
			}
			return nil
		})
	}
	warnings := func(reason string) int {
		t.Helper()
		var evs eventsv1.EventList
		if err := c.List(bg, &evs); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Tenant" && e.Regarding.Name == "near" && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				n++
				if e.Series != nil { // repeats of one Event are counted in its series
					n += int(e.Series.Count) - 1
				}
			}
		}
		return n
	}
	gauge := func(name string) float64 {
		return testutil.ToFloat64(metrics.ManagerTenantLimitUsage.GaugeVec.WithLabelValues(ns, name))
	}

	for i := range 3 {
		create(t, c, loadBalancer(ns, fmt.Sprintf("lb-%d", i)))
	}
	waitLimits(metav1.ConditionFalse, ReasonWithinLimits, "less than 80%")
	testsupport.Eventually(t, 10*time.Second, "usage metric at 3", func() error {
		if got := gauge("listenerPorts"); got != 3 {
			return fmt.Errorf("listenerPorts usage %v", got)
		}
		return nil
	})
	if got := testutil.ToFloat64(metrics.ManagerTenantLimit.GaugeVec.WithLabelValues(ns, "listenerPorts")); got != 5 {
		t.Errorf("listenerPorts limit metric %v, want 5", got)
	}
	if n := warnings(ReasonNearLimit); n != 0 {
		t.Errorf("%d NearLimit Events at 60%%", n)
	}

	create(t, c, loadBalancer(ns, "lb-3"))
	waitLimits(metav1.ConditionTrue, ReasonNearLimit, "listenerPorts 4 of 5 (80%)", "raise spec.limits")
	testsupport.Eventually(t, 10*time.Second, "a NearLimit Warning", func() error {
		if n := warnings(ReasonNearLimit); n != 1 {
			return fmt.Errorf("%d NearLimit Events", n)
		}
		return nil
	})

	create(t, c, loadBalancer(ns, "lb-4"), loadBalancer(ns, "lb-5"))
	waitLimits(metav1.ConditionTrue, ReasonLimitReached, "1 refused", "listenerPorts 6 of 5 (120%)")
	testsupport.Eventually(t, 10*time.Second, "a LimitReached Warning", func() error {
		if n := warnings(ReasonLimitReached); n != 1 {
			return fmt.Errorf("%d LimitReached Events", n)
		}
		return nil
	})

	update(t, c, tn, func(tn *kubelbv1alpha1.Tenant) { tn.Spec.Limits.ListenerPorts = ptr.To[int32](100) })
	waitLimits(metav1.ConditionFalse, ReasonWithinLimits)
	if got := testutil.ToFloat64(metrics.ManagerTenantLimit.GaugeVec.WithLabelValues(ns, "listenerPorts")); got != 100 {
		t.Errorf("listenerPorts limit metric %v after raising it, want 100", got)
	}
	// One Warning per crossing: none was repeated while the condition stayed.
	if a, b := warnings(ReasonNearLimit), warnings(ReasonLimitReached); a != 1 || b != 1 {
		t.Errorf("%d NearLimit and %d LimitReached Events, want one each", a, b)
	}
}
