package loadbalancer

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

func TestPlanPorts(t *testing.T) {
	t.Parallel()
	lb := objects.MirroredLoadBalancer(
		kubelbv1alpha1.LoadBalancerPort{Port: 80},
		kubelbv1alpha1.LoadBalancerPort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53},
		kubelbv1alpha1.LoadBalancerPort{Protocol: corev1.ProtocolTCP, Port: 80},                // same key as the first
		kubelbv1alpha1.LoadBalancerPort{Name: "other", Protocol: corev1.ProtocolUDP, Port: 53}, // same number+protocol
		kubelbv1alpha1.LoadBalancerPort{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53},
	)
	ports, problems := planPorts(lb)
	var keys []string
	for _, p := range ports {
		keys = append(keys, p.Key.String())
	}
	want := []string{"tenant-a/0b5f3c1e-uid/TCP/80", "tenant-a/0b5f3c1e-uid/UDP/dns", "tenant-a/0b5f3c1e-uid/TCP/dns-tcp"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	if len(problems) != 2 {
		t.Errorf("problems = %q, want 2", problems)
	}
}

func TestReadyCondition(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	for _, tc := range []struct {
		o      outcome
		status metav1.ConditionStatus
		reason string
	}{
		{outcome{hasAddress: true}, metav1.ConditionTrue, ReasonAddressAssigned},
		{outcome{}, metav1.ConditionFalse, ReasonWaitingForAddress},
		{outcome{problems: []string{"x"}, hasAddress: true}, metav1.ConditionFalse, ReasonInvalidPorts},
		{outcome{exhausted: boom, problems: []string{"x"}, hasAddress: true}, metav1.ConditionFalse, ReasonPortsExhausted},
		{outcome{serviceErr: boom, exhausted: boom}, metav1.ConditionFalse, ReasonServiceFailed},
		{outcome{noPorts: true, serviceErr: boom}, metav1.ConditionFalse, ReasonNoPorts},
		{outcome{disabled: true, noPorts: true}, metav1.ConditionFalse, ReasonLoadBalancingDisabled},
		{outcome{serviceType: corev1.ServiceTypeLoadBalancer}, metav1.ConditionFalse, ReasonWaitingForAddress},
		{outcome{serviceType: corev1.ServiceTypeClusterIP}, metav1.ConditionTrue, ReasonNoExternalAddress},
		{outcome{serviceType: corev1.ServiceTypeNodePort}, metav1.ConditionTrue, ReasonNoExternalAddress},
		{outcome{serviceType: corev1.ServiceTypeClusterIP, unsupportedType: "ExternalName"}, metav1.ConditionFalse, ReasonUnsupportedType},
		{outcome{serviceType: corev1.ServiceTypeClusterIP, problems: []string{"x"}}, metav1.ConditionFalse, ReasonInvalidPorts},
	} {
		c := readyCondition(tc.o, 7)
		if c.Status != tc.status || c.Reason != tc.reason || c.ObservedGeneration != 7 || c.Type != ConditionReady || c.Message == "" {
			t.Errorf("readyCondition(%+v) = %+v, want %s/%s", tc.o, c, tc.status, tc.reason)
		}
	}
}

func TestNextStatus(t *testing.T) {
	t.Parallel()
	lb := objects.MirroredLoadBalancer(kubelbv1alpha1.LoadBalancerPort{Port: 80}, kubelbv1alpha1.LoadBalancerPort{Port: 81})
	lb.Status.Hostname = &kubelbv1alpha1.HostnameStatus{Hostname: "kept.example.com"}
	ports, _ := planPorts(lb)
	alloc := map[portalloc.Key]int32{ports[0].Key: 10000} // 81 not allocated
	svc := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}, Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{
		Ingress: []corev1.LoadBalancerIngress{{IP: "127.0.0.10"}},
	}}}
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := nextStatus(lb, svc, corev1.ServiceTypeLoadBalancer, ports, alloc, readyCondition(outcome{hasAddress: true}, lb.Generation), t0)
	want := kubelbv1alpha1.LoadBalancerStatus{
		LoadBalancer: svc.Status.LoadBalancer,
		Service: kubelbv1alpha1.ServiceStatus{Ports: []kubelbv1alpha1.ServicePort{{
			ServicePort:        corev1.ServicePort{Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(10000)},
			UpstreamTargetPort: 10000,
		}}},
		Hostname: lb.Status.Hostname,
		Conditions: []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: 3,
			LastTransitionTime: t0, Reason: ReasonAddressAssigned, Message: "The hub Service has an address."}},
		ObservedGeneration: 3,
	}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	// Same condition later: the transition time stays, so the status is unchanged.
	lb.Status = st
	again := nextStatus(lb, svc, corev1.ServiceTypeLoadBalancer, ports, alloc, readyCondition(outcome{hasAddress: true}, lb.Generation), metav1.NewTime(t0.Add(time.Hour)))
	if diff := cmp.Diff(st, again); diff != "" {
		t.Errorf("unchanged input changed the status:\n%s", diff)
	}
	// No hub Service: the address goes away.
	gone := nextStatus(lb, nil, corev1.ServiceTypeLoadBalancer, ports, alloc, readyCondition(outcome{disabled: true}, lb.Generation), t0)
	if len(gone.LoadBalancer.Ingress) != 0 || len(gone.Service.Ports) != 1 {
		t.Errorf("status without hub Service: %+v", gone)
	}
}

