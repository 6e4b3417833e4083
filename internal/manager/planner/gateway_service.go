package planner

import (
	"maps"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/routekind"
	"kubelb.dev/kubelb/internal/settings"
)

// GatewayPortName is a Gateway Service port's name: "<protocol>-<port>" in lower case, e.g. "tcp-443".
func GatewayPortName(p routekind.ListenerPort) string {
	return portalloc.GeneratedPortName(p.Protocol, p.Port)
}

// AllocatedGatewayPorts returns the Gateway ports that have a listener port.
func AllocatedGatewayPorts(r *kubelbv1alpha1.Route, ports []routekind.ListenerPort, alloc map[portalloc.Key]int32) []Port {
	var out []Port
	for _, p := range ports {
		if t := alloc[portalloc.RouteKey(r.Namespace, r.Name, p.Protocol, p.Port)]; t != 0 {
			out = append(out, Port{Name: GatewayPortName(p), Protocol: p.Protocol, Port: p.Port, Target: t})
		}
	}
	return out
}

// missingGatewayPorts are the Gateway ports without a listener port (the range had none
// left), for hubservice.MarkExhausted.
func missingGatewayPorts(r *kubelbv1alpha1.Route, ports []routekind.ListenerPort, alloc map[portalloc.Key]int32) []hubnames.ServicePortRef {
	var out []hubnames.ServicePortRef
	for _, p := range ports {
		if alloc[portalloc.RouteKey(r.Namespace, r.Name, p.Protocol, p.Port)] == 0 {
			out = append(out, hubnames.ServicePortRef{Protocol: p.Protocol, Port: p.Port})
		}
	}
	return out
}

// GatewayService is the hub Service of a Gateway's Route: type LoadBalancer of the tenant's
// gateway class, selecting the tenant's Envoy pods, one port per allocated listener port
// (port = listener port, targetPort = Envoy listener port), labelled with the Route's name
// and controlled by the Route; hub NodePorts as the tenant's allocateNodePorts says
// (serviceSpec). ports must not be empty; existing is the Service as it is (nil: none).
// static, when valid, is the address asked of the hub's load balancer (spec.loadBalancerIP;
// staticAddress decides it).
//
// keepClients (Plan.GatewaysKeepClientAddresses: a SecurityPolicy of the tenant decides by
// client address) gives it externalTrafficPolicy Local, so that the clients' addresses reach
// Envoy; Cluster otherwise.
func GatewayService(r *kubelbv1alpha1.Route, t settings.Tenant, ports []Port, existing *corev1.Service, static netip.Addr, keepClients bool) *corev1ac.ServiceApplyConfiguration {
	labels := BaseLabels(r.Namespace)
	labels[kubelbv1alpha1.LabelRouteName] = r.Name
	for _, k := range []string{kubelbv1alpha1.LabelOriginName, kubelbv1alpha1.LabelOriginNamespace, kubelbv1alpha1.LabelOriginResourceKind} {
		if v, ok := r.Labels[k]; ok && len(validation.IsValidLabelValue(v)) == 0 {
			labels[k] = v
		}
	}
	svc := corev1ac.Service(hubnames.GatewayServiceName(r.Name), r.Namespace).
		WithLabels(labels).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(kubelbv1alpha1.GroupVersion.String()).
			WithKind("Route").
			WithName(r.Name).
			WithUID(r.UID).
			WithController(true).
			WithBlockOwnerDeletion(true)).
		WithSpec(ServiceSpec(r.Namespace, t.GatewayClass, t.AllocateNodePorts, ports, keepClients, existing))
	if static.IsValid() {
		svc.Spec.WithLoadBalancerIP(static.String())
	}
	if a := ValidAnnotations(t.Annotations(kubelbv1alpha1.AnnotatedResourceGateway, gatewayAnnotations(r))); len(a) > 0 {
		svc.WithAnnotations(a)
	}
	return svc
}

// Bounds of the spec.infrastructure.annotations of an embedded Gateway that the hub reads
// (Gateway API's own: at most 8, values of at most 4096 bytes; the embedded object is not
// validated against the Gateway CRD).
const (
	maxInfrastructureAnnotations     = 8
	maxInfrastructureAnnotationValue = 4096
)

// gatewayAnnotations are the annotations of a Gateway's Route that its hub Service may take,
// through the tenant's annotation settings like any (settings.Tenant.Annotations): the
// embedded Gateway's spec.infrastructure.annotations (the first 8 by key, values of at most
// 4096 bytes: Gateway API's annotations "for resources created in response to this
// Gateway"), then its metadata.annotations over them. spec.infrastructure.labels are not
// carried: labels select hub Services for address pools and policies (MetalLB's and Cilium's
// serviceSelectors), which a tenant must not steer.
func gatewayAnnotations(r *kubelbv1alpha1.Route) map[string]string {
	if r.Spec.Source.Kubernetes == nil {
		return nil
	}
	obj := &r.Spec.Source.Kubernetes.Route
	infra, _, _ := unstructured.NestedMap(obj.Object, "spec", "infrastructure", "annotations")
	own := obj.GetAnnotations()
	if len(infra) == 0 {
		return own
	}
	out := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(infra)) {
		if v, ok := infra[k].(string); ok && len(v) <= maxInfrastructureAnnotationValue {
			out[k] = v
			if len(out) == maxInfrastructureAnnotations {
				break
			}
		}
	}
	maps.Copy(out, own)
	return out
}
