// Package tenant onboards tenants on the hub. For a Tenant "x" it makes namespace tenant-x
// (owned by the Tenant), the ResourceQuota kubelb-tenant (LoadBalancer and Route counts at
// the tenant's limits), the Envoy fleet's NetworkPolicy kubelb-envoy (unless disabled), the
// ccm's ServiceAccount, a Role that confines the ccm to that namespace, the RoleBinding, the
// Secret kubelb-ccm-kubeconfig with a kubeconfig for the ServiceAccount (a TokenRequest token
// that is replaced after 80% of its lifetime), and TenantState "default". Deleting the Tenant
// removes the tenant's LoadBalancers, Routes and SyncSecrets first, then its Envoy fleet,
// RBAC, kubeconfig and namespace; finalizers that are not kubelb's and hold it are named in
// the Tenant's condition. The Tenant's status counts the tenant's LoadBalancers and Routes,
// written when they change and at most once per 10 s per tenant (counts.go); its condition
// LimitsNearlyReached and the limit metrics warn before the tenant reaches one of its limits
// (limits.go). Owner
// references naming a Tenant or a namespace on the objects
// tenants write are removed (owners.go), so that no tenant holds another's deletion. On
// every replica it also keeps the manager's tenant-labelled metrics to the Tenants that
// exist (metrics.go).
package tenant

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/finalizer"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/hubcache"
	"kubelb.dev/kubelb/internal/manager/predicates"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/quota"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/ssa"
	"kubelb.dev/kubelb/internal/textcut"
)

// controllerName names the controller, its logger and its Events.
const controllerName = "tenant"

// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=tenants,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=tenants/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=tenants/finalizers,verbs=update
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=configs,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=tenantstates,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=tenantstates/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=loadbalancers;routes;addresses;syncsecrets,verbs=get;list;watch;create;update;patch;delete;deletecollection
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts;secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create,resourceNames=kubelb-ccm
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get,namespace=kube-public,resourceNames=cluster-info
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments;daemonsets,verbs=get;list;watch;create;update;patch;delete;deletecollection
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete;deletecollection
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=resourcequotas,verbs=get;list;watch;create;update;patch;delete

// Reconciler reconciles Tenants.
type Reconciler struct {
	// client writes, and reads Tenants, Config, TenantStates and the tenant objects from the
	// manager's cache.
	client client.Client
	// owned reads the namespaces and ccm access objects from a cache that holds only objects
	// labelled as kubelb's (a hub has many Secrets; the manager caches none of the others).
	owned client.Reader
	// apiReader reads uncached: cluster-info, and the rare checks of deletion.
	apiReader client.Reader
	// kube requests tokens (TokenRequest).
	kube     kubernetes.Interface
	recorder events.EventRecorder
	opts     Options
	// notYet logs the Config's and Tenants' not-yet settings once per generation.
	notYet settings.NotYetWarner
	// caData is the manager's own CA bundle, the fallback CA of the ccm kubeconfig.
	caData []byte
	// ownedCluster holds the owned cache; it runs with the manager.
	ownedCluster cluster.Cluster
	// serviceAccountsGone maps a tenant to when its deleted ccm ServiceAccount was first
	// missed (see waitBeforeRecreating). A restarted manager waits afresh, which is safe.
	serviceAccountsGone sync.Map
	now                 func() time.Time
	// countGate spaces the writes of each Tenant's counts (counts.go).
	countGate countGate
	// quota reads what each tenant's objects ask for of its limits (limits.go).
	quota *quota.Store
	// legacyManager is the field manager of this binary's creates and updates (earlier
	// versions made the tenant's objects that way); its fields are handed to FieldOwner.
	legacyManager string
}

// SetupWithManager adds the Tenant controller to mgr.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	r, err := newReconciler(mgr, opts)
	if err != nil {
		return err
	}
	return r.setup(mgr)
}

func newReconciler(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	opts = opts.withDefaults()
	if opts.Verdicts == nil {
		opts.Verdicts = quota.NewStore(mgr.GetCache(), mgr.GetClient())
	}
	if opts.Namespace == "" {
		return nil, errors.New("tenant controller: the manager namespace must be set")
	}
	if err := checkNetworkPolicyOptions(opts.NetworkPolicy); err != nil && !opts.NetworkPolicy.Disabled {
		return nil, err
	}
	if opts.TokenTTL < MinTokenTTL {
		return nil, fmt.Errorf("tenant controller: token lifetime %s is below the minimum of %s", opts.TokenTTL, MinTokenTTL)
	}
	if opts.HubAPIServerURL != "" {
		u, err := url.Parse(opts.HubAPIServerURL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("tenant controller: hub API server URL %q must be https://host[:port]", opts.HubAPIServerURL)
		}
	}
	cfg := mgr.GetConfig()
	caData, err := restConfigCA(cfg)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfigAndClient(cfg, mgr.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("tenant controller: creating the clientset: %w", err)
	}
	owned, err := newOwnedCluster(mgr)
	if err != nil {
		return nil, err
	}
	return &Reconciler{
		client:        mgr.GetClient(),
		owned:         owned.GetClient(),
		apiReader:     mgr.GetAPIReader(),
		kube:          kube,
		recorder:      mgr.GetEventRecorder("kubelb-" + controllerName),
		opts:          opts,
		caData:        caData,
		ownedCluster:  owned,
		now:           time.Now,
		legacyManager: ssa.LegacyFieldManager(cfg),
		quota:         opts.Verdicts,
	}, nil
}

