// Package envoycp is the Envoy control-plane controller: for every tenant namespace it reads
// the LoadBalancers, Addresses and Routes from the cache, with the hub Services the Route
// controller made and the hub Secrets made from SyncSecrets (BuildInput), runs the
// translation pipeline — front ends (internal/translate.Run) → IR (internal/ir) → back end
// (internal/xds/translator) — hands the
// Envoy resources to the xDS server (internal/xds), and publishes what it found (problems,
// resource owners, versions) to the status store (internal/manager/status), whose leader-only
// writer turns it into conditions. It writes nothing to the API server. An IR equal to the
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
// Namespace object itself). Every LoadBalancer, Addresses, Route, Route or LoadBalancer hub Service and synced
// Secret event maps to its namespace's key,
// so a burst of events in one tenant coalesces in the workqueue into one rebuild, and an event
// in one tenant never rebuilds another.
//
// The controller does not need leader election: every manager replica serves xDS, and Envoy
// proxies may connect to any of them, so every replica keeps every tenant's snapshot current.
package envoycp

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
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
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/manager"
	"kubelb.dev/kubelb/internal/manager/loadbalancer"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/quota"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds"
	"kubelb.dev/kubelb/internal/xds/translator"
)

// controllerName names the controller in logs and metrics.
const controllerName = "envoycp"

// maxConcurrentReconciles bounds how many tenants are rebuilt at once.
const maxConcurrentReconciles = 4

// Snapshots is what the reconciler needs of the xDS server (*xds.Server implements it).
type Snapshots interface {
	SetTenant(ctx context.Context, tenant string, res xds.Resources) (bool, error)
	RemoveTenant(tenant string)
	TypeVersion(tenant, typeURL string) string
}

var _ Snapshots = (*xds.Server)(nil)

// Reconciler rebuilds one tenant's Envoy snapshot.
type Reconciler struct {
	client    client.Reader
	owned     client.Reader // hub Services and Secrets labelled managed-by: kubelb
	snapshots Snapshots
	store     *status.Store
	namespace string // the manager's, where Config "default" is
	opts      translate.Options

	names *names // resolves the tenants' endpoint hostnames

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
	front translate.Incremental
	back  translator.Cache
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

// built is the last IR of a tenant that reached the xDS server, with what came of it.
type built struct {
	cfg      *ir.Config
	problems ir.Problems // of the back end
	owners   map[string]map[string][]ir.ObjectRef
}

// NewReconciler returns a reconciler reading from c (the manager's cached client; Config
// "default" in namespace; also the hub Services and Secrets), writing snapshots to s and
// reports to store.
func NewReconciler(c client.Reader, s Snapshots, store *status.Store, namespace string, opts translate.Options) *Reconciler {
	return &Reconciler{client: c, owned: c, snapshots: s, store: store, namespace: namespace, opts: opts,
		names: newNames(net.DefaultResolver), last: map[string]*built{}, caches: map[string]*caches{}, now: time.Now}
}

// StretchHoldOff makes a tenant whose rebuild took longer than HoldOff wait as long again
// before its next rebuild (at most MaxHoldOff): under a burst of events in a large tenant,
// rebuilds then take at most about half of a core instead of running back to back, and
// leave the rest to the controllers that write the hub objects and addresses. The events
// in between are folded into that next rebuild. SetupWithManager turns it on.
func (r *Reconciler) StretchHoldOff() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next = map[string]time.Time{}
}

// MaxHoldOff bounds the hold-off a slow rebuild stretches (StretchHoldOff): a change waits
// at most this long, plus a rebuild, to reach the tenant's proxies.
const MaxHoldOff = 5 * time.Second

// stretchedHoldOff is how long after a rebuild that took took the tenant's next rebuild may
// start: as long as the rebuild took, at most MaxHoldOff. A rebuild faster than HoldOff
// stretches nothing: the event's own HoldOff is longer.
func stretchedHoldOff(took time.Duration) time.Duration { return min(took, MaxHoldOff) }

// deferred returns how long the tenant's rebuild must still wait (0: rebuild now).
func (r *Reconciler) deferred(tenant string, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if next, ok := r.next[tenant]; ok && now.Before(next) {
		return next.Sub(now)
	}
	return 0
}

// rebuilt records a rebuild of the tenant from start to end.
func (r *Reconciler) rebuilt(tenant string, start, end time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next == nil {
		return
	}
	if took := end.Sub(start); took > HoldOff {
		r.next[tenant] = end.Add(stretchedHoldOff(took))
	} else {
		delete(r.next, tenant)
	}
}

// SetupWithManager registers the controller with mgr. The translation options are checked
// here, so a bad listener address fails at start-up, not in every tenant's reconcile. Serve
// srv on every replica too: mgr.Add(srv.Runnable(addr)).
//
// Config "default" (in namespace, the manager's) and the Tenants feed the endpoint policy;
// the hub's ServiceCIDRs and Nodes its hub ranges. A change of Config, a ServiceCIDR or a
// Node's Pod CIDRs or addresses rebuilds every managed tenant (an unchanged IR is not pushed).
func SetupWithManager(mgr ctrl.Manager, srv *xds.Server, store *status.Store, namespace string, opts translate.Options) error {
	return setup(mgr, srv, store, namespace, opts, net.DefaultResolver)
}

