package envoycp

import (
	"context"
	"strings"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/encoding/prototext"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/manager/envoyfleet"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds"
)

// TestRateLimitServiceOfTheTenant: a tenant whose Gateway carries a BackendTrafficPolicy with a
// global rate limit (the golden gw-global-rate-limit's objects) gets its Envoys pointed at its
// rate-limit Service (the cluster kubelb/ratelimit at the Service's cluster IP and gRPC port)
// and the rate-limit configuration of its domain in its snapshot, when Config "default" has a
// store (spec.rateLimit) and the envoyfleet controller made that Service. Without a store, or
// before the Service is there, the policies are OverPlatformBound and the snapshot has no
// rate-limit configuration.
func TestRateLimitServiceOfTheTenant(t *testing.T) {
	t.Parallel()
	in, err := translatetest.LoadInput("../../translate/testdata/gw-global-rate-limit.in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objects := func() []client.Object {
		objs := []client.Object{namespace(in.Tenant, true)}
		for _, a := range in.Addresses {
			objs = append(objs, a.DeepCopy())
		}
		for i := range in.RouteServices {
			svc := in.RouteServices[i].DeepCopy()
			svc.Labels[v1alpha1.LabelManagedBy] = v1alpha1.LabelManagedByValue
			objs = append(objs, svc)
		}
		for i := range in.Routes {
			objs = append(objs, in.Routes[i].DeepCopy())
		}
		return objs
	}
	store := &v1alpha1.RateLimitStore{Image: "envoyproxy/ratelimit:3fb70258", RedisURL: "redis.kubelb.svc:6379"}
	config := func(s *v1alpha1.RateLimitStore) *v1alpha1.Config {
		return &v1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Namespace: "kubelb", Name: "default"}, Spec: v1alpha1.ConfigSpec{RateLimit: s}}
	}
	// The Service as envoyfleet makes it, with the cluster IP the API server gave it.
	rls := envoyfleet.BuildRateLimit(envoyfleet.RateLimitInput{Namespace: in.Tenant, Store: store, XDSAddress: "kubelb.kubelb.svc:8001"}).Service
	rls.Spec.ClusterIP = "10.96.0.10"
	foreign := rls.DeepCopy() // a Service of that name the manager did not make
	foreign.Labels = map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}

	reconcileOnce := func(t *testing.T, extra ...client.Object) (xds.Resources, *status.Report) {
		t.Helper()
		rec := &recorder{set: map[string]xds.Resources{}}
		st := status.NewStore()
		r := NewReconciler(newClient(t, append(objects(), extra...)...), rec, st, "kubelb", translate.Options{ListenerAddress: "127.0.0.1"})
		if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: in.Tenant}}); err != nil {
			t.Fatal(err)
		}
		return rec.set[in.Tenant], st.Get(in.Tenant)
	}
	overBound := func(rep *status.Report) []string {
		var out []string
		for _, p := range rep.Problems {
			if p.Reason == translate.ReasonOverPlatformBound {
				out = append(out, p.Message)
			}
		}
		return out
	}

	t.Run("store and Service", func(t *testing.T) {
		t.Parallel()
		res, rep := reconcileOnce(t, config(store), rls)
		if got := overBound(rep); len(got) != 0 {
			t.Errorf("OverPlatformBound with a store: %v", got)
		}
		rlc := res[resource.RateLimitConfigType]
		if len(rlc) != 1 {
			t.Fatalf("rate-limit configurations in the snapshot: %d, want 1", len(rlc))
		}
		c := rlc[0].(*rlsconfv3.RateLimitConfig)
		if c.GetDomain() != in.Tenant || len(c.GetDescriptors()) != 3 {
			t.Errorf("rate-limit configuration of domain %q with %d routes, want %q with 3 (web, shop, api)", c.GetDomain(), len(c.GetDescriptors()), in.Tenant)
		}
		// The cluster (or its endpoints) reaches the Service's cluster IP on the gRPC port.
		reached := false
		for _, typeURL := range []string{resource.ClusterType, resource.EndpointType} {
			for _, r := range res[typeURL] {
				if cache.GetResourceName(r) == translate.RateLimitCluster {
					s := prototext.Format(r)
					reached = reached || strings.Contains(s, `"10.96.0.10"`) && strings.Contains(s, "8081")
				}
			}
		}
		if !reached {
			t.Errorf("no cluster %s reaching 10.96.0.10:8081 in the snapshot", translate.RateLimitCluster)
		}
	})
	for name, extra := range map[string][]client.Object{
		"no store":                 {rls},
		"store, no Service yet":    {config(store)},
		"store, a foreign Service": {config(store), foreign},
		"an invalid store":         {config(&v1alpha1.RateLimitStore{Image: "x", RedisURL: "redis"}), rls},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res, rep := reconcileOnce(t, extra...)
			if got := overBound(rep); len(got) == 0 || !strings.Contains(got[0], "rate-limit store") {
				t.Errorf("OverPlatformBound problems %v, want the policies refused for want of a rate-limit store", got)
			}
			if n := len(res[resource.RateLimitConfigType]); n != 0 {
				t.Errorf("%d rate-limit configurations in the snapshot, want none", n)
			}
		})
	}
}

// TestRateLimitServiceChanged: the tenant is rebuilt when its rate-limit Service comes, goes
// or changes its cluster IP, not for other changes of it, nor for other Services.
func TestRateLimitServiceChanged(t *testing.T) {
	t.Parallel()
	p := rateLimitServiceChanged()
	svc := envoyfleet.BuildRateLimit(envoyfleet.RateLimitInput{Namespace: "tenant-a",
		Store: &v1alpha1.RateLimitStore{Image: "ratelimit", RedisURL: "redis:6379"}, XDSAddress: "kubelb.kubelb.svc:8001"}).Service
	withIP := svc.DeepCopy()
	withIP.Spec.ClusterIP = "10.96.0.10"
	annotated := withIP.DeepCopy()
	annotated.Annotations = map[string]string{"x": "y"}
	other := withIP.DeepCopy()
	other.Name = "envoy-web"
	if !p.Create(event.CreateEvent{Object: svc}) || !p.Delete(event.DeleteEvent{Object: withIP}) {
		t.Error("a rate-limit Service made or deleted does not rebuild its tenant")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: svc, ObjectNew: withIP}) {
		t.Error("a rate-limit Service given its cluster IP does not rebuild its tenant")
	}
	if p.Update(event.UpdateEvent{ObjectOld: withIP, ObjectNew: annotated}) || p.Create(event.CreateEvent{Object: other}) {
		t.Error("an unrelated change rebuilds the tenant")
	}
}
