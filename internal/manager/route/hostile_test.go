package route

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/loadbalancer"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// TestHostileTenantHostnames (issue 26): with explicit hostnames allowed, the attacker
// tenant B asks for the victim A's hostname (in another spelling) and for hub-internal names
// (the cluster domain, the wildcard domain's generated names, a cloud metadata name, a
// domain the platform team reserved). Today B got a Certificate and an external-dns record
// for each. Asserted, on the LoadBalancer and Route controllers with cert-manager's CRD:
// none of B's claims gets a Certificate or a DNS record; each gets a Hostname condition
// and a Warning Event that never names A; B's own hostname works; A's Certificate is not
// rewritten and its DNS record stays. A new manager (restart) decides the same from the
// hub's objects; when A's LoadBalancer goes, B's claim is the oldest and gets the hostname.
func TestHostileTenantHostnames(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	installCertificateCRD(t, c)
	objects.Create(t, c, objects.Namespace(managerNS, nil))
	objects.Create(t, c, objects.Config(managerNS, kubelbv1alpha1.ConfigSpec{
		DNS: kubelbv1alpha1.DNSSettings{WildcardDomain: ptr.To("*.apps.example.test"), UseDNSAnnotations: ptr.To(true),
			AllowExplicitHostnames: ptr.To(true), ReservedDomains: []string{"hub.example.net"}},
		Certificates: kubelbv1alpha1.CertificatesSettings{DefaultClusterIssuer: ptr.To("issuer")},
	}))
	for _, name := range []string{"a", "b"} {
		objects.CreateTenant(t, c, objects.Tenant(name, kubelbv1alpha1.TenantSpec{}))
	}
	lb := func(ns, name, hostname string) *kubelbv1alpha1.LoadBalancer {
		o := &kubelbv1alpha1.LoadBalancer{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: kubelbv1alpha1.LoadBalancerSpec{
				Hostname: hostname,
				Ports:    []kubelbv1alpha1.LoadBalancerPort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
				Endpoints: []kubelbv1alpha1.LoadBalancerEndpoints{{
					AddressesReference: &corev1.ObjectReference{Name: kubelbv1alpha1.DefaultAddressesName},
					Ports:              []kubelbv1alpha1.EndpointPort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 30080}},
				}},
			},
		}
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	ports := freeRange(t, 40)
	m := startManager(t, hub, ports)

	// The victim.
	const shop = "shop.example.org"
	victim := lb("tenant-a", "shop", shop)
	waitHostname(t, c, "tenant-a", "shop", &kubelbv1alpha1.HostnameStatus{Hostname: shop, DNSRecordCreated: true})
	cert := certificate(t, c, "tenant-a", "shop")
	if cert == nil {
		t.Fatal("no Certificate for the victim")
	}

	// The attacker: the victim's hostname, and hub-internal names.
	attacks := map[string]struct{ hostname, reason string }{
		"steal":     {"SHOP.example.org.", loadbalancer.ReasonHostnameConflict},
		"cluster":   {"kubernetes.default.svc.cluster.local", loadbalancer.ReasonHostnameInvalid},
		"svc":       {"kubelb.kubelb-system.svc", loadbalancer.ReasonHostnameInvalid},
		"generated": {"web.a.apps.example.test", loadbalancer.ReasonHostnameInvalid},
		"apex":      {"apps.example.test", loadbalancer.ReasonHostnameInvalid},
		"metadata":  {"metadata.google.internal", loadbalancer.ReasonHostnameInvalid},
		"reserved":  {"xds.hub.example.net", loadbalancer.ReasonHostnameInvalid},
	}
	for name, a := range attacks {
		lb("tenant-b", name, a.hostname)
	}
	lb("tenant-b", "own", "b.example.org")
	waitHostname(t, c, "tenant-b", "own", &kubelbv1alpha1.HostnameStatus{Hostname: "b.example.org", DNSRecordCreated: true})
	for name, a := range attacks {
		objects.WaitFor(t, c, waitTimeout, client.ObjectKey{Namespace: "tenant-b", Name: name}, &kubelbv1alpha1.LoadBalancer{}, func(got *kubelbv1alpha1.LoadBalancer) error {
			cond := meta.FindStatusCondition(got.Status.Conditions, loadbalancer.ConditionHostname)
			if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != a.reason || got.Status.Hostname != nil {
				return fmt.Errorf("status.hostname %+v, conditions %+v", got.Status.Hostname, got.Status.Conditions)
			}
			if strings.Contains(cond.Message, "tenant-a") || strings.Contains(cond.Message, "LoadBalancer shop") {
				t.Errorf("%s: the message names the other tenant: %q", name, cond.Message)
			}
			return nil
		})
		waitLBEvent(t, c, "tenant-b", name, a.reason)
	}
	// No Certificate for any of B's claims, and B's DNS record is its own hostname alone.
	for name := range attacks {
		if got := certificate(t, c, "tenant-b", name); got != nil {
			t.Errorf("a Certificate for %s: %v", name, got.Object["spec"])
		}
	}
	waitService(t, c, "tenant-b", kubelbv1alpha1.IngressServiceName, func(svc *corev1.Service) error {
		if got := svc.Annotations[AnnotationDNSHostname]; got != "b.example.org" {
			return fmt.Errorf("B's DNS annotation %q", got)
		}
		return nil
	})
	// The victim: same Certificate, same DNS record.
	waitService(t, c, "tenant-a", kubelbv1alpha1.IngressServiceName, func(svc *corev1.Service) error {
		if got := svc.Annotations[AnnotationDNSHostname]; got != shop {
			return fmt.Errorf("A's DNS annotation %q", got)
		}
		return nil
	})
	if got := certificate(t, c, "tenant-a", "shop"); got == nil || got.GetResourceVersion() != cert.GetResourceVersion() {
		t.Errorf("the victim's Certificate was changed or removed: %v", got)
	}

	// A restarted manager decides the same, from the hub's objects.
	m.stop()
	startManager(t, hub, ports)
	steal := &kubelbv1alpha1.LoadBalancer{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant-b", Name: "steal"}, steal); err != nil {
		t.Fatal(err)
	}
	steal.Annotations = map[string]string{"touch": "1"} // a reconcile by the new manager
	if err := c.Update(ctx, steal); err != nil {
		t.Fatal(err)
	}
	waitHostname(t, c, "tenant-a", "shop", &kubelbv1alpha1.HostnameStatus{Hostname: shop, DNSRecordCreated: true})
	if got := certificate(t, c, "tenant-b", "steal"); got != nil {
		t.Errorf("after a restart, a Certificate for B's claim: %v", got.Object["spec"])
	}

	// The victim lets the hostname go: B's claim is now the oldest.
	if err := c.Delete(ctx, victim); err != nil {
		t.Fatal(err)
	}
	waitHostname(t, c, "tenant-b", "steal", &kubelbv1alpha1.HostnameStatus{Hostname: shop, DNSRecordCreated: true})
	testsupport.Eventually(t, waitTimeout, "a Certificate for B's hostname", func() error {
		got := certificate(t, c, "tenant-b", "steal")
		if got == nil {
			return fmt.Errorf("none")
		}
		names, _, _ := unstructured.NestedStringSlice(got.Object, "spec", "dnsNames")
		if diff := cmp.Diff([]string{shop}, names); diff != "" {
			return fmt.Errorf("dnsNames (-want +got):\n%s", diff)
		}
		return nil
	})
}

