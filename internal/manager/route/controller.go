// Package route is the hub's Route controller. For every Route in a namespace labelled
// kubelb.k8c.io/managed-by=kubelb it makes what the Route's embedded tenant object needs on
// the hub:
//
//   - a Gateway gets a hub Service of its own, "gateway-<route name>", with one port per
//     distinct (port, protocol) of its listeners and of the ListenerSets it takes, each
//     mapped to the Envoy listener port the tenant's plan gives it (internal/manager/planner,
//     which also gives the tenant's quota verdict; until the plan knows the Route at its
//     generation, nothing is written, and the plan's outcome requeues it);
//   - an Ingress rides on the tenant's one shared Ingress Service "kubelb-ingress" (ports
//     80 and 443), which the planner makes while the tenant has an Ingress Route;
//   - HTTPRoutes, GRPCRoutes, TLSRoutes, TCPRoutes and UDPRoutes ride on their Gateway's
//     Service: nothing of their own.
//
// A Route has no finalizer: its deletion needs nothing the "gone" path does not do (see
// reconcileGone). It writes status.resources.source, status.resources.services (the hub
// Service, its ports and its status) and the ResourceAppliedSuccessfully condition of
// status.resources.route; never status.resources.route.status, which the leader-only status
// writer owns. The allocations are recorded only in the hub Services' targetPorts (see
// internal/portalloc).
package route

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/finalizer"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/dropped"
	"kubelb.dev/kubelb/internal/manager/fairqueue"
	"kubelb.dev/kubelb/internal/manager/hostnames"
	"kubelb.dev/kubelb/internal/manager/hubservice"
	"kubelb.dev/kubelb/internal/manager/perobject"
	"kubelb.dev/kubelb/internal/manager/planner"
	"kubelb.dev/kubelb/internal/manager/requeue"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/routekind"
	"kubelb.dev/kubelb/internal/settings"
)

// DefaultMaxConcurrentReconciles is the number of workers when Options leaves it unset.
const DefaultMaxConcurrentReconciles = 4

// controllerName names the controller (logs, metrics).
const controllerName = "route"

// Options configure the Route controller.
type Options struct {
	// Namespace the manager runs in; holds Config "default".
	Namespace string
	// Shared is what the LoadBalancer and Route controllers share (the port allocator, the
	// status Sink, the tenants' planner, the waiting tenants, Ingress Service problems); Ports is
	// required (loadbalancer.NewSharedPorts), what else is nil is made for this controller
	// alone.
	perobject.Shared
	// MaxConcurrentReconciles is the number of workers; zero means
	// DefaultMaxConcurrentReconciles.
	MaxConcurrentReconciles int
	// StaticAddressRetry is how often a Gateway whose granted static address another hub
	// Service holds or asks for is looked at again (it may have been freed); zero means
	// DefaultStaticAddressRetry.
	StaticAddressRetry time.Duration
}

// Reconciler reconciles Routes into hub Services, port allocations and status.
type Reconciler struct {
	client   client.Client
	recorder events.EventRecorder
	opts     Options
	ports    *portalloc.Shared

	plans *planner.Controller                    // the tenants' plans: quota verdicts, listener ports, Ingress Services
	steps perobject.Steps[*kubelbv1alpha1.Route] // get, gone, deleting, managed; the gauge

	mu      sync.Mutex
	waiting *requeue.Waiters // wakes the tenants waiting for free ports (opts.Waiters)
	// made are the Gateway Services this controller made that the cache does not show yet:
	// the plan's requeue may come before the Service's create event, and none is made twice.
	made hubservice.Made
	// dropped tells which steering annotations were not propagated, once per set.
	dropped dropped.Annotations
}

// SetupWithManager registers the Route controller with mgr.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	_, err := setup(mgr, opts, nil)
	return err
}

