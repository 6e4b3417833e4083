package status_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/reach"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds"
)

// TestReachTooManyEndpoints: a Route whose cluster health discovery leaves out (the tenant's
// clusters before it by name fill reach.MaxCheckedEndpoints) gets BackendsReachable=Unknown
// TooManyEndpoints, with the cap (not the tenant's count, which moves with every Service), though no proxy ever reports on it
// and it never had the condition (NotYetChecked is not written then: it would be for ever).
func TestReachTooManyEndpoints(t *testing.T) {
	big := make([]string, reach.MaxCheckedEndpoints)
	for i := range big {
		big[i] = fmt.Sprintf("10.1.%d.%d:30080", i/250, i%250)
	}
	c, gw := startRouteWriter(t, map[string][]string{"a-big": big, "gw-backend": {"10.0.0.1:30080", "10.0.0.2:30080"}})
	want := fmt.Sprintf("this object's endpoints are left out: the tenant has more endpoints than the hub's Envoy proxies health-check, at most %d",
		reach.MaxCheckedEndpoints)
	waitRouteStatus(t, c, gw.Name, metav1.ConditionTrue, status.ReasonProgrammed, func(r *v1alpha1.Route) error {
		cond := meta.FindStatusCondition(r.Status.Resources.Route.Conditions, status.ConditionBackendsReachable)
		if cond == nil || cond.Status != metav1.ConditionUnknown || cond.Reason != reach.ReasonTooManyEndpoints || !strings.Contains(cond.Message, want) {
			return fmt.Errorf("BackendsReachable %+v, want Unknown %s with %q", cond, reach.ReasonTooManyEndpoints, want)
		}
		return nil
	})
}

// startRouteWriter starts a hub with the tenant's namespace and a Gateway Route whose cluster
// gw-backend the leader's status writer judges, with the tenant's clusters' endpoints.
func startRouteWriter(t *testing.T, endpoints map[string][]string) (client.Client, *v1alpha1.Route) {
	t.Helper()
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	tenantNamespaces(t, c, tenant)
	gw := gatewayRoute("gw-uid")
	if err := c.Create(t.Context(), gw); err != nil {
		t.Fatal(err)
	}
	applyRouteControllerStatus(t, c, gw.Name)
	store := status.NewStore()
	testenv.StartManager(t, hub.Config, func(mgr ctrl.Manager) error {
		return status.SetupWriterWithManager(mgr, store, status.WithEndpoints(func(string) reach.Clusters { return reach.StaticClusters(endpoints) }))
	})
	gwRef := ir.ObjectRef{Kind: translate.KindRoute, Namespace: tenant, Name: gw.Name}
	store.Publish(tenant, &status.Report{
		Objects: map[ir.ObjectRef]int64{gwRef: gw.Generation},
		Owners:  map[string]map[string][]ir.ObjectRef{resource.ClusterType: {"gw-backend": {gwRef}}},
		Routes:  map[string]translate.RouteStatus{gw.Name: {Kind: "Gateway", Generation: 3, Status: gatewayStatus(t, 0, "True")}},
	})
	return c, gw
}

// TestRecorderSaysWhatItLeavesOut: a replica whose proxies found unreachable endpoints in
// more clusters than it reports (reach.MaxReportedClusters) writes the first ones and how many
// it left out; once they fit again, the count goes.
func TestRecorderSaysWhatItLeavesOut(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	tenantNamespaces(t, c, tenant)
	var rec *status.Recorder
	testenv.StartManager(t, hub.Config, func(mgr ctrl.Manager) error {
		rec = status.NewRecorder(mgr.GetClient(), mgr.GetLogger(), "r1")
		return mgr.Add(rec)
	})
	report := func(clusters int) xds.HealthReport {
		h := xds.HealthReport{Tenant: tenant, Proxy: "envoy-0", Asked: map[string][]string{}, Health: map[string]map[string]bool{}}
		for i := range clusters {
			name, addr := fmt.Sprintf("lb-%03d-tcp-80", i), fmt.Sprintf("10.2.%d.%d:30080", i/250, i%250)
			h.Asked[name] = []string{addr}
			h.Health[name] = map[string]bool{addr: false}
		}
		return h
	}
	state := func(entries, omitted int) func() error {
		return func() error {
			ts := &v1alpha1.TenantState{}
			if err := c.Get(t.Context(), client.ObjectKey{Namespace: tenant, Name: hubnames.TenantStateName}, ts); err != nil {
				return err
			}
			got := 0
			for _, o := range ts.Status.BackendHealthOmitted {
				if o.Replica == "r1" {
					got = int(o.Clusters)
				}
			}
			if len(ts.Status.BackendHealth) != entries || got != omitted {
				return fmt.Errorf("%d entries, %d left out; want %d and %d", len(ts.Status.BackendHealth), got, entries, omitted)
			}
			return nil
		}
	}
	rec.HearHealth(report(reach.MaxReportedClusters + 44))
	testsupport.Eventually(t, timeout, "the first clusters and how many are left out", state(reach.MaxReportedClusters, 44))
	rec.HearHealth(report(100))
	testsupport.Eventually(t, timeout, "all clusters, none left out", state(100, 0))
}

// TestReachHealthNotReported: while a replica says it left clusters out of its report, a
// Route whose cluster has no entry gets BackendsReachable=Unknown HealthNotReported (naming
// the cap), not NotYetChecked for ever; once nothing is left out, it is NotYetChecked again.
func TestReachHealthNotReported(t *testing.T) {
	ctx := t.Context()
	c, gw := startRouteWriter(t, map[string][]string{"gw-backend": {"10.0.0.1:30080"}})
	ts := &v1alpha1.TenantState{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: hubnames.TenantStateName}, ts); err != nil {
		t.Fatal(err)
	}
	ts.Status.BackendHealthOmitted = []v1alpha1.BackendHealthOmitted{{Replica: "r1", Clusters: 12, Time: metav1.Now().Rfc3339Copy()}}
	if err := c.Status().Update(ctx, ts); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("than a manager replica reports (%d)", reach.MaxReportedClusters)
	waitRouteStatus(t, c, gw.Name, metav1.ConditionTrue, status.ReasonProgrammed, func(r *v1alpha1.Route) error {
		cond := meta.FindStatusCondition(r.Status.Resources.Route.Conditions, status.ConditionBackendsReachable)
		if cond == nil || cond.Status != metav1.ConditionUnknown || cond.Reason != reach.ReasonHealthNotReported || !strings.Contains(cond.Message, want) {
			return fmt.Errorf("BackendsReachable %+v, want Unknown %s with %q", cond, reach.ReasonHealthNotReported, want)
		}
		return nil
	})
	if err := c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: hubnames.TenantStateName}, ts); err != nil {
		t.Fatal(err)
	}
	ts.Status.BackendHealthOmitted = nil
	if err := c.Status().Update(ctx, ts); err != nil {
		t.Fatal(err)
	}
	waitRouteStatus(t, c, gw.Name, metav1.ConditionTrue, status.ReasonProgrammed, func(r *v1alpha1.Route) error {
		cond := meta.FindStatusCondition(r.Status.Resources.Route.Conditions, status.ConditionBackendsReachable)
		if cond == nil || cond.Reason != reach.ReasonNotYetChecked {
			return fmt.Errorf("BackendsReachable %+v, want NotYetChecked", cond)
		}
		return nil
	})
}