// certificate returns the Certificate of a LoadBalancer's hostname, nil when there is none.
func certificate(t *testing.T, c client.Client, ns, lbName string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(hubnames.CertificateGVK)
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: hubnames.HostnameSecretName(lbName)}, u)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// waitLBEvent waits for a Warning Event of the reason on a LoadBalancer.
func waitLBEvent(t *testing.T, c client.Client, ns, name, reason string) {
	t.Helper()
	testsupport.Eventually(t, waitTimeout, "event "+reason+" on LoadBalancer "+name, func() error {
		list := &eventsv1.EventList{}
		if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Regarding.Kind == "LoadBalancer" && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				if strings.Contains(e.Note, "tenant-a") {
					t.Errorf("the Event names the other tenant: %q", e.Note)
				}
				return nil
			}
		}
		return fmt.Errorf("no event")
	})
}

// TestHostileTenantGatewaySteeringAnnotations (issue 26): with propagateAllAnnotations on,
// the attacker's Gateway carries MetalLB and external-dns annotations naming the victim's
// address and hostname. Today they reached the Gateway's hub Service. Asserted: the hub
// Service carries none of them (an innocent one passes) and the Route gets one
// AnnotationsDropped Warning Event.
func TestHostileTenantGatewaySteeringAnnotations(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	objects.Create(t, c, objects.Namespace(managerNS, nil))
	objects.Create(t, c, objects.Config(managerNS, kubelbv1alpha1.ConfigSpec{AnnotationSettings: kubelbv1alpha1.AnnotationSettings{
		PropagateAllAnnotations: ptr.To(true)}}))
	createNamespace(t, c, "tenant-b")
	startManager(t, hub, freeRange(t, 8))

	steering := map[string]string{
		"metallb.universe.tf/loadBalancerIPs":       "192.0.2.10",
		"external-dns.alpha.kubernetes.io/hostname": "shop.example.org",
	}
	rt := gatewayRoute("tenant-b", "gw", listener("http", 80, "HTTP"))
	annotations := map[string]string{"team": "b"}
	maps.Copy(annotations, steering)
	rt.Spec.Source.Kubernetes.Route.SetAnnotations(annotations)
	if err := c.Create(ctx, rt); err != nil {
		t.Fatal(err)
	}
	svc := waitService(t, c, "tenant-b", hubnames.GatewayServiceName("gw"), objects.Annotated("team", "b"))
	for k := range steering {
		if v, ok := svc.Annotations[k]; ok {
			t.Errorf("the Gateway's hub Service carries %s=%s", k, v)
		}
	}
	waitEvent(t, c, "tenant-b", "gw", ReasonAnnotationsDropped)
}

