package envoycp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/quota"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds"
)

// TestQuota: on a real API server, the envoycp controller leaves out of a tenant's snapshot
// the LoadBalancers its limits refuse (the same verdict as the LoadBalancer controller's) and
// reports them QuotaExceeded; it cuts a cluster's endpoints to spec.limits.endpointsPerCluster
// (the first ones by address) with a warning; and a tenant whose load balancing is disabled
// gets its LoadBalancers reported LoadBalancingDisabled instead of a missing listener port.
func TestQuota(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	const ns = "tenant-a"
	for _, o := range []client.Object{
		namespace(ns, true),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubelb"}},
		&v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1alpha1.TenantSpec{Limits: v1alpha1.Limits{
			LoadBalancers: ptr.To[int32](1), Routes: ptr.To[int32](1), EndpointsPerCluster: ptr.To[int32](2)}}},
		&v1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.DefaultAddressesName},
			Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "192.0.2.3"}, {IP: "192.0.2.1"}, {IP: "192.0.2.2"}}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// Two LoadBalancers with their listener ports recorded (as the LoadBalancer controller
	// does), the second created in a later second: it is the one refused.
	var last time.Time
	nextSecond := func() {
		testsupport.Eventually(t, 5*time.Second, "a new second", func() error {
			if !time.Now().Truncate(time.Second).After(last) {
				return fmt.Errorf("same second")
			}
			return nil
		})
	}
	for i, name := range []string{"old", "new"} {
		nextSecond()
		lb := loadBalancer(ns, name, int32(20001+i))
		svc := hubService(lb)
		if err := c.Create(ctx, lb); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
		last = lb.CreationTimestamp.Time
	}

	// Three Routes under a limit of one: the Gateway, oldest, is served; the Ingress and the
	// second Gateway are not, and their tenant objects are told so.
	for _, rt := range []*v1alpha1.Route{
		embedding(ns, "gw-a", "gateway.networking.k8s.io/v1", "Gateway"),
		embedding(ns, "ing-b", "networking.k8s.io/v1", "Ingress"),
		embedding(ns, "gw-c", "gateway.networking.k8s.io/v1", "Gateway"),
	} {
		nextSecond()
		if err := c.Create(ctx, rt); err != nil {
			t.Fatal(err)
		}
		last = rt.CreationTimestamp.Time
	}

	rec := &recorder{set: map[string]xds.Resources{}}
	store := status.NewStore()
	r := NewReconciler(c, rec, store, "kubelb", translate.Options{ListenerAddress: "127.0.0.1"})
	reconcileTenant := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	reconcileTenant()
	out := rec.set[ns]
	var listeners []string
	for _, l := range out[resource.ListenerType] {
		listeners = append(listeners, cache.GetResourceName(l))
	}
	if !slices.Equal(listeners, []string{"old-tcp-80"}) {
		t.Errorf("listeners %v, want only old-tcp-80: the refused LoadBalancer gets no traffic config", listeners)
	}
	var endpoints []string
	for _, res := range out[resource.EndpointType] {
		for _, le := range res.(*endpointv3.ClusterLoadAssignment).Endpoints {
			for _, e := range le.LbEndpoints {
				endpoints = append(endpoints, e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
			}
		}
	}
	if !slices.Equal(endpoints, []string{"192.0.2.1", "192.0.2.2"}) {
		t.Errorf("endpoints %v, want the first two by address (spec.limits.endpointsPerCluster: 2)", endpoints)
	}
	rep := store.Get(ns)
	oldRef := ir.ObjectRef{Kind: translate.KindLoadBalancer, Namespace: ns, Name: "old"}
	newRef := ir.ObjectRef{Kind: translate.KindLoadBalancer, Namespace: ns, Name: "new"}
	if _, ok := rep.Objects[newRef]; !ok {
		t.Errorf("the refused LoadBalancer is not in the report's objects (%v): its Programmed condition would not be written", rep.Objects)
	}
	byObject := rep.Problems.ByObject()
	if c := status.Programmed(1, byObject[newRef]); c.Status != metav1.ConditionFalse || c.Reason != quota.ReasonQuotaExceeded ||
		!strings.Contains(c.Message, "may hold 1 LoadBalancer (spec.limits.loadBalancers)") {
		t.Errorf("Programmed of the refused LoadBalancer: %+v", c)
	}
	if c := status.Programmed(1, byObject[oldRef]); c.Status != metav1.ConditionTrue || c.Reason != status.ReasonProgrammedWithWarnings ||
		!strings.Contains(c.Message, "endpointsPerCluster") {
		t.Errorf("Programmed of the cut LoadBalancer: %+v", c)
	}

	routeRef := func(name string) ir.ObjectRef {
		return ir.ObjectRef{Kind: translate.KindRoute, Namespace: ns, Name: name}
	}
	if c := status.Programmed(1, byObject[routeRef("gw-c")]); c.Reason != quota.ReasonQuotaExceeded ||
		!strings.Contains(c.Message, "may hold 1 Route (spec.limits.routes); this is the 3rd oldest") {
		t.Errorf("Programmed of the refused Gateway Route: %+v", c)
	}
	if c := status.Programmed(1, byObject[routeRef("gw-a")]); c.Reason == quota.ReasonQuotaExceeded {
		t.Errorf("the admitted Gateway Route is refused: %+v", c)
	}
	if got := string(rep.Routes["ing-b"].Status); got != `{"loadBalancer":{}}` {
		t.Errorf("status of the refused Ingress %s, want no address", got)
	}
	var gw struct{ Conditions []metav1.Condition }
	if err := json.Unmarshal(rep.Routes["gw-c"].Status, &gw); err != nil {
		t.Fatal(err)
	}
	if p := meta.FindStatusCondition(gw.Conditions, "Programmed"); p == nil || p.Status != metav1.ConditionFalse || p.Reason != "NoResources" ||
		!strings.Contains(p.Message, "spec.limits.routes") {
		t.Errorf("status of the refused Gateway %+v, want Programmed=False NoResources", gw.Conditions)
	}

	// Load balancing disabled: no listener, and a reason that says why.
	tn := &v1alpha1.Tenant{}
	if err := c.Get(ctx, client.ObjectKey{Name: "a"}, tn); err != nil {
		t.Fatal(err)
	}
	tn.Spec.LoadBalancer.Disable = true
	if err := c.Update(ctx, tn); err != nil {
		t.Fatal(err)
	}
	reconcileTenant()
	if n := len(rec.set[ns][resource.ListenerType]); n != 0 {
		t.Errorf("%d listeners while load balancing is disabled", n)
	}
	byObject = store.Get(ns).Problems.ByObject()
	for _, ref := range []ir.ObjectRef{oldRef, newRef} {
		if c := status.Programmed(1, byObject[ref]); c.Reason != translate.ReasonLoadBalancingDisabled || !strings.Contains(c.Message, "load balancing is disabled") {
			t.Errorf("Programmed of %s while disabled: %+v", ref.Name, c)
		}
	}
}

// embedding is a Route embedding a tenant object of apiVersion and kind, named like it.
func embedding(ns, name, apiVersion, kind string) *v1alpha1.Route {
	rt := &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	rt.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": "shop", "generation": int64(3)},
		"spec":     map[string]any{"listeners": []any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}}},
	}}}
	return rt
}
