// Package perobject holds what the per-object controllers of the objects that hold listener
// ports — LoadBalancers and Routes — share (docs/development.md, "Per object"): what the
// manager gives both (Shared: the port allocator, the status Sink, the tenants' planner),
// the first steps of a reconcile (the port allocator, get, gone or being deleted, the
// managed namespace), the watches of a tenant's settings, and the gauge of the objects
// reconciled per tenant.
package perobject

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/namespaces"
	"kubelb.dev/kubelb/internal/manager/planner"
	"kubelb.dev/kubelb/internal/manager/predicates"
	"kubelb.dev/kubelb/internal/manager/requeue"
	statuspkg "kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/manager/tenantingress"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/quota"
	"kubelb.dev/kubelb/internal/ssa"
)

// Shared is what the LoadBalancer and Route controllers share; the manager makes one of each
// and gives both controllers the same (cmd/kubelb), so that they agree.
type Shared struct {
	// Ports is the manager's one listener port allocator (loadbalancer.NewSharedPorts).
	Ports *portalloc.Shared
	// Sink is the one writer of LoadBalancer and Route status (leader only), also the status
	// writer's.
	Sink *statuspkg.Sink
	// Waiters are the tenants waiting for free listener ports, woken by a free from any
	// controller.
	Waiters *requeue.Waiters
	// Ingress tells why a tenant's Ingress Service, which serves LoadBalancer hostnames,
	// cannot be made: the tenants' planner (internal/manager/planner) reports it, the
	// LoadBalancer controller reads it.
	Ingress *tenantingress.Problems
	// Verdicts is the manager's one source of the tenants' quota verdicts (nil: one made
	// here), given to Plans when it is made here.
	Verdicts *quota.Store
	// Plans is the tenants' planner: each LoadBalancer's and Route's quota verdict and
	// listener ports, and each tenant's Ingress Service.
	Plans *planner.Controller
	// StaticAddressRetry is how often the planner looks again at a tenant with a Gateway
	// whose granted static address another hub Service holds (zero: the planner's default);
	// used when Plans is made here.
	StaticAddressRetry time.Duration
}

// WithDefaults returns s with a Sink, Waiters, Ingress and Plans of its own made for what is
// nil (one controller alone, as in some tests); namespace is the manager's (Config default),
// workers the planner's. Ports stays as it is; it must be set for Plans to be made.
func (s Shared) WithDefaults(mgr ctrl.Manager, namespace string, workers int) (Shared, error) {
	if s.Sink == nil {
		s.Sink = statuspkg.NewSink(mgr.GetClient())
	}
	if s.Waiters == nil {
		s.Waiters = requeue.NewWaiters()
	}
	if s.Ingress == nil {
		s.Ingress = tenantingress.New()
	}
	if s.Plans == nil && s.Ports != nil {
		plans, err := planner.SetupWithManager(mgr, planner.Options{Namespace: namespace, Ports: s.Ports, Waiters: s.Waiters, Verdicts: s.Verdicts,
			Ingress: s.Ingress, MaxConcurrentReconciles: workers, StaticAddressRetry: s.StaticAddressRetry})
		if err != nil {
			return s, err
		}
		s.Plans = plans
	}
	return s, nil
}

// Next says how a reconcile goes on after Begin.
type Next int

const (
	// Done: the object was gone or being deleted and is cleaned up (or an error stopped it).
	Done Next = iota
	// Skipped: the object is not in a managed namespace; nothing was done.
	Skipped
	// Proceed: the object is there, alive and managed: reconcile it.
	Proceed
)

// Steps are the first steps of a reconcile of a LoadBalancer or Route, and what differs
// between the two.
type Steps[T client.Object] struct {
	// Kind names the object in errors.
	Kind string
	// Client reads the object and the namespace from the cache.
	Client client.Client
	// Ports is the manager's listener port allocator, rebuilt before the first reconcile.
	Ports *portalloc.Shared
	// Namespace is the manager's (Config default).
	Namespace string
	// Count is the per-tenant gauge of the objects reconciled.
	Count *Count
	// Metric times each reconcile, per tenant.
	Metric *metrics.Reconcile
	// Gone cleans up after an object that no longer exists (key), Delete after one being
	// deleted (something else's finalizer, or a legacy one of ours, holds it).
	Gone   func(context.Context, *portalloc.Allocator, types.NamespacedName) error
	Delete func(context.Context, *portalloc.Allocator, T) error
}

// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=tenants;configs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile is one reconcile of the object req names, in obj: timed in Metric, Begin's first
// steps, then work for an object that proceeds. A conflict is retried (ssa.RetryConflict),
// not reported as an error. The RBAC above is what both controllers need besides their own
// objects: the tenants' settings, hub Services, namespaces and Events.
func (s Steps[T]) Reconcile(ctx context.Context, req reconcile.Request, obj T,
	work func(context.Context, *portalloc.Allocator, T) (reconcile.Result, error)) (res reconcile.Result, err error) {
	result := ""
	defer s.Metric.ObserveDeferred(req.Namespace, time.Now(), &result, &err)
	defer func() { res, err = ssa.RetryConflict(res, err) }()
	ports, next, err := s.Begin(ctx, req, obj)
	switch next {
	case Proceed:
		return work(ctx, ports, obj)
	case Skipped:
		result = metrics.ResultSkipped
	}
	return reconcile.Result{}, err
}

// Begin gets the port allocator and the object req names into obj, and cleans up after an
// object gone or being deleted; an object outside a managed namespace is skipped; an object
// that proceeds is counted.
func (s Steps[T]) Begin(ctx context.Context, req reconcile.Request, obj T) (*portalloc.Allocator, Next, error) {
	ports, err := s.Ports.Get(ctx)
	if err != nil {
		return nil, Done, err
	}
	if err := s.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			// Gone: nothing holds its deletion, so what it made and its ports go now (envtest
			// and a hub without a garbage collector would keep what it owns).
			return nil, Done, s.Gone(ctx, ports, req.NamespacedName)
		}
		return nil, Done, fmt.Errorf("getting %s %s: %w", s.Kind, req, err)
	}
	if !obj.GetDeletionTimestamp().IsZero() { // it no longer counts: the tenant's plan follows its events
		return nil, Done, s.Delete(ctx, ports, obj)
	}
	managed, err := namespaces.Managed(ctx, s.Client, req.Namespace)
	if err != nil {
		return nil, Done, err
	}
	if !managed {
		return nil, Skipped, nil
	}
	s.Count.Remember(req.NamespacedName)
	return ports, Proceed, nil
}

// WatchSettings adds the watches of a tenant's settings to b: a Tenant's change requeues
// the objects of its namespace, Config default's (in the manager's namespace) every object,
// and a change of a namespace's managed label the objects of that namespace. in lists the
// objects of a namespace ("": all), for example with Requests.
func WatchSettings(b *builder.Builder, namespace string, in func(ctx context.Context, namespace string) []reconcile.Request) *builder.Builder {
	return b.
		Watches(&kubelbv1alpha1.Tenant{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return in(ctx, hubnames.TenantNamespace(o.GetName()))
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&kubelbv1alpha1.Config{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			return in(ctx, "")
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{}, predicates.DefaultConfig(namespace))).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return in(ctx, o.GetName())
		}), builder.WithPredicates(namespaces.ManagedLabelChanged()))
}

// Requests lists from the cache the objects of list's kind in namespace ("": all) that keep
// accepts (nil: all), as requests.
func Requests(ctx context.Context, c client.Reader, list client.ObjectList, namespace string, keep func(client.Object) bool) []reconcile.Request {
	opts := []client.ListOption{client.UnsafeDisableDeepCopy}
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := c.List(ctx, list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing objects to requeue", "namespace", namespace)
		return nil
	}
	reqs := make([]reconcile.Request, 0, meta.LenList(list))
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		obj, ok := o.(client.Object)
		if ok && (keep == nil || keep(obj)) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
		}
		return nil
	})
	return reqs
}

// Count is a per-tenant gauge of the objects a controller reconciled.
type Count struct {
	gauge *metrics.TenantGaugeVec
	mu    sync.Mutex
	known map[types.NamespacedName]struct{}
	perNS map[string]int
}

// NewCount returns a Count reported in gauge (label: the tenant namespace).
func NewCount(gauge *metrics.TenantGaugeVec) *Count {
	return &Count{gauge: gauge, known: map[types.NamespacedName]struct{}{}, perNS: map[string]int{}}
}

// Remember counts key (once).
func (c *Count) Remember(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.known[key]; !ok {
		c.known[key] = struct{}{}
		c.perNS[key.Namespace]++
		c.reportLocked(key.Namespace)
	}
}

// Forget stops counting key.
func (c *Count) Forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.known[key]; ok {
		delete(c.known, key)
		c.perNS[key.Namespace]--
		c.reportLocked(key.Namespace)
	}
}

func (c *Count) reportLocked(ns string) {
	if n := c.perNS[ns]; n > 0 {
		c.gauge.WithLabelValues(ns).Set(float64(n))
		return
	}
	delete(c.perNS, ns)
	c.gauge.DeleteLabelValues(ns)
}
