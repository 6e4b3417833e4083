// Package routekind answers "what does this Route carry": the kind of the tenant object a hub
// Route embeds (spec.source.kubernetes.resource) and what that kind asks of the hub — a hub
// Service of its own with one port per Gateway listener port, the two ports of the tenant's
// shared Ingress Service, or nothing (a Gateway API route is served on the listeners of the
// Gateways it attaches to, a ListenerSet's listeners on its Gateway's hub Service:
// listenersets.go). The manager's Route controller, quota, the envoycp controller and
// the translation front ends classify Routes with Of; the ccm describes the kinds it mirrors
// with Kind. The embedded object is tenant input: nothing of it is trusted.
package routekind

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// Groups of the kinds kubelb serves.
const (
	GroupIngress    = "networking.k8s.io"
	GroupGatewayAPI = "gateway.networking.k8s.io"
)

// Kind is the kind of a Route's embedded tenant object.
type Kind uint8

// The kinds kubelb serves, and Unsupported for any other (or none).
const (
	Unsupported Kind = iota
	Ingress
	Gateway
	HTTPRoute
	GRPCRoute
	TLSRoute
	TCPRoute
	UDPRoute
	// ListenerSet adds listeners to the Gateway its spec.parentRef names (Gateway API
	// v1.6, GEP-1713): served on that Gateway's hub Service, nothing of its own.
	ListenerSet
)

// Kinds are the kinds kubelb serves, in this order.
var Kinds = []Kind{Ingress, Gateway, HTTPRoute, GRPCRoute, TLSRoute, TCPRoute, UDPRoute, ListenerSet}

// HubService is the hub Service a kind is served through.
type HubService uint8

const (
	// NoHubService: no hub Service of its own; a Gateway API route is served on the listeners
	// of the Gateways it attaches to (their hub Services).
	NoHubService HubService = iota
	// SharedIngressService: ports 80 and 443 of the tenant's Ingress Service
	// (v1alpha1.IngressServiceName), shared by every Ingress of the tenant.
	SharedIngressService
	// OwnHubService: a hub Service of its own, one port per distinct listener port and
	// protocol (GatewayPorts), labelled with the Route's name (ValidRouteName).
	OwnHubService
)

// kinds describes each Kind: its name, its group and its hub Service.
var kinds = [...]struct {
	name    string
	group   string
	service HubService
}{
	Unsupported: {},
	Ingress:     {"Ingress", GroupIngress, SharedIngressService},
	Gateway:     {"Gateway", GroupGatewayAPI, OwnHubService},
	HTTPRoute:   {"HTTPRoute", GroupGatewayAPI, NoHubService},
	GRPCRoute:   {"GRPCRoute", GroupGatewayAPI, NoHubService},
	TLSRoute:    {"TLSRoute", GroupGatewayAPI, NoHubService},
	TCPRoute:    {"TCPRoute", GroupGatewayAPI, NoHubService},
	UDPRoute:    {"UDPRoute", GroupGatewayAPI, NoHubService},
	ListenerSet: {"ListenerSet", GroupGatewayAPI, NoHubService},
}

// String is the kind's name as the API spells it ("HTTPRoute"); "" for Unsupported.
func (k Kind) String() string { return kinds[k].name }

// GroupVersionKind is the kind at the version the ccm reads in the tenant (v1 of its group).
// Routes of any version of the group are served. Unsupported has none.
func (k Kind) GroupVersionKind() schema.GroupVersionKind {
	if k == Unsupported {
		return schema.GroupVersionKind{}
	}
	return schema.GroupVersionKind{Group: kinds[k].group, Version: "v1", Kind: kinds[k].name}
}

// GatewayAPI tells whether the kind belongs to Gateway API: the tenant's Gateway API switch
// (spec.gatewayAPI.disable) governs it, as the Ingress switch governs an Ingress.
func (k Kind) GatewayAPI() bool { return kinds[k].group == GroupGatewayAPI }

// AttachesToGateway tells whether the kind is a Gateway API route: it attaches to Gateways
// (and ListenerSets) by spec.parentRefs, and its status is status.parents.
func (k Kind) AttachesToGateway() bool { return k.GatewayAPI() && k != Gateway && k != ListenerSet }

// HubService is the hub Service the kind is served through.
func (k Kind) HubService() HubService { return kinds[k].service }

// Of returns the kind of a Route's embedded object and the object's GroupVersionKind as
// written (with only the kind when its apiVersion cannot be parsed). Only the group and kind
// decide: every version of a served group is served.
func Of(r *v1alpha1.Route) (Kind, schema.GroupVersionKind) {
	if r.Spec.Source.Kubernetes == nil {
		return Unsupported, schema.GroupVersionKind{}
	}
	u := &r.Spec.Source.Kubernetes.Route
	gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
	if err != nil {
		return Unsupported, schema.GroupVersionKind{Kind: u.GetKind()}
	}
	gvk := gv.WithKind(u.GetKind())
	return ofGroupKind(gvk.Group, gvk.Kind), gvk
}

// ofGroupKind is the Kind of a group and kind.
func ofGroupKind(group, kind string) Kind {
	for _, k := range Kinds {
		if kinds[k].name == kind && kinds[k].group == group {
			return k
		}
	}
	return Unsupported
}
