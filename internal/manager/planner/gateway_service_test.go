package planner

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/routekind"
	"kubelb.dev/kubelb/internal/settings"
)

// gatewayEmbedded is an embedded Gateway without listeners.
func gatewayEmbedded() unstructured.Unstructured {
	return unstructured.Unstructured{Object: map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway"}}
}

func TestPortName(t *testing.T) {
	t.Parallel()
	if got := GatewayPortName(routekind.ListenerPort{Protocol: corev1.ProtocolTCP, Port: 53}); got != "tcp-53" {
		t.Errorf("TCP 53: %s", got)
	}
	if got := GatewayPortName(routekind.ListenerPort{Protocol: corev1.ProtocolUDP, Port: 53}); got != "udp-53" {
		t.Errorf("UDP 53: %s", got)
	}
}

func TestGatewayService(t *testing.T) {
	t.Parallel()
	rt := &kubelbv1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "r1", UID: "uid-1", Labels: map[string]string{
		kubelbv1alpha1.LabelOriginName: "gw", kubelbv1alpha1.LabelOriginNamespace: "shop", kubelbv1alpha1.LabelOriginResourceKind: "not a label value!",
	}}}
	rt.Spec.Source.Kubernetes = &kubelbv1alpha1.KubernetesSource{Route: gatewayEmbedded()}
	rt.Spec.Source.Kubernetes.Route.SetAnnotations(map[string]string{"ok.example.com/a": "1", "bad key/with/slashes": "2"})
	tenant := settings.Tenant{GatewayClass: ptr.To("gw-class"), AnnotationSettings: kubelbv1alpha1.AnnotationSettings{PropagateAllAnnotations: ptr.To(true)}}
	svc := GatewayService(rt, tenant, []Port{{Name: "tcp-80", Protocol: corev1.ProtocolTCP, Port: 80, Target: 10001}}, nil, netip.Addr{}, false)
	if *svc.Name != "gateway-r1" || *svc.Namespace != "tenant-a" || *svc.Spec.LoadBalancerClass != "gw-class" || *svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		t.Errorf("service %s/%s %+v", *svc.Namespace, *svc.Name, svc.Spec)
	}
	wantLabels := map[string]string{
		kubelbv1alpha1.LabelManagedBy: "kubelb", kubelbv1alpha1.LabelTenantName: "a", kubelbv1alpha1.LabelRouteName: "r1",
		kubelbv1alpha1.LabelOriginName: "gw", kubelbv1alpha1.LabelOriginNamespace: "shop",
	}
	if diff := cmp.Diff(wantLabels, svc.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"ok.example.com/a": "1"}, svc.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if p := svc.Spec.Ports[0]; *p.Name != "tcp-80" || *p.Port != 80 || *p.TargetPort != intstr.FromInt32(10001) {
		t.Errorf("port %+v", p)
	}
	if o := svc.OwnerReferences[0]; *o.Kind != "Route" || *o.UID != "uid-1" || !*o.Controller {
		t.Errorf("owner %+v", o)
	}
}

