package tenant

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
)

// DefaultCountsInterval is the least time between two writes of a Tenant's LoadBalancers and
// Routes counts: a burst of tenant objects costs one Tenant write per interval, not one per
// object.
const DefaultCountsInterval = 10 * time.Second

// objectCounts are the counts the Tenant's status shows (status.loadBalancers, .routes).
type objectCounts struct{ loadBalancers, routes int32 }

func countsOf(st kubelbv1alpha1.TenantStatus) objectCounts {
	return objectCounts{loadBalancers: st.LoadBalancers, routes: st.Routes}
}

// countsDue decides whether counts that changed from have to want may be written now, given
// when the tenant's counts were last written: write, or wait that long before asking again.
func countsDue(have, want objectCounts, last, now time.Time, interval time.Duration) (write bool, wait time.Duration) {
	if have == want {
		return false, 0
	}
	if since := now.Sub(last); !last.IsZero() && since < interval {
		return false, interval - since
	}
	return true, 0
}

// countGate remembers, per tenant, when its counts were last written (in memory: a
// restarted manager writes at once, which is rare enough).
type countGate struct {
	mu      sync.Mutex
	written map[string]time.Time
}

func (g *countGate) last(tenant string) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.written[tenant]
}

func (g *countGate) wrote(tenant string, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.written == nil {
		g.written = map[string]time.Time{}
	}
	g.written[tenant] = at
}

func (g *countGate) forget(tenant string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.written, tenant)
}

// countObjects counts the LoadBalancers and Routes of a tenant namespace in the cache.
func (r *Reconciler) countObjects(ctx context.Context, namespace string) (objectCounts, error) {
	var lbs kubelbv1alpha1.LoadBalancerList
	if err := r.client.List(ctx, &lbs, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return objectCounts{}, fmt.Errorf("counting the LoadBalancers of %s: %w", namespace, err)
	}
	var routes kubelbv1alpha1.RouteList
	if err := r.client.List(ctx, &routes, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return objectCounts{}, fmt.Errorf("counting the Routes of %s: %w", namespace, err)
	}
	return objectCounts{loadBalancers: int32(len(lbs.Items)), routes: int32(len(routes.Items))}, nil //nolint:gosec // bounded by the tenant's quota
}

// counts sets the outcome's counts when they changed and the gate lets them be written, and
// otherwise asks for a reconcile when it will.
func (r *Reconciler) counts(ctx context.Context, t *kubelbv1alpha1.Tenant, o *outcome) error {
	want, err := r.countObjects(ctx, hubnames.TenantNamespace(t.Name))
	if err != nil {
		return err
	}
	now := r.now()
	write, wait := countsDue(countsOf(t.Status), want, r.countGate.last(t.Name), now, r.opts.countsInterval)
	switch {
	case write:
		o.counts = &want
	case wait > 0 && (o.requeueAfter == 0 || wait < o.requeueAfter):
		o.requeueAfter = wait
	}
	return nil
}

// enqueueCountLater maps the creation or deletion of a tenant object to a reconcile of its
// Tenant one interval later: a burst of them is one reconcile.
func enqueueCountLater(interval time.Duration) handler.EventHandler {
	later := func(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if !hubnames.IsTenantNamespace(o.GetNamespace()) {
			return
		}
		q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Name: hubnames.TenantName(o.GetNamespace())}}, interval)
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			later(e.Object, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			later(e.Object, q)
		},
	}
}
