package status

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/translate"
)

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decode(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func cond(typ, st, reason, msg string, ltt any) map[string]any {
	c := map[string]any{"type": typ, "status": st, "reason": reason, "message": msg, "observedGeneration": 1}
	if ltt != nil {
		c["lastTransitionTime"] = ltt
	}
	return c
}

// TestStableTransitions: conditions inside a tenant object's status keep their
// lastTransitionTime while status, reason and message stay, wherever they are (the Gateway's,
// a listener's matched by name, a route parent's matched by parentRef); changed and new
// conditions, and those the front end left without a time, get now.
func TestStableTransitions(t *testing.T) {
	t.Parallel()
	before := "2026-01-01T10:00:00Z"
	now := time.Date(2026, 1, 1, 12, 0, 0, 500, time.UTC)
	stamp := "2026-01-01T12:00:00Z"

	prev := mustJSON(t, map[string]any{
		"conditions": []any{cond("Accepted", "True", "Accepted", "ok", before), cond("Programmed", "True", "Programmed", "ok", before)},
		"listeners": []any{
			map[string]any{"name": "a", "conditions": []any{cond("Programmed", "True", "Programmed", "ok", before)}},
			map[string]any{"name": "b", "conditions": []any{cond("Programmed", "True", "Programmed", "ok", before)}},
		},
	})
	next := mustJSON(t, map[string]any{
		"conditions": []any{cond("Accepted", "True", "Accepted", "ok", nil), cond("Programmed", "False", "Invalid", "bad", nil),
			cond("ResolvedRefs", "True", "ResolvedRefs", "ok", nil)},
		"listeners": []any{ // reordered, one more attached route: same conditions
			map[string]any{"name": "b", "attachedRoutes": 2, "conditions": []any{cond("Programmed", "True", "Programmed", "ok", nil)}},
			map[string]any{"name": "a", "conditions": []any{cond("Programmed", "True", "Programmed", "changed", nil)}},
			map[string]any{"name": "c", "conditions": []any{cond("Programmed", "True", "Programmed", "ok", nil)}},
		},
	})
	out, err := StableTransitions(next, prev, now)
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, out)
	times := func(conds any) []any {
		var out []any
		for _, c := range conds.([]any) {
			out = append(out, c.(map[string]any)["lastTransitionTime"])
		}
		return out
	}
	if got := times(m["conditions"]); got[0] != before || got[1] != stamp || got[2] != stamp {
		t.Errorf("Gateway conditions' times %v, want [kept now now]", got)
	}
	ls := m["listeners"].([]any)
	for i, want := range []string{before, stamp, stamp} {
		l := ls[i].(map[string]any)
		if got := times(l["conditions"])[0]; got != want {
			t.Errorf("listener %s: time %v, want %v", l["name"], got, want)
		}
	}
	if ls[0].(map[string]any)["attachedRoutes"] != float64(2) {
		t.Errorf("other fields changed: %v", ls[0])
	}

	// Route parents are matched by parentRef and controller.
	ref := func(name string) map[string]any {
		return map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": name}
	}
	prev = mustJSON(t, map[string]any{"parents": []any{
		map[string]any{"parentRef": ref("x"), "controllerName": "kubelb.k8c.io/gateway", "conditions": []any{cond("Accepted", "True", "Accepted", "ok", before)}},
	}})
	next = mustJSON(t, map[string]any{"parents": []any{
		map[string]any{"parentRef": ref("y"), "controllerName": "kubelb.k8c.io/gateway", "conditions": []any{cond("Accepted", "True", "Accepted", "ok", nil)}},
		map[string]any{"parentRef": ref("x"), "controllerName": "kubelb.k8c.io/gateway", "conditions": []any{cond("Accepted", "True", "Accepted", "ok", nil)}},
	}})
	out, err = StableTransitions(next, prev, now)
	if err != nil {
		t.Fatal(err)
	}
	ps := decode(t, out)["parents"].([]any)
	if y, x := times(ps[0].(map[string]any)["conditions"])[0], times(ps[1].(map[string]any)["conditions"])[0]; y != stamp || x != before {
		t.Errorf("parent times y=%v x=%v, want y new, x kept", y, x)
	}

	// Without a previous status (or an unreadable one), every condition is stamped now; a
	// status without conditions is unchanged.
	for _, p := range []json.RawMessage{nil, json.RawMessage(`not json`)} {
		out, err = StableTransitions(mustJSON(t, map[string]any{"conditions": []any{cond("Accepted", "True", "Accepted", "ok", nil)}}), p, now)
		if err != nil || times(decode(t, out)["conditions"])[0] != stamp {
			t.Errorf("prev %q: %s %v", p, out, err)
		}
	}
	ing := json.RawMessage(`{"loadBalancer":{"ingress":[{"ip":"192.0.2.1"}]}}`)
	if out, err = StableTransitions(ing, nil, now); err != nil || !sameJSON(out, ing) {
		t.Errorf("Ingress status %s %v", out, err)
	}
	if _, err := StableTransitions(json.RawMessage(`{`), nil, now); err == nil {
		t.Error("no error for a status that is not JSON")
	}
}