// restConfigCA returns the CA bundle the manager itself trusts its API server with.
func restConfigCA(cfg *rest.Config) ([]byte, error) {
	if len(cfg.CAData) > 0 {
		return cfg.CAData, nil
	}
	if cfg.CAFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("tenant controller: reading the API server CA %s: %w", cfg.CAFile, err)
	}
	return b, nil
}

// newOwnedCluster makes a cache of only kubelb's namespaces and ccm access objects.
func newOwnedCluster(mgr ctrl.Manager) (cluster.Cluster, error) {
	access := hubcache.ManagedSelector(map[string]string{hubnames.LabelAppName: AppName})
	return hubcache.NewLabelledCluster(mgr, controllerName, map[client.Object]cache.ByObject{
		&corev1.Namespace{}:      {Label: hubcache.ManagedSelector(nil)},
		&corev1.ServiceAccount{}: {Label: access},
		&rbacv1.Role{}:           {Label: access},
		&rbacv1.RoleBinding{}:    {Label: access},
		&corev1.Secret{}:         {Label: access},
		// The Envoy fleet's NetworkPolicy and the tenant's ResourceQuota.
		&networkingv1.NetworkPolicy{}: {Label: hubcache.ManagedSelector(nil)},
		&corev1.ResourceQuota{}:       {Label: hubcache.ManagedSelector(nil)},
	})
}

func (r *Reconciler) setup(mgr ctrl.Manager) error {
	if err := trackTenantMetrics(mgr); err != nil {
		return err
	}
	if !r.opts.keepOwnerReferences {
		if err := setupOwnerReferences(mgr, r.recorder); err != nil {
			return err
		}
	}
	ownedCache := r.ownedCluster.GetCache()
	byTenantLabel := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if name := o.GetLabels()[kubelbv1alpha1.LabelTenantName]; name != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
		}
		return nil
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		For(&kubelbv1alpha1.Tenant{}, builder.WithPredicates(tenantChanged())).
		Watches(&kubelbv1alpha1.Config{}, handler.EnqueueRequestsFromMapFunc(r.allTenants),
			builder.WithPredicates(predicates.DefaultConfig(r.opts.Namespace), predicate.GenerationChangedPredicate{})).
		Watches(&kubelbv1alpha1.TenantState{}, handler.EnqueueRequestsFromMapFunc(byNamespace)).
		// Deletions of tenant objects wake a Tenant that waits for them.
		Watches(&kubelbv1alpha1.LoadBalancer{}, handler.EnqueueRequestsFromMapFunc(r.terminatingTenant), builder.WithPredicates(deletesOnly())).
		Watches(&kubelbv1alpha1.Route{}, handler.EnqueueRequestsFromMapFunc(r.terminatingTenant), builder.WithPredicates(deletesOnly())).
		Watches(&kubelbv1alpha1.SyncSecret{}, handler.EnqueueRequestsFromMapFunc(r.terminatingTenant), builder.WithPredicates(deletesOnly())).
		// Creations and deletions of tenant objects change the Tenant's counts.
		Watches(&kubelbv1alpha1.LoadBalancer{}, enqueueCountLater(r.opts.countsInterval)).
		Watches(&kubelbv1alpha1.Route{}, enqueueCountLater(r.opts.countsInterval)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4})
	for _, obj := range []client.Object{&corev1.Namespace{}, &corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}, &corev1.Secret{},
		&networkingv1.NetworkPolicy{}, &corev1.ResourceQuota{}} {
		b = b.WatchesRawSource(source.Kind(ownedCache, obj, byTenantLabel))
	}
	return b.Complete(r)
}

// allTenants maps a Config change to every Tenant.
func (r *Reconciler) allTenants(ctx context.Context, _ client.Object) []reconcile.Request {
	var list kubelbv1alpha1.TenantList
	if err := r.client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing Tenants for a Config change")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
	}
	return out
}

// byNamespace maps an object in tenant-x to Tenant x.
func byNamespace(_ context.Context, o client.Object) []reconcile.Request {
	if !hubnames.IsTenantNamespace(o.GetNamespace()) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: hubnames.TenantName(o.GetNamespace())}}}
}

