package route

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/perobject"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// TestStaticAddresses: the manager asks the hub's load balancer (spec.loadBalancerIP of the
// Gateway's hub Service) only for an address the Tenant grants and no other hub Service holds
// or asks for; a taken address is asked for once it is free.
func TestStaticAddresses(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	objects.Create(t, c, objects.Namespace(managerNS, nil))
	for _, tn := range []struct{ name, grant string }{{"sa", "10.50.0.0/29"}, {"sb", "10.50.0.2"}} {
		tenant := objects.Tenant(tn.name, kubelbv1alpha1.TenantSpec{})
		tenant.Spec.GatewayAPI.StaticAddresses = []string{tn.grant}
		objects.CreateTenant(t, c, tenant)
	}
	// The CRD refuses an entry that is neither an IP address nor a CIDR.
	bad := objects.Tenant("sc", kubelbv1alpha1.TenantSpec{})
	bad.Spec.GatewayAPI.StaticAddresses = []string{"10.50.0.0/33"}
	if err := c.Create(ctx, bad); err == nil {
		t.Error("a Tenant granting 10.50.0.0/33 was accepted")
	}
	startManagerWith(t, hub, portalloc.Range{Min: 20000, Max: 20099}, Options{Shared: perobject.Shared{StaticAddressRetry: 200 * time.Millisecond}})

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
