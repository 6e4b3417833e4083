package envoycp

import (
	"context"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds"
)

// TestSlowRebuildStretchesTheHoldOff: a tenant whose rebuild took 2 s (a large tenant on a
// busy manager) is not rebuilt again within the next 2 s, however many events come; the
// request comes back when that time is up, and then the change made meanwhile reaches the
// proxies. A fast rebuild stretches nothing.
func TestSlowRebuildStretchesTheHoldOff(t *testing.T) {
	t.Parallel()
	c := newClient(t, namespace("tenant-a", true), loadBalancer("tenant-a", "web", 20001),
		&v1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: v1alpha1.DefaultAddressesName},
			Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "10.0.0.1"}}}})
	rec := &recorder{set: map[string]xds.Resources{}}
	r := NewReconciler(c, rec, status.NewStore(), "kubelb", translate.Options{ListenerAddress: "127.0.0.1"})
	r.StretchHoldOff()
	t0 := time.Date(2026, 11, 23, 5, 0, 0, 0, time.UTC)
	var clock []time.Time // what r.now answers, in turn
	r.now = func() time.Time {
		now := clock[0]
		clock = clock[1:]
		return now
	}
	reconcileAt := func(times ...time.Time) reconcile.Result {
		t.Helper()
		clock = times
		res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "tenant-a"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	listeners := func() []string {
		var names []string
		for _, l := range rec.set["tenant-a"][resource.ListenerType] {
			names = append(names, cache.GetResourceName(l))
		}
		return names
	}

	// The first rebuild takes 2 s.
	reconcileAt(t0, t0.Add(2*time.Second))
	if got := listeners(); len(got) != 1 {
		t.Fatalf("listeners after the first rebuild: %v", got)
	}
	sets := rec.sets
	// A LoadBalancer is added; its event comes 1 s after that rebuild ended: deferred by the
	// second left of the stretched hold-off, nothing is rebuilt or pushed.
	api := loadBalancer("tenant-a", "api", 20002)
	if err := c.Create(context.Background(), api); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), hubService(api)); err != nil {
		t.Fatal(err)
	}
	if res := reconcileAt(t0.Add(3 * time.Second)); res.RequeueAfter != time.Second || rec.sets != sets {
		t.Fatalf("a rebuild 1 s after one that took 2 s: requeued after %v, pushed %d times (want after 1s, not pushed)", res.RequeueAfter, rec.sets-sets)
	}
	// When the request comes back, the tenant is rebuilt with the change, quickly this time.
	reconcileAt(t0.Add(4*time.Second), t0.Add(4*time.Second+10*time.Millisecond))
	if got := listeners(); len(got) != 2 || rec.sets != sets+1 {
		t.Fatalf("listeners after the deferred rebuild: %v (pushed %d times)", got, rec.sets-sets)
	}
	// A fast rebuild (10 ms) leaves the next to the events' own HoldOff.
	if res := reconcileAt(t0.Add(4*time.Second+20*time.Millisecond), t0.Add(4*time.Second+30*time.Millisecond)); res.RequeueAfter != 0 {
		t.Fatalf("a rebuild right after a fast one was deferred by %v", res.RequeueAfter)
	}
	// However long a rebuild took, the next waits at most MaxHoldOff.
	if got := stretchedHoldOff(time.Minute); got != MaxHoldOff {
		t.Fatalf("a rebuild of a minute stretches the hold-off to %v, want %v", got, MaxHoldOff)
	}
}