// TestNextStatusByType: the address shows only for a hub Service of type LoadBalancer, the
// NodePorts for NodePort and LoadBalancer, and neither while the hub Service still has
// another type than the one it should have.
func TestNextStatusByType(t *testing.T) {
	t.Parallel()
	lb := objects.MirroredLoadBalancer(kubelbv1alpha1.LoadBalancerPort{Port: 80})
	ports, _ := planPorts(lb)
	alloc := map[portalloc.Key]int32{ports[0].Key: 10000}
	svc := func(typ corev1.ServiceType) *corev1.Service {
		return &corev1.Service{
			Spec:   corev1.ServiceSpec{Type: typ, Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 30080}}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "127.0.0.10"}}}},
		}
	}
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cond := readyCondition(outcome{}, 3)
	for _, tc := range []struct {
		name      string
		has, want corev1.ServiceType
		address   bool
		nodePort  int32
	}{
		{"LoadBalancer", corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeLoadBalancer, true, 30080},
		{"NodePort", corev1.ServiceTypeNodePort, corev1.ServiceTypeNodePort, false, 30080},
		{"ClusterIP", corev1.ServiceTypeClusterIP, corev1.ServiceTypeClusterIP, false, 0},
		{"LoadBalancer becoming ClusterIP", corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeClusterIP, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := nextStatus(lb, svc(tc.has), tc.want, ports, alloc, cond, t0)
			if got := len(st.LoadBalancer.Ingress) > 0; got != tc.address {
				t.Errorf("address shown: %v, want %v", got, tc.address)
			}
			if got := st.Service.Ports[0].NodePort; got != tc.nodePort {
				t.Errorf("nodePort %d, want %d", got, tc.nodePort)
			}
		})
	}
}

// TestWaitingForAddressSaysWhoShouldServe: a hub Service without an address says which
// load-balancer class it waits for and who should serve it; the ccm carries the message to
// the tenant Service (condition kubelb.k8c.io/AddressAssigned and a Warning Event).
func TestWaitingForAddressSaysWhoShouldServe(t *testing.T) {
	class := "example.com/lb"
	c := readyCondition(outcome{lbClass: &class, hubService: "tenant-a/lb-x"}, 1)
	if c.Reason != ReasonWaitingForAddress || !strings.Contains(c.Message, `hub Service tenant-a/lb-x`) ||
		!strings.Contains(c.Message, `load-balancer class "example.com/lb"`) || !strings.Contains(c.Message, "spec.loadBalancer.class of the Tenant or Config") {
		t.Errorf("with a class: %+v", c)
	}
	c = readyCondition(outcome{hubService: "tenant-a/lb-x"}, 1)
	if c.Reason != ReasonWaitingForAddress || !strings.Contains(c.Message, "names no load-balancer class") ||
		!strings.Contains(c.Message, "--address-provider=node-ip or ipam") {
		t.Errorf("without a class: %+v", c)
	}
	// kubelb's own address provider says why itself.
	c = readyCondition(outcome{addressPending: "no AddressPool is the default"}, 1)
	if c.Message != "The hub Service has no address: no AddressPool is the default" {
		t.Errorf("provider's reason: %+v", c)
	}
}

// TestIPFamiliesStatus: the status shows the IP families the hub Service got, whatever its
// type, and a refusal of the families asked for is its own reason, with what to do.
func TestIPFamiliesStatus(t *testing.T) {
	t.Parallel()
	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
	lb := objects.MirroredLoadBalancer(kubelbv1alpha1.LoadBalancerPort{Port: 80})
	ports, _ := planPorts(lb)
	alloc := map[portalloc.Key]int32{ports[0].Key: 10000}
	cip := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, IPFamilies: []corev1.IPFamily{v6, v4}}}
	st := nextStatus(lb, cip, corev1.ServiceTypeClusterIP, ports, alloc, readyCondition(outcome{serviceType: corev1.ServiceTypeClusterIP}, lb.Generation), metav1.Now())
	if diff := cmp.Diff([]corev1.IPFamily{v6, v4}, st.Service.IPFamilies); diff != "" {
		t.Errorf("status.service.ipFamilies of a ClusterIP hub Service (-want +got):\n%s", diff)
	}
	if st := nextStatus(lb, nil, corev1.ServiceTypeLoadBalancer, ports, alloc, readyCondition(outcome{}, lb.Generation), metav1.Now()); st.Service.IPFamilies != nil {
		t.Errorf("status.service.ipFamilies %v without a hub Service", st.Service.IPFamilies)
	}

	// The refusal is its own reason, with what to do.
	c := readyCondition(outcome{familyErr: errors.New(`Service "x" is invalid: spec.ipFamilyPolicy: Invalid value: "RequireDualStack": this cluster is not configured for dual-stack services`)}, 1)
	if c.Reason != ReasonIPFamilyUnavailable || !strings.Contains(c.Message, "not configured for dual-stack") || !strings.Contains(c.Message, "PreferDualStack") {
		t.Errorf("Ready %+v", c)
	}
}