// setup builds and registers the reconciler; wrap (tests) may wrap it.
func setup(mgr ctrl.Manager, opts Options, wrap func(reconcile.Reconciler) reconcile.Reconciler) (*Reconciler, error) {
	if opts.Ports == nil {
		return nil, errors.New("setting up the Route controller: no port allocator")
	}
	if opts.MaxConcurrentReconciles <= 0 {
		opts.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	var err error
	if opts.Shared, err = opts.WithDefaults(mgr, opts.Namespace, opts.MaxConcurrentReconciles); err != nil {
		return nil, fmt.Errorf("setting up the Route controller: %w", err)
	}
	if opts.StaticAddressRetry <= 0 {
		opts.StaticAddressRetry = DefaultStaticAddressRetry
	}
	if err := hostnames.IndexHostnames(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, fmt.Errorf("setting up the Route controller: %w", err)
	}
	if err := indexServiceAddresses(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, fmt.Errorf("setting up the Route controller: %w", err)
	}
	r := &Reconciler{
		client:   mgr.GetClient(),
		recorder: mgr.GetEventRecorder("kubelb-manager"),
		opts:     opts,
		ports:    opts.Ports,
		plans:    opts.Plans,
		waiting:  opts.Waiters,
	}
	r.steps = perobject.Steps[*kubelbv1alpha1.Route]{Kind: "Route", Client: r.client, Ports: r.ports,
		Namespace: opts.Namespace, Count: perobject.NewCount(metrics.ManagerRoutes), Metric: metrics.ManagerRouteReconcile, Gone: r.reconcileGone,
		Delete: r.reconcileDelete}
	var rec reconcile.Reconciler = r
	if wrap != nil {
		rec = wrap(r)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		For(&kubelbv1alpha1.Route{})
	err = perobject.WatchSettings(b, opts.Namespace, func(ctx context.Context, ns string) []reconcile.Request { return r.routesIn(ctx, ns) }).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(r.serviceToRoutes),
			builder.WithPredicates(predicate.NewPredicateFuncs(hubnames.LooksLikeRouteService))).
		// The plan's outcome of a Route (its verdict, its ports, a ListenerSet's listeners
		// on its Gateway, the tenant's Ingress Service) requeues it when it changes.
		WatchesRawSource(r.plans.Routes()).
		// Requests go out round robin across tenant namespaces: one tenant's flood of
		// objects does not hold back another's (fairqueue.New).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles, NewQueue: fairqueue.New}).
		Complete(rec)
	if err != nil {
		return nil, fmt.Errorf("setting up the Route controller: %w", err)
	}
	return r, nil
}

// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=routes,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=routes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=routes/finalizers,verbs=update
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=loadbalancers,verbs=get;list;watch

// Reconcile brings one Route's ports, hub Service and status in line, in the manager's
// controller shape (docs/development.md): get (gone → forget), finalizer, scope (settings,
// hub Service), desired state (pure, desired.go), server-side apply of the hub Service, and
// one status apply at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return r.steps.Reconcile(ctx, req, &kubelbv1alpha1.Route{}, r.reconcile)
}

func (r *Reconciler) reconcile(ctx context.Context, ports *portalloc.Allocator, route *kubelbv1alpha1.Route) (res reconcile.Result, err error) {
	key := types.NamespacedName{Namespace: route.Namespace, Name: route.Name}
	kind, gvk := routekind.Of(route)
	out := outcome{kind: kind, gvk: gvk}
	var services []hubServiceState
	defer func() { // the one status write
		if err != nil || out.pending {
			return // the hub Service is in an unknown state; the retry (or the planner's requeue) reports it
		}
		err = r.writeStatus(ctx, route, out, services)
		// Retried with backoff (some rejections are transient), except the tenant's Ingress
		// Service's: the planner retries it, and requeues this Route.
		if out.serviceErr != nil && kind.HubService() != routekind.SharedIngressService {
			err = errors.Join(err, fmt.Errorf("applying the hub Service of Route %s: %w", key, out.serviceErr))
		}
	}()

	// Scope: the tenant's settings.
	tenant, err := settings.Load(ctx, r.client, r.opts.Namespace, hubnames.TenantName(route.Namespace))
	if err != nil {
		return reconcile.Result{}, err
	}
	// The tenant's plan (internal/manager/planner): its limits' verdict (a refused Route has
	// no hub Service and holds no ports) and a Gateway's listener ports. Until the plan knows
	// the Route as it is, nothing is decided: the plan's next outcome requeues it.
	plan, ok := r.plans.OutcomeOf(false, key)
	if !ok || !plan.For(route, tenant) {
		out.pending = true
		return reconcile.Result{}, nil
	}
	if plan.Refused != "" {
		out.quota = plan.Refused
		return reconcile.Result{}, r.deleteGatewayService(ctx, key)
	}
	// What the Route had as another kind (its embedded object was replaced) goes; the plan
	// freed its ports.
	service := kind.HubService()
	if service != routekind.OwnHubService {
		if err := r.deleteGatewayService(ctx, key); err != nil {
			return reconcile.Result{}, err
		}
	}
	switch {
	case service == routekind.OwnHubService:
		services, err = r.reconcileGateway(ctx, route, tenant, plan, &out)
		if err == nil && out.staticTaken {
			res.RequeueAfter = r.opts.StaticAddressRetry
		}
		if out.retry > 0 {
			res.RequeueAfter = out.retry
		}
	case service == routekind.SharedIngressService:
		services = r.reconcileIngress(route.Namespace, tenant, &out)
	case kind.GatewayAPI():
		if tenant.DisableGatewayAPI {
			out.disabled = "Gateway API"
		}
	}
	return res, err
}

