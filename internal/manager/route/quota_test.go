package route

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/loadbalancer"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// createAged creates objects one after another, each in a later second than the one before
// (creationTimestamp has a resolution of a second), so that their age ranks them.
func createAged(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	var last time.Time
	for _, o := range objs {
		testsupport.Eventually(t, waitTimeout, "a new second for "+o.GetName(), func() error {
			if now := time.Now().Truncate(time.Second); !now.After(last) {
				return fmt.Errorf("still %s", now)
			}
			return nil
		})
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		last = o.GetCreationTimestamp().Time
	}
}

// httpRoute is a Route of an HTTPRoute: no hub objects of its own.
func httpRoute(ns, name string) *kubelbv1alpha1.Route {
	rt := &kubelbv1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	rt.Spec.Source.Kubernetes = &kubelbv1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": "hr-" + name, "namespace": "shop"},
		"spec":     map[string]any{"parentRefs": []any{map[string]any{"name": "gw-old"}}},
	}}}
	return rt
}

func appliedMessage(rt *kubelbv1alpha1.Route) string {
	if c := meta.FindStatusCondition(rt.Status.Resources.Route.Conditions, ConditionApplied); c != nil {
		return c.Message
	}
	return ""
}

// TestQuota checks that a tenant's limits hold for Routes (issue 11, "Exhaust"): Routes
// beyond spec.limits.routes and Routes whose listener ports do not fit in
// spec.limits.listenerPorts (counted with the tenant's Gateways, Ingress Service and
// LoadBalancers, oldest first) get ResourceAppliedSuccessfully=False/QuotaExceeded, an Event,
// no hub Service and no ports; deleting one admits the next, of either kind.
func TestQuota(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	objects.Create(t, c, objects.Namespace(managerNS, nil))
	ns := "tenant-r"
	objects.CreateTenant(t, c, objects.Tenant("r", kubelbv1alpha1.TenantSpec{Limits: kubelbv1alpha1.Limits{Routes: ptr.To[int32](3), ListenerPorts: ptr.To[int32](4)}}))
	m := startManager(t, hub, portalloc.Range{Min: 20000, Max: 20099})

	createAged(t, c,
		gatewayRoute(ns, "gw-old", listener("http", 80, "HTTP"), listener("https", 443, "HTTPS")), // 2 ports
		ingressRoute(ns, "ing"),                                   // the Ingress Service: 2 ports
		gatewayRoute(ns, "gw-new", listener("alt", 8080, "HTTP")), // 1 port: 5 > 4
		httpRoute(ns, "hr"))                                       // the 4th Route

	waitService(t, c, ns, hubnames.GatewayServiceName("gw-old"), nil)
	waitService(t, c, ns, kubelbv1alpha1.IngressServiceName, nil)
	waitCondition(t, c, ns, "ing", metav1.ConditionTrue, ReasonApplied)

	got := waitCondition(t, c, ns, "gw-new", metav1.ConditionFalse, ReasonQuotaExceeded)
	if msg := appliedMessage(got); !strings.Contains(msg, "tenant tenant-r may hold 4 listener ports (spec.limits.listenerPorts); older objects hold 4 and this Route needs 1 more") {
		t.Errorf("message %q", msg)
	}
	waitEvent(t, c, ns, "gw-new", ReasonQuotaExceeded)
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: hubnames.GatewayServiceName("gw-new")}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused Gateway has a hub Service (get: %v)", err)
	}
	for k := range m.ports.Allocator().Snapshot() {
		if k.Owner() == portalloc.RouteOwner(ns, "gw-new") {
			t.Errorf("the refused Gateway holds port %s", k)
		}
	}
	got = waitCondition(t, c, ns, "hr", metav1.ConditionFalse, ReasonQuotaExceeded)
	if msg := appliedMessage(got); !strings.Contains(msg, "may hold 3 Routes (spec.limits.routes); this is the 4th oldest") {
		t.Errorf("message %q", msg)
	}

	// Deleting the Ingress frees its Route and the Ingress Service's two ports: both others
	// are admitted.
	if err := c.Delete(ctx, getRoute(t, c, ns, "ing")); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kubelbv1alpha1.IngressServiceName}})
	waitService(t, c, ns, hubnames.GatewayServiceName("gw-new"), nil)
	waitCondition(t, c, ns, "gw-new", metav1.ConditionTrue, ReasonApplied)
	waitCondition(t, c, ns, "hr", metav1.ConditionTrue, ReasonApplied)

	// Listener ports are counted over Routes and LoadBalancers together: 3 are held, a
	// LoadBalancer asking for 2 more is refused.
	lb := &kubelbv1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lb"},
		Spec: kubelbv1alpha1.LoadBalancerSpec{Ports: []kubelbv1alpha1.LoadBalancerPort{{Name: "a", Port: 1}, {Name: "b", Port: 2}},
			Endpoints: []kubelbv1alpha1.LoadBalancerEndpoints{{AddressesReference: &corev1.ObjectReference{Name: "default"}}}}}
	if err := c.Create(ctx, lb); err != nil {
		t.Fatal(err)
	}
	waitLBReason := func(reason string) {
		t.Helper()
		testsupport.Eventually(t, waitTimeout, "LoadBalancer lb Ready "+reason, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(lb), lb); err != nil {
				return err
			}
			if cond := meta.FindStatusCondition(lb.Status.Conditions, loadbalancer.ConditionReady); cond == nil || cond.Reason != reason {
				return fmt.Errorf("conditions %+v", lb.Status.Conditions)
			}
			return nil
		})
	}
	waitLBReason(loadbalancer.ReasonQuotaExceeded)

	// Deleting a Route admits the LoadBalancer: the tenant's next plan (one verdict for both
	// kinds) requeues it in the LoadBalancer controller's queue.
	if err := c.Delete(ctx, getRoute(t, c, ns, "gw-old")); err != nil {
		t.Fatal(err)
	}
	waitService(t, c, ns, hubnames.LoadBalancerServiceName("lb"), nil)
	waitLBReason(loadbalancer.ReasonNoExternalAddress)
}
