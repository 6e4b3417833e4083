package quota

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/translate"
)

// TestAdmitNodePorts: hub NodePorts count one per port of the hub Services that take them —
// LoadBalancers of type NodePort or LoadBalancer, Gateways and the Ingress Service, only
// with allocateNodePorts on — and the object whose NodePorts do not fit in
// limits.nodePorts is refused, oldest first, with a message naming the limit.
func TestAdmitNodePorts(t *testing.T) {
	t.Parallel()
	typed := func(name string, age int, typ corev1.ServiceType, ports int) kubelbv1alpha1.LoadBalancer {
		var ps []kubelbv1alpha1.LoadBalancerPort
		for i := range ports {
			ps = append(ps, kubelbv1alpha1.LoadBalancerPort{Port: int32(80 + i)})
		}
		lb := hubLB(name, t0.Add(time.Duration(age)*time.Second), ps...)
		lb.Spec.Type = typ
		return lb
	}
	lbs := []kubelbv1alpha1.LoadBalancer{
		typed("cip", 0, corev1.ServiceTypeClusterIP, 3), // no NodePorts
		typed("np", 1, corev1.ServiceTypeNodePort, 2),
		typed("lb", 2, corev1.ServiceTypeLoadBalancer, 2),
		typed("late", 3, corev1.ServiceTypeNodePort, 1),
	}
	routes := []kubelbv1alpha1.Route{hubRoute("gw", t0.Add(4*time.Second), gateway(map[string]any{"name": "a", "port": int64(80), "protocol": "HTTP"}))}
	limits := settings.Limits{LoadBalancers: 10, Routes: 10, ListenerPorts: 100, NodePorts: 4, ObjectBytes: 1 << 30}

	on := settings.Tenant{AllocateNodePorts: true, Limits: limits}
	v := Admission("tenant-a", lbs, routes, on)
	if diff := cmp.Diff([]string{"late"}, v.RefusedNames(KindLoadBalancer)); diff != "" {
		t.Errorf("refused LoadBalancers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"gw"}, v.RefusedNames(KindRoute)); diff != "" {
		t.Errorf("refused Routes (-want +got):\n%s", diff)
	}
	if msg, _ := v.Refused(KindLoadBalancer, "late"); !strings.Contains(msg, "4 hub NodePorts (spec.limits.nodePorts)") || !strings.Contains(msg, "older objects hold 4") {
		t.Errorf("message %q", msg)
	}
	if v.UsedNodePorts != 4 || v.UsedPorts != 7 {
		t.Errorf("used %d NodePorts, %d listener ports; want 4, 7", v.UsedNodePorts, v.UsedPorts)
	}

	// Off: nothing takes NodePorts (a NodePort LoadBalancer's hub Service is ClusterIP).
	off := on
	off.AllocateNodePorts = false
	if v := Admission("tenant-a", lbs, routes, off); len(v.RefusedNames(KindLoadBalancer))+len(v.RefusedNames(KindRoute)) != 0 || v.UsedNodePorts != 0 {
		t.Errorf("with NodePorts off: refused %v %v, %d NodePorts", v.RefusedNames(KindLoadBalancer), v.RefusedNames(KindRoute), v.UsedNodePorts)
	}

	// The Ingress Service's two NodePorts are paid once, by the oldest that needs it.
	dns := on
	dns.DNS = translate.DNS{WildcardDomain: "example.com"}
	dns.Limits.NodePorts = 2
	host := typed("host", 5, corev1.ServiceTypeClusterIP, 1)
	objs := Objects([]kubelbv1alpha1.LoadBalancer{host}, []kubelbv1alpha1.Route{hubRoute("ing", t0.Add(6*time.Second), map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress"})}, dns)
	if v := Admit("tenant-a", objs, dns.Limits); v.UsedNodePorts != 2 || len(v.RefusedNames(KindRoute)) != 0 || len(v.RefusedNames(KindLoadBalancer)) != 0 {
		t.Errorf("Ingress Service: %d NodePorts, refused %v %v", v.UsedNodePorts, v.RefusedNames(KindLoadBalancer), v.RefusedNames(KindRoute))
	}
}