// reconcileGateway applies the Gateway's hub Service with the listener ports of its plan
// (its own listeners' and those of the ListenerSets it takes), or removes it when Gateway
// API is disabled or no listener is left.
func (r *Reconciler) reconcileGateway(ctx context.Context, route *kubelbv1alpha1.Route, tenant settings.Tenant, plan planner.Outcome, out *outcome) ([]hubServiceState, error) {
	if !routekind.ValidRouteName(route.Name) {
		out.invalidName = true
		return nil, nil
	}
	svc, stale, err := r.gatewayService(ctx, route)
	foreign := errors.Is(err, errForeignService)
	if err != nil && !foreign {
		return nil, err
	}
	if stale {
		// The hub Service of an earlier Route of this name (the Route was made anew before
		// its old one's "gone" pass): it goes, and this Route's is applied in its place. Its
		// ports stay allocated to this name meanwhile and are offered again as hints.
		if err := hubservice.Delete(ctx, r.client, svc); err != nil {
			return nil, err
		}
		svc = nil
	}
	if tenant.DisableGatewayAPI {
		out.disabled = "Gateway API"
		return nil, hubservice.Delete(ctx, r.client, svc) // the plan freed its ports
	}
	if foreign {
		out.serviceErr = err
		return nil, nil
	}
	if plan.Kept {
		// The plan left the ports as they were for a Service in the way that is gone now:
		// its deletion brings the next plan, which requeues this Route.
		out.pending = true
		return nil, nil
	}
	key := client.ObjectKeyFromObject(route)
	if wait := r.made.Wait(key, svc); wait > 0 {
		// This controller just made the Gateway Service and the cache does not show it yet:
		// its create event brings the Route back (a requeue in case it never shows).
		out.pending, out.retry = true, wait
		return nil, nil
	}
	planned, alloc := plan.GatewayPorts, plan.Alloc
	out.problems, out.noPorts, out.exhausted = plan.Problems, len(planned) == 0, plan.Exhausted
	exposed := allocatedGatewayPorts(route, planned, alloc)
	if len(exposed) == 0 {
		return nil, hubservice.Delete(ctx, r.client, svc)
	}
	static, err := r.staticAddress(ctx, route, tenant.StaticAddresses, svc)
	if err != nil {
		return nil, err
	}
	out.staticTaken = !static.IsValid() && r.asksGrantedAddress(route, tenant.StaticAddresses)
	desired := gatewayService(route, tenant, exposed, svc, static)
	hubservice.MarkExhausted(desired, missingGatewayPorts(route, planned, alloc))
	made := svc == nil
	svc, out.serviceErr, err = r.applyService(ctx, svc, desired)
	if err != nil || out.serviceErr != nil {
		return nil, err
	}
	if made {
		r.made.Record(key)
	}
	r.dropped.Warn(r.recorder, route, tenant.DroppedSteeringAnnotations(gatewayAnnotations(route)))
	return []hubServiceState{{name: hubnames.GatewayServiceName(route.Name), ports: exposed, svc: svc}}, nil
}