// terminatingTenant maps an object in tenant-x to Tenant x when x is being deleted.
func (r *Reconciler) terminatingTenant(ctx context.Context, o client.Object) []reconcile.Request {
	reqs := byNamespace(ctx, o)
	if len(reqs) == 0 {
		return nil
	}
	var t kubelbv1alpha1.Tenant
	if err := r.client.Get(ctx, reqs[0].NamespacedName, &t); err != nil || t.DeletionTimestamp.IsZero() {
		return nil
	}
	return reqs
}

// Reconcile brings one Tenant's objects and status in line with its spec. It has the
// manager's controller shape (docs/development.md): get (gone → done), finalizer, then
// reconcileDelete or reconcileNormal (scope, desired objects in resources.go, writes), and one
// status apply at the end whatever happened.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	start := time.Now()
	defer func() { metrics.ManagerTenantReconcile.Observe("", metrics.Result(err), start) }()
	defer r.countTenants(ctx)
	defer func() { res, err = ssa.RetryConflict(res, err) }()

	t := &kubelbv1alpha1.Tenant{}
	if err := r.client.Get(ctx, req.NamespacedName, t); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("getting Tenant %s: %w", req.Name, err)
	}
	if !t.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(t, kubelbv1alpha1.CleanupFinalizer) {
		// Kubelb's part is done; what may still hold the Tenant (foreground deletion) are
		// owner references tenants set on their objects: they are removed.
		if _, err := r.releaseOwnerReferences(ctx, t); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, nil
	}
	if t.DeletionTimestamp.IsZero() {
		if _, err := finalizer.Ensure(ctx, r.client, t, kubelbv1alpha1.CleanupFinalizer); err != nil {
			return ctrl.Result{}, err
		}
	}

	var o outcome
	done := false
	defer func() { // the one status write of this reconcile
		if done {
			return // the finalizer is gone, and so (soon) is the Tenant
		}
		if serr := r.writeStatus(ctx, t, o); serr != nil {
			err = errors.Join(err, serr)
		}
		if err == nil {
			res = ctrl.Result{RequeueAfter: o.requeueAfter}
		}
	}()
	if !t.DeletionTimestamp.IsZero() {
		o, done, err = r.reconcileDelete(ctx, t)
		if done {
			r.countGate.forget(t.Name)
		}
		return ctrl.Result{}, err
	}
	if o, err = r.reconcileNormal(ctx, t); err != nil {
		return ctrl.Result{}, err
	}
	if o.eff != nil {
		if err := r.limits(ctx, t, *o.eff, &o); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, r.counts(ctx, t, &o)
}

// writeStatus applies the Tenant status (observedGeneration, phase and the Ready condition,
// under field owner FieldOwner) when it changed, and emits a Warning Event when the Ready
// condition moves to a reason a person must act on.
func (r *Reconciler) writeStatus(ctx context.Context, t *kubelbv1alpha1.Tenant, o outcome) error {
	next := desiredTenantStatus(t, o, r.metaNow())
	if !statusChanged(t.Status, next) {
		return nil
	}
	prev := meta.FindStatusCondition(t.Status.Conditions, ConditionReady)
	prevLimits := meta.FindStatusCondition(t.Status.Conditions, ConditionLimitsNearlyReached)
	if prevLimits != nil {
		prevLimits = prevLimits.DeepCopy()
	}
	if err := ssa.ApplyStatus(ctx, r.client, t, FieldOwner, ownedTenantStatus(next)); err != nil {
		return err
	}
	if c := meta.FindStatusCondition(next.Conditions, ConditionLimitsNearlyReached); c != nil && limitsWarning(prevLimits, *c) {
		r.recorder.Eventf(t, nil, corev1.EventTypeWarning, c.Reason, "Limits", "%s", textcut.Cut(c.Message, maxEventNote, textcut.Dots))
	}
	if o.counts != nil && *o.counts != countsOf(t.Status) {
		r.countGate.wrote(t.Name, r.now())
	}
	// A Warning when the reason changes; for ForeignFinalizers also when what holds the
	// deletion changes, so the Event names the new holders.
	if o.warn && (prev == nil || prev.Reason != o.reason || (o.reason == ReasonForeignFinalizers && prev.Message != o.message)) {
		r.recorder.Eventf(t, nil, corev1.EventTypeWarning, o.reason, "Provision", "%s", textcut.Cut(o.message, maxEventNote, textcut.Dots))
	}
	return nil
}

// maxEventNote is the longest note the API server accepts in an Event (events.k8s.io/v1).
const maxEventNote = 1024

func (r *Reconciler) countTenants(ctx context.Context) {
	var list kubelbv1alpha1.TenantList
	if err := r.client.List(ctx, &list, client.UnsafeDisableDeepCopy); err == nil {
		metrics.ManagerTenants.Set(float64(len(list.Items)))
	}
}

// metaNow is the current time at the precision the API stores.
func (r *Reconciler) metaNow() metav1.Time { return metav1.NewTime(r.now().Truncate(time.Second)) }
