// Package source mirrors the tenant's Layer 7 objects — Ingresses, Gateways, HTTPRoutes,
// GRPCRoutes, TLSRoutes, TCPRoutes and UDPRoutes — into hub Routes named by the object's UID,
// makes NodePort twins of their ClusterIP backends, and copies the status the manager writes
// into Route.status.resources.route.status back onto the tenant object. One Reconciler does
// this for every kind; a Kind (one per kind, in this file) says what differs: which objects are
// served, what they reference and how the hub's status merges into theirs. GatewayClasses are
// kept by GatewayClassReconciler. See docs/ccm.md and docs/l7.md ("Tenant side (ccm)").
package source

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/routekind"
)

// ControllerName is the GatewayClass controllerName of kubelb; it is also the controllerName
// of the route status parents the manager writes.
const ControllerName = "kubelb.k8c.io/gateway-controller"

// GatewayName is the name of the Gateway KubeLB CE serves whatever its class (see
// GatewayServed).
const GatewayName = "kubelb"

// ingressClassAnnotation is the ingress class annotation that predates spec.ingressClassName.
const ingressClassAnnotation = "kubernetes.io/ingress.class"

// Gateway API group and kinds.
const (
	gatewayGroup    = gwapiv1.GroupName
	kindGateway     = "Gateway"
	kindListenerSet = "ListenerSet"
	kindService     = "Service"
	kindSecret      = "Secret"
)

// Ref is a reference of a tenant object to another object: a backend (a Service) or a
// certificate (a Secret).
type Ref struct {
	Group, Kind, Namespace, Name string
}

// String is group/kind namespace/name.
func (r Ref) String() string { return fmt.Sprintf("%s/%s %s/%s", r.Group, r.Kind, r.Namespace, r.Name) }

// isService tells whether r points at a core Service.
func (r Ref) isService() bool { return r.Group == "" && r.Kind == kindService }

// ParentRef is a route's reference to a Gateway (or, in ListenerSetParents, to a ListenerSet).
type ParentRef struct {
	Namespace, Name string
}

// Kind is what the Reconciler needs to know of one kind of tenant object.
type Kind struct {
	// Name is the lower-case kind, used in controller names and logs ("httproute").
	Name string
	// Kind is what the hub makes of the kind (routekind): its GroupVersionKind, the one the
	// ccm reads and writes in the tenant; GatewayAPI, whether it needs --enable-gateway-api
	// and gets a SourceContext; AttachesToGateway, whether it is a Gateway API route
	// (parentRefs, status.parents).
	routekind.Kind
	// New returns an empty object of the kind; NewList an empty list.
	New     func() client.Object
	NewList func() client.ObjectList
	// Reconcile is the kind's reconcile metric, Managed its gauge of mirrored objects.
	Reconcile *metrics.Reconcile
	Managed   *prometheus.GaugeVec
}

// OriginKind is the value of the origin-resource-kind label of the kind's Routes, e.g.
// "HTTPRoute.gateway.networking.k8s.io".
func (k Kind) OriginKind() string { return k.String() + "." + k.GroupVersionKind().Group }

// mirrored is the Kind of the ccm's controller named name for kind k.
func mirrored(name string, k routekind.Kind, newObj func() client.Object, newList func() client.ObjectList, r *metrics.Reconcile, g *prometheus.GaugeVec) Kind {
	return Kind{Name: name, Kind: k, New: newObj, NewList: newList, Reconcile: r, Managed: g}
}

