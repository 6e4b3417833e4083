package planner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
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
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/dropped"
	"kubelb.dev/kubelb/internal/manager/hostnames"
	"kubelb.dev/kubelb/internal/manager/hubservice"
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

// collect reads the tenant's Input from the caches.
func (c *Controller) collect(ctx context.Context, namespace string, tenant settings.Tenant) (Input, error) {
	in := Input{Namespace: namespace, Tenant: tenant, Services: map[string]*corev1.Service{}}
	lbs := &kubelbv1alpha1.LoadBalancerList{}
	if err := c.client.List(ctx, lbs, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return in, fmt.Errorf("listing the LoadBalancers of %s: %w", namespace, err)
	}
	routes := &kubelbv1alpha1.RouteList{}
	if err := c.client.List(ctx, routes, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return in, fmt.Errorf("listing the Routes of %s: %w", namespace, err)
	}
	svcs := &corev1.ServiceList{}
	if err := c.client.List(ctx, svcs, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return in, fmt.Errorf("listing the Services of %s: %w", namespace, err)
	}
	in.LoadBalancers = make([]*kubelbv1alpha1.LoadBalancer, 0, len(lbs.Items))
	for i := range lbs.Items {
		in.LoadBalancers = append(in.LoadBalancers, &lbs.Items[i])
	}
	in.Routes = make([]*kubelbv1alpha1.Route, 0, len(routes.Items))
	for i := range routes.Items {
		in.Routes = append(in.Routes, &routes.Items[i])
	}
	for i := range svcs.Items {
		if s := &svcs.Items[i]; planned(s.Name) {
			in.Services[s.Name] = s
		}
	}
	if !tenant.DisableLoadBalancer && !tenant.DNS.IsZero() {
		// A hostname another tenant holds gets no DNS record (nor, from the LoadBalancer
		// controller, a certificate).
		held, err := hostnames.HostnamesHeldElsewhere(ctx, c.client, c.opts.Namespace, in.LoadBalancers)
		if err != nil {
			return in, err
		}
		in.HeldElsewhere = held
	}
	return in, nil
}

// applyPorts makes every LoadBalancer's and Route's listener ports what the plan says, and
// frees those of the objects gone; it returns each object's Outcome and whether one waits
// for free ports. An object whose requests are those it had all of last time keeps its
// ports without asking the allocator again: a plan costs what changed.
func (c *Controller) applyPorts(ports *portalloc.Allocator, p Plan, tenant tenantKey) (map[objectKey]Outcome, bool, error) {
	c.mu.Lock()
	before := c.outcomes[p.Namespace]
	c.mu.Unlock()
	out := make(map[objectKey]Outcome, len(p.Holders))
	waiting := false
	for _, h := range p.Holders {
		if h.Kind == Ingress {
			continue // applyIngress
		}
		key := objectKey{loadBalancer: h.Kind == LoadBalancer, name: h.Name}
		o := Outcome{UID: h.UID, Generation: h.Generation, tenant: tenant, Refused: h.Refused, Problems: h.Problems,
			LoadBalancerPorts: h.LoadBalancerPorts, GatewayPorts: h.GatewayPorts, requests: h.Requests}
		prev, had := before[key]
		switch {
		case h.Action == Keep:
			o.Kept = true
		case had && prev.UID == h.UID && !prev.Kept && prev.Exhausted == nil && sameRequests(prev.requests, h.Requests):
			o.Alloc = prev.Alloc // unchanged: the allocator holds exactly these
		default:
			alloc, released, err := ports.Ensure(h.Owner, h.Requests)
			if err != nil && !errors.Is(err, portalloc.ErrExhausted) {
				return nil, false, fmt.Errorf("allocating listener ports for %s %s/%s: %w", h.Kind, p.Namespace, h.Name, err)
			}
			if released > 0 { // ports this object dropped may serve one that waits
				c.opts.Waiters.Wake()
			}
			o.Alloc, o.Exhausted = alloc, err
			waiting = waiting || err != nil
		}
		out[key] = o
	}
	for _, owner := range p.Release {
		c.release(ports, owner)
	}
	return out, waiting, nil
}

// planned reports whether a Service of this name stands where a plan's hub Service is.
func planned(name string) bool {
	return name == kubelbv1alpha1.IngressServiceName || strings.HasPrefix(name, "envoy-") ||
		strings.HasPrefix(name, kubelbv1alpha1.GatewayServicePrefix)
}

