package route

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/testenv"
)

// TestStaticAddressFree: a hub Service holding an address keeps it; with no holder, the
// oldest Service asking for it takes it, whichever reconciles first.
func TestStaticAddressFree(t *testing.T) {
	t.Parallel()
	ip := netip.MustParseAddr("192.0.2.5")
	at := func(ns, name string, sec int, asks bool, shows bool) corev1.Service {
		s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(time.Unix(int64(1000+sec), 0))}}
		if asks {
			s.Spec.LoadBalancerIP = ip.String()
		}
		if shows {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip.String()}}
		}
		return s
	}
	self := types.NamespacedName{Namespace: "tenant-b", Name: "gateway-b"}
	for _, c := range []struct {
		name   string
		own    *corev1.Service
		others []corev1.Service
		want   bool
	}{
		{name: "nobody else", others: nil, want: true},
		{name: "only itself in the index", own: svcPtr(at("tenant-b", "gateway-b", 5, true, false)), others: []corev1.Service{at("tenant-b", "gateway-b", 5, true, false)}, want: true},
		{name: "another tenant's LoadBalancer holds it", own: svcPtr(at("tenant-b", "gateway-b", 1, false, false)), others: []corev1.Service{at("tenant-a", "envoy-x", 9, false, true)}, want: false},
		{name: "an older Service asks for it", own: svcPtr(at("tenant-b", "gateway-b", 5, true, false)), others: []corev1.Service{at("tenant-a", "gateway-a", 1, true, false)}, want: false},
		{name: "a newer Service asks for it", own: svcPtr(at("tenant-b", "gateway-b", 1, true, false)), others: []corev1.Service{at("tenant-a", "gateway-a", 5, true, false)}, want: true},
		{name: "not made yet, another asks", others: []corev1.Service{at("tenant-a", "gateway-a", 5, true, false)}, want: false},
		{name: "it holds it, an older one asks", own: svcPtr(at("tenant-b", "gateway-b", 5, true, true)), others: []corev1.Service{at("tenant-a", "gateway-a", 1, true, false)}, want: true},
		{name: "both hold it, the other is older", own: svcPtr(at("tenant-b", "gateway-b", 5, true, true)), others: []corev1.Service{at("tenant-a", "gateway-a", 1, true, true)}, want: false},
	} {
		if got := staticAddressFree(ip, self, c.own, c.others); got != c.want {
			t.Errorf("%s: free %v, want %v", c.name, got, c.want)
		}
	}
}

func svcPtr(s corev1.Service) *corev1.Service { return &s }

// TestStaticAddresses: the manager asks the hub's load balancer (spec.loadBalancerIP of the
// Gateway's hub Service) only for an address the Tenant grants and no other hub Service holds
// or asks for; a taken address is asked for once it is free.
func TestStaticAddresses(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNS}}); err != nil {
		t.Fatal(err)
	}
	for _, tn := range []struct{ name, grant string }{{"sa", "10.50.0.0/29"}, {"sb", "10.50.0.2"}} {
		createNamespace(t, c, "tenant-"+tn.name)
		tenant := &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: tn.name}}
		tenant.Spec.GatewayAPI.StaticAddresses = []string{tn.grant}
		if err := c.Create(ctx, tenant); err != nil {
			t.Fatal(err)
		}
	}
	// The CRD refuses an entry that is neither an IP address nor a CIDR.
	bad := &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "sc"}}
	bad.Spec.GatewayAPI.StaticAddresses = []string{"10.50.0.0/33"}
	if err := c.Create(ctx, bad); err == nil {
		t.Error("a Tenant granting 10.50.0.0/33 was accepted")
	}
	startManagerWith(t, hub, portalloc.Range{Min: 20000, Max: 20099}, Options{StaticAddressRetry: 200 * time.Millisecond})

	asking := func(ns, name string, addrs ...string) *kubelbv1alpha1.Route {
		rt := gatewayRoute(ns, name, listener("http", 80, "HTTP"))
		var list []any
		for _, a := range addrs {
			list = append(list, map[string]any{"value": a})
		}
		rt.Spec.Source.Kubernetes.Route.Object["spec"].(map[string]any)["addresses"] = list
		if err := c.Create(ctx, rt); err != nil {
			t.Fatal(err)
		}
		return rt
	}
	asks := func(want string) func(*corev1.Service) error {
		return func(s *corev1.Service) error {
			if s.Spec.LoadBalancerIP != want {
				return fmt.Errorf("spec.loadBalancerIP %q, want %q", s.Spec.LoadBalancerIP, want)
			}
			return nil
		}
	}
	first := asking("tenant-sa", "first", "10.50.0.2")
	waitService(t, c, "tenant-sa", hubnames.GatewayServiceName(first.Name), asks("10.50.0.2"))
	outside := asking("tenant-sa", "outside", "10.50.0.9")
	two := asking("tenant-sa", "two", "10.50.0.3", "10.50.0.4")
	second := asking("tenant-sb", "second", "10.50.0.2") // granted to both; the first holds it
	for _, rt := range []*kubelbv1alpha1.Route{outside, two, second} {
		svc := waitService(t, c, rt.Namespace, hubnames.GatewayServiceName(rt.Name), nil)
		time.Sleep(500 * time.Millisecond) // a few retries of the taken one
		if err := c.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			t.Fatal(err)
		}
		if svc.Spec.LoadBalancerIP != "" {
			t.Errorf("the hub Service of %s asks for %s", rt.Name, svc.Spec.LoadBalancerIP)
		}
	}

	// The first Gateway lets the address go: the second takes it.
	got := getRoute(t, c, "tenant-sa", first.Name)
	delete(got.Spec.Source.Kubernetes.Route.Object["spec"].(map[string]any), "addresses")
	if err := c.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	waitService(t, c, "tenant-sa", hubnames.GatewayServiceName(first.Name), asks(""))
	waitService(t, c, "tenant-sb", hubnames.GatewayServiceName(second.Name), asks("10.50.0.2"))
}