// TestRouteProgrammed: a Route's Programmed condition comes from its problems like a
// LoadBalancer's; a Route no front end said anything of is not served.
func TestRouteProgrammed(t *testing.T) {
	t.Parallel()
	r := &v1alpha1.Route{}
	r.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: map[string]any{"kind": "FooRoute"}}}
	c := routeProgrammed(r, 4, false, nil)
	if c.Status != metav1.ConditionFalse || c.Reason != ReasonNotTranslated || c.ObservedGeneration != 4 || c.Message != "Not served: kubelb does not translate a FooRoute (yet)." {
		t.Errorf("untranslated: %+v", c)
	}
	if c := routeProgrammed(r, 4, true, nil); c.Status != metav1.ConditionTrue || c.Reason != ReasonProgrammed {
		t.Errorf("translated: %+v", c)
	}
	p := ir.Problem{Object: ir.ObjectRef{Kind: translate.KindRoute, Name: "r", Section: "rule 0"}, Severity: ir.SeverityError,
		Reason: translate.ReasonBackendNotFound, Message: "Service shop/web is not among the Services the route carries"}
	if c := routeProgrammed(r, 4, false, []ir.Problem{p}); c.Status != metav1.ConditionFalse || c.Reason != translate.ReasonBackendNotFound {
		t.Errorf("with an error: %+v", c)
	}
}

// TestDesiredRouteState: the state applied names the embedded tenant object, and a settled
// Route is unchanged (no write).
func TestDesiredRouteState(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	r := &v1alpha1.Route{}
	r.Name, r.Namespace = "uid-1", "tenant-a"
	r.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": map[string]any{"name": "web", "namespace": "shop"}}}}
	rs := translate.RouteStatus{Kind: "Ingress", Generation: 1, Status: json.RawMessage(`{"loadBalancer":{"ingress":[{"ip":"192.0.2.1"}]}}`)}
	st, err := desiredRouteState(r, rs, true, Programmed(1, nil), now)
	if err != nil {
		t.Fatal(err)
	}
	if st.apiVersion != "networking.k8s.io/v1" || st.kind != "Ingress" || st.name != "web" || st.namespace != "shop" || routeUnchanged(t, r, st) {
		t.Fatalf("state %+v", st)
	}
	st.set(&r.Status) // what the API server would then hold
	again, err := desiredRouteState(r, rs, true, Programmed(1, nil), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !routeUnchanged(t, r, again) {
		t.Errorf("a settled Route would be written again: %+v", again)
	}
	if !again.programmed.LastTransitionTime.Time.Equal(now) {
		t.Errorf("Programmed moved to %v", again.programmed.LastTransitionTime)
	}
	// A front end's null status is no status.
	none, err := desiredRouteState(r, translate.RouteStatus{Kind: "Ingress", Status: json.RawMessage(" null")}, true, Programmed(1, nil), now)
	if err != nil || none.status != nil {
		t.Errorf("null status: %s %v", none.status, err)
	}
}

// routeUnchanged tells whether setting st leaves r's status as the Sink would write it.
func routeUnchanged(t *testing.T, r *v1alpha1.Route, st routeState) bool {
	t.Helper()
	next := RouteOwned(r.Status)
	st.set(&next)
	a, err := payload(RouteOwned(r.Status))
	if err != nil {
		t.Fatal(err)
	}
	b, err := payload(next)
	if err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(a, b)
}

// sameJSON reports whether two JSON documents are equal as values (empty counts as none).
func sameJSON(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
