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
	"k8s.io/utils/ptr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/settings"
)

func testLB(ports ...kubelbv1alpha1.LoadBalancerPort) *kubelbv1alpha1.LoadBalancer {
	return &kubelbv1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "tenant-a", Name: "0b5f3c1e-uid", UID: "uid-1", Generation: 3,
			Labels: map[string]string{
				kubelbv1alpha1.LabelOriginName: "web", kubelbv1alpha1.LabelOriginNamespace: "default",
				kubelbv1alpha1.LabelTenantName: "a", "unrelated": "x",
			},
			Annotations: map[string]string{"keep.example.com/x": "1", "drop.example.com/y": "2"},
		},
		Spec: kubelbv1alpha1.LoadBalancerSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: ports},
	}
}

func TestPlanPorts(t *testing.T) {
	t.Parallel()
	lb := testLB(
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

func TestHubService(t *testing.T) {
	t.Parallel()
	lb := testLB(kubelbv1alpha1.LoadBalancerPort{Port: 80}, kubelbv1alpha1.LoadBalancerPort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53})
	lb.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	tenant := settings.Resolve(&kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{
		AnnotationSettings: kubelbv1alpha1.AnnotationSettings{
			PropagatedAnnotations: &map[string]string{"keep.example.com/x": ""},
			DefaultAnnotations: map[kubelbv1alpha1.AnnotatedResource]kubelbv1alpha1.Annotations{
				kubelbv1alpha1.AnnotatedResourceService: {"metallb.universe.tf/address-pool": "public"},
			},
		},
		LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{Class: ptr.To("metallb")},
	}}, nil)
	ports, _ := planPorts(lb)
	alloc := map[portalloc.Key]int32{ports[0].Key: 10000, ports[1].Key: 10001}
	svc := hubService(lb, tenant, ports, alloc, nil)

	if *svc.Name != "envoy-0b5f3c1e-uid" || *svc.Namespace != "tenant-a" {
		t.Errorf("name %s/%s", *svc.Namespace, *svc.Name)
	}
	wantLabels := map[string]string{
		"kubelb.k8c.io/managed-by": "kubelb", "kubelb.k8c.io/lb-name": "0b5f3c1e-uid", "kubelb.k8c.io/lb-namespace": "tenant-a",
		"kubelb.k8c.io/origin-name": "web", "kubelb.k8c.io/origin-ns": "default", "kubelb.k8c.io/tenant": "a",
	}
	if diff := cmp.Diff(wantLabels, svc.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	wantAnn := map[string]string{"metallb.universe.tf/address-pool": "public", "keep.example.com/x": "1"}
	if diff := cmp.Diff(wantAnn, svc.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if len(svc.OwnerReferences) != 1 || *svc.OwnerReferences[0].UID != "uid-1" || !*svc.OwnerReferences[0].Controller {
		t.Errorf("owner references %+v", svc.OwnerReferences)
	}
	s := svc.Spec
	if *s.Type != corev1.ServiceTypeLoadBalancer || *s.LoadBalancerClass != "metallb" || *s.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal ||
		!ptr.Deref(s.AllocateLoadBalancerNodePorts, false) {
		t.Errorf("type %s class %s etp %s allocateLoadBalancerNodePorts %v", *s.Type, *s.LoadBalancerClass, *s.ExternalTrafficPolicy, s.AllocateLoadBalancerNodePorts)
	}
	if diff := cmp.Diff(hubnames.EnvoyPodLabels("tenant-a"), s.Selector); diff != "" {
		t.Errorf("selector: %s", diff)
	}
	type port struct {
		Name     string
		Protocol corev1.Protocol
		Port     int32
		Target   int32
	}
	var got []port
	for _, p := range s.Ports {
		got = append(got, port{ptr.Deref(p.Name, ""), *p.Protocol, *p.Port, p.TargetPort.IntVal})
	}
	// The unnamed port gets a name because the Service has two ports.
	want := []port{{"tcp-80", corev1.ProtocolTCP, 80, 10000}, {"dns", corev1.ProtocolUDP, 53, 10001}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}

	// One unnamed port stays unnamed; no class and an unknown policy give Cluster and no class.
	lb.Spec.ExternalTrafficPolicy = "Bogus"
	svc = hubService(lb, settings.Tenant{}, ports[:1], alloc, nil)
	if svc.Spec.Ports[0].Name != nil || svc.Spec.LoadBalancerClass != nil || *svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster || svc.Annotations != nil {
		t.Errorf("single port service: %+v", svc.Spec)
	}

	// Source ranges need the clients' addresses at Envoy: the hub Service keeps them
	// (externalTrafficPolicy Local) whatever the tenant Service's own policy.
	lb.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	lb.Spec.SourceRanges = []string{"203.0.113.0/24"}
	svc = hubService(lb, settings.Tenant{}, ports[:1], alloc, nil)
	if *svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		t.Errorf("with source ranges: externalTrafficPolicy %s, want Local", *svc.Spec.ExternalTrafficPolicy)
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
	lb := testLB(kubelbv1alpha1.LoadBalancerPort{Port: 80}, kubelbv1alpha1.LoadBalancerPort{Port: 81})
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

// TestHubServiceTypes: spec.type decides the hub Service's type, and only the fields that
// type allows are applied (the API server refuses the others).
func TestHubServiceTypes(t *testing.T) {
	t.Parallel()
	tenant := settings.Tenant{LoadBalancerClass: ptr.To("metallb"), AllocateNodePorts: true}
	for _, tc := range []struct {
		spec      corev1.ServiceType
		want      corev1.ServiceType
		supported bool
		etp, lb   bool // externalTrafficPolicy; class and allocateLoadBalancerNodePorts
	}{
		{"", corev1.ServiceTypeClusterIP, true, false, false}, // the CRD's default
		{corev1.ServiceTypeClusterIP, corev1.ServiceTypeClusterIP, true, false, false},
		{corev1.ServiceTypeNodePort, corev1.ServiceTypeNodePort, true, true, false},
		{corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeLoadBalancer, true, true, true},
		{corev1.ServiceTypeExternalName, corev1.ServiceTypeClusterIP, false, false, false},
		{"Bogus", corev1.ServiceTypeClusterIP, false, false, false},
	} {
		t.Run(string(tc.spec), func(t *testing.T) {
			lb := testLB(kubelbv1alpha1.LoadBalancerPort{Port: 80})
			lb.Spec.Type = tc.spec
			typ, supported := hubServiceType(lb, true)
			if typ != tc.want || supported != tc.supported {
				t.Fatalf("hubServiceType = %s, %v; want %s, %v", typ, supported, tc.want, tc.supported)
			}
			// Without allocateNodePorts, NodePort becomes ClusterIP (no hub NodePort); the
			// others stay.
			noNP, npSupported := hubServiceType(lb, false)
			if tc.spec == corev1.ServiceTypeNodePort && (noNP != corev1.ServiceTypeClusterIP || npSupported) {
				t.Errorf("hubServiceType without NodePorts = %s, %v; want ClusterIP, false", noNP, npSupported)
			} else if tc.spec != corev1.ServiceTypeNodePort && (noNP != typ || npSupported != supported) {
				t.Errorf("hubServiceType without NodePorts = %s, %v; want %s, %v", noNP, npSupported, typ, supported)
			}
			ports, _ := planPorts(lb)
			s := hubService(lb, tenant, ports, map[portalloc.Key]int32{ports[0].Key: 10000}, nil).Spec
			if *s.Type != tc.want || (s.ExternalTrafficPolicy != nil) != tc.etp ||
				(s.LoadBalancerClass != nil) != tc.lb || (s.AllocateLoadBalancerNodePorts != nil) != tc.lb {
				t.Errorf("type %s, externalTrafficPolicy %v, class %v, allocateLoadBalancerNodePorts %v",
					*s.Type, s.ExternalTrafficPolicy, s.LoadBalancerClass, s.AllocateLoadBalancerNodePorts)
			}
		})
	}
}

// TestHubServiceWithoutNodePorts: with the tenant's NodePorts switched off, the hub Service
// of type LoadBalancer asks for none, and takes back (nodePort 0) those it still has.
func TestHubServiceWithoutNodePorts(t *testing.T) {
	t.Parallel()
	lb := testLB(kubelbv1alpha1.LoadBalancerPort{Port: 80}, kubelbv1alpha1.LoadBalancerPort{Port: 53, Protocol: corev1.ProtocolUDP})
	ports, _ := planPorts(lb)
	alloc := map[portalloc.Key]int32{ports[0].Key: 10000, ports[1].Key: 10001}
	existing := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{
		{Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 30080}, {Port: 53, Protocol: corev1.ProtocolUDP}}}}
	off := settings.Tenant{AllocateNodePorts: false}
	s := hubService(lb, off, ports, alloc, existing).Spec
	if ptr.Deref(s.AllocateLoadBalancerNodePorts, true) {
		t.Errorf("allocateLoadBalancerNodePorts %v, want false", s.AllocateLoadBalancerNodePorts)
	}
	if s.Ports[0].NodePort == nil || *s.Ports[0].NodePort != 0 || s.Ports[1].NodePort != nil {
		t.Errorf("nodePorts %v, %v: want 0 for the port that has one, nothing for the other", s.Ports[0].NodePort, s.Ports[1].NodePort)
	}
	// Allocated: NodePorts are left to the API server.
	on := settings.Tenant{AllocateNodePorts: true}
	s = hubService(lb, on, ports, alloc, existing).Spec
	if !ptr.Deref(s.AllocateLoadBalancerNodePorts, false) || s.Ports[0].NodePort != nil {
		t.Errorf("allocated: allocateLoadBalancerNodePorts %v nodePort %v", s.AllocateLoadBalancerNodePorts, s.Ports[0].NodePort)
	}
	// A NodePort Service keeps its NodePorts whatever the switch says.
	lb.Spec.Type = corev1.ServiceTypeNodePort
	s = hubService(lb, off, ports, alloc, existing).Spec
	if s.AllocateLoadBalancerNodePorts != nil || s.Ports[0].NodePort != nil {
		t.Errorf("NodePort: allocateLoadBalancerNodePorts %v nodePort %v", s.AllocateLoadBalancerNodePorts, s.Ports[0].NodePort)
	}
}

// TestNextStatusByType: the address shows only for a hub Service of type LoadBalancer, the
// NodePorts for NodePort and LoadBalancer, and neither while the hub Service still has
// another type than the one it should have.
func TestNextStatusByType(t *testing.T) {
	t.Parallel()
	lb := testLB(kubelbv1alpha1.LoadBalancerPort{Port: 80})
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

// TestHubIPFamilies: what the hub Service asks of the hub's IP families, for each policy the
// LoadBalancer (the tenant Service) has; and the status records the families the hub
// Service got, whatever its type.
func TestHubIPFamilies(t *testing.T) {
	t.Parallel()
	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
	for name, tc := range map[string]struct {
		policy       *corev1.IPFamilyPolicy
		families     []corev1.IPFamily
		wantPolicy   corev1.IPFamilyPolicy
		wantFamilies []corev1.IPFamily
	}{
		"none (KubeLB CE)":                 {nil, nil, "", nil},
		"families without a policy":        {nil, []corev1.IPFamily{v6}, "", nil},
		"SingleStack IPv6":                 {ptr.To(corev1.IPFamilyPolicySingleStack), []corev1.IPFamily{v6}, corev1.IPFamilyPolicySingleStack, []corev1.IPFamily{v6}},
		"SingleStack with two: the first":  {ptr.To(corev1.IPFamilyPolicySingleStack), []corev1.IPFamily{v6, v4}, corev1.IPFamilyPolicySingleStack, []corev1.IPFamily{v6}},
		"PreferDualStack: the policy only": {ptr.To(corev1.IPFamilyPolicyPreferDualStack), []corev1.IPFamily{v6, v4}, corev1.IPFamilyPolicyPreferDualStack, nil},
		"RequireDualStack in order":        {ptr.To(corev1.IPFamilyPolicyRequireDualStack), []corev1.IPFamily{v6, v4}, corev1.IPFamilyPolicyRequireDualStack, []corev1.IPFamily{v6, v4}},
		"unknown family left out":          {ptr.To(corev1.IPFamilyPolicyRequireDualStack), []corev1.IPFamily{"IPv5"}, corev1.IPFamilyPolicyRequireDualStack, nil},
		"unknown policy":                   {ptr.To(corev1.IPFamilyPolicy("DualStack")), []corev1.IPFamily{v4}, "", nil},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			lb := testLB(kubelbv1alpha1.LoadBalancerPort{Port: 80})
			lb.Spec.IPFamilyPolicy, lb.Spec.IPFamilies = tc.policy, tc.families
			ports, _ := planPorts(lb)
			svc := hubService(lb, settings.Tenant{}, ports, map[portalloc.Key]int32{ports[0].Key: 10000}, nil)
			if got := ptr.Deref(svc.Spec.IPFamilyPolicy, ""); got != tc.wantPolicy {
				t.Errorf("ipFamilyPolicy %q, want %q", got, tc.wantPolicy)
			}
			if diff := cmp.Diff(tc.wantFamilies, svc.Spec.IPFamilies); diff != "" {
				t.Errorf("ipFamilies (-want +got):\n%s", diff)
			}
		})
	}

	lb := testLB(kubelbv1alpha1.LoadBalancerPort{Port: 80})
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
