package quota

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/routekind"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/translate"
)

// sharedIngress names the listener ports of the tenant's Ingress Service in Object.
const sharedIngress = "ingress"

// IngressServicePorts is the number of listener ports of a tenant's Ingress Service
// (kubelb-ingress: 80 and 443).
const IngressServicePorts = 2

// Objects returns what Admit needs to know of a tenant's LoadBalancers and Routes
// (those being deleted are left out) under the tenant's settings t: each object's creation
// time and the listener ports it needs — a LoadBalancer one per port
// (LoadBalancerPorts), a Gateway one per distinct listener port and protocol
// (routekind.GatewayPorts), none for what is disabled. Ingress Routes and LoadBalancers with a
// hostname share the two ports of the tenant's Ingress Service. The LoadBalancer, Route and
// envoycp controllers all decide from it, so that they agree.
//
// Each object's Bytes is its spec as JSON plus its labels and annotations (what
// limits.objectBytes counts).
func Objects(lbs []kubelbv1alpha1.LoadBalancer, routes []kubelbv1alpha1.Route, t settings.Tenant) []Object {
	out := make([]Object, 0, len(lbs)+len(routes))
	for i := range lbs {
		if o, ok := loadBalancerObject(&lbs[i], t); ok {
			out = append(out, o)
		}
	}
	for i := range routes {
		if o, ok := routeObject(&routes[i], t); ok {
			out = append(out, o)
		}
	}
	return out
}

// loadBalancerObject is what Admit needs of one LoadBalancer (false: being deleted). It
// depends on t only through loadBalancerSettings.
func loadBalancerObject(lb *kubelbv1alpha1.LoadBalancer, t settings.Tenant) (Object, bool) {
	if !lb.DeletionTimestamp.IsZero() {
		return Object{}, false
	}
	o := Object{Kind: KindLoadBalancer, Name: lb.Name, Created: lb.CreationTimestamp.Time, Bytes: LoadBalancerBytes(lb)}
	if !t.DisableLoadBalancer {
		ports, _ := LoadBalancerPorts(lb)
		o.Ports = len(ports)
		if LoadBalancerTakesNodePorts(lb, t.AllocateNodePorts) {
			o.NodePorts = len(ports)
		}
		if !t.DNS.IsZero() {
			if h, err := translate.LoadBalancerHostname(lb, hubnames.TenantName(lb.Namespace), t.DNS); err == nil && h != "" {
				o.Shared, o.SharedPorts = sharedIngress, IngressServicePorts
				if t.AllocateNodePorts {
					o.SharedNodePorts = IngressServicePorts
				}
			}
		}
	}
	return o, true
}

// LoadBalancerTakesNodePorts reports whether the hub Service of lb takes hub NodePorts
// (one per port) under the tenant's allocateNodePorts: only with allocateNodePorts on, and
// then when its type is NodePort or LoadBalancer. Without allocateNodePorts a LoadBalancer
// of spec.type NodePort gets a hub Service of type ClusterIP: no hub Service of a tenant
// takes a NodePort the tenant's settings do not allow.
func LoadBalancerTakesNodePorts(lb *kubelbv1alpha1.LoadBalancer, allocateNodePorts bool) bool {
	return allocateNodePorts && (lb.Spec.Type == corev1.ServiceTypeNodePort || lb.Spec.Type == corev1.ServiceTypeLoadBalancer)
}

// loadBalancerSettings is what of the tenant's settings loadBalancerObject reads.
type loadBalancerSettings struct {
	disabled          bool
	allocateNodePorts bool
	wildcardDomain    string
	allowExplicit     bool
	reservedDomains   string // joined by ","
}

// lbSettings is loadBalancerSettings of t.
func lbSettings(t settings.Tenant) loadBalancerSettings {
	return loadBalancerSettings{disabled: t.DisableLoadBalancer, allocateNodePorts: t.AllocateNodePorts,
		wildcardDomain: t.DNS.WildcardDomain, allowExplicit: t.DNS.AllowExplicitHostnames, reservedDomains: strings.Join(t.DNS.ReservedDomains, ",")}
}

// routeObject is what Admit needs of one Route (false: being deleted). It depends on t only
// through routeSettings.
func routeObject(rt *kubelbv1alpha1.Route, t settings.Tenant) (Object, bool) {
	if !rt.DeletionTimestamp.IsZero() {
		return Object{}, false
	}
	o := Object{Kind: KindRoute, Name: rt.Name, Created: rt.CreationTimestamp.Time, Bytes: RouteBytes(rt)}
	kind, _ := routekind.Of(rt)
	switch kind.HubService() {
	case routekind.OwnHubService:
		if !t.DisableGatewayAPI && routekind.ValidRouteName(rt.Name) {
			// The UDP ports of its HTTP/3 count as any (routekind.HTTP3Ports).
			ports, _ := routekind.GatewayRoutePorts(rt, nil, routekind.ClientTrafficAllowed(t.Upstream.TrafficPolicies))
			o.Ports = len(ports)
			if t.AllocateNodePorts {
				o.NodePorts = len(ports)
			}
		}
	case routekind.NoHubService:
		// A ListenerSet's listener ports are its Gateway's, and counted here, each distinct
		// port of the ListenerSet once, even when the Gateway already has it (the Gateway's
		// hub Service is the ListenerSet's only when the Gateway takes it).
		if kind == routekind.ListenerSet && !t.DisableGatewayAPI {
			ports, _ := routekind.GatewayPorts(&rt.Spec.Source.Kubernetes.Route)
			o.Ports = len(ports)
			if t.AllocateNodePorts {
				o.NodePorts = len(ports)
			}
		}
	case routekind.SharedIngressService:
		if !t.DisableIngress {
			o.Shared, o.SharedPorts = sharedIngress, IngressServicePorts
			if t.AllocateNodePorts {
				o.SharedNodePorts = IngressServicePorts
			}
		}
	}
	return o, true
}

// routeSettings is what of the tenant's settings routeObject reads.
type routeSettings struct{ disableGatewayAPI, disableIngress, allocateNodePorts, clientTraffic bool }

// routeSettingsOf is routeSettings of t.
func routeSettingsOf(t settings.Tenant) routeSettings {
	return routeSettings{disableGatewayAPI: t.DisableGatewayAPI, disableIngress: t.DisableIngress, allocateNodePorts: t.AllocateNodePorts,
		clientTraffic: routekind.ClientTrafficAllowed(t.Upstream.TrafficPolicies)}
}

// Admission is the tenant's verdict (Admit) over its LoadBalancers and Routes.
func Admission(namespace string, lbs []kubelbv1alpha1.LoadBalancer, routes []kubelbv1alpha1.Route, t settings.Tenant) Verdict {
	return Admit(namespace, Objects(lbs, routes, t), t.Limits)
}

// LoadAdmission lists the tenant's LoadBalancers and Routes from c (a cache) and returns
// Admission over them.
func LoadAdmission(ctx context.Context, c client.Reader, namespace string, t settings.Tenant) (Verdict, error) {
	lbs := &kubelbv1alpha1.LoadBalancerList{}
	if err := c.List(ctx, lbs, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return Verdict{}, fmt.Errorf("listing the LoadBalancers of %s: %w", namespace, err)
	}
	routes := &kubelbv1alpha1.RouteList{}
	if err := c.List(ctx, routes, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return Verdict{}, fmt.Errorf("listing the Routes of %s: %w", namespace, err)
	}
	return Admission(namespace, lbs.Items, routes.Items, t), nil
}
