package route

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/manager/planner"
	"kubelb.dev/kubelb/internal/routekind"
	"kubelb.dev/kubelb/internal/settings"
)

// gatewayEmbedded is an embedded Gateway without listeners.
func gatewayEmbedded() unstructured.Unstructured {
	return unstructured.Unstructured{Object: map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway"}}
}

func TestPortName(t *testing.T) {
	t.Parallel()
	if got := portName(routekind.ListenerPort{Protocol: corev1.ProtocolTCP, Port: 53}); got != "tcp-53" {
		t.Errorf("TCP 53: %s", got)
	}
	if got := portName(routekind.ListenerPort{Protocol: corev1.ProtocolUDP, Port: 53}); got != "udp-53" {
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
	svc := gatewayService(rt, tenant, []hubPort{{Name: "tcp-80", Protocol: corev1.ProtocolTCP, Port: 80, Target: 10001}}, nil, netip.Addr{})
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
	ports := []hubPort{{Name: "tcp-80", Protocol: corev1.ProtocolTCP, Port: 80, Target: 10001}}

	all := settings.Tenant{AnnotationSettings: kubelbv1alpha1.AnnotationSettings{PropagateAllAnnotations: ptr.To(true)}}
	svc := gatewayService(rt, all, ports, nil, netip.Addr{})
	if diff := cmp.Diff(map[string]string{"example.com/owner": "shop-team", "example.com/cost-centre": "7"}, svc.Annotations); diff != "" {
		t.Errorf("propagateAllAnnotations: annotations (-want +got):\n%s", diff)
	}
	if _, ok := svc.Labels["team"]; ok {
		t.Errorf("an infrastructure label on the hub Service: %v", svc.Labels)
	}
	listed := settings.Tenant{AnnotationSettings: kubelbv1alpha1.AnnotationSettings{PropagatedAnnotations: &map[string]string{"example.com/owner": ""}}}
	if diff := cmp.Diff(map[string]string{"example.com/owner": "shop-team"}, gatewayService(rt, listed, ports, nil, netip.Addr{}).Annotations); diff != "" {
		t.Errorf("allowlist: annotations (-want +got):\n%s", diff)
	}
	if got := gatewayService(rt, settings.Tenant{}, ports, nil, netip.Addr{}).Annotations; len(got) != 0 {
		t.Errorf("no annotation settings: annotations %v", got)
	}
	if got := all.DroppedSteeringAnnotations(gatewayAnnotations(rt)); !slices.Equal(got, []string{"metallb.universe.tf/loadBalancerIPs"}) {
		t.Errorf("dropped steering annotations %v", got)
	}
}

func TestAppliedCondition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		o      outcome
		status metav1.ConditionStatus
		reason string
	}{
		{outcome{kind: routekind.Gateway}, metav1.ConditionTrue, ReasonApplied},
		{outcome{kind: routekind.HTTPRoute}, metav1.ConditionTrue, ReasonApplied},
		{outcome{kind: routekind.Unsupported}, metav1.ConditionFalse, ReasonUnsupportedKind},
		{outcome{kind: routekind.Gateway, disabled: "Gateway API", exhausted: fmt.Errorf("x")}, metav1.ConditionFalse, ReasonDisabled},
		{outcome{kind: routekind.Gateway, exhausted: fmt.Errorf("x"), problems: []string{"p"}}, metav1.ConditionFalse, ReasonPortsExhausted},
		{outcome{kind: routekind.Gateway, problems: []string{"p"}}, metav1.ConditionFalse, ReasonInvalidListeners},
		{outcome{kind: routekind.Gateway, noPorts: true}, metav1.ConditionFalse, ReasonInvalidListeners},
		{outcome{kind: routekind.Gateway, invalidName: true}, metav1.ConditionFalse, ReasonInvalidName},
		{outcome{kind: routekind.Ingress, serviceErr: fmt.Errorf("x")}, metav1.ConditionFalse, ReasonServiceFailed},
	} {
		c := appliedCondition(tc.o, 3)
		if c.Status != tc.status || c.Reason != tc.reason || c.ObservedGeneration != 3 || c.Type != ConditionApplied || c.Message == "" {
			t.Errorf("%+v → %+v", tc.o, c)
		}
	}
}

