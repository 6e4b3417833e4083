// Package route is the hub's Route controller. For every Route in a namespace labelled
// kubelb.k8c.io/managed-by=kubelb it reports what the tenant's plan (internal/manager/planner,
// which gives the quota verdict, the listener ports and applies the hub Services; until the
// plan knows the Route at its generation, nothing is written, and the plan's outcome requeues
// it) made of what the Route's embedded tenant object needs on the hub:
//
//   - a Gateway gets a hub Service of its own, "gateway-<route name>", with one port per
//     distinct (port, protocol) of its listeners and of the ListenerSets it takes, each
//     mapped to the Envoy listener port the plan gives it;
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
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"kubelb.dev/kubelb/internal/finalizer"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/dropped"
	"kubelb.dev/kubelb/internal/manager/fairqueue"
	"kubelb.dev/kubelb/internal/manager/hostnames"
	"kubelb.dev/kubelb/internal/manager/perobject"
	"kubelb.dev/kubelb/internal/manager/planner"
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
}

// Reconciler reconciles Routes into hub Services, port allocations and status.
type Reconciler struct {
	client   client.Client
	recorder events.EventRecorder
	opts     Options
	ports    *portalloc.Shared

	plans *planner.Controller                    // the tenants' plans: quota verdicts, listener ports, Ingress Services
	steps perobject.Steps[*kubelbv1alpha1.Route] // get, gone, deleting, managed; the gauge

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
	if err := hostnames.IndexHostnames(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, fmt.Errorf("setting up the Route controller: %w", err)
	}
	r := &Reconciler{
		client:   mgr.GetClient(),
		recorder: mgr.GetEventRecorder("kubelb-manager"),
		opts:     opts,
		ports:    opts.Ports,
		plans:    opts.Plans,
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

// Reconcile reports one Route's status, in the manager's per-object controller shape
// (docs/development.md): get (gone → forget; a legacy finalizer is removed), the tenant's
// plan's outcome for the Route (its ports and hub Service, which the planner applied), the
// hub Service as the cache shows it, and one status change handed to the status Sink.
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
		out.quota = plan.Refused // the plan deleted its hub Service and freed its ports
		return reconcile.Result{}, nil
	}
	switch service := kind.HubService(); {
	case service == routekind.OwnHubService:
		services, err = r.reconcileGateway(ctx, route, tenant, plan, &out)
	case service == routekind.SharedIngressService:
		services = r.reconcileIngress(route.Namespace, tenant, &out)
	case kind.GatewayAPI():
		if tenant.DisableGatewayAPI {
			out.disabled = "Gateway API"
		}
	}
	return reconcile.Result{}, err
}

// reconcileGateway reports the Gateway's hub Service as the tenant's plan applied it (with
// the listener ports of its own listeners and of the ListenerSets it takes; none when
// Gateway API is disabled or no listener is left) and the cache shows it.
func (r *Reconciler) reconcileGateway(ctx context.Context, route *kubelbv1alpha1.Route, tenant settings.Tenant, plan planner.Outcome, out *outcome) ([]hubServiceState, error) {
	switch {
	case !routekind.ValidRouteName(route.Name):
		out.invalidName = true
		return nil, nil
	case tenant.DisableGatewayAPI:
		out.disabled = "Gateway API"
		return nil, nil
	case plan.Service.Err != nil:
		out.serviceErr = plan.Service.Err
		return nil, nil
	case plan.Kept:
		// The plan left the ports as they were for a Service in the way that is gone now:
		// its deletion brings the next plan, which requeues this Route.
		out.pending = true
		return nil, nil
	}
	out.problems, out.noPorts, out.exhausted = plan.Problems, len(plan.GatewayPorts) == 0, plan.Exhausted
	out.staticTaken = plan.Service.StaticTaken
	if len(plan.Service.Ports) == 0 {
		return nil, nil
	}
	svc, err := r.gatewayService(ctx, route)
	if err != nil {
		return nil, err
	}
	return []hubServiceState{{name: hubnames.GatewayServiceName(route.Name), ports: plan.Service.Ports, svc: svc}}, nil
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
// it, or the cleanup finalizer an earlier version set): the legacy finalizer is removed. The
// tenant's plan deletes its Gateway Service, then frees its ports.
func (r *Reconciler) reconcileDelete(ctx context.Context, _ *portalloc.Allocator, route *kubelbv1alpha1.Route) error {
	if _, err := finalizer.Remove(ctx, r.client, route, kubelbv1alpha1.CleanupFinalizer); err != nil {
		return err
	}
	r.forget(client.ObjectKeyFromObject(route))
	return nil
}

// reconcileGone forgets a Route that no longer exists. Its deletion needs no finalizer: the
// tenant's plan, which its delete event brings too, deletes its Gateway Service (controlled
// by it) and then frees its ports, and settles the tenant's Ingress Service. A Route deleted
// while no manager ran is caught the same way: its Gateway Service's event at start-up
// brings its tenant to the planner. A Route makes no Secrets.
func (r *Reconciler) reconcileGone(_ context.Context, _ *portalloc.Allocator, key types.NamespacedName) error {
	r.forget(key)
	return nil
}

// forget drops what the controller remembers of a Route that is gone.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.opts.Sink.Forget("Route", key)
	r.steps.Count.Forget(key)
}

// ReasonAnnotationsDropped is the reason of the Warning Event of a Gateway Route whose
// steering annotations were not copied to its hub Service.
const ReasonAnnotationsDropped = dropped.ReasonAnnotationsDropped

// gatewayService returns the Gateway Route's hub Service from the cache when this Route
// controls it; nil otherwise (none yet, an earlier Route's or someone else's, which the plan
// reports).
func (r *Reconciler) gatewayService(ctx context.Context, route *kubelbv1alpha1.Route) (*corev1.Service, error) {
	svc := &corev1.Service{}
	key := client.ObjectKey{Namespace: route.Namespace, Name: hubnames.GatewayServiceName(route.Name)}
	if err := r.client.Get(ctx, key, svc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting hub Service %s: %w", key, err)
	}
	if ref := metav1.GetControllerOfNoCopy(svc); ref == nil || ref.Kind != "Route" || ref.UID != route.UID {
		return nil, nil
	}
	return svc, nil
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
