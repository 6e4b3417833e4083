package route

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/manager/planner"
	"kubelb.dev/kubelb/internal/quota"
	"kubelb.dev/kubelb/internal/routekind"
	"kubelb.dev/kubelb/internal/textcut"
)

// FieldOwner is the server-side apply field manager of the hub Services of Routes.
const FieldOwner = planner.RouteFieldOwner

// ConditionApplied is the condition of status.resources.route (and of every entry of
// status.resources.services) that says whether the hub objects of the Route are in place,
// as KubeLB CE names it.
const ConditionApplied = "ResourceAppliedSuccessfully"

// Reasons of the ResourceAppliedSuccessfully condition.
const (
	// ReasonApplied: the hub objects the Route needs are applied (KubeLB CE's reason).
	ReasonApplied = "InstallationSuccessful"
	// ReasonDisabled: the Tenant or Config disables Ingress or Gateway API; no hub Service.
	ReasonDisabled = "Disabled"
	// ReasonPortsExhausted: the listener port range has no room for the Route's ports.
	ReasonPortsExhausted = "PortsExhausted"
	// ReasonInvalidListeners: some Gateway listeners were left out (the others are served).
	ReasonInvalidListeners = "InvalidListeners"
	// ReasonUnsupportedKind: the embedded object is not a kind kubelb serves.
	ReasonUnsupportedKind = "UnsupportedKind"
	// ReasonServiceFailed: the API server rejected the hub Service, or a Service of its name
	// that the manager did not make is in the way.
	ReasonServiceFailed = "ServiceFailed"
	// ReasonInvalidName: the Route's name cannot label its hub Service.
	ReasonInvalidName = "InvalidName"
	// ReasonQuotaExceeded: the tenant's limits (spec.limits of the Tenant or Config) refuse
	// the Route (quota.Admit); it has no hub Service, holds no listener ports and is not served.
	ReasonQuotaExceeded = quota.ReasonQuotaExceeded
)

// hubPort is one port of a hub Service (planner.Port).
type hubPort = planner.Port

// AnnotationDNSHostname is external-dns's annotation listing the hostnames of a Service's
// address.
const AnnotationDNSHostname = planner.AnnotationDNSHostname

// outcome is what a reconcile found; appliedCondition turns it into the condition.
type outcome struct {
	kind        routekind.Kind
	gvk         schema.GroupVersionKind
	invalidName bool
	quota       string // why the tenant's limits refuse the Route; "" when admitted
	disabled    string // "Ingress" or "Gateway API" when disabled
	serviceErr  error
	exhausted   error
	problems    []string
	noPorts     bool
	pending     bool // the tenant's plan is behind: no status to write
	// staticTaken: the Gateway's granted static address is held or asked for by another hub
	// Service; the tenant is planned again after a while (it may be freed).
	staticTaken bool
}

// appliedCondition is the ResourceAppliedSuccessfully condition of status.resources.route
// for an outcome, the most important problem first.
func appliedCondition(o outcome, generation int64) metav1.Condition {
	c := metav1.Condition{Type: ConditionApplied, Status: metav1.ConditionFalse, ObservedGeneration: generation}
	switch {
	case o.quota != "":
		c.Reason, c.Message = ReasonQuotaExceeded, "Not served: "+o.quota+". It has no hub Service and holds no listener ports."
	case o.kind == routekind.Unsupported:
		c.Reason = ReasonUnsupportedKind
		c.Message = fmt.Sprintf("The Route carries a %q of apiVersion %q; kubelb serves Ingress (networking.k8s.io) and Gateway, ListenerSet, HTTPRoute, GRPCRoute, TLSRoute, TCPRoute and UDPRoute (gateway.networking.k8s.io). Mirror one of those.",
			textcut.Cut(o.gvk.Kind, maxQuoted, textcut.Ellipsis), textcut.Cut(o.gvk.GroupVersion().String(), maxQuoted, textcut.Ellipsis))
	case o.invalidName:
		c.Reason, c.Message = ReasonInvalidName, "The Route's name is not a valid label value (at most 63 characters: letters, digits, '-', '_', '.'); its hub Service cannot be made. Routes are named by the tenant object's UID."
	case o.disabled != "":
		field := "spec.ingress.disable"
		if o.disabled != "Ingress" {
			field = "spec.gatewayAPI.disable"
		}
		c.Reason, c.Message = ReasonDisabled, o.disabled+" is disabled for this tenant by the hub's platform team ("+field+" of the Tenant or Config): not served, no hub Service is made."
	case o.serviceErr != nil:
		c.Reason, c.Message = ReasonServiceFailed, "The hub Service was not applied: "+o.serviceErr.Error()
	case o.exhausted != nil:
		c.Reason, c.Message = ReasonPortsExhausted, "No listener port is left for this Route: "+o.exhausted.Error()
	case len(o.problems) > 0:
		c.Reason, c.Message = ReasonInvalidListeners, "Listeners left out: "+strings.Join(o.problems, "; ")
	case o.noPorts:
		c.Reason, c.Message = ReasonInvalidListeners, "The Gateway has no listener to serve."
	default:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonApplied
		switch o.kind.HubService() {
		case routekind.OwnHubService:
			c.Message = "The Gateway's hub Service is applied."
		case routekind.SharedIngressService:
			c.Message = "The tenant's Ingress Service " + kubelbv1alpha1.IngressServiceName + " is applied."
		default:
			c.Message = "Nothing to make on the hub: the route is served through its Gateway's Service."
			if o.kind == routekind.ListenerSet {
				c.Message = "Nothing to make on the hub: the ListenerSet's listeners are served through its Gateway's Service."
			}
		}
	}
	return c
}

