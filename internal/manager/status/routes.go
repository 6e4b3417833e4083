package status

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/translate"
)

// ReasonNotTranslated: no front end said anything of the Route (its tenant object is of a
// kind kubelb does not translate); it is not served.
const ReasonNotTranslated = "NotTranslated"

// routeProgrammed is the Programmed condition of a Route: from its problems, as for
// LoadBalancers (Programmed), except that a Route no front end reported on at all — no
// status and no problem — is not served.
func routeProgrammed(route *v1alpha1.Route, generation int64, translated bool, problems []ir.Problem) metav1.Condition {
	if !translated && len(problems) == 0 {
		kind := "object"
		if src := route.Spec.Source.Kubernetes; src != nil && src.Route.GetKind() != "" {
			kind = src.Route.GetKind()
		}
		return metav1.Condition{Type: ConditionProgrammed, ObservedGeneration: generation, Status: metav1.ConditionFalse,
			Reason: ReasonNotTranslated, Message: bounded(fmt.Sprintf("Not served: kubelb does not translate a %s (yet).", kind))}
	}
	return Programmed(generation, problems)
}

// routeState is what the Writer owns of status.resources.route: the tenant object's
// identity, the status to copy back onto it (JSON, nil for none) and the Programmed condition.
type routeState struct {
	apiVersion, kind, name, namespace string
	status                            json.RawMessage
	programmed                        metav1.Condition
	keepProgrammed                    bool // no verdict yet (a listener port pending): Programmed stays as it is
}

// desiredRouteState computes what the Writer applies to a Route (pure; now stamps conditions
// that changed). The raw status is rs.Status with the lastTransitionTime of each condition
// inside it kept from the Route's current status when the condition did not change
// (StableTransitions); a Route the front ends gave no status (or null) gets none.
func desiredRouteState(route *v1alpha1.Route, rs translate.RouteStatus, translated bool, cond metav1.Condition, now time.Time) (routeState, error) {
	cur := &route.Status.Resources.Route
	st := routeState{programmed: cond}
	if src := route.Spec.Source.Kubernetes; src != nil {
		o := &src.Route
		st.apiVersion, st.kind, st.name, st.namespace = o.GetAPIVersion(), o.GetKind(), o.GetName(), o.GetNamespace()
	}
	if raw := bytes.TrimSpace(rs.Status); translated && len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		raw, err := StableTransitions(rs.Status, cur.Status.Raw, now)
		if err != nil {
			return routeState{}, fmt.Errorf("reading the translated status of Route %s/%s: %w", route.Namespace, route.Name, err)
		}
		st.status = raw
	}
	prev := meta.FindStatusCondition(cur.Conditions, ConditionProgrammed)
	st.programmed.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
	if prev != nil && prev.Status == cond.Status {
		st.programmed.LastTransitionTime = prev.LastTransitionTime
	}
	return st, nil
}

// set writes st into a Route's status (status.resources.route: identity, the tenant
// object's status, Programmed), leaving the rest alone.
func (st routeState) set(out *v1alpha1.RouteStatus) {
	rt := &out.Resources.Route
	rt.APIVersion, rt.Kind, rt.Name, rt.Namespace = st.apiVersion, st.kind, st.name, st.namespace
	rt.Status = runtime.RawExtension{Raw: st.status}
	if !st.keepProgrammed {
		meta.SetStatusCondition(&rt.Conditions, st.programmed)
	}
}