// setup is SetupWithManager with the resolver of the endpoint hostnames.
func setup(mgr ctrl.Manager, srv Snapshots, store *status.Store, namespace string, opts translate.Options, resolver Resolver) error {
	if _, _, err := translate.Translate(translate.Input{Options: opts}); err != nil {
		return fmt.Errorf("setting up the envoycp controller: %w", err)
	}
	// Services and Secrets come from a cache of the objects labelled managed-by: kubelb only,
	// so that no replica caches every Secret (or Service) of the hub.
	owned, err := manager.NewLabelledCluster(mgr, controllerName, map[client.Object]cache.ByObject{
		&corev1.Service{}: {Label: manager.ManagedSelector(nil)},
		&corev1.Secret{}:  {Label: manager.ManagedSelector(nil)},
	})
	if err != nil {
		return err
	}
	r := NewReconciler(mgr.GetClient(), srv, store, namespace, opts)
	r.owned = owned.GetClient()
	r.names = newNames(resolver)
	r.StretchHoldOff()
	// A tenant whose endpoint hostnames resolve differently is rebuilt: the resolver's
	// notices come in as events of the tenant's key.
	resolved := make(chan event.GenericEvent)
	if err := mgr.Add(forwarder{r.names, resolved}); err != nil {
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
		WatchesRawSource(source.Kind(owned.GetCache(), client.Object(&corev1.Secret{}), enqueueTenantAfter(HoldOff), syncedSecretChanged())).
		WatchesRawSource(source.Kind(owned.GetCache(), client.Object(&corev1.Secret{}), enqueueTenantAfter(HoldOff), hostnameSecretChanged())).
		Watches(&v1alpha1.Tenant{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: hubnames.TenantNamespace(o.GetName())}}}
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.Config{}, allTenants, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == namespace && o.GetName() == v1alpha1.DefaultConfigName
		}), predicate.GenerationChangedPredicate{})).
		Watches(&networkingv1.ServiceCIDR{}, allTenants, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, allTenants, builder.WithPredicates(hubRangesChanged())).
		WatchesRawSource(source.Channel(resolved, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
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

// tenantKey is the object whose event requests the rebuild of tenant (its namespace).
func tenantKey(tenant string) client.Object {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}
}

// HoldOff is how long a tenant's rebuild waits after an event, so that a burst of events
// (1000 Services created at once) costs a few rebuilds, not one per event. Events within the
// hold-off coalesce into one request in the workqueue.
const HoldOff = 100 * time.Millisecond

// enqueueTenantAfter enqueues the tenant of every event after delay.
func enqueueTenantAfter(delay time.Duration) handler.EventHandler {
	add := func(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range TenantOf(context.Background(), o) {
			q.AddAfter(req, delay)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object, q)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object, q)
		},
	}
}

// enqueueAllTenantsAfter enqueues every managed tenant namespace after delay, for a change
// of a hub-wide input (Config, ServiceCIDR, Node). It lists the namespaces from the cache.
func enqueueAllTenantsAfter(c client.Reader, delay time.Duration) handler.EventHandler {
	add := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		namespaces := &corev1.NamespaceList{}
		if err := c.List(ctx, namespaces, client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue},
			client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing tenant namespaces for a hub-wide change")
			return
		}
		for i := range namespaces.Items {
			q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Name: namespaces.Items[i].Name}}, delay)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, _ event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q)
		},
		UpdateFunc: func(ctx context.Context, _ event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q)
		},
		DeleteFunc: func(ctx context.Context, _ event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q)
		},
		GenericFunc: func(ctx context.Context, _ event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q)
		},
	}
}

// hubRangesChanged passes Node creates and deletes, and updates that change what HubRanges
// reads (Pod CIDRs, addresses); heartbeats and condition updates rebuild nothing.
func hubRangesChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		if !ok1 || !ok2 {
			return true
		}
		return !slices.Equal(o.Spec.PodCIDRs, n.Spec.PodCIDRs) || !slices.Equal(o.Status.Addresses, n.Status.Addresses)
	}}
}

// translationInputChanged passes LoadBalancer updates that can change the translation: the
// spec, annotations, origin labels and deletion. Translation does not read the status (the
// listener ports and IP families come from the hub Service, hubServiceChanged), so status
// writes rebuild nothing.
func translationInputChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*v1alpha1.LoadBalancer)
		n, ok2 := e.ObjectNew.(*v1alpha1.LoadBalancer)
		if !ok1 || !ok2 {
			return true
		}
		return o.Generation != n.Generation || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
			!maps.Equal(o.Annotations, n.Annotations) || !maps.Equal(o.Labels, n.Labels)
	}}
}

