// Package envoycp is the Envoy control-plane controller. It only gathers and publishes: for
// every tenant namespace it gathers the scope from the caches (gather.go: the LoadBalancers,
// Addresses and Routes, the hub Services and Secrets the manager made, the settings and the
// quota verdict), hands it to the translation pipeline — what the settings hold back
// (translate.Hold) and the front ends (translate.Run) → IR (internal/ir) → back end
// (internal/xds/translator) — sets the Envoy resources on the xDS server (internal/xds) and
// publishes what came of it (problems, resource owners, versions, generations, Route
// statuses) to the status store (internal/manager/status), whose leader-only writer turns it
// into conditions (publish.go). Every decision of what is translated and of what an object's
// status says is translate's. It writes nothing to the API server. An IR equal to the
// tenant's previous one is neither translated again nor pushed. Each tenant keeps what its
// last translation built (translate.Incremental, translator.Cache; the xDS server keeps the
// resources' digests): a rebuild translates, builds and hashes again only the LoadBalancers
// that changed.
//
// Endpoint hostnames (the ccm's Hostname node addresses) are resolved by the manager
// (resolve.go), never by Envoy, and never on the controller's workers: a rebuild reads the
// last answers, the lookups run apart (per-tenant and global bounds, round robin across
// tenants) and a changed answer rebuilds its tenant. The addresses go into the translation
// input (translate.Input.Resolved), where the endpoint policy checks each one. A tenant with
// hostnames is rebuilt every ResolveInterval, which looks its stale names up again.
//
// Requests are keyed by tenant: {Name: <namespace>}, with an empty Namespace (the key of the
// Namespace object itself). Every LoadBalancer, Addresses, Route, Route or LoadBalancer hub
// Service and synced Secret event maps to its namespace's key (handlers.go), after a
// hold-off (holdoff.go), so a burst of events in one tenant coalesces in the workqueue into
// one rebuild, and an event in one tenant never rebuilds another. The watches' predicates
// (predicates.go) pass only changes of what translation reads; owned.go says which hub
// Services and Secrets are read at all.
//
// The controller does not need leader election: every manager replica serves xDS, and Envoy
// proxies may connect to any of them, so every replica keeps every tenant's snapshot current.
package envoycp

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/hubcache"
	"kubelb.dev/kubelb/internal/manager/oidcdiscovery"
	"kubelb.dev/kubelb/internal/manager/predicates"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/quota"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds"
	"kubelb.dev/kubelb/internal/xds/translator"
)

// controllerName names the controller in logs and metrics.
const controllerName = "envoycp"

// maxConcurrentReconciles bounds how many tenants are rebuilt at once.
const maxConcurrentReconciles = 4

// Reconciler rebuilds one tenant's Envoy snapshot.
type Reconciler struct {
	client    client.Reader
	owned     client.Reader // hub Services and Secrets labelled managed-by: kubelb
	snapshots Snapshots
	store     *status.Store
	verdicts  *quota.Store // the tenants' quota verdicts (nil: computed over each rebuild's objects)
	namespace string       // the manager's, where Config "default" is
	opts      translate.Options

	names *names // resolves the tenants' endpoint hostnames
	// discovery reads the discovery documents of the tenants' OIDC issuers (nil: none are
	// read, and such logins answer 500).
	discovery *oidcdiscovery.Fetcher

	mu   sync.Mutex
	last map[string]*built // tenant → what was last pushed
	// caches are, per tenant, what its last translation built (translate.Incremental,
	// translator.Cache), so that a rebuild costs what changed, not the whole tenant.
	caches map[string]*caches
	// next is, per tenant, the earliest time of its next rebuild after a slow one (see
	// stretchedHoldOff); nil leaves every rebuild to the event's HoldOff alone.
	next map[string]time.Time
	now  func() time.Time
}

// caches are one tenant's translation caches. Requests of one tenant are never reconciled
// at once, so they are used by one reconcile at a time.
type caches struct {
	front   translate.Incremental
	back    translator.Cache
	settled translate.Settled // objects waiting for a listener port are served as they were
}

