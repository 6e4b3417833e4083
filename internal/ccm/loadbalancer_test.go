package ccm

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/api/v1alpha1"
)

func TestServiceClass(t *testing.T) {
	t.Parallel()
	lb := func(class *string) *corev1.Service {
		return &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: class}}
	}
	tests := []struct {
		name     string
		svc      *corev1.Service
		useClass bool
		want     ClassVerdict
	}{
		{"ClusterIP", &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}}, false, NotLoadBalancer},
		{"NodePort", &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort}}, true, NotLoadBalancer},
		{"no class, filter off", lb(nil), false, OurClass},
		{"no class, filter on", lb(nil), true, OtherClass},
		{"class kubelb, filter off", lb(ptr.To("kubelb")), false, OurClass},
		{"class kubelb, filter on", lb(ptr.To("kubelb")), true, OurClass},
		// A class of another implementation is never ours, whatever the filter says.
		{"other class, filter off", lb(ptr.To("metallb.io/metallb")), false, OtherClass},
		{"other class, filter on", lb(ptr.To("metallb.io/metallb")), true, OtherClass},
	}
	for _, tc := range tests {
		if got := ServiceClass(tc.svc, tc.useClass); got != tc.want {
			t.Errorf("%s: ServiceClass = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestDesiredLoadBalancer(t *testing.T) {
	t.Parallel()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "shop", UID: "1234-uid",
			Annotations: map[string]string{
				v1alpha1.AnnotationProxyProtocol:   "v2",
				"example.com/team":                 "a",
				corev1.LastAppliedConfigAnnotation: `{"huge":"json"}`,
			},
			Labels: map[string]string{"app": "web"}, // not mirrored
		},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			HealthCheckNodePort:   32123,
			SessionAffinity:       corev1.ServiceAffinityClientIP,
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 30080},
				{Name: "DNS", Port: 53, Protocol: corev1.ProtocolUDP, NodePort: 30053},
				{Name: "pending", Port: 8080, Protocol: corev1.ProtocolTCP},
				{Name: "sctp", Port: 9, Protocol: corev1.ProtocolSCTP, NodePort: 30009},
			},
		},
	}
	got, problems := DesiredLoadBalancer(svc, "tenant-a")
	want := &v1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{
			Name: "1234-uid", Namespace: "tenant-a",
			Labels: map[string]string{
				v1alpha1.LabelOriginName:         "web",
				v1alpha1.LabelOriginNamespace:    "shop",
				v1alpha1.LabelOriginResourceKind: "Service",
				v1alpha1.LabelTenantName:         "a",
				v1alpha1.LabelManagedBy:          "kubelb",
			},
			Annotations: map[string]string{v1alpha1.AnnotationProxyProtocol: "v2", "example.com/team": "a"},
		},
		Spec: v1alpha1.LoadBalancerSpec{
			Endpoints: []v1alpha1.LoadBalancerEndpoints{{
				AddressesReference: &corev1.ObjectReference{Kind: "Addresses", Name: "default"},
				Ports: []v1alpha1.EndpointPort{
					{Name: "http", Port: 30080, Protocol: corev1.ProtocolTCP},
					{Name: "dns", Port: 30053, Protocol: corev1.ProtocolUDP},
				},
			}},
			Ports: []v1alpha1.LoadBalancerPort{
				{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
			},
			Type:                  corev1.ServiceTypeLoadBalancer,
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			HealthCheckNodePort:   32123,
			Persistence:           &v1alpha1.Persistence{Type: v1alpha1.PersistenceSourceIP},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LoadBalancer (-want +got):\n%s", diff)
	}
	// The IP families: carried as the API server filled them; an impossible list is not.
	svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
	got, _ = DesiredLoadBalancer(svc, "tenant-a")
	if ptr.Deref(got.Spec.IPFamilyPolicy, "") != corev1.IPFamilyPolicyRequireDualStack || fmt.Sprint(got.Spec.IPFamilies) != "[IPv6 IPv4]" {
		t.Errorf("ipFamilyPolicy %v, ipFamilies %v; want RequireDualStack [IPv6 IPv4]", got.Spec.IPFamilyPolicy, got.Spec.IPFamilies)
	}
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv4Protocol}
	if got, _ = DesiredLoadBalancer(svc, "tenant-a"); got.Spec.IPFamilies != nil {
		t.Errorf("a repeated family carried: %v", got.Spec.IPFamilies)
	}
	wantProblems := []PortProblem{
		{Port: "pending", Pending: true, Message: "no NodePort is allocated yet"},
		{Port: "sctp", Message: "protocol SCTP is not supported; only TCP and UDP are"},
	}
	if diff := cmp.Diff(wantProblems, problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestDesiredLoadBalancerUnnamedPortNoAffinity(t *testing.T) {
	t.Parallel()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "one", Namespace: "ns", UID: "u"},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
			SessionAffinity:       corev1.ServiceAffinityNone,
			Ports:                 []corev1.ServicePort{{Port: 443, Protocol: corev1.ProtocolTCP, NodePort: 31443}},
		},
	}
	got, problems := DesiredLoadBalancer(svc, "tenant-b")
	if len(problems) != 0 {
		t.Errorf("unexpected problems: %v", problems)
	}
	if got.Spec.Persistence != nil {
		t.Errorf("persistence = %v, want none without ClientIP affinity", got.Spec.Persistence)
	}
	if got.Annotations != nil {
		t.Errorf("annotations = %v, want none", got.Annotations)
	}
	wantPorts := []v1alpha1.LoadBalancerPort{{Name: "443-tcp", Port: 443, Protocol: corev1.ProtocolTCP}}
	if diff := cmp.Diff(wantPorts, got.Spec.Ports); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	wantEP := []v1alpha1.EndpointPort{{Name: "443-tcp", Port: 31443, Protocol: corev1.ProtocolTCP}}
	if diff := cmp.Diff(wantEP, got.Spec.Endpoints[0].Ports); diff != "" {
		t.Errorf("endpoint ports (-want +got):\n%s", diff)
	}
	if got.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster {
		t.Errorf("externalTrafficPolicy = %q", got.Spec.ExternalTrafficPolicy)
	}
}