// hubServiceChanged passes the LoadBalancers' hub Services (hubnames.LoadBalancerOf, before
// or after the event) when what translation reads of them changes: the listener ports (each
// port's protocol, number and targetPort), the IP families, deletion. The LoadBalancer controller's
// other writes and the hub's address rebuild nothing.
func hubServiceChanged() predicate.TypedPredicate[client.Object] {
	is := func(o client.Object) bool { return hubnames.LoadBalancerOf(o) != "" }
	return predicate.TypedFuncs[client.Object]{
		CreateFunc:  func(e event.CreateEvent) bool { return is(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return is(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return is(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if !is(e.ObjectOld) && !is(e.ObjectNew) {
				return false
			}
			o, ok1 := e.ObjectOld.(*corev1.Service)
			n, ok2 := e.ObjectNew.(*corev1.Service)
			if !ok1 || !ok2 {
				return true
			}
			return is(o) != is(n) || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
				!slices.Equal(o.Spec.IPFamilies, n.Spec.IPFamilies) || !slices.EqualFunc(o.Spec.Ports, n.Spec.Ports, sameListenerPort)
		},
	}
}

// sameListenerPort reports whether two hub Service ports record the same listener port.
func sameListenerPort(a, b corev1.ServicePort) bool {
	return a.Protocol == b.Protocol && a.Port == b.Port && a.TargetPort == b.TargetPort
}

// routeChanged passes Route updates that can change the translation: the spec (generation),
// labels, annotations and deletion. The status writes of the Route controller and of the
// status writer rebuild nothing.
func routeChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return o.GetGeneration() != n.GetGeneration() || o.GetDeletionTimestamp().IsZero() != n.GetDeletionTimestamp().IsZero() ||
			!maps.Equal(o.GetAnnotations(), n.GetAnnotations()) || !maps.Equal(o.GetLabels(), n.GetLabels())
	}}
}

