package envoycp

import (
	"context"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds/translator"
)

// TestLoadBalancerProxyProtocolSettings: on a real API server, the Config's
// spec.loadBalancer.proxyProtocol reaches the translation of every tenant: the TCP listener of
// each LoadBalancer reads a PROXY protocol header first (Envoy's proxy_protocol listener
// filter); a Tenant's fields override the Config's for that tenant only (optional: true
// accepts connections without one; enabled: false turns it off); a UDP port with source
// ranges is told ClientAddressUnknown while it is on. The Envoy resources carry the filter.
func TestLoadBalancerProxyProtocolSettings(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	namespaces := []string{"tenant-a", "tenant-b", "tenant-c"}
	for _, ns := range namespaces {
		upstreamCreate(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}}})
	}
	upstreamCreate(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: upstreamManagerNS}},
		&v1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Namespace: upstreamManagerNS, Name: v1alpha1.DefaultConfigName},
			Spec: v1alpha1.ConfigSpec{LoadBalancer: v1alpha1.LoadBalancerSettings{ProxyProtocol: &v1alpha1.LoadBalancerProxyProtocol{Enabled: ptr.To(true)}}}},
		// Tenant a: the Config's, with connections without a header served too.
		&v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1alpha1.TenantSpec{LoadBalancer: v1alpha1.LoadBalancerSettings{
			ProxyProtocol: &v1alpha1.LoadBalancerProxyProtocol{Optional: ptr.To(true)}}}},
		// Tenant b: its load balancer sends none.
		&v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: v1alpha1.TenantSpec{LoadBalancer: v1alpha1.LoadBalancerSettings{
			ProxyProtocol: &v1alpha1.LoadBalancerProxyProtocol{Enabled: ptr.To(false)}}}},
		// tenant-c has no Tenant: the Config's.
	)
	for i, ns := range namespaces {
		upstreamCreate(t, c, &v1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.DefaultAddressesName},
			Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "192.0.2.10"}}}})
		lb := loadBalancer(ns, "office", int32(20001+2*i))
		lb.Spec.SourceRanges = []string{"192.0.2.0/24"}
		lb.Spec.Ports = append(lb.Spec.Ports, v1alpha1.LoadBalancerPort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})
		lb.Spec.Ports[0].Name = "web"
		lb.Spec.Endpoints[0].Ports = []v1alpha1.EndpointPort{{Name: "web", Port: 31080}, {Name: "dns", Port: 31053, Protocol: corev1.ProtocolUDP}}
		udp := v1alpha1.ServicePort{UpstreamTargetPort: int32(20002 + 2*i)}
		udp.Port, udp.Protocol = 53, corev1.ProtocolUDP
		lb.Status.Service.Ports = append(lb.Status.Service.Ports, udp)
		svc := hubService(lb)
		svc.Spec.Type = corev1.ServiceTypeLoadBalancer
		upstreamCreate(t, c, lb, svc)
	}

	base := translate.Options{ListenerAddress: "127.0.0.1"}
	// check translates tenant ns and compares the TCP listener's PROXY protocol (nil: none)
	// and whether its UDP port is told ClientAddressUnknown.
	check := func(ns string, want *ir.ProxyProtocol) {
		t.Helper()
		in, err := BuildInput(ctx, c, c, upstreamManagerNS, ns, base)
		if err != nil {
			t.Fatal(err)
		}
		res, err := translate.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		var got *ir.ProxyProtocol
		var tcp *ir.Listener
		for _, l := range res.Config.Listeners {
			if l.Protocol == ir.ProtocolTCP {
				tcp = l
			}
		}
		if tcp == nil {
			t.Fatalf("%s: no TCP listener in %+v (problems %v)", ns, res.Config.Listeners, res.Problems)
		}
		if tcp.ClientTraffic != nil {
			got = tcp.ClientTraffic.ProxyProtocol
		}
		if (got == nil) != (want == nil) || (got != nil && *got != *want) {
			t.Errorf("%s: the TCP listener's PROXY protocol is %+v, want %+v", ns, got, want)
		}
		told := false
		for _, p := range res.Problems {
			if p.Reason == translate.ReasonClientAddressUnknown && p.Object.Section == "UDP/53 (dns)" && strings.Contains(p.Message, "spec.loadBalancer.proxyProtocol") {
				told = true
			} else {
				t.Errorf("%s: unexpected problem %+v", ns, p)
			}
		}
		if told != (want != nil) {
			t.Errorf("%s: the UDP port told ClientAddressUnknown: %v, want %v", ns, told, want != nil)
		}
		// The Envoy listener reads the header first.
		out, _, err := translator.Translate(res.Config)
		if err != nil {
			t.Fatal(err)
		}
		filters := ""
		for _, r := range out[resource.ListenerType] {
			for _, f := range r.(*listenerv3.Listener).GetListenerFilters() {
				filters += f.GetName() + " "
			}
		}
		if strings.Contains(filters, translator.FilterProxyProtocol) != (want != nil) {
			t.Errorf("%s: Envoy listener filters %q, want the PROXY protocol filter: %v", ns, filters, want != nil)
		}
	}
	check("tenant-a", &ir.ProxyProtocol{Optional: true})
	check("tenant-b", nil)
	check("tenant-c", &ir.ProxyProtocol{})

	// The Config turns it off: tenant a's own fields say only optional, so it is off too; the
	// Tenant b turns it on for itself.
	update := func(obj client.Object, change func()) {
		t.Helper()
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		change()
		if err := c.Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	cfg := &v1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Namespace: upstreamManagerNS, Name: v1alpha1.DefaultConfigName}}
	update(cfg, func() { cfg.Spec.LoadBalancer.ProxyProtocol = nil })
	tb := &v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	update(tb, func() { tb.Spec.LoadBalancer.ProxyProtocol.Enabled = ptr.To(true) })
	check("tenant-a", nil)
	check("tenant-b", &ir.ProxyProtocol{})
	check("tenant-c", nil)
}
