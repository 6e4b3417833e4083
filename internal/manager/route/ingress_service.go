package route

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	"kubelb.dev/kubelb/internal/manager/planner"
	"kubelb.dev/kubelb/internal/manager/predicates"
	"kubelb.dev/kubelb/internal/manager/requeue"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/ssa"
)

// ingressControllerName names the tenant Ingress Service controller (logs, metrics).
const ingressControllerName = "ingress-service"

// ingressServices keeps each tenant's shared Ingress Service (kubelb-ingress: ports 80 and
// 443 on the tenant's Envoy fleet) in line with the tenant's Ingress Routes and LoadBalancer
// hostnames. It has the per-tenant shape (docs/development.md): the request is a tenant
// namespace; collect (settings, the quota verdict, the admitted Ingress Routes and
// LoadBalancer hostnames, the Service as it is) → decide (the Service exists while one of
// them does) → apply (ports, then the Service) → publish the outcome, which the Route
// controller reports on each Ingress Route; a changed outcome requeues those Routes. One
// reconcile per tenant at a time decides, by construction of the queue: no lock.
type ingressServices struct {
	client  client.Client
	opts    Options
	ports   *portalloc.Shared
	readmit *requeue.Readmit
	routes  *Reconciler // whose Routes to requeue, and how to apply a hub Service

	mu     sync.Mutex
	states map[string]ingressState // tenant namespace → last outcome
}

// ingressState is the outcome of the last reconcile of a tenant's Ingress Service: the
// Service as reported (nil: none), or why it is not there.
type ingressState struct {
	service    *hubServiceState
	exhausted  error
	serviceErr error
}

// problem says why the Ingress Service cannot serve the tenant's LoadBalancer hostnames, in
// words for the LoadBalancer's Hostname condition ("" when it can).
func (s ingressState) problem() string {
	switch {
	case s.exhausted != nil:
		return fmt.Sprintf("the tenant's Ingress Service %s has no listener port for it (%v); ports are given as soon as the hub frees some, or ask the hub's admin for a larger --envoy-port-range", kubelbv1alpha1.IngressServiceName, s.exhausted)
	case s.serviceErr != nil:
		return fmt.Sprintf("the tenant's Ingress Service %s cannot be applied: %v", kubelbv1alpha1.IngressServiceName, s.serviceErr)
	}
	return ""
}

// equal tells whether two outcomes report the same to the Ingress Routes.
func (s ingressState) equal(o ingressState) bool {
	return errString(s.exhausted) == errString(o.exhausted) && errString(s.serviceErr) == errString(o.serviceErr) &&
		(s.service == nil) == (o.service == nil) &&
		(s.service == nil || (s.service.name == o.service.name && slices.Equal(s.service.ports, o.service.ports) &&
			(s.service.svc == nil) == (o.service.svc == nil) &&
			(s.service.svc == nil || equality.Semantic.DeepEqual(s.service.svc.Status, o.service.svc.Status))))
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// setupIngressServices registers the tenant Ingress Service controller with mgr, reporting
// to the Route controller r.
func setupIngressServices(mgr ctrl.Manager, r *Reconciler) (*ingressServices, error) {
	s := &ingressServices{client: mgr.GetClient(), opts: r.opts, ports: r.ports, readmit: r.readmit, routes: r, states: map[string]ingressState{}}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(ingressControllerName).
		Watches(&kubelbv1alpha1.Route{}, handler.EnqueueRequestsFromMapFunc(namespaceKey),
			builder.WithPredicates(predicates.SpecOrDeletionChanged())).
		Watches(&kubelbv1alpha1.LoadBalancer{}, handler.EnqueueRequestsFromMapFunc(namespaceKey),
			builder.WithPredicates(predicates.SpecOrDeletionChanged())).
		Watches(&kubelbv1alpha1.LoadBalancer{}, handler.EnqueueRequestsFromMapFunc(s.sameHostnameElsewhere),
			builder.WithPredicates(predicates.SpecOrDeletionChanged(), predicate.NewPredicateFuncs(hostnames.HasExplicitHostname))).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(namespaceKey),
			builder.WithPredicates(predicate.NewPredicateFuncs(isIngressServiceName))).
		Watches(&kubelbv1alpha1.Tenant{}, handler.EnqueueRequestsFromMapFunc(tenantKey),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&kubelbv1alpha1.Config{}, handler.EnqueueRequestsFromMapFunc(s.everyTenant),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}, predicates.DefaultConfig(r.opts.Namespace))).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(namespaceSelf),
			builder.WithPredicates(namespaces.ManagedLabelChanged())).
		WatchesRawSource(r.waiting.Source(requeue.IngressServices)).
		// One tenant per request; as many workers as the Route controller, so that tenants
		// settle in parallel (a request never runs twice at once for one tenant).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.opts.MaxConcurrentReconciles}).
		Complete(s)
	if err != nil {
		return nil, fmt.Errorf("setting up the Ingress Service controller: %w", err)
	}
	return s, nil
}

