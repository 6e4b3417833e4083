package planner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/hostnames"
	"kubelb.dev/kubelb/internal/manager/hubservice"
	"kubelb.dev/kubelb/internal/manager/namespaces"
	"kubelb.dev/kubelb/internal/manager/predicates"
	"kubelb.dev/kubelb/internal/manager/requeue"
	"kubelb.dev/kubelb/internal/manager/tenantingress"
	"kubelb.dev/kubelb/internal/portalloc"
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
	// Readmit is told each plan's quota verdict, and requeues the LoadBalancers and Routes it
	// admits or refuses anew.
	Readmit *requeue.Readmit
	// Waiters wake a tenant waiting for listener ports when any controller frees some.
	Waiters *requeue.Waiters
	// Ingress is told why a tenant's Ingress Service, which serves LoadBalancer hostnames,
	// cannot be made (the LoadBalancer controller reports it).
	Ingress *tenantingress.Problems
	// IngressChanged is called with a tenant namespace whose Ingress Service outcome changed
	// (the Route controller requeues its Ingress Routes, which report it).
	IngressChanged func(namespace string)
	// MaxConcurrentReconciles is the number of workers (tenants planned at once); at least 1.
	MaxConcurrentReconciles int
}

// Controller is the tenant-keyed planner (leader only; the per-tenant shape of
// docs/development.md): collect the tenant's objects, settings and hub Services from the
// caches → Plan (pure, remembered per object) → apply → publish. Today it applies the
// tenant's shared Ingress Service (its listener ports, its Service with its DNS annotation,
// its deletion) and the quota verdict's requeues; the LoadBalancers' and Gateways' ports and
// hub Services are still their controllers'. One reconcile per tenant at a time, by the
// queue: no lock guards a tenant's Services.
type Controller struct {
	client client.Client
	opts   Options

	mu       sync.Mutex
	planners map[string]*Planner       // tenant namespace → its memo
	ingress  map[string]IngressOutcome // tenant namespace → the last outcome of its Ingress Service
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
	if opts.Ports == nil || opts.Readmit == nil || opts.Waiters == nil || opts.Ingress == nil {
		return nil, errors.New("setting up the planner: Ports, Readmit, Waiters and Ingress are required")
	}
	if opts.MaxConcurrentReconciles <= 0 {
		opts.MaxConcurrentReconciles = 1
	}
	c := &Controller{client: mgr.GetClient(), opts: opts, planners: map[string]*Planner{}, ingress: map[string]IngressOutcome{}}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		Watches(&kubelbv1alpha1.Route{}, handler.EnqueueRequestsFromMapFunc(namespaceKey),
			builder.WithPredicates(predicates.SpecOrDeletionChanged())).
		Watches(&kubelbv1alpha1.LoadBalancer{}, handler.EnqueueRequestsFromMapFunc(namespaceKey),
			builder.WithPredicates(predicates.SpecOrDeletionChanged())).
		Watches(&kubelbv1alpha1.LoadBalancer{}, handler.EnqueueRequestsFromMapFunc(c.sameHostnameElsewhere),
			builder.WithPredicates(predicates.SpecOrDeletionChanged(), predicate.NewPredicateFuncs(hostnames.HasExplicitHostname))).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(namespaceKey),
			builder.WithPredicates(predicate.NewPredicateFuncs(isIngressServiceName))).
		Watches(&kubelbv1alpha1.Tenant{}, handler.EnqueueRequestsFromMapFunc(tenantKey),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&kubelbv1alpha1.Config{}, handler.EnqueueRequestsFromMapFunc(c.everyTenant),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}, predicates.DefaultConfig(opts.Namespace))).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(namespaceSelf),
			builder.WithPredicates(namespaces.ManagedLabelChanged())).
		WatchesRawSource(opts.Waiters.Source(requeue.IngressServices)).
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
		c.opts.Waiters.Set(requeue.IngressServices, req.NamespacedName, false, 0)
		c.forget(namespace)
		c.publish(namespace, nil)
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
	// Plan.
	p := c.planner(namespace).Plan(in)
	c.opts.Readmit.Observe(namespace, p.Verdict)
	// Apply.
	st, err := c.applyIngress(ctx, ports, p, tenant, in.Services[kubelbv1alpha1.IngressServiceName])
	if err != nil {
		return reconcile.Result{}, err
	}
	// Publish.
	c.publish(namespace, &st)
	c.opts.Waiters.Set(requeue.IngressServices, req.NamespacedName, st.Exhausted != nil, freed)
	c.opts.Ingress.Set(ctx, namespace, st.Problem())
	if st.ServiceErr != nil { // retried with backoff: some rejections are transient
		return reconcile.Result{}, fmt.Errorf("applying the Ingress Service of %s: %w", namespace, st.ServiceErr)
	}
	return reconcile.Result{}, nil
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
}

// publish records the tenant's Ingress Service outcome (nil: none, the namespace is not
// managed) and, when it changed, tells IngressChanged.
func (c *Controller) publish(namespace string, st *IngressOutcome) {
	c.mu.Lock()
	prev, had := c.ingress[namespace]
	if st == nil {
		delete(c.ingress, namespace)
	} else {
		c.ingress[namespace] = *st
	}
	c.mu.Unlock()
	if (st == nil && !had) || (st != nil && had && prev.equal(*st)) {
		return
	}
	if c.opts.IngressChanged != nil {
		c.opts.IngressChanged(namespace)
	}
}

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

// tenantKey maps a Tenant to its namespace's request.
func tenantKey(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{tenantRequest(hubnames.TenantNamespace(o.GetName()))}
}

// isIngressServiceName passes the Services named as a tenant's Ingress Service.
func isIngressServiceName(o client.Object) bool {
	return o.GetName() == kubelbv1alpha1.IngressServiceName
}
