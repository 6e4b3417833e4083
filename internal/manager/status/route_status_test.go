package status_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
)

// routeFieldOwner is the field owner the Route controller applied its status under before
// the Sink wrote every status (a former owner, status.FormerFieldOwners).
const routeFieldOwner = "kubelb-route"

// gatewayRoute is a Route mirroring the tenant Gateway shop/kubelb at generation 3.
func gatewayRoute(name string) *v1alpha1.Route {
	r := &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: name,
		Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}}}
	r.Spec.Endpoints = []v1alpha1.LoadBalancerEndpoints{{AddressesReference: &corev1.ObjectReference{Name: v1alpha1.DefaultAddressesName}}}
	r.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": "kubelb", "namespace": "shop", "generation": int64(3)},
		"spec": map[string]any{"gatewayClassName": "kubelb", "listeners": []any{
			map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}}},
	}}}
	return r
}

// applyRouteControllerStatus plays the Route controller: it applies, under its own field
// owner, the source, a service and its ResourceAppliedSuccessfully condition.
func applyRouteControllerStatus(t *testing.T, c client.Client, name string) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": "Route",
		"metadata": map[string]any{"name": name, "namespace": tenant},
		"status": map[string]any{"resources": map[string]any{
			"source": "shop/kubelb",
			"services": map[string]any{"shop/kubelb": map[string]any{
				"name": "gateway-" + name, "namespace": tenant,
				"ports": []any{map[string]any{"name": "http", "port": int64(80), "protocol": "TCP", "targetPort": int64(20080)}},
			}},
			"route": map[string]any{"conditions": []any{map[string]any{
				"type": "ResourceAppliedSuccessfully", "status": "True", "reason": "InstallationSuccessful", "message": "Success",
				"lastTransitionTime": "2026-01-01T00:00:00Z",
			}}},
		}},
	}}
	if err := c.Status().Patch(context.Background(), u, client.Apply, client.FieldOwner(routeFieldOwner), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
}

func getRoute(t *testing.T, c client.Client, name string) *v1alpha1.Route {
	t.Helper()
	r := &v1alpha1.Route{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: tenant, Name: name}, r); err != nil {
		t.Fatal(err)
	}
	return r
}

// checkRouteControllerFields fails when the Route controller's fields are gone.
func checkRouteControllerFields(t *testing.T, r *v1alpha1.Route) {
	t.Helper()
	res := &r.Status.Resources
	if res.Source != "shop/kubelb" || len(res.Services) != 1 || len(res.Services["shop/kubelb"].Ports) != 1 ||
		meta.FindStatusCondition(res.Route.Conditions, "ResourceAppliedSuccessfully") == nil {
		t.Errorf("the Route controller's fields were cleared: %+v", res)
	}
}

// waitRouteStatus waits until the Route's Programmed condition has status and reason and
// returns the Route.
func waitRouteStatus(t *testing.T, c client.Client, name string, st metav1.ConditionStatus, reason string, check func(*v1alpha1.Route) error) *v1alpha1.Route {
	t.Helper()
	var got *v1alpha1.Route
	testsupport.Eventually(t, timeout, fmt.Sprintf("Route %s Programmed=%s/%s", name, st, reason), func() error {
		r := &v1alpha1.Route{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: tenant, Name: name}, r); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(r.Status.Resources.Route.Conditions, status.ConditionProgrammed)
		if cond == nil {
			return fmt.Errorf("no Programmed condition")
		}
		if cond.Status != st || cond.Reason != reason || cond.ObservedGeneration != r.Generation {
			return fmt.Errorf("%s/%s %q gen %d", cond.Status, cond.Reason, cond.Message, cond.ObservedGeneration)
		}
		if check != nil {
			if err := check(r); err != nil {
				return err
			}
		}
		got = r
		return nil
	})
	return got
}

