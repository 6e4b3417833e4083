package planner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/dropped"
	"kubelb.dev/kubelb/internal/manager/hostnames"
	"kubelb.dev/kubelb/internal/manager/namespaces"
	"kubelb.dev/kubelb/internal/manager/predicates"
	"kubelb.dev/kubelb/internal/manager/requeue"
	"kubelb.dev/kubelb/internal/manager/tenantingress"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/quota"
	"kubelb.dev/kubelb/internal/routekind"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/ssa"
)

// controllerName names the planner (logs, metrics).
const controllerName = "planner"

// Options configure the planner.
type Options struct {
	// Namespace the manager runs in; holds Config "default".
	Namespace string
	// Ports is the manager's one listener port allocator.
	Ports *portalloc.Shared
	// Waiters wake a tenant waiting for listener ports when any controller frees some.
	Waiters *requeue.Waiters
	// Ingress is told why a tenant's Ingress Service, which serves LoadBalancer hostnames,
	// cannot be made (the LoadBalancer controller reports it).
	Ingress *tenantingress.Problems
	// Verdicts is the manager's one source of the tenants' quota verdicts, shared with the
	// Envoy control plane and the Tenant controller (nil: one of the planner's own).
	Verdicts *quota.Store
	// MaxConcurrentReconciles is the number of workers (tenants planned at once); at least 1.
	MaxConcurrentReconciles int
	// StaticAddressRetry is how often a tenant with a Gateway whose granted static address
	// another hub Service holds or asks for is planned again (it may have been freed); zero
	// means DefaultStaticAddressRetry.
	StaticAddressRetry time.Duration
}

// Controller is the tenant-keyed planner (leader only; the per-tenant shape of
// docs/development.md): collect the tenant's objects, settings, hub Services and port
// holders from the caches and the allocator → Plan (pure, remembered per object) → apply
// (the hub Services of objects gone; every holder's listener ports; every LoadBalancer's and
// Gateway's hub Service, services.go; the tenant's shared Ingress Service: its Service with
// its DNS annotation, or its deletion) → publish (each LoadBalancer's and Route's Outcome:
// its quota verdict, its ports and its hub Service's, requeued in its controller when it
// changed; the Ingress Service's outcome). One reconcile per tenant at a time, by the queue:
// no lock guards a tenant's ports and Services.
type Controller struct {
	client   client.Client
	recorder events.EventRecorder
	opts     Options

	// droppedLB and droppedRoute tell which steering annotations were not propagated onto a
	// LoadBalancer's or Gateway's hub Service, once per set.
	droppedLB, droppedRoute dropped.Annotations

	loadBalancers, routes requeue.Queue // the LoadBalancer and Route controllers' queues

	mu       sync.Mutex
	planners map[string]*Planner              // tenant namespace → its memo
	ingress  map[string]IngressOutcome        // tenant namespace → the last outcome of its Ingress Service
	outcomes map[string]map[objectKey]Outcome // tenant namespace → each object's last Outcome
	applied  map[string]map[types.UID]applied // tenant namespace → what its hub Services were applied from

	deleted deletions // hub Services deleted and still in the cache
}

// objectKey names a LoadBalancer or a Route of a tenant.
type objectKey struct {
	loadBalancer bool
	name         string
}

// Outcome is what the last plan of its tenant gave one LoadBalancer or Route.
type Outcome struct {
	// UID and Generation are those of the object the plan saw, and tenant what it read of
	// the tenant's settings: an object or settings that differ wait for the next plan
	// (which requeues the object); see For.
	UID        types.UID
	Generation int64
	tenant     tenantKey
	// Refused is why the tenant's limits refuse the object ("" when admitted).
	Refused string
	// Kept: the plan left the allocation as it was (a stale or foreign hub Service in the
	// way, or a Route name that cannot label a Service): Alloc is empty.
	Kept bool
	// Alloc is the object's listener ports (a LoadBalancer's, a Gateway's); Exhausted says
	// why some are missing (the range has none left; they come as soon as some are freed).
	Alloc     map[portalloc.Key]int32
	Exhausted error
	// Problems are the ports left out (repeats, invalid listeners); LoadBalancerPorts and
	// GatewayPorts are the ports planned (Holder).
	Problems          []string
	LoadBalancerPorts []quota.LoadBalancerPort
	GatewayPorts      []routekind.ListenerPort
	// Service is what was done with the object's hub Service (a LoadBalancer's, a
	// Gateway's).
	Service ServiceOutcome
	// requests are what was asked of the allocator (Alloc answers them).
	requests []portalloc.Request
}