// applyIngress applies the plan's Ingress Service: while it is wanted, its two listener
// ports and the Service with the ports that got one (none: no Service); otherwise it is
// deleted (unless it is someone else's) and its ports freed.
func (c *Controller) applyIngress(ctx context.Context, ports *portalloc.Allocator, p Plan, tenant settings.Tenant, svc *corev1.Service) (IngressOutcome, error) {
	h, ok := p.Holder(Ingress, kubelbv1alpha1.IngressServiceName)
	switch {
	case !ok: // nothing wants it, nothing holds it
		c.release(ports, portalloc.IngressOwner(p.Namespace))
		return IngressOutcome{}, nil
	case h.Foreign && h.Action == Keep: // wanted, and someone else's Service is in the way
		return IngressOutcome{ServiceErr: errForeign(svc)}, nil
	case !h.Wanted:
		if h.DeleteService {
			if err := hubservice.Delete(ctx, c.client, svc); err != nil {
				return IngressOutcome{}, err
			}
		}
		c.release(ports, h.Owner)
		return IngressOutcome{}, nil
	}
	alloc, released, allocErr := ports.Ensure(h.Owner, h.Requests)
	if allocErr != nil && !errors.Is(allocErr, portalloc.ErrExhausted) {
		return IngressOutcome{}, fmt.Errorf("allocating listener ports for the Ingress Service of %s: %w", p.Namespace, allocErr)
	}
	if released > 0 {
		c.opts.Waiters.Wake()
	}
	st := IngressOutcome{Exhausted: allocErr}
	exposed := AllocatedIngressPorts(p.Namespace, alloc)
	if len(exposed) == 0 {
		return st, hubservice.Delete(ctx, c.client, svc)
	}
	if svc != nil && !svc.DeletionTimestamp.IsZero() {
		return st, fmt.Errorf("hub Service %s/%s is being deleted; waiting to make it again", svc.Namespace, svc.Name)
	}
	desired := IngressService(p.Namespace, tenant, exposed, p.Hostnames, svc)
	hubservice.MarkExhausted(desired, MissingIngressPorts(p.Namespace, alloc))
	applied, rejected, err := hubservice.Apply(ctx, c.client, RouteFieldOwner, svc, desired)
	st.ServiceErr = rejected
	if err != nil || rejected != nil {
		return st, err
	}
	st.Service = &ServiceState{Name: kubelbv1alpha1.IngressServiceName, Ports: exposed, Service: applied}
	return st, nil
}

// errForeign is the problem of a Service in the place of the tenant's Ingress Service that
// kubelb did not make.
func errForeign(svc *corev1.Service) error {
	return fmt.Errorf("service %s/%s exists and was not made by kubelb for this Route; rename or delete it", svc.Namespace, svc.Name)
}

// release frees an owner's ports and wakes those waiting for ports.
func (c *Controller) release(ports *portalloc.Allocator, owner types.NamespacedName) {
	if ports.ReleaseOwner(owner) > 0 {
		c.opts.Waiters.Wake()
	}
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
}

// publish records the tenant's outcomes (nil: none, the namespace is not managed) and
// requeues, in their controllers' queues, the objects whose Outcome changed, and the
// tenant's Ingress Routes (of routes) when its Ingress Service's did.
func (c *Controller) publish(namespace string, st *IngressOutcome, outcomes map[objectKey]Outcome, routes []*kubelbv1alpha1.Route) {
	c.mu.Lock()
	prev, had := c.ingress[namespace]
	before := c.outcomes[namespace]
	if st == nil {
		delete(c.ingress, namespace)
		delete(c.outcomes, namespace)
	} else {
		c.ingress[namespace] = *st
		c.outcomes[namespace] = outcomes
	}
	c.mu.Unlock()
	var lbs, rts []types.NamespacedName
	changed := func(k objectKey) {
		key := types.NamespacedName{Namespace: namespace, Name: k.name}
		if k.loadBalancer {
			lbs = append(lbs, key)
		} else {
			rts = append(rts, key)
		}
	}
	for k, o := range outcomes {
		if b, ok := before[k]; !ok || !b.equal(o) {
			changed(k)
		}
	}
	for k := range before {
		if _, ok := outcomes[k]; !ok {
			changed(k)
			gone := types.NamespacedName{Namespace: namespace, Name: k.name}
			if k.loadBalancer {
				c.droppedLB.Forget(gone)
			} else {
				c.droppedRoute.Forget(gone)
			}
		}
	}
	if !((st == nil && !had) || (st != nil && had && prev.equal(*st))) {
		for _, rt := range routes {
			key := client.ObjectKeyFromObject(rt)
			if k, _ := routekind.Of(rt); k.HubService() == routekind.SharedIngressService && !slices.Contains(rts, key) {
				rts = append(rts, key)
			}
		}
	}
	c.loadBalancers.Add(lbs...)
	c.routes.Add(rts...)
}