// cachesOf returns the tenant's translation caches.
func (r *Reconciler) cachesOf(tenant string) *caches {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.caches[tenant]
	if c == nil {
		c = &caches{}
		r.caches[tenant] = c
	}
	return c
}

// NewReconciler returns a reconciler reading from c (the manager's cached client; Config
// "default" in namespace; also the hub Services and Secrets), writing snapshots to s and
// reports to store.
func NewReconciler(c client.Reader, s Snapshots, store *status.Store, namespace string, opts translate.Options) *Reconciler {
	return &Reconciler{client: c, owned: c, snapshots: s, store: store, namespace: namespace, opts: opts,
		names: newNames(net.DefaultResolver), last: map[string]*built{}, caches: map[string]*caches{}, now: time.Now}
}

// SetupWithManager registers the controller with mgr. The translation options are checked
// here, so a bad listener address fails at start-up, not in every tenant's reconcile. Serve
// srv on every replica too: mgr.Add(srv.Runnable(addr)).
//
// Config "default" (in namespace, the manager's) and the Tenants feed the endpoint policy;
// the hub's ServiceCIDRs and Nodes its hub ranges. A change of Config, a ServiceCIDR or a
// Node's Pod CIDRs or addresses rebuilds every managed tenant (an unchanged IR is not pushed).
// verdicts computes the tenants' quota verdicts (the planner's quota.Admit over the same
// objects), each object's share worked out once per change; nil makes one for this
// controller alone.
func SetupWithManager(mgr ctrl.Manager, srv *xds.Server, store *status.Store, verdicts *quota.Store, namespace string, opts translate.Options) error {
	return setup(mgr, srv, store, verdicts, namespace, opts, net.DefaultResolver)
}