// reconcileIngress reports the tenant's shared Ingress Service, as the tenant's planner
// last left it (planner.Controller.IngressOf), on an Ingress Route; pending until the
// planner first planned the tenant (it then requeues the tenant's Ingress Routes).
func (r *Reconciler) reconcileIngress(namespace string, tenant settings.Tenant, out *outcome) []hubServiceState {
	if tenant.DisableIngress {
		out.disabled = "Ingress"
	}
	st, ok := r.plans.IngressOf(namespace)
	if !ok {
		out.pending = true
		return nil
	}
	out.exhausted, out.serviceErr = st.Exhausted, st.ServiceErr
	if st.Service == nil {
		return nil
	}
	return []hubServiceState{{name: st.Service.Name, ports: st.Service.Ports, svc: st.Service.Service}}
}

// writeStatus hands the Route's status (the fields this controller decides) to the status
// Sink, the one writer of Route status, which writes it when it differs, and emits a Warning Event when the condition turns
// False for a reason a user must act on.
func (r *Reconciler) writeStatus(ctx context.Context, route *kubelbv1alpha1.Route, out outcome, services []hubServiceState) error {
	cond := appliedCondition(out, route.Generation)
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	known, _, err := r.opts.Sink.Route(ctx, route, func(st *kubelbv1alpha1.RouteStatus) { setStatus(st, route, out, services, cond, now) })
	if err != nil {
		return err
	}
	prev := meta.FindStatusCondition(known.Resources.Route.Conditions, ConditionApplied)
	if cond.Status == metav1.ConditionFalse && (prev == nil || prev.Reason != cond.Reason) {
		switch cond.Reason {
		case ReasonPortsExhausted, ReasonServiceFailed, ReasonInvalidListeners, ReasonUnsupportedKind, ReasonInvalidName, ReasonQuotaExceeded:
			r.recorder.Eventf(route, nil, corev1.EventTypeWarning, cond.Reason, "Reconcile", "%s", cond.Message)
		}
	}
	return nil
}

// reconcileDelete cleans up after a Route being deleted (something else's finalizer holds
// it, or the cleanup finalizer an earlier version set): as reconcileGone, and the legacy
// finalizer is removed in between. The Gateway Service, the record of the allocation, goes
// first: once it is gone no restart counts the ports as used.
func (r *Reconciler) reconcileDelete(ctx context.Context, ports *portalloc.Allocator, route *kubelbv1alpha1.Route) error {
	key := client.ObjectKeyFromObject(route)
	if err := r.deleteGatewayService(ctx, key); err != nil {
		return err
	}
	if _, err := finalizer.Remove(ctx, r.client, route, kubelbv1alpha1.CleanupFinalizer); err != nil {
		return err
	}
	r.forget(ports, key)
	return nil
}

// reconcileGone cleans up after a Route that no longer exists. Its deletion needs no
// finalizer: its Gateway Service (controlled by it) is deleted here, then its ports are
// freed (forget); the tenant's planner settles the tenant's Ingress Service on the
// same delete event. A Route deleted while no manager ran is caught the same way: its
// Gateway Service's event at start-up brings its key here, and the Ingress Service's brings
// its tenant to the planner. A Route makes no Secrets.
func (r *Reconciler) reconcileGone(ctx context.Context, ports *portalloc.Allocator, key types.NamespacedName) error {
	if err := r.deleteGatewayService(ctx, key); err != nil {
		return err
	}
	r.forget(ports, key)
	return nil
}

// deleteGatewayService deletes the Gateway Service of the Route key: the Service of its
// name that a Route of that name controls, whichever its UID. Any other is left alone.
func (r *Reconciler) deleteGatewayService(ctx context.Context, key types.NamespacedName) error {
	svc, err := r.gatewayServiceOf(ctx, key)
	if err != nil && !errors.Is(err, errForeignService) {
		return err
	}
	return hubservice.Delete(ctx, r.client, svc)
}