// sameRequests reports whether a and b ask for the same keys with the same hints.
func sameRequests(a, b []portalloc.Request) bool {
	return slices.EqualFunc(a, b, func(x, y portalloc.Request) bool { return x.Key == y.Key && slices.Equal(x.Hints, y.Hints) })
}

// tenantKey is what of the tenant's settings a plan's outcomes depend on.
type tenantKey struct {
	settings settingsKey
	limits   settings.Limits
}

func tenantKeyOf(t settings.Tenant) tenantKey { return tenantKey{settings: keyOf(t), limits: t.Limits} }

// For reports whether the outcome was planned for obj as it is (UID and generation) under the
// tenant's settings t: otherwise the object's controller waits for the next plan, which
// requeues it.
func (o Outcome) For(obj client.Object, t settings.Tenant) bool {
	return o.UID == obj.GetUID() && o.Generation == obj.GetGeneration() && o.tenant == tenantKeyOf(t)
}

// equal tells whether two outcomes say the same to the object's controller.
func (o Outcome) equal(p Outcome) bool {
	return o.UID == p.UID && o.Generation == p.Generation && o.tenant == p.tenant && o.Refused == p.Refused && o.Kept == p.Kept &&
		maps.Equal(o.Alloc, p.Alloc) && errString(o.Exhausted) == errString(p.Exhausted) && slices.Equal(o.Problems, p.Problems) &&
		slices.Equal(o.LoadBalancerPorts, p.LoadBalancerPorts) && slices.Equal(o.GatewayPorts, p.GatewayPorts) && o.Service.equal(p.Service)
}

// ServiceState is a hub Service as a Route's status reports it: name, ports and its status
// (nil Service: just applied, no status yet).
type ServiceState struct {
	Name    string
	Ports   []Port
	Service *corev1.Service
}

// IngressOutcome is the outcome of the last plan of a tenant's Ingress Service: the Service
// as reported (nil: none), or why it is not there.
type IngressOutcome struct {
	Service    *ServiceState
	Exhausted  error
	ServiceErr error
}

// Problem says why the Ingress Service cannot serve the tenant's LoadBalancer hostnames, in
// words for the LoadBalancer's Hostname condition ("" when it can).
func (s IngressOutcome) Problem() string {
	switch {
	case s.Exhausted != nil:
		return fmt.Sprintf("the tenant's Ingress Service %s has no listener port for it (%v); ports are given as soon as the hub frees some, or ask the hub's admin for a larger --envoy-port-range", kubelbv1alpha1.IngressServiceName, s.Exhausted)
	case s.ServiceErr != nil:
		return fmt.Sprintf("the tenant's Ingress Service %s cannot be applied: %v", kubelbv1alpha1.IngressServiceName, s.ServiceErr)
	}
	return ""
}

// equal tells whether two outcomes report the same to the Ingress Routes.
func (s IngressOutcome) equal(o IngressOutcome) bool {
	return errString(s.Exhausted) == errString(o.Exhausted) && errString(s.ServiceErr) == errString(o.ServiceErr) &&
		(s.Service == nil) == (o.Service == nil) &&
		(s.Service == nil || (s.Service.Name == o.Service.Name && slices.Equal(s.Service.Ports, o.Service.Ports) &&
			(s.Service.Service == nil) == (o.Service.Service == nil) &&
			(s.Service.Service == nil || equality.Semantic.DeepEqual(s.Service.Service.Status, o.Service.Service.Status))))
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// SetupWithManager registers the planner with mgr.
func SetupWithManager(mgr ctrl.Manager, opts Options) (*Controller, error) {
	if opts.Ports == nil || opts.Waiters == nil || opts.Ingress == nil {
		return nil, errors.New("setting up the planner: Ports, Waiters and Ingress are required")
	}
	if opts.MaxConcurrentReconciles <= 0 {
		opts.MaxConcurrentReconciles = 1
	}
	if opts.StaticAddressRetry <= 0 {
		opts.StaticAddressRetry = DefaultStaticAddressRetry
	}
	if opts.Verdicts == nil {
		opts.Verdicts = quota.NewStore(mgr.GetCache(), mgr.GetClient())
	}
	if err := indexServiceAddresses(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, fmt.Errorf("setting up the planner: %w", err)
	}
	c := &Controller{client: mgr.GetClient(), recorder: mgr.GetEventRecorder("kubelb-manager"), opts: opts, planners: map[string]*Planner{},
		ingress: map[string]IngressOutcome{}, outcomes: map[string]map[objectKey]Outcome{}, applied: map[string]map[types.UID]applied{}}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		// What the plan and the hub Services read of them: spec, labels, annotations.
		Watches(&kubelbv1alpha1.Route{}, handler.EnqueueRequestsFromMapFunc(namespaceKey),
			builder.WithPredicates(predicates.SpecMetadataOrDeletionChanged())).
		Watches(&kubelbv1alpha1.LoadBalancer{}, handler.EnqueueRequestsFromMapFunc(namespaceKey),
			builder.WithPredicates(predicates.SpecMetadataOrDeletionChanged())).
		Watches(&kubelbv1alpha1.LoadBalancer{}, handler.EnqueueRequestsFromMapFunc(c.sameHostnameElsewhere),
			builder.WithPredicates(predicates.SpecOrDeletionChanged(), predicate.NewPredicateFuncs(hostnames.HasExplicitHostname))).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(namespaceKey),
			builder.WithPredicates(hubServiceChanged())).
		Watches(&kubelbv1alpha1.Tenant{}, handler.EnqueueRequestsFromMapFunc(tenantToRequest),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&kubelbv1alpha1.Config{}, handler.EnqueueRequestsFromMapFunc(c.everyTenant),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}, predicates.DefaultConfig(opts.Namespace))).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(namespaceSelf),
			builder.WithPredicates(namespaces.ManagedLabelChanged())).
		WatchesRawSource(opts.Waiters.Source()).
		// One tenant per request (a tenant's burst of events folds into it); tenants are
		// planned in parallel, a request never twice at once.
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles}).
		Complete(c)
	if err != nil {
		return nil, fmt.Errorf("setting up the planner: %w", err)
	}
	return c, nil
}

// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=loadbalancers;routes;tenants;configs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile plans the tenant of namespace req.Name: collect → plan → apply → publish.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	defer func() { res, err = ssa.RetryConflict(res, err) }()
	namespace := req.Name
	freed := c.opts.Waiters.Freed() // before any allocation: a free while it runs is not missed
	ports, err := c.opts.Ports.Get(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	managed, err := namespaces.Managed(ctx, c.client, namespace)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !managed { // gone or unmanaged: forget the tenant
		c.release(ports, portalloc.IngressOwner(namespace))
		for _, o := range ports.Owners(namespace) {
			c.release(ports, o)
		}
		c.opts.Waiters.Set(req.NamespacedName, false, 0)
		c.forget(namespace)
		c.publish(namespace, nil, nil, nil)
		c.opts.Ingress.Set(ctx, namespace, "")
		return reconcile.Result{}, nil
	}
	// Collect.
	tenant, err := settings.Load(ctx, c.client, c.opts.Namespace, hubnames.TenantName(namespace))
	if err != nil {
		return reconcile.Result{}, err
	}
	in, err := c.collect(ctx, namespace, tenant)
	if err != nil {
		return reconcile.Result{}, err
	}
	in.Allocated = ports.Owners(namespace)
	// Plan.
	p := c.planner(namespace).Plan(in)
	// Apply: the hub Services of what is gone first (the record of their ports), then the
	// ports, then the hub Services.
	for _, name := range p.DeleteServices {
		if err := c.deleteService(ctx, in.Services[name]); err != nil {
			return reconcile.Result{}, err
		}
	}
	outcomes, waiting, err := c.applyPorts(ports, p, tenantKeyOf(tenant))
	if err != nil {
		return reconcile.Result{}, err
	}
	again, svcErr := c.applyServices(ctx, p, in, tenant, outcomes)
	st, err := c.applyIngress(ctx, ports, p, tenant, in.Services[kubelbv1alpha1.IngressServiceName])
	if err != nil {
		return reconcile.Result{}, errors.Join(svcErr, err)
	}
	// Publish.
	c.publish(namespace, &st, outcomes, in.Routes)
	c.opts.Waiters.Set(req.NamespacedName, waiting || st.Exhausted != nil, freed)
	c.opts.Ingress.Set(ctx, namespace, st.Problem())
	if st.ServiceErr != nil { // retried with backoff: some rejections are transient
		svcErr = errors.Join(svcErr, fmt.Errorf("applying the Ingress Service of %s: %w", namespace, st.ServiceErr))
	}
	return reconcile.Result{RequeueAfter: again}, svcErr
}

// planner is the tenant's memo.
func (c *Controller) planner(namespace string) *Planner {
	c.mu.Lock()
	defer c.mu.Unlock()
	pl, ok := c.planners[namespace]
	if !ok {
		pl = &Planner{}
		c.planners[namespace] = pl
	}
	return pl
}

// forget drops the tenant's memo.
func (c *Controller) forget(namespace string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.planners, namespace)
	delete(c.applied, namespace)
	c.deleted.forget(namespace)
}
