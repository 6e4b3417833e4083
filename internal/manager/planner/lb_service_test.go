package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/quota"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

func TestHubService(t *testing.T) {
	t.Parallel()
	lb := objects.MirroredLoadBalancer(kubelbv1alpha1.LoadBalancerPort{Port: 80}, kubelbv1alpha1.LoadBalancerPort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53})
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
	ports, _ := quota.LoadBalancerPorts(lb)
	alloc := map[portalloc.Key]int32{ports[0].Key: 10000, ports[1].Key: 10001}
	svc := LoadBalancerService(lb, tenant, ports, alloc, nil)

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
	svc = LoadBalancerService(lb, settings.Tenant{}, ports[:1], alloc, nil)
	if svc.Spec.Ports[0].Name != nil || svc.Spec.LoadBalancerClass != nil || *svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster || svc.Annotations != nil {
		t.Errorf("single port service: %+v", svc.Spec)
	}

	// Source ranges need the clients' addresses at Envoy: the hub Service keeps them
	// (externalTrafficPolicy Local) whatever the tenant Service's own policy.
	lb.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	lb.Spec.SourceRanges = []string{"203.0.113.0/24"}
	svc = LoadBalancerService(lb, settings.Tenant{}, ports[:1], alloc, nil)
	if *svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		t.Errorf("with source ranges: externalTrafficPolicy %s, want Local", *svc.Spec.ExternalTrafficPolicy)
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
			lb := objects.MirroredLoadBalancer(kubelbv1alpha1.LoadBalancerPort{Port: 80})
			lb.Spec.Type = tc.spec
			typ, supported := HubServiceType(lb, true)
			if typ != tc.want || supported != tc.supported {
				t.Fatalf("hubServiceType = %s, %v; want %s, %v", typ, supported, tc.want, tc.supported)
			}
			// Without allocateNodePorts, NodePort becomes ClusterIP (no hub NodePort); the
			// others stay.
			noNP, npSupported := HubServiceType(lb, false)
			if tc.spec == corev1.ServiceTypeNodePort && (noNP != corev1.ServiceTypeClusterIP || npSupported) {
				t.Errorf("hubServiceType without NodePorts = %s, %v; want ClusterIP, false", noNP, npSupported)
			} else if tc.spec != corev1.ServiceTypeNodePort && (noNP != typ || npSupported != supported) {
				t.Errorf("hubServiceType without NodePorts = %s, %v; want %s, %v", noNP, npSupported, typ, supported)
			}
			ports, _ := quota.LoadBalancerPorts(lb)
			s := LoadBalancerService(lb, tenant, ports, map[portalloc.Key]int32{ports[0].Key: 10000}, nil).Spec
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
	lb := objects.MirroredLoadBalancer(kubelbv1alpha1.LoadBalancerPort{Port: 80}, kubelbv1alpha1.LoadBalancerPort{Port: 53, Protocol: corev1.ProtocolUDP})
	ports, _ := quota.LoadBalancerPorts(lb)
	alloc := map[portalloc.Key]int32{ports[0].Key: 10000, ports[1].Key: 10001}
	existing := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{
		{Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 30080}, {Port: 53, Protocol: corev1.ProtocolUDP}}}}
	off := settings.Tenant{AllocateNodePorts: false}
	s := LoadBalancerService(lb, off, ports, alloc, existing).Spec
	if ptr.Deref(s.AllocateLoadBalancerNodePorts, true) {
		t.Errorf("allocateLoadBalancerNodePorts %v, want false", s.AllocateLoadBalancerNodePorts)
	}
	if s.Ports[0].NodePort == nil || *s.Ports[0].NodePort != 0 || s.Ports[1].NodePort != nil {
		t.Errorf("nodePorts %v, %v: want 0 for the port that has one, nothing for the other", s.Ports[0].NodePort, s.Ports[1].NodePort)
	}
	// Allocated: NodePorts are left to the API server.
	on := settings.Tenant{AllocateNodePorts: true}
	s = LoadBalancerService(lb, on, ports, alloc, existing).Spec
	if !ptr.Deref(s.AllocateLoadBalancerNodePorts, false) || s.Ports[0].NodePort != nil {
		t.Errorf("allocated: allocateLoadBalancerNodePorts %v nodePort %v", s.AllocateLoadBalancerNodePorts, s.Ports[0].NodePort)
	}
	// A NodePort Service keeps its NodePorts whatever the switch says.
	lb.Spec.Type = corev1.ServiceTypeNodePort
	s = LoadBalancerService(lb, off, ports, alloc, existing).Spec
	if s.AllocateLoadBalancerNodePorts != nil || s.Ports[0].NodePort != nil {
		t.Errorf("NodePort: allocateLoadBalancerNodePorts %v nodePort %v", s.AllocateLoadBalancerNodePorts, s.Ports[0].NodePort)
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
			lb := objects.MirroredLoadBalancer(kubelbv1alpha1.LoadBalancerPort{Port: 80})
			lb.Spec.IPFamilyPolicy, lb.Spec.IPFamilies = tc.policy, tc.families
			ports, _ := quota.LoadBalancerPorts(lb)
			svc := LoadBalancerService(lb, settings.Tenant{}, ports, map[portalloc.Key]int32{ports[0].Key: 10000}, nil)
			if got := ptr.Deref(svc.Spec.IPFamilyPolicy, ""); got != tc.wantPolicy {
				t.Errorf("ipFamilyPolicy %q, want %q", got, tc.wantPolicy)
			}
			if diff := cmp.Diff(tc.wantFamilies, svc.Spec.IPFamilies); diff != "" {
				t.Errorf("ipFamilies (-want +got):\n%s", diff)
			}
		})
	}
}