// setup is SetupWithManager with the resolver of the endpoint hostnames.
func setup(mgr ctrl.Manager, srv Snapshots, store *status.Store, verdicts *quota.Store, namespace string, opts translate.Options, resolver Resolver) error {
	if _, _, err := translate.Translate(translate.Input{Options: opts}); err != nil {
		return fmt.Errorf("setting up the envoycp controller: %w", err)
	}
	// Services and Secrets come from a cache of the objects labelled managed-by: kubelb only,
	// so that no replica caches every Secret (or Service) of the hub.
	owned, err := hubcache.NewLabelledCluster(mgr, controllerName, map[client.Object]cache.ByObject{
		&corev1.Service{}: {Label: hubcache.ManagedSelector(nil)},
		&corev1.Secret{}:  {Label: hubcache.ManagedSelector(nil)},
	})
	if err != nil {
		return err
	}
	r := NewReconciler(mgr.GetClient(), srv, store, namespace, opts)
	r.owned = &OwnedReader{Reader: owned.GetClient(), Informers: owned.GetCache()}
	if verdicts == nil {
		verdicts = quota.NewStore(mgr.GetCache(), mgr.GetClient())
	}
	r.verdicts = verdicts
	r.names = newNames(resolver)
	r.StretchHoldOff()
	// A tenant whose endpoint hostnames resolve differently is rebuilt: the resolver's
	// notices come in as events of the tenant's key.
	resolved := make(chan event.GenericEvent)
	if err := mgr.Add(forwarder{r.names, resolved}); err != nil {
		return fmt.Errorf("setting up the envoycp controller: %w", err)
	}
	r.discovery = oidcdiscovery.New(resolver, nil)
	discovered := make(chan event.GenericEvent)
	if err := mgr.Add(discoveryForwarder{r.discovery, discovered}); err != nil {
		return fmt.Errorf("setting up the envoycp controller: %w", err)
	}
	noLeaderElection := false
	allTenants := enqueueAllTenantsAfter(mgr.GetClient(), HoldOff)
	err = ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		For(&corev1.Namespace{}, builder.WithPredicates(managedNamespaceChanged())).
		Watches(&v1alpha1.LoadBalancer{}, enqueueTenantAfter(HoldOff), builder.WithPredicates(translationInputChanged())).
		Watches(&v1alpha1.Addresses{}, enqueueTenantAfter(HoldOff)).
		Watches(&v1alpha1.Route{}, enqueueTenantAfter(HoldOff), builder.WithPredicates(routeChanged())).
		WatchesRawSource(source.Kind(owned.GetCache(), client.Object(&corev1.Service{}), enqueueTenantAfter(HoldOff), routeServiceChanged())).
		WatchesRawSource(source.Kind(owned.GetCache(), client.Object(&corev1.Service{}), enqueueTenantAfter(HoldOff), hubServiceChanged())).
		WatchesRawSource(source.Kind(owned.GetCache(), client.Object(&corev1.Service{}), enqueueTenantAfter(HoldOff), rateLimitServiceChanged())).
		WatchesRawSource(source.Kind(owned.GetCache(), client.Object(&corev1.Secret{}), enqueueTenantAfter(HoldOff), syncedSecretChanged())).
		WatchesRawSource(source.Kind(owned.GetCache(), client.Object(&corev1.Secret{}), enqueueTenantAfter(HoldOff), hostnameSecretChanged())).
		WatchesRawSource(source.Kind(owned.GetCache(), client.Object(&corev1.Secret{}), enqueueTenantAfter(HoldOff), oidcCookieKeysChanged())).
		// A Config or Tenant may name such a Secret as the default Ingress certificate: a
		// change rebuilds every tenant (they are few, and the event rare).
		WatchesRawSource(source.Kind(owned.GetCache(), client.Object(&corev1.Secret{}), allTenants, platformSecretChanged())).
		Watches(&v1alpha1.Tenant{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: hubnames.TenantNamespace(o.GetName())}}}
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.Config{}, allTenants, builder.WithPredicates(predicates.DefaultConfig(namespace), predicate.GenerationChangedPredicate{})).
		Watches(&networkingv1.ServiceCIDR{}, allTenants, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, allTenants, builder.WithPredicates(hubRangesChanged())).
		WatchesRawSource(source.Channel(resolved, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
		}))).
		WatchesRawSource(source.Channel(discovered, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
		}))).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: maxConcurrentReconciles,
			NeedLeaderElection:      &noLeaderElection,
		}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the envoycp controller: %w", err)
	}
	return nil
}

// forwarder runs the resolver's notices into the controller, on every replica.
type forwarder struct {
	names  *names
	events chan<- event.GenericEvent
}

func (f forwarder) Start(ctx context.Context) error {
	f.names.forward(ctx, f.events)
	return nil
}

func (forwarder) NeedLeaderElection() bool { return false }

// discoveryForwarder turns the notices of the OIDC discovery reads into events, on every
// replica.
type discoveryForwarder struct {
	fetcher *oidcdiscovery.Fetcher
	events  chan<- event.GenericEvent
}

func (f discoveryForwarder) Start(ctx context.Context) error {
	f.fetcher.Forward(ctx, f.events)
	return nil
}

func (discoveryForwarder) NeedLeaderElection() bool { return false }

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=loadbalancers;addresses;routes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services;secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=configs;tenants,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=servicecidrs,verbs=get;list;watch
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;list;watch