// OutcomeOf is the last Outcome of the LoadBalancer (loadBalancer true) or Route key; false
// before its tenant's plan knows it.
func (c *Controller) OutcomeOf(loadBalancer bool, key types.NamespacedName) (Outcome, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.outcomes[key.Namespace][objectKey{loadBalancer: loadBalancer, name: key.Name}]
	return o, ok
}

// LoadBalancers captures the LoadBalancer controller's queue: LoadBalancers whose Outcome
// changed are added to it.
func (c *Controller) LoadBalancers() source.Source { return c.loadBalancers.Source() }

// Routes captures the Route controller's queue: Routes whose Outcome changed, and the
// Ingress Routes of a tenant whose Ingress Service's outcome changed, are added to it.
func (c *Controller) Routes() source.Source { return c.routes.Source() }

// IngressOf is the last outcome of the tenant's Ingress Service, false before the tenant's
// first plan.
func (c *Controller) IngressOf(namespace string) (IngressOutcome, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.ingress[namespace]
	return st, ok
}

// sameHostnameElsewhere maps a LoadBalancer with an explicit hostname to the tenants with a
// LoadBalancer of the same hostname (hostnames.SameHostnameElsewhere): which of them holds it
// (and gets its DNS record) may have changed.
func (c *Controller) sameHostnameElsewhere(ctx context.Context, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, k := range hostnames.SameHostnameElsewhere(ctx, c.client, o) {
		if req := tenantRequest(k.Namespace); !slices.Contains(out, req) {
			out = append(out, req)
		}
	}
	return out
}

// everyTenant requeues every namespace with Routes or LoadBalancers: Config applies to all.
func (c *Controller) everyTenant(ctx context.Context, _ client.Object) []reconcile.Request {
	seen := map[string]bool{}
	var out []reconcile.Request
	add := func(ns string) {
		if !seen[ns] {
			seen[ns] = true
			out = append(out, tenantRequest(ns))
		}
	}
	routes := &kubelbv1alpha1.RouteList{}
	lbs := &kubelbv1alpha1.LoadBalancerList{}
	for _, l := range []client.ObjectList{routes, lbs} {
		if err := c.client.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing objects to requeue the tenants' plans")
			return out
		}
	}
	for i := range routes.Items {
		add(routes.Items[i].Namespace)
	}
	for i := range lbs.Items {
		add(lbs.Items[i].Namespace)
	}
	return out
}

// tenantRequest is the request of a tenant namespace.
func tenantRequest(namespace string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Name: namespace}}
}

// namespaceKey maps an object to its namespace's request.
func namespaceKey(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{tenantRequest(o.GetNamespace())}
}

// namespaceSelf maps a Namespace to its own request.
func namespaceSelf(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{tenantRequest(o.GetName())}
}

// tenantToRequest maps a Tenant to its namespace's request.
func tenantToRequest(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{tenantRequest(hubnames.TenantNamespace(o.GetName()))}
}

// hubServiceChanged passes the Services standing where a plan's hub Services are
// ("envoy-…", "gateway-…", kubelb-ingress, or labelled so) when they are made or deleted,
// and updates of what the plan reads of them: their ports (the hints), owners, labels and
// deletion.
func hubServiceChanged() predicate.Predicate {
	looks := func(o client.Object) bool {
		return hubnames.LooksLikeLoadBalancerService(o) || hubnames.LooksLikeRouteService(o)
	}
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return looks(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return looks(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return looks(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, okOld := e.ObjectOld.(*corev1.Service)
			n, okNew := e.ObjectNew.(*corev1.Service)
			if !okOld || !okNew || !looks(n) {
				return false
			}
			return !equality.Semantic.DeepEqual(o.Spec.Ports, n.Spec.Ports) || !equality.Semantic.DeepEqual(o.OwnerReferences, n.OwnerReferences) ||
				!maps.Equal(o.Labels, n.Labels) || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
		},
	}
}