// routeServiceChanged passes the Route controller's hub Services (hubnames.IsRouteService,
// before or after the event) when what translation reads of them changes: ports (the
// targetPorts are the listener ports), addresses, labels, deletion.
func routeServiceChanged() predicate.TypedPredicate[client.Object] {
	return predicate.TypedFuncs[client.Object]{
		CreateFunc:  func(e event.CreateEvent) bool { return hubnames.IsRouteService(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return hubnames.IsRouteService(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return hubnames.IsRouteService(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if !hubnames.IsRouteService(e.ObjectOld) && !hubnames.IsRouteService(e.ObjectNew) {
				return false
			}
			o, ok1 := e.ObjectOld.(*corev1.Service)
			n, ok2 := e.ObjectNew.(*corev1.Service)
			if !ok1 || !ok2 {
				return true
			}
			return !maps.Equal(o.Labels, n.Labels) || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
				!equality.Semantic.DeepEqual(o.Spec.Ports, n.Spec.Ports) ||
				!equality.Semantic.DeepEqual(o.Status.LoadBalancer, n.Status.LoadBalancer)
		},
	}
}

// syncedSecretChanged passes Secrets made from SyncSecrets (before or after the event) when
// their data, labels or owners change.
func syncedSecretChanged() predicate.TypedPredicate[client.Object] {
	return predicate.TypedFuncs[client.Object]{
		CreateFunc:  func(e event.CreateEvent) bool { return hubnames.IsSyncedSecret(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return hubnames.IsSyncedSecret(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return hubnames.IsSyncedSecret(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if !hubnames.IsSyncedSecret(e.ObjectOld) && !hubnames.IsSyncedSecret(e.ObjectNew) {
				return false
			}
			o, ok1 := e.ObjectOld.(*corev1.Secret)
			n, ok2 := e.ObjectNew.(*corev1.Secret)
			if !ok1 || !ok2 {
				return true
			}
			return !maps.Equal(o.Labels, n.Labels) || !equality.Semantic.DeepEqual(o.OwnerReferences, n.OwnerReferences) ||
				!equality.Semantic.DeepEqual(o.Data, n.Data) || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
		},
	}
}

// hostnameSecretChanged passes the Secrets cert-manager issued for LoadBalancer hostnames
// (loadbalancer.IsHostnameSecret, before or after the event) when their data, labels or
// annotations change.
func hostnameSecretChanged() predicate.TypedPredicate[client.Object] {
	return predicate.TypedFuncs[client.Object]{
		CreateFunc:  func(e event.CreateEvent) bool { return loadbalancer.IsHostnameSecret(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return loadbalancer.IsHostnameSecret(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return loadbalancer.IsHostnameSecret(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if !loadbalancer.IsHostnameSecret(e.ObjectOld) && !loadbalancer.IsHostnameSecret(e.ObjectNew) {
				return false
			}
			o, ok1 := e.ObjectOld.(*corev1.Secret)
			n, ok2 := e.ObjectNew.(*corev1.Secret)
			if !ok1 || !ok2 {
				return true
			}
			return !maps.Equal(o.Labels, n.Labels) || !maps.Equal(o.Annotations, n.Annotations) ||
				!equality.Semantic.DeepEqual(o.Data, n.Data) || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
		},
	}
}

// TenantOf maps an object to the request of its tenant: {Name: <its namespace>}.
func TenantOf(_ context.Context, o client.Object) []reconcile.Request {
	if o.GetNamespace() == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
}

// managedNamespaceChanged passes namespaces that are (or were) managed: creation, deletion,
// and label changes either way.
func managedNamespaceChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return hubnames.IsManaged(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return hubnames.IsManaged(e.ObjectOld) != hubnames.IsManaged(e.ObjectNew)
		},
		DeleteFunc: func(e event.DeleteEvent) bool { return hubnames.IsManaged(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool {
			return hubnames.IsManaged(e.Object)
		},
	}
}

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=loadbalancers;addresses;routes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services;secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=configs;tenants,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=servicecidrs,verbs=get;list;watch
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;list;watch

// Reconcile rebuilds the snapshot of the tenant named by req.Name. A namespace that is gone
// or not managed by kubelb has its snapshot removed; a managed namespace without
// LoadBalancers gets an empty snapshot, so its proxies drop every listener.
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
	if ns == nil || !hubnames.IsManaged(ns) {
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

	scope, err := Build(ctx, r.client, r.owned, r.namespace, tenant, r.opts)
	if err != nil {
		return reconcile.Result{}, err
	}
	in := scope.Input
	// Endpoint hostnames are resolved by the manager, never by Envoy, and never here: the
	// rebuild reads the last answers and queues the stale names (want). A tenant with any is
	// rebuilt every ResolveInterval, which looks them up again; a changed answer rebuilds it
	// at once.
	hostnames := translate.EndpointHostnames(&in)
	in.Resolved = r.names.want(tenant, hostnames)
	var res reconcile.Result
	if len(hostnames) > 0 {
		res.RequeueAfter = ResolveInterval
	}
	buildStart := time.Now()
	cache := r.cachesOf(tenant)
	out, err := cache.front.Run(in)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("translating tenant %s: %w", tenant, err)
	}
	cfg := out.Config
	// What the tenant's settings hold back (objects refused by its limits, LoadBalancers of a
	// tenant with load balancing disabled) are problems on those objects; the endpoints cut
	// by its limits are the translation's own (translate.Options.MaxEndpoints*).
	problems := append(slices.Clone(out.Problems), scope.HeldBack...)
	b, changed, err := r.push(ctx, tenant, cfg, &cache.back)
	metrics.ManagerSnapshotBuildDuration.WithLabelValues(tenant).Observe(time.Since(buildStart).Seconds())
	if err != nil {
		return reconcile.Result{}, err
	}
	if changed {
		// What the tenant may not read (the rule that denied an endpoint, what the hub's
		// DNS answered) is logged for the platform team, once per change of the snapshot.
		for _, p := range problems {
			if p.Detail != "" {
				log.Info("Endpoint left out", "object", p.Object.String(), "reason", p.Reason, "detail", p.Detail)
			}
		}
		log.V(1).Info("Envoy snapshot updated", "loadBalancers", len(in.LoadBalancers), "routes", len(in.Routes),
			"listeners", len(cfg.Listeners), "problems", len(problems)+len(b.problems),
			"translated", cache.front.Stats.Translated, "reused", cache.front.Stats.Reused,
			"resourcesBuilt", cache.back.Built, "resourcesReused", cache.back.Reused)
	}
	routes := out.Routes
	if len(scope.HeldRoutes) > 0 {
		routes = maps.Clone(routes)
		if routes == nil {
			routes = map[string]translate.RouteStatus{}
		}
		maps.Copy(routes, scope.HeldRoutes)
	}
	r.store.Publish(tenant, r.report(tenant, scope, routes, b, append(problems, b.problems...)))
	return res, nil
}

// push runs the back end (with the tenant's cache) and sets the snapshot, unless the IR
// equals the one last pushed.
func (r *Reconciler) push(ctx context.Context, tenant string, cfg *ir.Config, back *translator.Cache) (*built, bool, error) {
	r.mu.Lock()
	last := r.last[tenant]
	r.mu.Unlock()
	if last != nil && last.cfg.Equal(cfg) {
		return last, false, nil
	}
	res, problems, err := back.Translate(cfg)
	if err != nil {
		return nil, false, fmt.Errorf("building the Envoy resources of tenant %s: %w", tenant, err)
	}
	changed, err := r.snapshots.SetTenant(ctx, tenant, res)
	if err != nil {
		return nil, false, fmt.Errorf("setting the Envoy snapshot of tenant %s: %w", tenant, err)
	}
	b := &built{cfg: cfg, problems: problems, owners: translator.Owners(cfg)}
	r.mu.Lock()
	r.last[tenant] = b
	r.mu.Unlock()
	return b, changed, nil
}

// report is what the status writer needs to know of this translation.
func (r *Reconciler) report(tenant string, scope Scope, routes map[string]translate.RouteStatus, b *built, problems ir.Problems) *status.Report {
	in := &scope.Input
	rep := &status.Report{
		Objects:  make(map[ir.ObjectRef]int64, len(in.LoadBalancers)+len(in.Routes)+len(scope.HeldObjects)),
		Problems: problems,
		Owners:   b.owners,
		Versions: map[string]string{},
		Routes:   routes,
	}
	rep.Problems.Sort()
	for i := range in.LoadBalancers {
		lb := &in.LoadBalancers[i]
		rep.Objects[ir.ObjectRef{Kind: translate.KindLoadBalancer, Namespace: tenant, Name: lb.Name}] = lb.Generation
	}
	for i := range in.Routes {
		rt := &in.Routes[i]
		rep.Objects[ir.ObjectRef{Kind: translate.KindRoute, Namespace: tenant, Name: rt.Name}] = rt.Generation
	}
	maps.Copy(rep.Objects, scope.HeldObjects)
	for _, typeURL := range xds.TypeURLs {
		if v := r.snapshots.TypeVersion(tenant, typeURL); v != "" {
			rep.Versions[typeURL] = v
		}
	}
	return rep
}

func (r *Reconciler) forget(tenant string) {
	r.names.forget(tenant)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, tenant)
	delete(r.caches, tenant)
	delete(r.next, tenant)
}

// BuildInput reads one tenant's translation input. From c (the manager's cache): the
// tenant's settings (Config "default" in managerNamespace and the Tenant: endpoint policy,
// header limits), the hub ranges (ServiceCIDRs, Nodes), and the tenant's LoadBalancers and
// Routes (those being deleted left out) and Addresses. From owned (a reader of the Services
// and Secrets labelled managed-by: kubelb; c itself will do): the hub Services the Route
// controller made (hubnames.IsRouteService) and the hub Secrets made from SyncSecrets
// (hubnames.IsSyncedSecret), the LoadBalancers' hub Services (hubnames.LoadBalancerOf: their
// targetPorts are the listener ports), and the Secrets cert-manager issued for the Certificates the LoadBalancer
// controller made for LoadBalancer hostnames (hostnameSecrets). Nothing else of the tenant
// namespace is read.
//
// The tenant's limits (quota.Admission) and settings hold objects back: see Build.
func BuildInput(ctx context.Context, c, owned client.Reader, managerNamespace, tenant string, opts translate.Options) (translate.Input, error) {
	scope, err := Build(ctx, c, owned, managerNamespace, tenant, opts)
	return scope.Input, err
}

// Scope is one tenant's translation input (BuildInput) with what its settings hold back.
type Scope struct {
	Input translate.Input
	// HeldBack are the problems of the objects left out of Input: LoadBalancers and Routes
	// the tenant's limits refuse (quota.ReasonQuotaExceeded), and every LoadBalancer of a
	// tenant with load balancing disabled (ReasonLoadBalancingDisabled). Each is an Error: the
	// object is not served.
	HeldBack ir.Problems
	// HeldObjects are those objects with their generations, for status.Report.Objects.
	HeldObjects map[ir.ObjectRef]int64
	// HeldRoutes are the statuses of the tenant objects of held Gateway and Ingress Routes
	// (HeldStatus), for status.Report.Routes: a Gateway says Programmed=False (NoResources),
	// an Ingress has no address.
	HeldRoutes map[string]translate.RouteStatus
}

// ReasonLoadBalancingDisabled is the problem of a LoadBalancer of a tenant whose Tenant or
// Config disables load balancing: it is not translated.
const ReasonLoadBalancingDisabled = "LoadBalancingDisabled"

// Build reads one tenant's scope: the translation input as BuildInput describes it, less the
// LoadBalancers and Routes the tenant's limits refuse (quota.Admission, the same verdict the
// LoadBalancer and Route controllers act on) and, when the tenant's load balancing is
// disabled, less its LoadBalancers; those are in HeldBack and HeldObjects.
func Build(ctx context.Context, c, owned client.Reader, managerNamespace, tenant string, opts translate.Options) (Scope, error) {
	in, scope, err := buildInput(ctx, c, owned, managerNamespace, tenant, opts)
	scope.Input = in
	return scope, err
}

// buildInput reads what Build returns, the input apart from the rest of the scope.
func buildInput(ctx context.Context, c, owned client.Reader, managerNamespace, tenant string, opts translate.Options) (translate.Input, Scope, error) {
	log := ctrl.LoggerFrom(ctx)
	var scope Scope
	config, tn, err := settings.Read(ctx, c, managerNamespace, hubnames.TenantName(tenant))
	if err != nil {
		return translate.Input{}, scope, err
	}
	set := settings.Resolve(config, tn)
	if len(set.InvalidEndpointPolicy) > 0 {
		log.Info("WARNING: endpoint policy entries that are not CIDRs are ignored", "tenant", tenant, "entries", set.InvalidEndpointPolicy)
	}
	limits, ignored := HeaderLimits(set.Envoy.HeaderLimits)
	if len(ignored) > 0 {
		log.Info("WARNING: header limits out of Envoy's range are ignored", "tenant", tenant, "fields", ignored)
	}
	hub, err := hubRanges(ctx, c)
	if err != nil {
		return translate.Input{}, scope, err
	}

	// Translation only reads its input: the cache's objects are used without a deep copy.
	lbs := &v1alpha1.LoadBalancerList{}
	if err := c.List(ctx, lbs, client.InNamespace(tenant), client.UnsafeDisableDeepCopy); err != nil {
		return translate.Input{}, scope, fmt.Errorf("listing LoadBalancers of %s: %w", tenant, err)
	}
	addrs := &v1alpha1.AddressesList{}
	if err := c.List(ctx, addrs, client.InNamespace(tenant), client.UnsafeDisableDeepCopy); err != nil {
		return translate.Input{}, scope, fmt.Errorf("listing Addresses of %s: %w", tenant, err)
	}
	routes := &v1alpha1.RouteList{}
	if err := c.List(ctx, routes, client.InNamespace(tenant), client.UnsafeDisableDeepCopy); err != nil {
		return translate.Input{}, scope, fmt.Errorf("listing Routes of %s: %w", tenant, err)
	}
	managed := client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}
	svcs := &corev1.ServiceList{}
	if err := owned.List(ctx, svcs, client.InNamespace(tenant), managed, client.UnsafeDisableDeepCopy); err != nil {
		return translate.Input{}, scope, fmt.Errorf("listing the Route hub Services of %s: %w", tenant, err)
	}
	secrets := &corev1.SecretList{}
	if err := owned.List(ctx, secrets, client.InNamespace(tenant), managed, client.UnsafeDisableDeepCopy); err != nil {
		return translate.Input{}, scope, fmt.Errorf("listing the synced Secrets of %s: %w", tenant, err)
	}
	in := translate.Input{
		Tenant:        tenant,
		LoadBalancers: make([]v1alpha1.LoadBalancer, 0, len(lbs.Items)),
		Addresses:     make(map[string]v1alpha1.Addresses, len(addrs.Items)),
		// The tenant's spec.upstream (Config, Tenant) in place of the manager's defaults.
		Options:      opts.WithUpstream(set.Upstream),
		Policy:       set.EndpointPolicy,
		HeaderLimits: limits,
		DNS:          set.DNS,
	}
	in.Policy.Hub = hub
	// The endpoint limits bound the translation itself: it stops merging a cluster's
	// endpoints at the limit, so an oversized input never costs more than what is kept.
	in.Options.MaxEndpointsPerCluster = set.Limits.EndpointsPerCluster
	in.Options.MaxEndpoints = set.Limits.Endpoints
	// The health-check budget: the tenant's own, at most its share of the hub's total.
	budget, err := HealthCheckBudget(ctx, c, set.Limits)
	if err != nil {
		return translate.Input{}, scope, err
	}
	in.Options.HealthCheckProbesPerSecond = budget
	in.Options.HealthCheckProxies = int(set.Envoy.Replicas)
	scope.HeldObjects = map[ir.ObjectRef]int64{}
	verdict := quota.Admission(tenant, lbs.Items, routes.Items, set)
	hold := func(kind, name string, generation int64, reason, msg string) {
		ref := ir.ObjectRef{Kind: kind, Namespace: tenant, Name: name}
		scope.HeldObjects[ref] = generation
		scope.HeldBack = append(scope.HeldBack, ir.Problem{Object: ref, Severity: ir.SeverityError, Reason: reason, Message: msg})
	}
	for _, lb := range lbs.Items {
		if !lb.DeletionTimestamp.IsZero() {
			continue
		}
		if set.DisableLoadBalancer {
			hold(translate.KindLoadBalancer, lb.Name, lb.Generation, ReasonLoadBalancingDisabled,
				"load balancing is disabled for this tenant (spec.loadBalancer.disable of the Tenant or Config); the LoadBalancer is not served")
			continue
		}
		if msg, refused := verdict.Refused(quota.KindLoadBalancer, lb.Name); refused {
			hold(translate.KindLoadBalancer, lb.Name, lb.Generation, quota.ReasonQuotaExceeded, msg)
			continue
		}
		in.LoadBalancers = append(in.LoadBalancers, lb)
	}
	// Addresses beyond spec.limits.addresses (oldest first) are left out: a LoadBalancer
	// that references one reports it missing.
	addrItems := make([]quota.Item, 0, len(addrs.Items))
	for _, a := range addrs.Items {
		if a.DeletionTimestamp.IsZero() {
			addrItems = append(addrItems, quota.Item{Name: a.Name, Created: a.CreationTimestamp.Time})
		}
	}
	addrVerdict := quota.AdmitItems(tenant, quota.KindAddresses, addrItems, quota.ItemLimits{Count: set.Limits.Addresses, CountField: "addresses", Bytes: -1})
	if refused := addrVerdict.RefusedNames(); len(refused) > 0 {
		log.V(1).Info("Addresses over the tenant's limit are not used", "tenant", tenant, "addresses", refused)
	}
	for _, a := range addrs.Items {
		if _, refused := addrVerdict.Refused(a.Name); !refused {
			in.Addresses[a.Name] = a
		}
	}
	for _, rt := range routes.Items {
		// With Ingress disabled, kubelb-ingress may still exist for LoadBalancer hostnames:
		// the tenant's Ingresses are left out, so that it serves only those.
		if !rt.DeletionTimestamp.IsZero() || (set.DisableIngress && isIngressRoute(&rt)) {
			continue
		}
		if msg, refused := verdict.Refused(quota.KindRoute, rt.Name); refused {
			hold(translate.KindRoute, rt.Name, rt.Generation, quota.ReasonQuotaExceeded, msg)
			if st, ok := HeldStatus(&rt, msg); ok {
				if scope.HeldRoutes == nil {
					scope.HeldRoutes = map[string]translate.RouteStatus{}
				}
				scope.HeldRoutes[rt.Name] = st
			}
			continue
		}
		in.Routes = append(in.Routes, rt)
	}
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		if hubnames.IsRouteService(svc) {
			in.RouteServices = append(in.RouteServices, *svc)
		} else if lb := hubnames.LoadBalancerOf(svc); lb != "" {
			if in.HubServices == nil {
				in.HubServices = make(map[string]*corev1.Service, len(lbs.Items))
			}
			in.HubServices[lb] = svc
		}
	}
	for i := range secrets.Items {
		if hubnames.IsSyncedSecret(&secrets.Items[i]) {
			in.Secrets = append(in.Secrets, secrets.Items[i])
		}
	}
	if in.HostnameSecrets, err = hostnameSecrets(ctx, c, in.LoadBalancers, secrets.Items); err != nil {
		return translate.Input{}, scope, err
	}
	// The caches list in no fixed order; sorted, the same state always gives the same input.
	byName := func(a, b corev1.Service) int { return cmp.Compare(a.Name, b.Name) }
	slices.SortFunc(in.RouteServices, byName)
	slices.SortFunc(in.Secrets, func(a, b corev1.Secret) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(in.Routes, func(a, b v1alpha1.Route) int { return cmp.Compare(a.Name, b.Name) })
	scope.HeldBack.Sort()
	return in, scope, nil
}

// HeldStatus is the status of the tenant object of a Route that is not served because the
// tenant's limits refuse it (msg says why), for the ccm to copy back: a Gateway is Accepted
// (nothing is wrong with it) but Programmed=False with Gateway API's reason NoResources, and
// has no addresses or listeners; an Ingress has no address. Other kinds get none (false):
// their parents' status says nothing of a Gateway that is not served.
func HeldStatus(rt *v1alpha1.Route, msg string) (translate.RouteStatus, bool) {
	src := rt.Spec.Source.Kubernetes
	if src == nil {
		return translate.RouteStatus{}, false
	}
	gen := src.Route.GetGeneration()
	if gen <= 0 {
		gen = rt.Generation
	}
	var status any
	switch kind, _ := quota.Classify(rt); kind {
	case quota.SourceIngress:
		status = map[string]any{"loadBalancer": map[string]any{}}
	case quota.SourceGateway:
		at := metav1.NewTime(rt.CreationTimestamp.UTC())
		if rt.CreationTimestamp.IsZero() {
			at = metav1.NewTime(time.Unix(0, 0).UTC())
		}
		status = map[string]any{"conditions": []metav1.Condition{
			{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", Message: "The Gateway is valid; it is not programmed: see Programmed.",
				ObservedGeneration: gen, LastTransitionTime: at},
			{Type: "Programmed", Status: metav1.ConditionFalse, Reason: "NoResources", Message: "Not served: " + msg + ".",
				ObservedGeneration: gen, LastTransitionTime: at},
		}}
	default:
		return translate.RouteStatus{}, false
	}
	raw, err := json.Marshal(status)
	if err != nil { // plain maps and API types; this cannot happen
		return translate.RouteStatus{}, false
	}
	return translate.RouteStatus{Kind: src.Route.GetKind(), Generation: gen, Status: raw}, true
}

// isIngressRoute reports whether a Route embeds an Ingress (networking.k8s.io).
func isIngressRoute(rt *v1alpha1.Route) bool {
	if rt.Spec.Source.Kubernetes == nil {
		return false
	}
	gvk := rt.Spec.Source.Kubernetes.Route.GroupVersionKind()
	return gvk.Group == "networking.k8s.io" && gvk.Kind == "Ingress"
}

// hostnameSecrets returns the certificates of LoadBalancer hostnames by LoadBalancer name:
// the Secret translate.HostnameSecretName(lb) that cert-manager issued
// (loadbalancer.IsHostnameSecret: labels from the Certificate's secretTemplate, cert-manager's
// certificate-name annotation) for a Certificate the LoadBalancer controller made for that
// LoadBalancer (loadbalancer.OwnsCertificate: its labels and controller reference). The
// Certificates are read as metadata from c, only for such Secrets: none is read where
// cert-manager issued nothing, so a hub without cert-manager is never asked for them.
func hostnameSecrets(ctx context.Context, c client.Reader, lbs []v1alpha1.LoadBalancer, secrets []corev1.Secret) (map[string]corev1.Secret, error) {
	byName := make(map[string]*corev1.Secret)
	for i := range secrets {
		if loadbalancer.IsHostnameSecret(&secrets[i]) {
			byName[secrets[i].Name] = &secrets[i]
		}
	}
	if len(byName) == 0 {
		return nil, nil
	}
	out := map[string]corev1.Secret{}
	for i := range lbs {
		lb := &lbs[i]
		s, ok := byName[translate.HostnameSecretName(lb.Name)]
		if !ok || s.Labels[v1alpha1.LabelLoadBalancerName] != lb.Name {
			continue
		}
		cert := &metav1.PartialObjectMetadata{}
		cert.SetGroupVersionKind(loadbalancer.CertificateGVK)
		err := c.Get(ctx, client.ObjectKey{Namespace: lb.Namespace, Name: s.Name}, cert)
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("getting Certificate %s/%s: %w", lb.Namespace, s.Name, err)
		}
		if loadbalancer.OwnsCertificate(cert, lb) {
			out[lb.Name] = *s
		}
	}
	return out, nil
}

// Envoy's bounds of the header limits (HttpConnectionManager max_request_headers_kb: 1 to
// 8192; HttpProtocolOptions max_headers_count: at least 1).
const (
	maxRequestHeadersKB = 8192
)

// HeaderLimits converts the tenant's effective header limits (Config, or the Tenant's when
// set) to the IR's; nil when none is set. A value Envoy would refuse (0, or more than 8192
// KiB) is left out and named in ignored, so it cannot make every HTTP listener rejected.
// maxResponseHeadersKb is not used.
func HeaderLimits(h *v1alpha1.HeaderLimits) (_ *ir.HeaderLimits, ignored []string) {
	if h == nil {
		return nil, nil
	}
	var out ir.HeaderLimits
	if v := h.MaxRequestHeadersKb; v != nil {
		if *v < 1 || *v > maxRequestHeadersKB {
			ignored = append(ignored, fmt.Sprintf("maxRequestHeadersKb=%d (1 to %d)", *v, maxRequestHeadersKB))
		} else {
			out.MaxRequestHeadersKB = *v
		}
	}
	if v := h.MaxRequestHeadersCount; v != nil {
		if *v < 1 {
			ignored = append(ignored, fmt.Sprintf("maxRequestHeadersCount=%d (at least 1)", *v))
		} else {
			out.MaxRequestHeadersCount = *v
		}
	}
	if out == (ir.HeaderLimits{}) {
		return nil, ignored
	}
	return &out, ignored
}

// hubRanges lists the hub's ServiceCIDRs and Nodes from the cache and returns their ranges.
func hubRanges(ctx context.Context, c client.Reader) ([]translate.PolicyRule, error) {
	cidrs := &networkingv1.ServiceCIDRList{}
	if err := c.List(ctx, cidrs, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ServiceCIDRs: %w", err)
	}
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing Nodes: %w", err)
	}
	return HubRanges(cidrs.Items, nodes.Items), nil
}

// HubRanges returns the ranges of the hub that tenants' endpoints must not reach: the CIDRs
// of its ServiceCIDRs, the Pod CIDRs of its Nodes and their InternalIP and ExternalIP
// addresses (each a /32 or /128). Sorted and deduplicated; entries that do not parse are left
// out. It is pure.
func HubRanges(cidrs []networkingv1.ServiceCIDR, nodes []corev1.Node) []translate.PolicyRule {
	var out []translate.PolicyRule
	add := func(s, src string) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return
		}
		out = append(out, translate.PolicyRule{Prefix: p.Masked(), Source: src})
	}
	for i := range cidrs {
		for _, c := range cidrs[i].Spec.CIDRs {
			add(c, translate.SourceHubServiceCIDR)
		}
	}
	for i := range nodes {
		n := &nodes[i]
		for _, c := range n.Spec.PodCIDRs {
			add(c, translate.SourceHubPodCIDR)
		}
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Zone() == "" {
				ip = ip.Unmap()
				out = append(out, translate.PolicyRule{Prefix: netip.PrefixFrom(ip, ip.BitLen()), Source: translate.SourceHubNode})
			}
		}
	}
	slices.SortFunc(out, func(a, b translate.PolicyRule) int {
		return cmp.Or(a.Prefix.Addr().Compare(b.Prefix.Addr()), cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()), cmp.Compare(a.Source, b.Source))
	})
	return slices.Compact(out)
}