// Reconcile settles the Ingress Service of the tenant namespace req.Name.
func (s *ingressServices) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	defer func() { res, err = ssa.RetryConflict(res, err) }()
	namespace := req.Name
	freed := s.routes.waiting.Freed() // before any allocation: a free while it runs is not missed
	ports, err := s.ports.Get(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	managed, err := namespaces.Managed(ctx, s.client, namespace)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !managed {
		s.routes.release(ports, portalloc.IngressOwner(namespace))
		s.routes.waiting.Set(requeue.IngressServices, req.NamespacedName, false, 0)
		s.publish(namespace, nil)
		s.opts.Ingress.Set(ctx, namespace, "")
		return reconcile.Result{}, nil
	}
	tenant, err := settings.Load(ctx, s.client, s.opts.Namespace, hubnames.TenantName(namespace))
	if err != nil {
		return reconcile.Result{}, err
	}
	st, err := s.sync(ctx, ports, namespace, tenant)
	if err != nil {
		return reconcile.Result{}, err
	}
	s.publish(namespace, &st)
	s.routes.waiting.Set(requeue.IngressServices, req.NamespacedName, st.exhausted != nil, freed)
	s.opts.Ingress.Set(ctx, namespace, st.problem())
	if st.serviceErr != nil { // retried with backoff: some rejections are transient
		return reconcile.Result{}, fmt.Errorf("applying the Ingress Service of %s: %w", namespace, st.serviceErr)
	}
	return reconcile.Result{}, nil
}

// sync makes the tenant's Ingress Service exist, with ports 80 and 443, while the tenant has
// an Ingress Route that is not being deleted and is admitted by its limits, or a LoadBalancer
// hostname (its DNS record is an annotation of the Service), and Ingress is not disabled;
// otherwise it deletes the Service and frees its ports.
func (s *ingressServices) sync(ctx context.Context, ports *portalloc.Allocator, namespace string, tenant settings.Tenant) (ingressState, error) {
	owner := portalloc.IngressOwner(namespace)
	svc, err := s.routes.ingressService(ctx, namespace)
	foreign := errors.Is(err, errForeignService)
	if err != nil && !foreign {
		return ingressState{}, err
	}
	// Most changes concern no Ingress Service: a tenant with no Route, no LoadBalancer
	// hostnames (no DNS settings) and no Service has nothing to decide, and its verdict is
	// not worked out (a walk over the tenant, for each of 10 000 LoadBalancers created).
	if !foreign && svc == nil && tenant.DNS.IsZero() {
		none, err := s.routes.noRoutes(ctx, namespace)
		if err != nil {
			return ingressState{}, err
		}
		if none {
			s.routes.release(ports, owner)
			return ingressState{}, nil
		}
	}
	verdict, err := s.readmit.Admission(ctx, namespace, tenant)
	if err != nil {
		return ingressState{}, err
	}
	wanted := false
	if !tenant.DisableIngress {
		if wanted, err = s.routes.hasIngressRoute(ctx, namespace, verdict); err != nil {
			return ingressState{}, err
		}
	}
	hosts, err := s.routes.loadBalancerHostnames(ctx, namespace, tenant, verdict)
	if err != nil {
		return ingressState{}, err
	}
	if !wanted && len(hosts) == 0 {
		if !foreign {
			if err := hubservice.Delete(ctx, s.client, svc); err != nil {
				return ingressState{}, err
			}
		}
		s.routes.release(ports, owner)
		return ingressState{}, nil
	}
	if foreign {
		return ingressState{serviceErr: err}, nil
	}
	alloc, _, allocErr := ports.Ensure(owner, planner.IngressRequests(namespace, svc))
	if allocErr != nil && !errors.Is(allocErr, portalloc.ErrExhausted) {
		return ingressState{}, fmt.Errorf("allocating listener ports for the Ingress Service of %s: %w", namespace, allocErr)
	}
	st := ingressState{exhausted: allocErr}
	exposed := allocatedIngressPorts(namespace, alloc)
	if len(exposed) == 0 {
		return st, hubservice.Delete(ctx, s.client, svc)
	}
	desired := ingressService(namespace, tenant, exposed, hosts, svc)
	hubservice.MarkExhausted(desired, missingIngressPorts(namespace, alloc))
	svc, st.serviceErr, err = s.routes.applyService(ctx, svc, desired)
	if err != nil || st.serviceErr != nil {
		return st, err
	}
	st.service = &hubServiceState{name: kubelbv1alpha1.IngressServiceName, ports: exposed, svc: svc}
	return st, nil
}

// publish records the tenant's outcome (nil: none, the namespace is not managed) and, when
// it changed, requeues the tenant's Ingress Routes, which report it.
func (s *ingressServices) publish(namespace string, st *ingressState) {
	s.mu.Lock()
	prev, had := s.states[namespace]
	if st == nil {
		delete(s.states, namespace)
	} else {
		s.states[namespace] = *st
	}
	s.mu.Unlock()
	if (st == nil && !had) || (st != nil && had && prev.equal(*st)) {
		return
	}
	s.routes.requeueIngressRoutes(namespace)
}

// state is the tenant's last outcome, false before its first reconcile.
func (s *ingressServices) state(namespace string) (ingressState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.states[namespace]
	return st, ok
}

// sameHostnameElsewhere maps a LoadBalancer with an explicit hostname to the tenants with a
// LoadBalancer of the same hostname (hostnames.SameHostnameElsewhere): which of them holds it
// (and gets its DNS record) may have changed.
func (s *ingressServices) sameHostnameElsewhere(ctx context.Context, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, k := range hostnames.SameHostnameElsewhere(ctx, s.client, o) {
		if req := tenantRequest(k.Namespace); !slices.Contains(out, req) {
			out = append(out, req)
		}
	}
	return out
}

// everyTenant requeues every namespace with Routes or LoadBalancers: Config applies to all.
func (s *ingressServices) everyTenant(ctx context.Context, _ client.Object) []reconcile.Request {
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
		if err := s.client.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing objects to requeue the Ingress Services")
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