func TestWarnOnce(t *testing.T) {
	t.Parallel()
	w := newWarnOnce()
	w.observe(true)
	if !w.first("a") || w.first("a") {
		t.Fatal("want exactly one warning per Service while disabled")
	}
	w.observe(true)
	if w.first("a") {
		t.Fatal("the same verdict must not warn again")
	}
	w.observe(false)
	w.observe(true)
	if !w.first("a") {
		t.Fatal("disabled again after being enabled: want a new warning")
	}
	w.forget("a")
	if !w.first("a") {
		t.Fatal("a forgotten Service is warned again")
	}
}

// TestExternalLoadBalancerNoNodeHealthCheck: with --enable-cloud-provider=false the endpoints
// are the other load balancer's addresses, so an externalTrafficPolicy: Local Service's
// healthCheckNodePort is not carried (the hub would check a kube-proxy port on an address
// that is no node).
func TestExternalLoadBalancerNoNodeHealthCheck(t *testing.T) {
	t.Parallel()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", UID: "uid-1"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			HealthCheckNodePort: 32000,
			Ports:               []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 31080}},
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}}},
	}
	desired, _ := DesiredLoadBalancer(svc, "tenant-a")
	if desired.Spec.HealthCheckNodePort != 32000 {
		t.Fatalf("DesiredLoadBalancer healthCheckNodePort %d, want 32000 (the node mirror)", desired.Spec.HealthCheckNodePort)
	}
	got, problems := ExternalLoadBalancer(desired, svc)
	if len(problems) != 0 {
		t.Errorf("problems %v", problems)
	}
	if got.Spec.HealthCheckNodePort != 0 {
		t.Errorf("healthCheckNodePort %d carried to the hub, want none", got.Spec.HealthCheckNodePort)
	}
	want := []v1alpha1.LoadBalancerEndpoints{{Addresses: []v1alpha1.EndpointAddress{{IP: "192.0.2.10"}},
		Ports: []v1alpha1.EndpointPort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if diff := cmp.Diff(want, got.Spec.Endpoints); diff != "" {
		t.Errorf("endpoints -want +got:\n%s", diff)
	}
}