// forget frees the ports of a Route that is gone (a Gateway's) and forgets it for the gauge.
// (Its tenant's plan follows the Route's delete event by itself.)
func (r *Reconciler) forget(ports *portalloc.Allocator, key types.NamespacedName) {
	if ports.ReleaseOwner(portalloc.RouteOwner(key.Namespace, key.Name)) > 0 {
		r.waiting.Wake() // the ports may serve a tenant that waits
	}
	r.opts.Sink.Forget("Route", key)
	r.made.Forget(key)
	r.mu.Lock()
	r.dropped.Forget(key)
	r.mu.Unlock()
	r.steps.Count.Forget(key)
}

// ReasonAnnotationsDropped is the reason of the Warning Event of a Gateway Route whose
// steering annotations were not copied to its hub Service.
const ReasonAnnotationsDropped = dropped.ReasonAnnotationsDropped

// errForeignService means a Service with a hub Service's name belongs to something else.
var errForeignService = errors.New("exists and was not made by kubelb for this Route; rename or delete it")

// gatewayService returns the Gateway Route's hub Service from the cache, nil when there is
// none. It is the Route's only when the Route controls it; one an earlier Route of this name
// controls is stale (returned with stale true); any other is errForeignService and is never
// touched.
func (r *Reconciler) gatewayService(ctx context.Context, route *kubelbv1alpha1.Route) (svc *corev1.Service, stale bool, err error) {
	svc, err = r.gatewayServiceOf(ctx, client.ObjectKeyFromObject(route))
	if err != nil || svc == nil {
		return nil, false, err
	}
	if metav1.GetControllerOfNoCopy(svc).UID != route.UID {
		return svc, true, nil
	}
	return svc, false, nil
}

// gatewayServiceOf returns the hub Service of the Route key from the cache when a Route of
// that name controls it (whichever its UID), nil when there is none, and errForeignService
// when another object stands in its place.
func (r *Reconciler) gatewayServiceOf(ctx context.Context, route types.NamespacedName) (*corev1.Service, error) {
	svc := &corev1.Service{}
	key := client.ObjectKey{Namespace: route.Namespace, Name: hubnames.GatewayServiceName(route.Name)}
	if err := r.client.Get(ctx, key, svc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting hub Service %s: %w", key, err)
	}
	if !planner.RouteControlled(svc, route.Name) {
		return nil, fmt.Errorf("service %s %w", key, errForeignService)
	}
	return svc, nil
}

// applyService applies the desired hub Service (hubservice.Apply), once a deletion of it
// in progress is seen through: the Service is made again after its delete event.
func (r *Reconciler) applyService(ctx context.Context, existing *corev1.Service, desired *corev1ac.ServiceApplyConfiguration) (svc *corev1.Service, rejected, err error) {
	if existing != nil && !existing.DeletionTimestamp.IsZero() {
		return nil, nil, fmt.Errorf("hub Service %s/%s is being deleted; waiting to make it again", existing.Namespace, existing.Name)
	}
	return hubservice.Apply(ctx, r.client, FieldOwner, existing, desired)
}

// serviceToRoutes maps a Gateway's hub Service to its Route (hubnames.RouteNamedBy; a Route
// that is gone gets its Service deleted). The Ingress Service is the Ingress Service
// controller's, which requeues the Ingress Routes when its outcome changes.
func (r *Reconciler) serviceToRoutes(_ context.Context, o client.Object) []reconcile.Request {
	ns := o.GetNamespace()
	if o.GetName() == kubelbv1alpha1.IngressServiceName {
		return nil
	}
	name := hubnames.RouteNamedBy(o)
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// routesIn lists the Routes of a namespace ("" = all) from the cache, of the given kinds (none: all).
func (r *Reconciler) routesIn(ctx context.Context, namespace string, kinds ...routekind.Kind) []reconcile.Request {
	var keep func(client.Object) bool
	if len(kinds) > 0 {
		keep = func(o client.Object) bool {
			k, _ := routekind.Of(o.(*kubelbv1alpha1.Route))
			return slices.Contains(kinds, k)
		}
	}
	return perobject.Requests(ctx, r.client, &kubelbv1alpha1.RouteList{}, namespace, keep)
}