// TestHostileTenantGatewayNodePorts (issue 26): on a hub whose NodePort range has 10 ports,
// under nodePorts: 4, the victim tenant A's Gateway holds 2 hub NodePorts; attacker B
// creates 4 Gateways of 2 ports. Today B took the rest of the range and the platform team's
// NodePort Service was refused. Asserted: B's 2 oldest Gateways hold 4 NodePorts, the
// others are QuotaExceeded with an Event naming spec.limits.nodePorts, A's NodePorts are
// unchanged, and the platform team's 4-port NodePort Service is created.
func TestHostileTenantGatewayNodePorts(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{ServiceNodePortRange: "30000-30009"})
	c := hub.Client
	ctx := context.Background()
	objects.Create(t, c, objects.Namespace(managerNS, nil))
	objects.Create(t, c, objects.Config(managerNS, kubelbv1alpha1.ConfigSpec{Limits: kubelbv1alpha1.Limits{NodePorts: ptr.To[int32](4)}}))
	for _, name := range []string{"a", "b"} {
		objects.CreateTenant(t, c, objects.Tenant(name, kubelbv1alpha1.TenantSpec{}))
	}
	startManager(t, hub, freeRange(t, 40))
	nodePorts := func(s *corev1.Service) []int32 {
		var out []int32
		for _, p := range s.Spec.Ports {
			out = append(out, p.NodePort)
		}
		return out
	}
	withNodePorts := func(s *corev1.Service) error {
		for _, p := range s.Spec.Ports {
			if p.NodePort == 0 {
				return fmt.Errorf("port %s without a NodePort", p.Name)
			}
		}
		return nil
	}

	if err := c.Create(ctx, gatewayRoute("tenant-a", "web", listener("http", 80, "HTTP"), listener("dns", 53, "UDP"))); err != nil {
		t.Fatal(err)
	}
	victim := nodePorts(waitService(t, c, "tenant-a", hubnames.GatewayServiceName("web"), withNodePorts))

	for i := range 4 {
		if err := c.Create(ctx, gatewayRoute("tenant-b", fmt.Sprintf("gw-%d", i), listener("http", 80, "HTTP"), listener("dns", 53, "UDP"))); err != nil {
			t.Fatal(err)
		}
	}
	// Created one after the other: their age order (creation time, then name) is name order.
	for i := range 2 {
		waitService(t, c, "tenant-b", hubnames.GatewayServiceName(fmt.Sprintf("gw-%d", i)), withNodePorts)
	}
	for i := 2; i < 4; i++ {
		name := fmt.Sprintf("gw-%d", i)
		got := waitCondition(t, c, "tenant-b", name, metav1.ConditionFalse, ReasonQuotaExceeded)
		if st := got.Status.Resources.Route; !strings.Contains(fmt.Sprint(st.Conditions), "spec.limits.nodePorts") {
			t.Errorf("%s: condition does not name the limit: %+v", name, st.Conditions)
		}
		waitEvent(t, c, "tenant-b", name, ReasonQuotaExceeded)
		svc := &corev1.Service{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant-b", Name: hubnames.GatewayServiceName(name)}, svc); !apierrors.IsNotFound(err) {
			t.Errorf("%s has a hub Service (%v)", name, err)
		}
	}
	if got := nodePorts(waitService(t, c, "tenant-a", hubnames.GatewayServiceName("web"), withNodePorts)); !cmp.Equal(got, victim) {
		t.Errorf("victim's NodePorts %v, were %v", got, victim)
	}
	if err := c.Create(ctx, objects.PlatformNodePortService(managerNS, 4)); err != nil {
		t.Fatalf("the platform team's NodePort Service was refused: %v", err)
	}
}
