package planner

import (
	"errors"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/hubservice"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/quota"
	"kubelb.dev/kubelb/internal/settings"
)

// LoadBalancerFieldOwner is the server-side apply field manager of the LoadBalancers' hub
// Services (and of their hostname Certificates, which the LoadBalancer controller applies).
const LoadBalancerFieldOwner = "kubelb-manager-loadbalancer"

// AllocatedLoadBalancerPorts returns the ports that have a listener port, in order.
func AllocatedLoadBalancerPorts(ports []quota.LoadBalancerPort, alloc map[portalloc.Key]int32) []quota.LoadBalancerPort {
	out := make([]quota.LoadBalancerPort, 0, len(ports))
	for _, p := range ports {
		if alloc[p.Key] != 0 {
			out = append(out, p)
		}
	}
	return out
}

// HubServiceType is the type of a LoadBalancer's hub Service: its spec.type when that is
// ClusterIP, NodePort or LoadBalancer ("" is the CRD's default, ClusterIP), as KubeLB CE
// does. Any other type (ExternalName, which would not select the Envoy pods) is not
// supported: the hub Service is then of type ClusterIP and supported is false. NodePort
// takes hub NodePorts, so it needs the tenant's allocateNodePorts (allocate): without it
// the hub Service is of type ClusterIP too, and supported is false.
func HubServiceType(lb *kubelbv1alpha1.LoadBalancer, allocate bool) (typ corev1.ServiceType, supported bool) {
	switch lb.Spec.Type {
	case "", corev1.ServiceTypeClusterIP:
		return corev1.ServiceTypeClusterIP, true
	case corev1.ServiceTypeNodePort:
		if !allocate {
			return corev1.ServiceTypeClusterIP, false
		}
		return lb.Spec.Type, true
	case corev1.ServiceTypeLoadBalancer:
		return lb.Spec.Type, true
	}
	return corev1.ServiceTypeClusterIP, false
}

// LoadBalancerService is the hub Service of a LoadBalancer: of the type HubServiceType says, selecting
// the tenant's Envoy pods, one port per allocated LoadBalancer port (port = requested port,
// targetPort = listener port). ports must all be allocated and not empty. existing is the
// hub Service as it is (nil when there is none).
//
// The hub Service has externalTrafficPolicy Local when the LoadBalancer asks for it, and
// whenever it has source ranges (so that Envoy sees the clients' addresses).
//
// Only a Service of type LoadBalancer carries the load balancer class and
// allocateLoadBalancerNodePorts (t.AllocateNodePorts); ClusterIP carries no
// externalTrafficPolicy (the API server refuses these fields on the other types). When
// NodePorts are not to be allocated, a port of existing that still has one is applied with
// nodePort 0 (hubservice.NodePorts, shared with the Route controller's hub Services).
func LoadBalancerService(lb *kubelbv1alpha1.LoadBalancer, t settings.Tenant, ports []quota.LoadBalancerPort, alloc map[portalloc.Key]int32, existing *corev1.Service) *corev1ac.ServiceApplyConfiguration {
	typ, _ := HubServiceType(lb, t.AllocateNodePorts)
	labels := map[string]string{
		kubelbv1alpha1.LabelManagedBy:      kubelbv1alpha1.LabelManagedByValue,
		kubelbv1alpha1.LabelLoadBalancerNS: lb.Namespace,
	}
	if len(validation.IsValidLabelValue(lb.Name)) == 0 {
		labels[kubelbv1alpha1.LabelLoadBalancerName] = lb.Name
	}
	// The tenant comes from the namespace, never from the LoadBalancer's own labels: the
	// tenant writes those, and could name another tenant.
	if tenant := hubnames.TenantName(lb.Namespace); len(validation.IsValidLabelValue(tenant)) == 0 {
		labels[kubelbv1alpha1.LabelTenantName] = tenant
	}
	for _, k := range []string{kubelbv1alpha1.LabelOriginName, kubelbv1alpha1.LabelOriginNamespace,
		kubelbv1alpha1.LabelOriginResourceKind} {
		if v, ok := lb.Labels[k]; ok {
			labels[k] = v
		}
	}
	svcPorts := make([]*corev1ac.ServicePortApplyConfiguration, 0, len(ports))
	for _, p := range ports {
		sp := corev1ac.ServicePort().
			WithProtocol(p.Protocol).
			WithPort(p.Port).
			WithTargetPort(intstr.FromInt32(alloc[p.Key]))
		switch {
		case p.Name != "":
			sp.WithName(p.Name)
		case len(ports) > 1: // a Service with several ports must name them all
			sp.WithName(portalloc.GeneratedPortName(p.Protocol, p.Port))
		}
		svcPorts = append(svcPorts, sp)
	}
	etp := corev1.ServiceExternalTrafficPolicyCluster
	// Source ranges are enforced by Envoy against the client's address: with Cluster, a node
	// forwarding to an Envoy pod on another node replaces it by its own (SNAT); with Local the
	// hub's load balancer sends only to nodes with an Envoy pod (healthCheckNodePort) and the
	// address survives.
	if lb.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal || len(lb.Spec.SourceRanges) > 0 {
		etp = corev1.ServiceExternalTrafficPolicyLocal
	}
	spec := corev1ac.ServiceSpec().
		WithType(typ).
		WithSelector(hubnames.EnvoyPodLabels(lb.Namespace)).
		WithPorts(svcPorts...)
	if typ != corev1.ServiceTypeClusterIP {
		spec.WithExternalTrafficPolicy(etp)
	}
	if policy, families := hubIPFamilies(lb); policy != "" {
		spec.WithIPFamilyPolicy(policy).WithIPFamilies(families...)
	}
	if typ == corev1.ServiceTypeLoadBalancer {
		hubservice.NodePorts(spec, t.AllocateNodePorts, existing)
		if t.LoadBalancerClass != nil {
			spec.WithLoadBalancerClass(*t.LoadBalancerClass)
		}
	}
	svc := corev1ac.Service(hubnames.LoadBalancerServiceName(lb.Name), lb.Namespace).
		WithLabels(labels).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(kubelbv1alpha1.GroupVersion.String()).
			WithKind("LoadBalancer").
			WithName(lb.Name).
			WithUID(lb.UID).
			WithController(true).
			WithBlockOwnerDeletion(true)).
		WithSpec(spec)
	a := t.Annotations(kubelbv1alpha1.AnnotatedResourceService, lb.Annotations)
	delete(a, kubelbv1alpha1.AnnotationPortsExhausted) // the manager's, never a tenant's
	if len(a) > 0 {
		svc.WithAnnotations(a)
	}
	return svc
}