// The kinds the ccm mirrors. TLSRoute, TCPRoute and UDPRoute are served as
// gateway.networking.k8s.io/v1 in gateway-api v1.6's standard channel.
var (
	Ingress = mirrored("ingress", routekind.Ingress,
		func() client.Object { return &networkingv1.Ingress{} }, func() client.ObjectList { return &networkingv1.IngressList{} },
		metrics.CCMIngressReconcile, metrics.CCMManagedIngresses)
	Gateway = mirrored("gateway", routekind.Gateway,
		func() client.Object { return &gwapiv1.Gateway{} }, func() client.ObjectList { return &gwapiv1.GatewayList{} },
		metrics.CCMGatewayReconcile, metrics.CCMManagedGateways)
	HTTPRoute = mirrored("httproute", routekind.HTTPRoute,
		func() client.Object { return &gwapiv1.HTTPRoute{} }, func() client.ObjectList { return &gwapiv1.HTTPRouteList{} },
		metrics.CCMHTTPRouteReconcile, metrics.CCMManagedHTTPRoutes)
	GRPCRoute = mirrored("grpcroute", routekind.GRPCRoute,
		func() client.Object { return &gwapiv1.GRPCRoute{} }, func() client.ObjectList { return &gwapiv1.GRPCRouteList{} },
		metrics.CCMGRPCRouteReconcile, metrics.CCMManagedGRPCRoutes)
	TLSRoute = mirrored("tlsroute", routekind.TLSRoute,
		func() client.Object { return &gwapiv1.TLSRoute{} }, func() client.ObjectList { return &gwapiv1.TLSRouteList{} },
		metrics.CCMTLSRouteReconcile, metrics.CCMManagedTLSRoutes)
	TCPRoute = mirrored("tcproute", routekind.TCPRoute,
		func() client.Object { return &gwapiv1.TCPRoute{} }, func() client.ObjectList { return &gwapiv1.TCPRouteList{} },
		metrics.CCMTCPRouteReconcile, metrics.CCMManagedTCPRoutes)
	UDPRoute = mirrored("udproute", routekind.UDPRoute,
		func() client.Object { return &gwapiv1.UDPRoute{} }, func() client.ObjectList { return &gwapiv1.UDPRouteList{} },
		metrics.CCMUDPRouteReconcile, metrics.CCMManagedUDPRoutes)
	// ListenerSet is mirrored when its spec.parentRef names a served Gateway; the hub adds its
	// listeners to that Gateway's when the Gateway allows it.
	ListenerSet = mirrored("listenerset", routekind.ListenerSet,
		func() client.Object { return &gwapiv1.ListenerSet{} }, func() client.ObjectList { return &gwapiv1.ListenerSetList{} },
		metrics.CCMListenerSetReconcile, metrics.CCMManagedListenerSets)
)

// Kinds are all kinds, in the order their controllers are set up.
var Kinds = []Kind{Ingress, Gateway, ListenerSet, HTTPRoute, GRPCRoute, TLSRoute, TCPRoute, UDPRoute}

// IngressServed tells whether the ccm mirrors an Ingress: of class kubelb (spec or the older
// annotation) when useClass, else every Ingress.
func IngressServed(ing *networkingv1.Ingress, useClass bool) bool {
	if !useClass {
		return true
	}
	if ing.Spec.IngressClassName != nil {
		return *ing.Spec.IngressClassName == v1alpha1.DefaultClass
	}
	return ing.Annotations[ingressClassAnnotation] == v1alpha1.DefaultClass
}

// GatewayServed is the rule for Gateways. A Gateway is served when its GatewayClass (nil:
// not found) has kubelb's controllerName; and, as KubeLB CE does, the Gateway named kubelb is
// served whatever its class when useClass is false, and when its class is named kubelb when
// useClass is true. docs/l7.md has the truth table.
func GatewayServed(gw *gwapiv1.Gateway, class *gwapiv1.GatewayClass, useClass bool) bool {
	if class != nil && class.Spec.ControllerName == ControllerName {
		return true
	}
	if gw.Name != GatewayName {
		return false
	}
	return !useClass || string(gw.Spec.GatewayClassName) == v1alpha1.DefaultClass
}

// getGatewayServed reads a Gateway and its class from the tenant cache and applies
// GatewayServed. A missing Gateway is not served.
func getGatewayServed(ctx context.Context, c client.Reader, key client.ObjectKey, useClass bool) (bool, error) {
	gw := &gwapiv1.Gateway{}
	if err := c.Get(ctx, key, gw); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	class := &gwapiv1.GatewayClass{}
	if err := c.Get(ctx, client.ObjectKey{Name: string(gw.Spec.GatewayClassName)}, class); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("getting GatewayClass %s: %w", gw.Spec.GatewayClassName, err)
		}
		class = nil
	}
	return GatewayServed(gw, class, useClass), nil
}