// maxQuoted bounds tenant text quoted in a message: 100 bytes and the ellipsis.
const maxQuoted = 100 + len(textcut.Ellipsis)

// hubServiceState is a hub Service as the status reports it: name, ports and its status
// (nil svc: just applied, no status yet).
type hubServiceState struct {
	name  string
	ports []hubPort
	svc   *corev1.Service
}

// setStatus writes into st (a Route's status as kubelb last knew it) what this controller
// decides: the source, the hub Services (keyed "namespace/name", every entry: the controller
// is the only writer of that map), the route's identity and its ResourceAppliedSuccessfully
// condition. A condition keeps its transition time unless its status changes. The route's
// GeneratedName is the hub object that serves the tenant object: in KubeLB CE the hub Ingress
// or Gateway API object its manager made, in kubelb (which makes none) the Route itself; a
// KubeLB CE ccm copies status back only once it is set.
func setStatus(st *kubelbv1alpha1.RouteStatus, r *kubelbv1alpha1.Route, o outcome, services []hubServiceState, cond metav1.Condition, now metav1.Time) {
	res := &st.Resources
	res.Source = ""
	if r.Spec.Source.Kubernetes != nil {
		u := &r.Spec.Source.Kubernetes.Route
		rt := &res.Route
		rt.APIVersion, rt.Kind, rt.Name, rt.Namespace, rt.GeneratedName = u.GetAPIVersion(), u.GetKind(), u.GetName(), u.GetNamespace(), r.Name
		res.Source = strings.TrimSpace(u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName())
	}
	setCondition(&res.Route.Conditions, cond, now)
	prev := res.Services
	res.Services = nil
	for _, s := range services {
		key := r.Namespace + "/" + s.name
		entry := kubelbv1alpha1.RouteServiceStatus{ResourceState: kubelbv1alpha1.ResourceState{
			APIVersion: "v1", Kind: "Service", Name: s.name, Namespace: r.Namespace, GeneratedName: s.name,
			Conditions: slices.Clone(prev[key].Conditions),
		}}
		setCondition(&entry.Conditions, metav1.Condition{Type: ConditionApplied, Status: metav1.ConditionTrue,
			Reason: ReasonApplied, Message: "Success", ObservedGeneration: r.Generation}, now)
		for _, p := range s.ports {
			entry.Ports = append(entry.Ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, TargetPort: intstr.FromInt32(p.Target)})
		}
		if s.svc != nil {
			entry.Status.Raw, _ = json.Marshal(s.svc.Status)
		}
		if res.Services == nil {
			res.Services = map[string]kubelbv1alpha1.RouteServiceStatus{}
		}
		res.Services[key] = entry
	}
}

// setCondition sets cond in conds, with the transition time it has there when its status
// is unchanged, now otherwise.
func setCondition(conds *[]metav1.Condition, cond metav1.Condition, now metav1.Time) {
	cond.LastTransitionTime = now
	meta.SetStatusCondition(conds, cond)
}
