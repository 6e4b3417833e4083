package status

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/process"
)

// TestStaleRejectionsArePruned: entries of versions that are no longer current (left behind
// by a replica that died) are removed once they are older than StaleRejectionTTL; current and
// young ones stay.
func TestStaleRejectionsArePruned(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const lds = "type.googleapis.com/envoy.config.listener.v3.Listener"
	ts := &v1alpha1.TenantState{ObjectMeta: metav1.ObjectMeta{Name: hubnames.TenantStateName, Namespace: "tenant-a"}}
	ts.Status.Rejections = []v1alpha1.ConfigRejection{
		{Proxy: "current", TypeURL: lds, Version: "v2", Time: metav1.NewTime(now.Add(-time.Hour))},
		{Proxy: "old", TypeURL: lds, Version: "v1", Time: metav1.NewTime(now.Add(-time.Hour))},
		{Proxy: "young", TypeURL: lds, Version: "v1", Time: metav1.NewTime(now.Add(-time.Minute))},
	}
	c := fake.NewClientBuilder().WithScheme(process.Scheme()).WithObjects(ts).WithStatusSubresource(ts).Build()
	w := &Writer{client: c, now: func() time.Time { return now }, sink: NewSink(c)}
	got, requeue, err := w.rejections(context.Background(), "tenant-a", &Report{Versions: map[string]string{lds: "v2"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Errorf("read %d rejections, want all 3 (stale ones are ignored by rejectionProblems)", len(got))
	}
	if requeue != StaleRejectionTTL-time.Minute {
		t.Errorf("requeue after %v, want %v", requeue, StaleRejectionTTL-time.Minute)
	}
	after := &v1alpha1.TenantState{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(ts), after); err != nil {
		t.Fatal(err)
	}
	var proxies []string
	for _, r := range after.Status.Rejections {
		proxies = append(proxies, r.Proxy)
	}
	if len(proxies) != 2 || proxies[0] != "current" || proxies[1] != "young" {
		t.Errorf("left %v, want [current young]", proxies)
	}
	// Only rejections of the current version become problems.
	ps := rejectionProblems(&Report{Versions: map[string]string{lds: "v2"}, Owners: map[string]map[string][]ir.ObjectRef{
		lds: {"web-tcp-80": {{Kind: "LoadBalancer", Namespace: "tenant-a", Name: "web", Section: "TCP/80"}}},
	}}, []Rejected{{Proxy: "p", TypeURL: lds, Version: "v2", Message: "Error adding/updating listener(s) web-tcp-80: cannot bind"},
		{Proxy: "p", TypeURL: lds, Version: "v1", Message: "Error adding/updating listener(s) web-tcp-80: old"}})
	if len(ps) != 1 || ps[0].Object.Name != "web" || ps[0].Reason != ReasonRejected {
		t.Errorf("problems %v, want one Rejected on web", ps)
	}
}

func TestProgrammedCondition(t *testing.T) {
	t.Parallel()
	obj := ir.ObjectRef{Kind: "LoadBalancer", Namespace: "tenant-a", Name: "web"}
	port := obj
	port.Section = "TCP/80"
	warn := ir.Problem{Object: obj, Severity: ir.SeverityWarning, Reason: "InvalidAddress", Message: "left out"}
	fail := ir.Problem{Object: port, Severity: ir.SeverityError, Reason: "NoEndpoints", Message: "no endpoints"}
	for name, tc := range map[string]struct {
		problems []ir.Problem
		status   metav1.ConditionStatus
		reason   string
		message  string
	}{
		"clean":         {nil, metav1.ConditionTrue, ReasonProgrammed, "Every port"},
		"warnings only": {[]ir.Problem{warn}, metav1.ConditionTrue, ReasonProgrammedWithWarnings, "Served, with warnings: InvalidAddress: left out"},
		"an error":      {[]ir.Problem{warn, fail}, metav1.ConditionFalse, "NoEndpoints", "Not served: TCP/80: NoEndpoints: no endpoints; InvalidAddress: left out"},
	} {
		c := Programmed(7, tc.problems)
		if c.Type != ConditionProgrammed || c.Status != tc.status || c.Reason != tc.reason || !strings.HasPrefix(c.Message, tc.message) || c.ObservedGeneration != 7 {
			t.Errorf("%s: %+v", name, c)
		}
	}
	many := make([]ir.Problem, 100)
	for i := range many {
		many[i] = fail
		many[i].Message = strings.Repeat("x", 50)
	}
	if c := Programmed(1, many); len(c.Message) > maxMessage || !strings.HasSuffix(c.Message, "(more in the object's Events)") {
		t.Errorf("a long message is not bounded: %d bytes", len(c.Message))
	}
}
