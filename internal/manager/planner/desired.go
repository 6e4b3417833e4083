package planner

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/hubservice"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/settings"
)

// RouteFieldOwner is the server-side apply field manager of the hub Services of Routes: the
// Gateways' and the tenant's Ingress Service.
const RouteFieldOwner = "kubelb-manager-route"

// Port is one port of a hub Service: its name, protocol, tenant-facing port and listener
// port.
type Port struct {
	Name     string
	Protocol corev1.Protocol
	Port     int32
	Target   int32
}

// AnnotationDNSHostname is external-dns's annotation listing the hostnames of a Service's
// address.
const AnnotationDNSHostname = "external-dns.alpha.kubernetes.io/hostname"

// MissingIngressPorts are the Ingress ports without a listener port (the range had none
// left), for hubservice.MarkExhausted.
func MissingIngressPorts(namespace string, alloc map[portalloc.Key]int32) []hubnames.ServicePortRef {
	var out []hubnames.ServicePortRef
	for _, p := range IngressPorts {
		if alloc[portalloc.IngressKey(namespace, p.Port)] == 0 {
			out = append(out, hubnames.ServicePortRef{Protocol: corev1.ProtocolTCP, Port: p.Port})
		}
	}
	return out
}

// AllocatedIngressPorts returns the Ingress ports that have a listener port.
func AllocatedIngressPorts(namespace string, alloc map[portalloc.Key]int32) []Port {
	var out []Port
	for _, p := range IngressPorts {
		if t := alloc[portalloc.IngressKey(namespace, p.Port)]; t != 0 {
			out = append(out, Port{Name: p.Name, Protocol: corev1.ProtocolTCP, Port: p.Port, Target: t})
		}
	}
	return out
}

// IngressService is the tenant's shared Ingress Service "kubelb-ingress": type
// LoadBalancer of the tenant's ingress class, selecting the tenant's Envoy pods, ports
// "http" 80 and "https" 443 (those allocated). It has no owner: the planner deletes
// it when the tenant's last Ingress Route and LoadBalancer hostname go. With the tenant's
// dns.useDNSAnnotations, the external-dns hostname annotation lists hosts (the tenant's
// LoadBalancer hostnames, served on this Service's address). Hub NodePorts as the tenant's
// allocateNodePorts says (ServiceSpec). keepClients (Plan.KeepClientAddresses: a hostname or
// an Ingress limits its clients by address) gives it externalTrafficPolicy Local, so that the
// hub's nodes send its traffic only to their own Envoy pods and the clients' addresses reach
// Envoy; Cluster otherwise. ports must not be empty; existing is the Service as it is (nil:
// none).
func IngressService(namespace string, t settings.Tenant, ports []Port, hosts []string, keepClients bool, existing *corev1.Service) *corev1ac.ServiceApplyConfiguration {
	labels := BaseLabels(namespace)
	labels[kubelbv1alpha1.LabelIngressService] = "true"
	svc := corev1ac.Service(kubelbv1alpha1.IngressServiceName, namespace).
		WithLabels(labels).
		WithSpec(ServiceSpec(namespace, t.IngressClass, t.AllocateNodePorts, ports, keepClients, existing))
	a := ValidAnnotations(t.Annotations(kubelbv1alpha1.AnnotatedResourceIngress, nil))
	if t.UseDNSAnnotations && len(hosts) > 0 {
		if a == nil {
			a = map[string]string{}
		}
		a[AnnotationDNSHostname] = strings.Join(hosts, ",")
	}
	if len(a) > 0 {
		svc.WithAnnotations(a)
	}
	return svc
}

// BaseLabels are the labels of every hub Service of a Route.
func BaseLabels(namespace string) map[string]string {
	labels := map[string]string{kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue}
	if tenant := hubnames.TenantName(namespace); len(validation.IsValidLabelValue(tenant)) == 0 {
		labels[kubelbv1alpha1.LabelTenantName] = tenant
	}
	return labels
}

// ServiceSpec is the spec of a Route's hub Service: type LoadBalancer of class, selecting the
// tenant's Envoy pods, with ports. allocateNodePorts (the tenant's
// spec.loadBalancer.allocateNodePorts) decides its hub NodePorts as for LoadBalancers' hub
// Services (hubservice.NodePorts): off, existing's NodePorts are given back. keepClients
// gives it externalTrafficPolicy Local (the hub's nodes send its traffic only to their own
// Envoy pods, and the clients' addresses reach Envoy), Cluster otherwise.
func ServiceSpec(namespace string, class *string, allocateNodePorts bool, ports []Port, keepClients bool, existing *corev1.Service) *corev1ac.ServiceSpecApplyConfiguration {
	svcPorts := make([]*corev1ac.ServicePortApplyConfiguration, 0, len(ports))
	for _, p := range ports {
		svcPorts = append(svcPorts, corev1ac.ServicePort().
			WithName(p.Name).
			WithProtocol(p.Protocol).
			WithPort(p.Port).
			WithTargetPort(intstr.FromInt32(p.Target)))
	}
	spec := corev1ac.ServiceSpec().
		WithType(corev1.ServiceTypeLoadBalancer).
		WithSelector(hubnames.EnvoyPodLabels(namespace)).
		WithPorts(svcPorts...)
	hubservice.NodePorts(spec, allocateNodePorts, existing)
	if keepClients {
		spec.WithExternalTrafficPolicy(corev1.ServiceExternalTrafficPolicyLocal)
	} else {
		spec.WithExternalTrafficPolicy(corev1.ServiceExternalTrafficPolicyCluster)
	}
	if class != nil {
		spec.WithLoadBalancerClass(*class)
	}
	return spec
}

// ValidAnnotations drops annotations whose key the API server would refuse (a tenant's
// Gateway may carry anything when all annotations are propagated).
func ValidAnnotations(a map[string]string) map[string]string {
	for k := range a {
		if len(validation.IsQualifiedName(strings.ToLower(k))) != 0 {
			delete(a, k)
		}
	}
	return a
}