// applyRoute writes status.resources.route of one Route through the Sink (which writes only
// when it differs from what the Route has); the Route controller's services, source and
// conditions stay, and so does Programmed when cond is nil (no verdict yet). An Event
// follows when the meaning of Programmed changed.
func (w *Writer) applyRoute(ctx context.Context, route *v1alpha1.Route, rs translate.RouteStatus, translated bool, cond *metav1.Condition) error {
	var stErr error
	known, wrote, err := w.sink.Route(ctx, route, func(out *v1alpha1.RouteStatus) {
		cur := *route
		cur.Status = *out
		st, err := desiredRouteState(&cur, rs, translated, ptr.Deref(cond, metav1.Condition{}), w.now())
		if err != nil {
			stErr = err
			return
		}
		st.keepProgrammed = cond == nil
		st.set(out)
	})
	if err := errors.Join(stErr, err); err != nil {
		return fmt.Errorf("applying the status of Route %s/%s: %w", route.Namespace, route.Name, err)
	}
	if wrote && cond != nil {
		w.event(route, meta.FindStatusCondition(known.Resources.Route.Conditions, ConditionProgrammed), *cond)
	}
	return nil
}

// StableTransitions returns next (a tenant object's status as JSON) with the
// lastTransitionTime of every condition in it — an object with a "type" in a list named
// "conditions", at any depth: a Gateway's, its listeners', a route's parents' — set: to the
// lastTransitionTime of the same condition in prev (the status the Route carries now) when
// its status, reason and message are unchanged, to now otherwise. The same condition is the
// one of the same type in the same place: list entries are matched by "name" (listeners),
// by "parentRef" and "controllerName" (route parents), else by position. A translation that
// did not change therefore gives the status the Route already has, and a settled tenant
// makes no writes. It is pure.
func StableTransitions(next, prev json.RawMessage, now time.Time) (json.RawMessage, error) {
	var n, p any
	if err := json.Unmarshal(next, &n); err != nil {
		return nil, err
	}
	if len(prev) > 0 {
		if err := json.Unmarshal(prev, &p); err != nil {
			p = nil // a status we cannot read is replaced
		}
	}
	stamp := now.UTC().Truncate(time.Second).Format(time.RFC3339)
	out, err := json.Marshal(stabilize(n, p, stamp))
	if err != nil {
		return nil, err
	}
	return out, nil
}

func stabilize(n, p any, now string) any {
	switch nv := n.(type) {
	case map[string]any:
		pm, _ := p.(map[string]any)
		for k, v := range nv {
			if l, ok := v.([]any); ok && k == "conditions" {
				pl, _ := pm[k].([]any)
				stampConditions(l, pl, now)
				continue
			}
			nv[k] = stabilize(v, pm[k], now)
		}
	case []any:
		pl, _ := p.([]any)
		for i, v := range nv {
			nv[i] = stabilize(v, sameEntry(v, i, pl), now)
		}
	}
	return n
}

// sameEntry finds the entry of prev that corresponds to v, the i-th entry of its list.
func sameEntry(v any, i int, prev []any) any {
	vm, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	if name, ok := vm["name"].(string); ok {
		for _, p := range prev {
			if pm, ok := p.(map[string]any); ok && pm["name"] == name {
				return pm
			}
		}
		return nil
	}
	if ref, ok := vm["parentRef"]; ok {
		for _, p := range prev {
			if pm, ok := p.(map[string]any); ok && reflect.DeepEqual(pm["parentRef"], ref) && pm["controllerName"] == vm["controllerName"] {
				return pm
			}
		}
		return nil
	}
	if i < len(prev) {
		return prev[i]
	}
	return nil
}

// stampConditions sets the lastTransitionTime of each condition of conds (see
// StableTransitions) from prev, the same list as it is now.
func stampConditions(conds, prev []any, now string) {
	for _, c := range conds {
		cm, ok := c.(map[string]any)
		if !ok {
			continue
		}
		cm["lastTransitionTime"] = now
		for _, p := range prev {
			pm, ok := p.(map[string]any)
			if !ok || pm["type"] != cm["type"] {
				continue
			}
			if t, ok := pm["lastTransitionTime"].(string); ok && t != "" &&
				pm["status"] == cm["status"] && pm["reason"] == cm["reason"] && pm["message"] == cm["message"] {
				cm["lastTransitionTime"] = t
			}
			break
		}
	}
}
