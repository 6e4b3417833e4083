package tenantside

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/routekind"
)

// routeStatus follows an Ingress, a Gateway or a Gateway API route.
func routeStatus(ctx context.Context, tenant client.Reader, hub HubAccess, t Target) StatusReport {
	var r StatusReport
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(t.Kind.GroupVersionKind())
	step, found := tenantStep(ctx, tenant, t, obj)
	r.Steps = append(r.Steps, step)
	if !found {
		return r
	}
	r.Conditions = append(r.Conditions, tenantConditions(t, obj)...)
	hint := notMirroredHint
	if t.Kind == routekind.Ingress {
		if class := ingressClass(obj); class != v1alpha1.DefaultClass {
			hint = fmt.Sprintf("the ccm mirrors Ingresses of class kubelb (this one's: %q): set spec.ingressClassName: kubelb; else %s", class, notMirroredHint)
		}
	}
	route := &v1alpha1.Route{}
	step, found = hubStep(ctx, hub, "Route", string(obj.GetUID()), route, hint)
	r.Steps = append(r.Steps, step)
	if !found {
		return r
	}
	rs := route.Status.Resources
	r.Conditions = append(r.Conditions, Conditions{Heading: "hub Route " + route.Namespace + "/" + route.Name, Conditions: rs.Route.Conditions})
	r.Rejections, r.OtherRejections = rejections(ctx, hub, route.Name, rs.Route.Conditions)
	r.Steps = append(r.Steps, appliedStep(rs.Route.Conditions), hubServiceStep(t.Kind, rs.Services))
	switch t.Kind {
	case routekind.Ingress:
		r.Steps = append(r.Steps, addressStep(objectIngress(obj, "status", "loadBalancer", "ingress"), meta.FindStatusCondition(rs.Route.Conditions, condApplied), "copied by the ccm onto the Ingress"))
	case routekind.Gateway:
		r.Steps = append(r.Steps, addressStep(objectIngress(obj, "status", "addresses"), meta.FindStatusCondition(rs.Route.Conditions, condApplied), "copied by the ccm onto the Gateway"))
	case routekind.ListenerSet:
		r.Steps = append(r.Steps, skipped("hub address", "a ListenerSet's listeners are reached on the address of its Gateway (kubectl kubelb status gateway/<name>)"))
	default:
		r.Steps = append(r.Steps, skipped("hub address", "a route is reached on the address of the Gateways it attaches to (kubectl kubelb status gateway/<name>)"))
	}
	r.Steps = append(r.Steps, programmedStep(rs.Route.Conditions))
	if c := meta.FindStatusCondition(rs.Route.Conditions, condReachable); c != nil {
		r.Steps = append(r.Steps, reachableStep(c, "the hub's Envoy cannot reach your backends' NodePorts: check firewalls between the hub and your nodes"))
	} else {
		r.Steps = append(r.Steps, skipped("endpoints", "the hub reports no health of the backends"))
	}
	return r
}

// appliedStep is the hub's ResourceAppliedSuccessfully condition of a Route.
func appliedStep(conds []metav1.Condition) Step {
	const name = "hub accepted"
	c := meta.FindStatusCondition(conds, condApplied)
	switch {
	case c == nil:
		return failed(name, "the manager has not judged it yet: wait a little; if it stays, the platform team runs `kubectl kubelb check hub`", "no %s condition yet", condApplied)
	case c.Status == metav1.ConditionTrue:
		return ok(name, "%s (%s)", condApplied, c.Reason)
	}
	return failed(name, readyHint(c.Reason), "%s=%s %s: %s", condApplied, c.Status, c.Reason, c.Message)
}

// hubServiceStep lists the hub Services of a Route and their listener ports.
func hubServiceStep(k routekind.Kind, services map[string]v1alpha1.RouteServiceStatus) Step {
	const name = "hub Service and listener ports"
	switch {
	case k == routekind.ListenerSet:
		return skipped(name, "a ListenerSet's listeners get their ports on its Gateway's hub Service (kubectl kubelb status gateway/<name>)")
	case k.HubService() == routekind.NoHubService:
		return skipped(name, "a route is served on the listeners of its Gateways")
	}
	if len(services) == 0 {
		return failed(name, "no hub Service while the hub refuses the object: see \"hub accepted\"", "no hub Service")
	}
	keys := make([]string, 0, len(services))
	for k := range services {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, key := range keys {
		var ports []string
		for _, p := range services[key].Ports {
			ports = append(ports, fmt.Sprintf("%d/%s→%d", p.Port, v1alpha1.ProtocolOrTCP(p.Protocol), p.TargetPort.IntValue()))
		}
		parts = append(parts, fmt.Sprintf("%s [%s]", key, strings.Join(ports, ", ")))
	}
	return ok(name, "%s", strings.Join(parts, "; "))
}

// tenantConditions are the conditions of a tenant Ingress or Gateway API object: its own and,
// for routes, each parent's.
func tenantConditions(t Target, obj *unstructured.Unstructured) []Conditions {
	out := []Conditions{{Heading: t.String(), Conditions: conditionsAt(obj.Object, "status", "conditions")}}
	parents, _, _ := unstructured.NestedSlice(obj.Object, "status", "parents")
	for _, p := range parents {
		m, isMap := p.(map[string]any)
		if !isMap {
			continue
		}
		ref, _, _ := unstructured.NestedString(m, "parentRef", "name")
		out = append(out, Conditions{Heading: t.String() + " parent " + ref, Conditions: conditionsAt(m, "conditions")})
	}
	return out
}

// conditionsAt reads a list of conditions at a path of an unstructured object.
func conditionsAt(obj map[string]any, path ...string) []metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(obj, path...)
	out := make([]metav1.Condition, 0, len(raw))
	for _, r := range raw {
		m, isMap := r.(map[string]any)
		if !isMap {
			continue
		}
		var c metav1.Condition
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c) == nil {
			out = append(out, c)
		}
	}
	return out
}

// objectIngress reads the addresses of a tenant object: status.loadBalancer.ingress of an
// Ingress (ip or hostname), status.addresses of a Gateway (value).
func objectIngress(obj *unstructured.Unstructured, path ...string) []corev1.LoadBalancerIngress {
	raw, _, _ := unstructured.NestedSlice(obj.Object, path...)
	var out []corev1.LoadBalancerIngress
	for _, r := range raw {
		m, isMap := r.(map[string]any)
		if !isMap {
			continue
		}
		for _, key := range []string{"ip", "hostname", "value"} {
			if v, _ := m[key].(string); v != "" {
				out = append(out, corev1.LoadBalancerIngress{IP: v})
				break
			}
		}
	}
	return out
}

// ingressClass is an Ingress's class: spec.ingressClassName, else the older annotation.
func ingressClass(obj *unstructured.Unstructured) string {
	if c, found, _ := unstructured.NestedString(obj.Object, "spec", "ingressClassName"); found {
		return c
	}
	return obj.GetAnnotations()["kubernetes.io/ingress.class"]
}