// gatewayStatus is what a front end would say of the Gateway: attached is the listener's
// attachedRoutes, programmed its Programmed condition status.
func gatewayStatus(t *testing.T, attached int, programmed string) json.RawMessage {
	t.Helper()
	c := func(typ, st, reason string) map[string]any {
		return map[string]any{"type": typ, "status": st, "reason": reason, "message": typ + " " + st, "observedGeneration": 3,
			"lastTransitionTime": nil}
	}
	b, err := json.Marshal(map[string]any{
		"addresses":  []any{map[string]any{"type": "IPAddress", "value": "192.0.2.1"}},
		"conditions": []any{c("Accepted", "True", "Accepted"), c("Programmed", programmed, "Programmed")},
		"listeners": []any{map[string]any{"name": "http", "attachedRoutes": attached,
			"supportedKinds": []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}},
			"conditions":     []any{c("Accepted", "True", "Accepted"), c("Programmed", programmed, "Programmed")}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// transitionTimes returns the lastTransitionTime of each condition of the raw Gateway status
// by "<where>/<type>".
func transitionTimes(t *testing.T, r *v1alpha1.Route) map[string]string {
	t.Helper()
	var st struct {
		Conditions []metav1.Condition `json:"conditions"`
		Listeners  []struct {
			Name       string             `json:"name"`
			Conditions []metav1.Condition `json:"conditions"`
		} `json:"listeners"`
	}
	if err := json.Unmarshal(r.Status.Resources.Route.Status.Raw, &st); err != nil {
		t.Fatalf("status.resources.route.status %s: %v", r.Status.Resources.Route.Status.Raw, err)
	}
	out := map[string]string{}
	for _, c := range st.Conditions {
		out["gateway/"+c.Type] = c.LastTransitionTime.UTC().Format(time.RFC3339)
	}
	for _, l := range st.Listeners {
		for _, c := range l.Conditions {
			out[l.Name+"/"+c.Type] = c.LastTransitionTime.UTC().Format(time.RFC3339)
		}
	}
	return out
}

// nextSecond waits until the wall clock is in a later second than after, so that a condition
// stamped now would get a different lastTransitionTime (it is not an assertion).
func nextSecond(after time.Time) {
	for time.Now().Truncate(time.Second).Compare(after.Truncate(time.Second)) <= 0 {
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRouteStatus proves, on a real API server with the leader's Writer running, that for a
// Report built by hand (the front ends' output) the Writer writes status.resources.route —
// the embedded tenant object's identity, the status to copy back, the Programmed condition —
// without clearing the Route controller's fields (services, source, ResourceAppliedSuccessfully,
// applied first under field owner kubelb-route); keeps the lastTransitionTime of unchanged
// conditions inside the copied status; and records a
// Warning Event when Programmed turns False and a Normal one when it recovers.
func TestRouteStatus(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant,
		Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}}}); err != nil {
		t.Fatal(err)
	}
	gw, unknown := gatewayRoute("gw-uid"), gatewayRoute("foo-uid")
	unknown.Spec.Source.Kubernetes.Route.SetKind("FooRoute")
	for _, r := range []*v1alpha1.Route{gw, unknown} {
		if err := c.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	applyRouteControllerStatus(t, c, gw.Name)

	store := status.NewStore()
	testenv.StartManager(t, hub.Config, func(mgr ctrl.Manager) error { return status.SetupWriterWithManager(mgr, store) })
	gwRef := ir.ObjectRef{Kind: translate.KindRoute, Namespace: tenant, Name: gw.Name}
	unknownRef := ir.ObjectRef{Kind: translate.KindRoute, Namespace: tenant, Name: unknown.Name}
	version := 0
	publish := func(rs translate.RouteStatus, problems ...ir.Problem) {
		version++ // a new snapshot version: every Report differs, so the Writer runs each time
		store.Publish(tenant, &status.Report{
			Objects:  map[ir.ObjectRef]int64{gwRef: gw.Generation, unknownRef: unknown.Generation},
			Problems: problems,
			Versions: map[string]string{"type.googleapis.com/envoy.config.listener.v3.Listener": fmt.Sprint(version)},
			Routes:   map[string]translate.RouteStatus{gw.Name: rs},
		})
	}

	publish(translate.RouteStatus{Kind: "Gateway", Generation: 3, Status: gatewayStatus(t, 0, "True")})
	r := waitRouteStatus(t, c, gw.Name, metav1.ConditionTrue, status.ReasonProgrammed, func(r *v1alpha1.Route) error {
		if len(r.Status.Resources.Route.Status.Raw) == 0 {
			return fmt.Errorf("no status to copy back yet")
		}
		return nil
	})
	got := r.Status.Resources.Route
	if got.APIVersion != "gateway.networking.k8s.io/v1" || got.Kind != "Gateway" || got.Name != "kubelb" || got.Namespace != "shop" {
		t.Errorf("status.resources.route names %s %s %s/%s, want the tenant Gateway shop/kubelb", got.APIVersion, got.Kind, got.Namespace, got.Name)
	}
	var copied map[string]any
	if err := json.Unmarshal(got.Status.Raw, &copied); err != nil {
		t.Fatal(err)
	}
	if addrs, _ := copied["addresses"].([]any); len(addrs) != 1 {
		t.Errorf("status to copy back %s, want the front end's", got.Status.Raw)
	}
	times := transitionTimes(t, r)
	for k, v := range times {
		if v == "" || v == "0001-01-01T00:00:00Z" {
			t.Errorf("condition %s has no lastTransitionTime", k)
		}
	}
	if len(times) != 4 {
		t.Errorf("conditions %v, want 4", times)
	}
	checkRouteControllerFields(t, r)
	owners := map[string]bool{}
	for _, mf := range r.ManagedFields {
		if mf.Subresource == "status" {
			owners[mf.Manager] = true
		}
	}
	// One writer: the Sink took the fields the Route controller applied under its former
	// field owner over (they are still there, above) and released that owner.
	if !owners[status.FieldOwner] || len(owners) != 1 {
		t.Errorf("status field owners %v, want only %s", owners, status.FieldOwner)
	}
	// The Route no front end translated is not served.
	waitRouteStatus(t, c, unknown.Name, metav1.ConditionFalse, status.ReasonNotTranslated, nil)
	waitEvent(t, c, unknown.Name, corev1.EventTypeWarning, status.ReasonNotTranslated, "FooRoute")

	t.Run("unchanged conditions keep their lastTransitionTime", func(t *testing.T) {
		nextSecond(time.Now())
		// One more attached route; the listener's and the Gateway's conditions are the same.
		publish(translate.RouteStatus{Kind: "Gateway", Generation: 3, Status: gatewayStatus(t, 1, "True")})
		r := waitRouteStatus(t, c, gw.Name, metav1.ConditionTrue, status.ReasonProgrammed, func(r *v1alpha1.Route) error {
			if attachedOf(r) != `"attachedRoutes":1` {
				return fmt.Errorf("status %s", r.Status.Resources.Route.Status.Raw)
			}
			return nil
		})
		if after := transitionTimes(t, r); fmt.Sprint(after) != fmt.Sprint(times) {
			t.Errorf("lastTransitionTimes moved: %v, were %v", after, times)
		}
		checkRouteControllerFields(t, r)
	})

	t.Run("the Route controller's next apply keeps the Writer's fields", func(t *testing.T) {
		applyRouteControllerStatus(t, c, gw.Name)
		r := getRoute(t, c, gw.Name)
		if meta.FindStatusCondition(r.Status.Resources.Route.Conditions, status.ConditionProgrammed) == nil ||
			len(r.Status.Resources.Route.Status.Raw) == 0 || r.Status.Resources.Route.Kind != "Gateway" {
			t.Errorf("the Writer's fields were cleared: %+v", r.Status.Resources.Route)
		}
	})

	t.Run("Programmed False and recovery", func(t *testing.T) {
		nextSecond(time.Now())
		p := ir.Problem{Object: ir.ObjectRef{Kind: translate.KindRoute, Namespace: tenant, Name: gw.Name, Section: "listener http"},
			Severity: ir.SeverityError, Reason: translate.ReasonCertificateNotFound, Message: "Secret shop/app-tls has not reached the hub"}
		publish(translate.RouteStatus{Kind: "Gateway", Generation: 3, Status: gatewayStatus(t, 1, "False")}, p)
		r := waitRouteStatus(t, c, gw.Name, metav1.ConditionFalse, translate.ReasonCertificateNotFound, nil)
		waitEvent(t, c, gw.Name, corev1.EventTypeWarning, translate.ReasonCertificateNotFound, "listener http: CertificateNotFound")
		after := transitionTimes(t, r)
		if after["gateway/Accepted"] != times["gateway/Accepted"] || after["gateway/Programmed"] == times["gateway/Programmed"] ||
			after["http/Programmed"] == times["http/Programmed"] {
			t.Errorf("lastTransitionTimes %v (were %v): only the changed Programmed conditions may move", after, times)
		}
		checkRouteControllerFields(t, r)

		publish(translate.RouteStatus{Kind: "Gateway", Generation: 3, Status: gatewayStatus(t, 1, "True")})
		waitRouteStatus(t, c, gw.Name, metav1.ConditionTrue, status.ReasonProgrammed, nil)
		waitEvent(t, c, gw.Name, corev1.EventTypeNormal, status.ReasonProgrammed, "")
	})

	t.Run("a Route without a status loses the one it had", func(t *testing.T) {
		store.Publish(tenant, &status.Report{Objects: map[ir.ObjectRef]int64{gwRef: gw.Generation}, Versions: map[string]string{"x": "final"},
			Problems: []ir.Problem{{Object: gwRef, Severity: ir.SeverityError, Reason: translate.ReasonInvalidRoute, Message: "spec.source.kubernetes.resource is empty"}}})
		r := waitRouteStatus(t, c, gw.Name, metav1.ConditionFalse, translate.ReasonInvalidRoute, func(r *v1alpha1.Route) error {
			if len(r.Status.Resources.Route.Status.Raw) != 0 {
				return fmt.Errorf("status still %s", r.Status.Resources.Route.Status.Raw)
			}
			return nil
		})
		checkRouteControllerFields(t, r)
	})
}

// attachedOf returns the listener's "attachedRoutes":N as written in the raw status.
func attachedOf(r *v1alpha1.Route) string {
	var st struct {
		Listeners []struct {
			AttachedRoutes int `json:"attachedRoutes"`
		} `json:"listeners"`
	}
	if json.Unmarshal(r.Status.Resources.Route.Status.Raw, &st) != nil || len(st.Listeners) == 0 {
		return ""
	}
	return fmt.Sprintf(`"attachedRoutes":%d`, st.Listeners[0].AttachedRoutes)
}
