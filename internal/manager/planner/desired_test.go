package planner

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/translate"
)

// TestIngressServiceDNSAnnotation: the tenant's Ingress Service lists the hostnames of its
// LoadBalancers (generated and explicit, lower case, once each; not those being deleted or
// invalid) in external-dns's annotation, only with dns.useDNSAnnotations.
func TestIngressServiceDNSAnnotation(t *testing.T) {
	t.Parallel()
	withHost := func(name, host string) *kubelbv1alpha1.LoadBalancer {
		l := &kubelbv1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-x", Name: name, UID: k8stypes.UID("uid-" + name)}, Spec: kubelbv1alpha1.LoadBalancerSpec{Hostname: host}}
		return l
	}
	deleted := withHost("gone", "gone.example.com")
	deleted.DeletionTimestamp = ptrTime(metav1.Now())
	deleted.Finalizers = []string{"someone.else/hold"}
	dns := translate.DNS{WildcardDomain: "apps.example.com", AllowExplicitHostnames: true}
	p := Make(Input{Namespace: "tenant-x", Tenant: settings.Tenant{DNS: dns, Limits: settings.Limits{LoadBalancers: 10, Routes: 10, ListenerPorts: 10, NodePorts: 10, ObjectBytes: 1 << 20}},
		LoadBalancers: []*kubelbv1alpha1.LoadBalancer{withHost("web", ""), withHost("shop", "Shop.example.com"), withHost("dup", "shop.example.com"), withHost("bad", "*.example.com"), deleted}})
	hosts := p.Hostnames
	if want := []string{"shop.example.com", "web.x.apps.example.com"}; !slices.Equal(hosts, want) {
		t.Fatalf("hostnames %v, want %v", hosts, want)
	}
	ports := []Port{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, Target: 20000}}
	on := settings.Tenant{UseDNSAnnotations: true}
	if got := IngressService("tenant-x", on, ports, hosts, false, nil).Annotations[AnnotationDNSHostname]; got != "shop.example.com,web.x.apps.example.com" {
		t.Errorf("annotation %q", got)
	}
	if a := IngressService("tenant-x", settings.Tenant{}, ports, hosts, false, nil).Annotations; a[AnnotationDNSHostname] != "" {
		t.Errorf("annotation without useDNSAnnotations: %v", a)
	}
	if a := IngressService("tenant-x", on, ports, nil, false, nil).Annotations; a[AnnotationDNSHostname] != "" {
		t.Errorf("annotation without hostnames: %v", a)
	}
}

func ptrTime(t metav1.Time) *metav1.Time { return &t }
