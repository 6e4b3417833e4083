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
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/reach"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/translate"
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