// TestGatewayServiceInfrastructureAnnotations: a Gateway's spec.infrastructure.annotations
// reach its hub Service only through the tenant's annotation settings, like its own
// annotations (which win over them): with propagateAllAnnotations, not those steering a hub
// load balancer nor kubelb's own; with an allowlist, only what it lists. Its
// spec.infrastructure.labels never reach the hub Service.
func TestGatewayServiceInfrastructureAnnotations(t *testing.T) {
	t.Parallel()
	rt := &kubelbv1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "r1", UID: "uid-1"}}
	rt.Spec.Source.Kubernetes = &kubelbv1alpha1.KubernetesSource{Route: gatewayEmbedded()}
	rt.Spec.Source.Kubernetes.Route.Object["spec"] = map[string]any{"infrastructure": map[string]any{
		"annotations": map[string]any{
			"example.com/owner": "shop-team", "example.com/cost-centre": "42",
			"metallb.universe.tf/loadBalancerIPs": "192.0.2.99", "kubelb.k8c.io/request-timeout": "1s",
		},
		"labels": map[string]any{"team": "shop"},
	}}
	rt.Spec.Source.Kubernetes.Route.SetAnnotations(map[string]string{"example.com/cost-centre": "7"})
	ports := []Port{{Name: "tcp-80", Protocol: corev1.ProtocolTCP, Port: 80, Target: 10001}}

	all := settings.Tenant{AnnotationSettings: kubelbv1alpha1.AnnotationSettings{PropagateAllAnnotations: ptr.To(true)}}
	svc := GatewayService(rt, all, ports, nil, netip.Addr{}, false)
	if diff := cmp.Diff(map[string]string{"example.com/owner": "shop-team", "example.com/cost-centre": "7"}, svc.Annotations); diff != "" {
		t.Errorf("propagateAllAnnotations: annotations (-want +got):\n%s", diff)
	}
	if _, ok := svc.Labels["team"]; ok {
		t.Errorf("an infrastructure label on the hub Service: %v", svc.Labels)
	}
	listed := settings.Tenant{AnnotationSettings: kubelbv1alpha1.AnnotationSettings{PropagatedAnnotations: &map[string]string{"example.com/owner": ""}}}
	if diff := cmp.Diff(map[string]string{"example.com/owner": "shop-team"}, GatewayService(rt, listed, ports, nil, netip.Addr{}, false).Annotations); diff != "" {
		t.Errorf("allowlist: annotations (-want +got):\n%s", diff)
	}
	if got := GatewayService(rt, settings.Tenant{}, ports, nil, netip.Addr{}, false).Annotations; len(got) != 0 {
		t.Errorf("no annotation settings: annotations %v", got)
	}
	if got := all.DroppedSteeringAnnotations(gatewayAnnotations(rt)); !slices.Equal(got, []string{"metallb.universe.tf/loadBalancerIPs"}) {
		t.Errorf("dropped steering annotations %v", got)
	}
}

// TestServiceNodePorts: the Gateway and Ingress hub Services follow allocateNodePorts as
// LoadBalancers' do: off, allocateLoadBalancerNodePorts false and nodePort 0 for a port the
// Service still has a NodePort for (matched by port and protocol); on, no nodePort at all.
func TestServiceNodePorts(t *testing.T) {
	t.Parallel()
	rt := &kubelbv1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "r1", UID: "uid-1"}}
	rt.Spec.Source.Kubernetes = &kubelbv1alpha1.KubernetesSource{Route: gatewayEmbedded()}
	ports := []Port{{Name: "tcp-53", Protocol: corev1.ProtocolTCP, Port: 53, Target: 10001}, {Name: "udp-53", Protocol: corev1.ProtocolUDP, Port: 53, Target: 10002}}
	existing := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{
		{Port: 53, Protocol: corev1.ProtocolUDP, NodePort: 30053}, {Port: 53, Protocol: corev1.ProtocolTCP}}}}
	off, on := settings.Tenant{AllocateNodePorts: false}, settings.Tenant{AllocateNodePorts: true}
	for name, spec := range map[string]*corev1ac.ServiceSpecApplyConfiguration{
		"gateway": GatewayService(rt, off, ports, existing, netip.Addr{}, false).Spec,
		"ingress": IngressService("tenant-a", off, ports, nil, false, existing).Spec,
	} {
		if ptr.Deref(spec.AllocateLoadBalancerNodePorts, true) {
			t.Errorf("%s off: allocateLoadBalancerNodePorts %v, want false", name, spec.AllocateLoadBalancerNodePorts)
		}
		if spec.Ports[0].NodePort != nil || spec.Ports[1].NodePort == nil || *spec.Ports[1].NodePort != 0 {
			t.Errorf("%s off: nodePorts %v, %v: want nothing for TCP 53, 0 for UDP 53 (which has one)", name, spec.Ports[0].NodePort, spec.Ports[1].NodePort)
		}
	}
	for name, spec := range map[string]*corev1ac.ServiceSpecApplyConfiguration{
		"gateway": GatewayService(rt, on, ports, existing, netip.Addr{}, false).Spec,
		"ingress": IngressService("tenant-a", on, ports, nil, false, existing).Spec,
	} {
		if !ptr.Deref(spec.AllocateLoadBalancerNodePorts, false) || spec.Ports[1].NodePort != nil {
			t.Errorf("%s on: allocateLoadBalancerNodePorts %v nodePort %v", name, spec.AllocateLoadBalancerNodePorts, spec.Ports[1].NodePort)
		}
	}
}