// Reconcile rebuilds the snapshot of the tenant named by req.Name: collect (Build) → pure
// plan (translate.Hold and the front ends) → apply (the back end and the xDS snapshot, push)
// → publish (a Report to the status store). A namespace that is gone or not managed by
// kubelb has its snapshot removed; a managed namespace without LoadBalancers gets an empty
// snapshot, so its proxies drop every listener.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, err error) {
	tenant := req.Name
	start := r.now()
	result := ""
	defer func() {
		if result == "" {
			result = metrics.Result(err)
		}
		metrics.ManagerEnvoyCPReconcile.Observe(tenant, result, start)
	}()
	log := ctrl.LoggerFrom(ctx).WithValues("tenant", tenant)

	ns := &corev1.Namespace{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: tenant}, ns); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("getting namespace %s: %w", tenant, err)
		}
		ns = nil
	}
	if ns == nil || !managed(ns) {
		r.snapshots.RemoveTenant(tenant)
		r.store.Remove(tenant)
		r.forget(tenant)
		result = metrics.ResultSkipped
		return reconcile.Result{}, nil
	}
	// After a slow rebuild, the next waits (StretchHoldOff); this request comes back then.
	if wait := r.deferred(tenant, start); wait > 0 {
		result = metrics.ResultSkipped
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	defer func() { r.rebuilt(tenant, start, r.now()) }()

	// Collect.
	scope, err := Build(ctx, r.client, r.owned, r.namespace, tenant, r.opts, r.verdicts)
	if err != nil {
		return reconcile.Result{}, err
	}
	// Plan: what the tenant's settings hold back (objects refused by its limits,
	// LoadBalancers of a tenant with load balancing disabled) is left out, with its problems
	// and Route statuses; the endpoints cut by its limits are the translation's own
	// (translate.Options.MaxEndpoints*).
	in, held := translate.Hold(scope.Input, scope.Holds)
	// Endpoint hostnames are resolved by the manager, never by Envoy, and never here: the
	// rebuild reads the last answers and queues the stale names (want). A tenant with any is
	// rebuilt every ResolveInterval, which looks them up again; a changed answer rebuilds it
	// at once.
	hostnames := translate.EndpointHostnames(&in)
	in.Resolved = r.names.want(tenant, hostnames)
	// The OIDC issuers' discovery documents likewise: read by the manager (oidcdiscovery),
	// dialling only what the tenant's endpoint policy allows; a document read or changed
	// rebuilds the tenant.
	if issuers := translate.OIDCIssuers(&in); len(issuers) > 0 && r.discovery != nil {
		in.OIDCProviders = r.discovery.Want(tenant, issuers, in.Policy.Allows)
	}
	var res reconcile.Result
	if len(hostnames) > 0 {
		res.RequeueAfter = ResolveInterval
	}
	buildStart := time.Now()
	cache := r.cachesOf(tenant)
	// An object waiting for a listener port the planner has not applied yet is served at its
	// last version that had every port (or not at all), and gets no verdict until it has them.
	in, out, waiting, err := cache.settled.Translate(in, cache.front.Run)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("translating tenant %s: %w", tenant, err)
	}
	// Apply.
	b, changed, err := r.push(ctx, tenant, out.Config, &cache.back)
	metrics.ManagerSnapshotBuildDuration.WithLabelValues(tenant).Observe(time.Since(buildStart).Seconds())
	if err != nil {
		return reconcile.Result{}, err
	}
	out = held.With(out)
	if changed {
		// What the tenant may not read (the rule that denied an endpoint, what the hub's
		// DNS answered) is logged for the platform team, once per change of the snapshot.
		for _, p := range out.Problems {
			if p.Detail != "" {
				log.Info("Endpoint left out", "object", p.Object.String(), "reason", p.Reason, "detail", p.Detail)
			}
		}
		log.V(1).Info("Envoy snapshot updated", "loadBalancers", len(in.LoadBalancers), "routes", len(in.Routes),
			"listeners", len(out.Config.Listeners), "problems", len(out.Problems)+len(b.problems),
			"translated", cache.front.Stats.Translated, "reused", cache.front.Stats.Reused,
			"routesDecoded", cache.front.Stats.RoutesDecoded, "irElementsChanged", cache.front.Stats.ElementsChanged+cache.front.Stats.VirtualHostsChanged,
			"resourcesBuilt", cache.back.Built, "resourcesReused", cache.back.Reused)
	}
	// Publish.
	r.store.Publish(tenant, r.report(&in, held, waiting, out, b))
	return res, nil
}

func (r *Reconciler) forget(tenant string) {
	r.names.forget(tenant)
	if r.discovery != nil {
		r.discovery.Forget(tenant)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, tenant)
	delete(r.caches, tenant)
	delete(r.next, tenant)
}