// TestSetStatus: the status holds the services entry with the hub Service's status,
// keeps a condition's transition time while its status holds, and is unchanged when set
// again (so a settled Route is not written again).
func TestSetStatus(t *testing.T) {
	t.Parallel()
	rt := &kubelbv1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "r1", Generation: 2}}
	rt.Spec.Source.Kubernetes = &kubelbv1alpha1.KubernetesSource{Route: gatewayEmbedded()}
	rt.Spec.Source.Kubernetes.Route.SetName("gw")
	rt.Spec.Source.Kubernetes.Route.SetNamespace("shop")
	svc := &corev1.Service{Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.7"}}}}}
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	o := outcome{kind: routekind.Gateway}
	services := []hubServiceState{{name: "gateway-r1", ports: []hubPort{{Name: "tcp-80", Protocol: corev1.ProtocolTCP, Port: 80, Target: 10001}}, svc: svc}}
	var st kubelbv1alpha1.RouteStatus
	setStatus(&st, rt, o, services, appliedCondition(o, 2), t0)
	entry := st.Resources.Services["tenant-a/gateway-r1"]
	if st.Resources.Source != "Gateway shop/gw" || entry.Name != "gateway-r1" || string(entry.Status.Raw) != `{"loadBalancer":{"ingress":[{"ip":"192.0.2.7"}]}}` ||
		entry.Ports[0].TargetPort.IntVal != 10001 || st.Resources.Route.GeneratedName != "r1" {
		t.Errorf("status %+v", st)
	}

	// Set again on the status it made, an hour later: the same (the time is kept), and the
	// other part's field stays.
	st.Resources.Route.Status = runtime.RawExtension{Raw: []byte(`{"other":"part"}`)}
	again := *st.DeepCopy()
	setStatus(&again, rt, o, services, appliedCondition(o, 2), metav1.NewTime(t0.Add(time.Hour)))
	if !equality.Semantic.DeepEqual(again, st) {
		t.Errorf("an unchanged reconcile changes the status:\n%+v\n%+v", again, st)
	}
	// The address changes: a different status.
	svc2 := svc.DeepCopy()
	svc2.Status.LoadBalancer.Ingress[0].IP = "192.0.2.8"
	changed := *st.DeepCopy()
	setStatus(&changed, rt, o, []hubServiceState{{name: "gateway-r1", ports: services[0].ports, svc: svc2}}, appliedCondition(o, 2), t0)
	if equality.Semantic.DeepEqual(changed, st) {
		t.Errorf("a new address does not change the status")
	}
}

// TestServiceNodePorts: the Gateway and Ingress hub Services follow allocateNodePorts as
// LoadBalancers' do: off, allocateLoadBalancerNodePorts false and nodePort 0 for a port the
// Service still has a NodePort for (matched by port and protocol); on, no nodePort at all.
func TestServiceNodePorts(t *testing.T) {
	t.Parallel()
	rt := &kubelbv1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "r1", UID: "uid-1"}}
	rt.Spec.Source.Kubernetes = &kubelbv1alpha1.KubernetesSource{Route: gatewayEmbedded()}
	ports := []hubPort{{Name: "tcp-53", Protocol: corev1.ProtocolTCP, Port: 53, Target: 10001}, {Name: "udp-53", Protocol: corev1.ProtocolUDP, Port: 53, Target: 10002}}
	existing := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{
		{Port: 53, Protocol: corev1.ProtocolUDP, NodePort: 30053}, {Port: 53, Protocol: corev1.ProtocolTCP}}}}
	off, on := settings.Tenant{AllocateNodePorts: false}, settings.Tenant{AllocateNodePorts: true}
	for name, spec := range map[string]*corev1ac.ServiceSpecApplyConfiguration{
		"gateway": gatewayService(rt, off, ports, existing, netip.Addr{}).Spec,
		"ingress": planner.IngressService("tenant-a", off, ports, nil, existing).Spec,
	} {
		if ptr.Deref(spec.AllocateLoadBalancerNodePorts, true) {
			t.Errorf("%s off: allocateLoadBalancerNodePorts %v, want false", name, spec.AllocateLoadBalancerNodePorts)
		}
		if spec.Ports[0].NodePort != nil || spec.Ports[1].NodePort == nil || *spec.Ports[1].NodePort != 0 {
			t.Errorf("%s off: nodePorts %v, %v: want nothing for TCP 53, 0 for UDP 53 (which has one)", name, spec.Ports[0].NodePort, spec.Ports[1].NodePort)
		}
	}
	for name, spec := range map[string]*corev1ac.ServiceSpecApplyConfiguration{
		"gateway": gatewayService(rt, on, ports, existing, netip.Addr{}).Spec,
		"ingress": planner.IngressService("tenant-a", on, ports, nil, existing).Spec,
	} {
		if !ptr.Deref(spec.AllocateLoadBalancerNodePorts, false) || spec.Ports[1].NodePort != nil {
			t.Errorf("%s on: allocateLoadBalancerNodePorts %v nodePort %v", name, spec.AllocateLoadBalancerNodePorts, spec.Ports[1].NodePort)
		}
	}
}