// markLoadBalancerExhausted records on the hub Service svc the LoadBalancer ports (planned) that got no
// listener port in alloc because the range is exhausted (AnnotationPortsExhausted): the
// translation reports those as not served (PortNotAllocated), and any other port the hub
// Service lacks as pending. Nothing when every port has one.
func markLoadBalancerExhausted(svc *corev1ac.ServiceApplyConfiguration, planned []quota.LoadBalancerPort, alloc map[portalloc.Key]int32) {
	var missing []hubnames.ServicePortRef
	for _, p := range planned {
		if alloc[p.Key] == 0 {
			missing = append(missing, hubnames.ServicePortRef{Protocol: p.Protocol, Port: p.Port})
		}
	}
	hubservice.MarkExhausted(svc, missing)
}

// hubIPFamilies is what the hub Service asks of the hub's IP families, from the
// LoadBalancer's spec.ipFamilyPolicy and spec.ipFamilies (the tenant Service's, as the ccm
// mirrors them); policy "" leaves both to the hub's defaults (a LoadBalancer without the
// fields, as KubeLB CE's ccm writes it; ipFamilies alone are not read).
//   - SingleStack: the first family asked for (none: the hub's primary family);
//   - PreferDualStack: the policy only, so that the hub Service gets what the hub has: both
//     families on a dual-stack hub, the one it has otherwise (the API server refuses
//     PreferDualStack with a family it does not have, even as the second one);
//   - RequireDualStack: the policy and the families in their order; a single-stack hub refuses
//     it (ReasonIPFamilyUnavailable).
func hubIPFamilies(lb *kubelbv1alpha1.LoadBalancer) (corev1.IPFamilyPolicy, []corev1.IPFamily) {
	families := lb.Spec.IPFamilies
	for _, f := range families { // the CRD checks them; a family it does not know is left out
		if f != corev1.IPv4Protocol && f != corev1.IPv6Protocol {
			families = nil
		}
	}
	if len(families) == 2 && families[0] == families[1] {
		families = families[:1]
	}
	switch p := ptr.Deref(lb.Spec.IPFamilyPolicy, ""); p {
	case corev1.IPFamilyPolicySingleStack:
		if len(families) > 1 {
			families = families[:1]
		}
		return p, slices.Clone(families)
	case corev1.IPFamilyPolicyPreferDualStack:
		return p, nil
	case corev1.IPFamilyPolicyRequireDualStack:
		return p, slices.Clone(families)
	}
	return "", nil
}

// IsIPFamilyRefusal reports whether the API server refused a Service for its IP families
// (a cause on spec.ipFamilyPolicy or spec.ipFamilies: the hub's Service range lacks a family).
func IsIPFamilyRefusal(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == "spec.ipFamilyPolicy" || strings.HasPrefix(c.Field, "spec.ipFamilies") {
			return true
		}
	}
	return false
}
