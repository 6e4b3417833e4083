// Package envoyfleet runs each tenant's Envoy fleet on the hub: in every tenant namespace
// with at least one LoadBalancer or Route, a ConfigMap envoy-bootstrap with the Envoy
// bootstrap (internal/xds/bootstrap: ADS to the manager, node.cluster = the tenant namespace) and a
// Deployment (or DaemonSet) "envoy" whose pods carry app.kubernetes.io/name=envoy and
// kubelb.k8c.io/tenant=<tenant>, the labels the hub Services select, and a Secret
// envoy-xds-tls with the fleet's client certificate for xDS (internal/pki: it names the tenant
// namespace; issued from the manager's CA, reissued after 2/3 of its lifetime and when the CA
// changes), which the pods mount. Replicas, resources,
// scheduling, image and graceful shutdown come from Config "default" and the Tenant. The
// fleet is removed when the tenant has no more LoadBalancers or Routes. While Config "default"
// has a rate-limit store (spec.rateLimit), the fleet has a rate-limit service too
// (ratelimit.go: Deployment and Service kubelb-ratelimit), removed with the fleet or when the
// Config no longer has a store.
package envoyfleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/hubcache"
	"kubelb.dev/kubelb/internal/manager/predicates"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/pki"
	"kubelb.dev/kubelb/internal/pki/store"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/ssa"
	xdsbootstrap "kubelb.dev/kubelb/internal/xds/bootstrap"
)

const controllerName = "envoyfleet"

// FieldOwner is the server-side apply field manager of the fleets' ConfigMaps, Deployments
// and DaemonSets.
const FieldOwner = "kubelb-envoyfleet"

// ReasonInvalidEnvoyProxy is the reason of the Warning Event when the Envoy settings give no
// valid bootstrap; the running fleet is left as it is.
const ReasonInvalidEnvoyProxy = "InvalidEnvoyProxy"

// +kubebuilder:rbac:groups=apps,resources=deployments;daemonsets,verbs=get;list;watch;create;update;patch;delete;deletecollection
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete;deletecollection
// The tenants' rate-limit Services (kubelb-ratelimit).
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// The fleets' client certificate Secrets, and the xDS CA Secret in the manager's namespace.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=loadbalancers;routes;tenants;configs,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// ReasonXDSSecretConflict is the reason of the Warning Event on the Tenant when a Secret
// envoy-xds-tls that kubelb did not make is in the way of the fleet's client certificate:
// the manager leaves it alone, and the fleet is not deployed until it is deleted.
const ReasonXDSSecretConflict = "XDSSecretConflict"

// foreignSecretError: a Secret of the client Secret's name that kubelb did not make.
type foreignSecretError struct{ namespace string }

func (e *foreignSecretError) Error() string {
	return fmt.Sprintf("the Secret %s/%s exists and was not made by kubelb: delete it so that the manager can issue the Envoy fleet's xDS certificate", e.namespace, pki.ClientSecretName)
}

// Reconciler reconciles the Envoy fleet of one tenant namespace (the request's Name).
type Reconciler struct {
	// client writes, and reads LoadBalancers, Routes, Tenants and Config from the manager's
	// cache.
	client client.Client
	// owned reads kubelb's namespaces and the fleets from a cache holding only those (a hub
	// has many Deployments and ConfigMaps; the manager caches none of the others).
	owned        client.Reader
	ownedCluster cluster.Cluster
	// apiReader reads what the caches do not hold: the xDS CA Secret when the manager makes it,
	// a Secret in the client Secret's place that kubelb did not make.
	apiReader client.Reader
	// now is the clock of certificate issuance and renewal.
	now      func() time.Time
	recorder events.EventRecorder
	opts     Options
	// legacyManager is the field manager of this binary's creates and updates (earlier
	// versions made the fleet that way); its fields are handed to FieldOwner.
	legacyManager string
}

// SetupWithManager adds the Envoy fleet controller to mgr.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	owned, err := newOwnedCluster(mgr)
	if err != nil {
		return err
	}
	r := &Reconciler{
		client:        mgr.GetClient(),
		owned:         owned.GetClient(),
		ownedCluster:  owned,
		apiReader:     mgr.GetAPIReader(),
		now:           time.Now,
		recorder:      mgr.GetEventRecorder("kubelb-" + controllerName),
		opts:          opts,
		legacyManager: ssa.LegacyFieldManager(mgr.GetConfig()),
	}
	return r.setup(mgr)
}

// fleetSelector selects the objects of every fleet: the Envoy fleet's and the rate-limit
// service's.
func fleetSelector() labels.Selector {
	sel := hubcache.ManagedSelector(nil)
	req, err := labels.NewRequirement(hubnames.LabelAppName, selection.In, []string{hubnames.EnvoyAppName, RateLimitAppName})
	if err != nil {
		panic(err) // constant, valid values
	}
	return sel.Add(*req)
}

// rateLimitSelector selects the tenants' rate-limit Services.
func rateLimitSelector() labels.Selector {
	return hubcache.ManagedSelector(map[string]string{hubnames.LabelAppName: RateLimitAppName})
}

// xdsTLSSelector selects the xDS CA Secret and the fleets' client Secrets.
func xdsTLSSelector() labels.Selector {
	sel := hubcache.ManagedSelector(nil)
	req, err := labels.NewRequirement(pki.LabelXDSTLS, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid key
	}
	return sel.Add(*req)
}

func newOwnedCluster(mgr ctrl.Manager) (cluster.Cluster, error) {
	return hubcache.NewLabelledCluster(mgr, controllerName, map[client.Object]cache.ByObject{
		&corev1.Namespace{}:  {Label: hubcache.ManagedSelector(nil)},
		&corev1.Secret{}:     {Label: xdsTLSSelector()},
		&corev1.ConfigMap{}:  {Label: fleetSelector()},
		&appsv1.Deployment{}: {Label: fleetSelector()},
		&appsv1.DaemonSet{}:  {Label: fleetSelector()},
		&corev1.Service{}:    {Label: rateLimitSelector()},
	})
}

func (r *Reconciler) setup(mgr ctrl.Manager) error {
	owned := r.ownedCluster.GetCache()
	byNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return tenantRequest(o.GetNamespace())
	})
	byName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return tenantRequest(o.GetName())
	})
	byTenant := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return tenantRequest(hubnames.TenantNamespace(o.GetName()))
	})
	existence := r.existenceMatters()
	b := ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		Watches(&kubelbv1alpha1.LoadBalancer{}, existenceHandler(), builder.WithPredicates(existence)).
		Watches(&kubelbv1alpha1.Route{}, existenceHandler(), builder.WithPredicates(existence)).
		Watches(&kubelbv1alpha1.Tenant{}, byTenant, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&kubelbv1alpha1.Config{}, handler.EnqueueRequestsFromMapFunc(r.allTenants), builder.WithPredicates(
			predicates.DefaultConfig(r.opts.Namespace), predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Kind(owned, client.Object(&corev1.Namespace{}), byName, deletionChanged())).
		WatchesRawSource(source.Kind(owned, client.Object(&corev1.ConfigMap{}), byNamespace)).
		// A new CA (its Secret deleted and made again) reissues every fleet's certificate.
		WatchesRawSource(source.Kind(owned, client.Object(&corev1.Secret{}), handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, o client.Object) []reconcile.Request {
				if o.GetNamespace() == r.opts.Namespace && o.GetName() == pki.CASecretName {
					return r.allTenants(ctx, o)
				}
				return tenantRequest(o.GetNamespace())
			}))).
		WatchesRawSource(source.Kind(owned, client.Object(&appsv1.Deployment{}), byNamespace)).
		WatchesRawSource(source.Kind(owned, client.Object(&appsv1.DaemonSet{}), byNamespace)).
		WatchesRawSource(source.Kind(owned, client.Object(&corev1.Service{}), byNamespace)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4})
	return b.Complete(r)
}

func tenantRequest(ns string) []reconcile.Request {
	if !hubnames.IsTenantNamespace(ns) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: ns}}}
}

// allTenants maps a Config change to every kubelb namespace.
func (r *Reconciler) allTenants(ctx context.Context, _ client.Object) []reconcile.Request {
	var list corev1.NamespaceList
	if err := r.owned.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing tenant namespaces for a Config change")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		out = append(out, tenantRequest(list.Items[i].Name)...)
	}
	return out
}

// Reconcile makes the fleet of one tenant namespace what the tenant needs. It follows the
// manager's controller shape (docs/development.md): get the namespace (gone → forget the
// fleet), load the scope (settings, the fleet as it is), compute the desired fleet (Build,
// pure), apply what differs (server-side apply under FieldOwner). The fleet has no status of
// its own and needs no finalizer: its objects live in the tenant namespace and go with it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	result := ""
	defer metrics.ManagerEnvoyFleetReconcile.ObserveDeferred(req.Name, time.Now(), &result, &err)
	defer func() { res, err = ssa.RetryConflict(res, err) }()

	ns := req.Name
	tenant := hubnames.TenantName(ns)
	want, err := r.wanted(ctx, ns)
	if err != nil {
		return ctrl.Result{}, err
	}
	existing, err := r.existing(ctx, ns)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !want {
		if existing.any() {
			if err := Delete(ctx, r.client, ns); err != nil {
				return ctrl.Result{}, err
			}
			ctrl.LoggerFrom(ctx).Info("removed the Envoy fleet: the tenant has no LoadBalancers or Routes", "namespace", ns)
		}
		metrics.ManagerEnvoyProxies.DeleteLabelValues(tenant)
		result = metrics.ResultSkipped
		return ctrl.Result{}, nil
	}

	cfg, t, err := settings.Read(ctx, r.client, r.opts.Namespace, tenant)
	if err != nil {
		return ctrl.Result{}, err
	}
	eff := settings.Resolve(cfg, t)
	bootstrap, err := xdsbootstrap.Generate(xdsbootstrap.Options{
		Tenant:       ns,
		XDSAddress:   r.opts.XDSAddress,
		Protocol:     r.opts.XDSProtocol,
		AdminAddress: fmt.Sprintf("127.0.0.1:%d", AdminPort),
		ReadyAddress: fmt.Sprintf("0.0.0.0:%d", ReadyPort),
		StatsAddress: fmt.Sprintf("0.0.0.0:%d", StatsPort),
		EnvoyProxy:   &eff.Envoy,
	})
	if err != nil {
		// A setting no Envoy accepts: say so where it was set, keep the running fleet.
		var regarding client.Object
		switch {
		case cfg != nil: // the bootstrap settings (overload manager) come from the Config
			regarding = cfg
		case t != nil:
			regarding = t
		}
		if regarding != nil {
			r.recorder.Eventf(regarding, nil, corev1.EventTypeWarning, ReasonInvalidEnvoyProxy, "BuildEnvoyFleet",
				"the Envoy fleet of %s is not updated: %v", ns, err)
		}
		ctrl.LoggerFrom(ctx).Error(err, "invalid Envoy settings; the fleet is left as it is", "namespace", ns)
		result = metrics.ResultSkipped
		return ctrl.Result{}, nil
	}
	// The client certificate first: the pods mount it.
	renewAt, err := r.applyClientSecret(ctx, ns, existing.secret)
	if err != nil {
		var foreign *foreignSecretError
		if errors.As(err, &foreign) && t != nil {
			r.recorder.Eventf(t, nil, corev1.EventTypeWarning, ReasonXDSSecretConflict, "IssueXDSCertificate", "%v", err)
		}
		return ctrl.Result{}, err
	}
	res.RequeueAfter = max(renewAt.Sub(r.now()), time.Second)
	desired := Build(Input{Namespace: ns, Settings: eff, Image: r.opts.EnvoyImage, ShutdownManagerImage: r.opts.ShutdownManagerImage, Bootstrap: bootstrap})
	if err := r.apply(ctx, desired, existing); err != nil {
		return ctrl.Result{}, err
	}
	if eff.InvalidRateLimit != nil && cfg != nil {
		r.recorder.Eventf(cfg, nil, corev1.EventTypeWarning, ReasonInvalidRateLimit, "BuildRateLimitService",
			"no rate-limit service is deployed: %v", eff.InvalidRateLimit)
	}
	if err := r.applyRateLimit(ctx, ns, eff, existing); err != nil {
		return ctrl.Result{}, err
	}
	replicas := eff.Envoy.Replicas
	if desired.DaemonSet != nil {
		replicas = 0
		if existing.daemonSet != nil {
			replicas = existing.daemonSet.Status.DesiredNumberScheduled
		}
	}
	metrics.ManagerEnvoyProxies.WithLabelValues(tenant).Set(float64(replicas))
	return res, nil
}

// xdsCA returns the xDS CA from its Secret in the manager's namespace, making the CA when
// there is none yet.
func (r *Reconciler) xdsCA(ctx context.Context) (*pki.CA, error) {
	sec := &corev1.Secret{}
	err := r.owned.Get(ctx, types.NamespacedName{Namespace: r.opts.Namespace, Name: pki.CASecretName}, sec)
	if apierrors.IsNotFound(err) {
		return store.EnsureCA(ctx, r.client, r.apiReader, r.opts.Namespace)
	}
	if err != nil {
		return nil, fmt.Errorf("getting the xDS CA Secret: %w", err)
	}
	return store.CAFromSecret(sec)
}

// applyClientSecret keeps the fleet's client certificate Secret current: it issues a new
// certificate when there is none, when the CA changed or when the certificate is due for
// renewal, and returns when the certificate will be due. A Secret of that name that kubelb
// did not make is left alone (an error says so).
func (r *Reconciler) applyClientSecret(ctx context.Context, ns string, existing *corev1.Secret) (time.Time, error) {
	ca, err := r.xdsCA(ctx)
	if err != nil {
		return time.Time{}, err
	}
	sds, err := xdsbootstrap.TLSFiles("")
	if err != nil {
		return time.Time{}, err
	}
	now := r.now()
	if ok, renewAt := ClientSecretCurrent(existing, ns, ca, sds, now); ok {
		return renewAt, nil
	}
	if existing == nil {
		foreign := &corev1.Secret{}
		err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: pki.ClientSecretName}, foreign)
		if err == nil && !hubnames.IsManaged(foreign) {
			return time.Time{}, &foreignSecretError{namespace: ns}
		}
		if client.IgnoreNotFound(err) != nil {
			return time.Time{}, fmt.Errorf("getting Secret %s/%s: %w", ns, pki.ClientSecretName, err)
		}
	}
	certPEM, keyPEM, err := ca.IssueClient(ns, now, pki.ClientLifetime)
	if err != nil {
		return time.Time{}, fmt.Errorf("issuing the xDS client certificate of %s: %w", ns, err)
	}
	var have client.Object // not a typed nil
	if existing != nil {
		have = existing
	}
	if err := r.applyObject(ctx, ClientSecret(ns, certPEM, keyPEM, ca.CertPEM, sds), have); err != nil {
		return time.Time{}, err
	}
	ctrl.LoggerFrom(ctx).Info("issued the Envoy fleet's xDS client certificate", "namespace", ns, "ca", ca.Fingerprint())
	_, renewAt := pki.NeedsRenewal(certPEM, ca, now)
	return renewAt, nil
}

// wanted says whether namespace ns needs a fleet: it is a kubelb namespace that is not being
// deleted and it holds a LoadBalancer or Route. A Tenant being deleted keeps its fleet until
// its LoadBalancers and Routes are gone: their hub Services are removed first.
func (r *Reconciler) wanted(ctx context.Context, ns string) (bool, error) {
	nsObj := &corev1.Namespace{}
	if err := r.owned.Get(ctx, types.NamespacedName{Name: ns}, nsObj); apierrors.IsNotFound(err) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("getting namespace %s: %w", ns, err)
	}
	if !nsObj.DeletionTimestamp.IsZero() {
		return false, nil
	}
	for _, list := range []client.ObjectList{&kubelbv1alpha1.LoadBalancerList{}, &kubelbv1alpha1.RouteList{}} {
		if err := r.client.List(ctx, list, client.InNamespace(ns), client.Limit(1), client.UnsafeDisableDeepCopy); err != nil {
			return false, fmt.Errorf("listing %T in %s: %w", list, ns, err)
		}
		if meta.LenList(list) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// current is the fleet as it is.
type current struct {
	configMap  *corev1.ConfigMap
	deployment *appsv1.Deployment
	daemonSet  *appsv1.DaemonSet
	secret     *corev1.Secret
	// the rate-limit service's
	rateLimitDeployment *appsv1.Deployment
	rateLimitService    *corev1.Service
}

func (c current) any() bool {
	return c.configMap != nil || c.deployment != nil || c.daemonSet != nil || c.secret != nil ||
		c.rateLimitDeployment != nil || c.rateLimitService != nil
}

// hasFleet reports whether the tenant namespace has its whole fleet (bootstrap ConfigMap,
// Deployment or DaemonSet, client Secret) in the cache.
func (r *Reconciler) hasFleet(ns string) bool {
	c, err := r.existing(context.Background(), ns)
	return err == nil && c.configMap != nil && (c.deployment != nil || c.daemonSet != nil) && c.secret != nil
}

func (r *Reconciler) existing(ctx context.Context, ns string) (current, error) {
	var c current
	get := func(obj client.Object, name string) (bool, error) {
		err := r.owned.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("getting %T %s/%s: %w", obj, ns, name, err)
		}
		return true, nil
	}
	cm, dep, ds, sec := &corev1.ConfigMap{}, &appsv1.Deployment{}, &appsv1.DaemonSet{}, &corev1.Secret{}
	rlDep, rlSvc := &appsv1.Deployment{}, &corev1.Service{}
	for _, x := range []struct {
		obj  client.Object
		name string
		set  func()
	}{
		{cm, BootstrapConfigMapName, func() { c.configMap = cm }},
		{dep, WorkloadName, func() { c.deployment = dep }},
		{ds, WorkloadName, func() { c.daemonSet = ds }},
		{sec, pki.ClientSecretName, func() { c.secret = sec }},
		{rlDep, RateLimitName, func() { c.rateLimitDeployment = rlDep }},
		{rlSvc, RateLimitName, func() { c.rateLimitService = rlSvc }},
	} {
		found, err := get(x.obj, x.name)
		if err != nil {
			return c, err
		}
		if found {
			x.set()
		}
	}
	return c, nil
}

// apply applies what differs between desired and existing (server-side apply), and nothing
// else.
func (r *Reconciler) apply(ctx context.Context, desired Fleet, existing current) error {
	if err := r.applyConfigMap(ctx, desired.ConfigMap, existing.configMap); err != nil {
		return err
	}
	if desired.DaemonSet != nil {
		if existing.deployment != nil {
			if err := r.deleteObject(ctx, existing.deployment); err != nil {
				return err
			}
		}
		return r.applyDaemonSet(ctx, desired.DaemonSet, existing.daemonSet)
	}
	if existing.daemonSet != nil {
		if err := r.deleteObject(ctx, existing.daemonSet); err != nil {
			return err
		}
	}
	return r.applyDeployment(ctx, desired.Deployment, existing.deployment)
}

func (r *Reconciler) applyConfigMap(ctx context.Context, desired, existing *corev1.ConfigMap) error {
	if existing == nil {
		return r.applyObject(ctx, desired, nil)
	}
	if equality.Semantic.DeepEqual(existing.Data, desired.Data) && hubnames.HasAll(existing.Labels, desired.Labels) {
		return nil
	}
	return r.applyObject(ctx, desired, existing)
}

func (r *Reconciler) applyDeployment(ctx context.Context, desired, existing *appsv1.Deployment) error {
	if existing != nil {
		if !equality.Semantic.DeepEqual(existing.Spec.Selector, desired.Spec.Selector) {
			// The selector is immutable: replace the Deployment.
			return r.deleteObject(ctx, existing)
		}
		if upToDate(existing.ObjectMeta, desired.ObjectMeta) && ptrEqual(existing.Spec.Replicas, desired.Spec.Replicas) {
			return nil
		}
		return r.applyObject(ctx, desired, existing)
	}
	return r.applyObject(ctx, desired, nil)
}

func (r *Reconciler) applyDaemonSet(ctx context.Context, desired, existing *appsv1.DaemonSet) error {
	if existing != nil {
		if !equality.Semantic.DeepEqual(existing.Spec.Selector, desired.Spec.Selector) {
			return r.deleteObject(ctx, existing)
		}
		if upToDate(existing.ObjectMeta, desired.ObjectMeta) {
			return nil
		}
		return r.applyObject(ctx, desired, existing)
	}
	return r.applyObject(ctx, desired, nil)
}

// applyObject applies one object of the fleet under FieldOwner (existing: as it is, or nil).
func (r *Reconciler) applyObject(ctx context.Context, desired, existing client.Object) error {
	return ssa.Apply(ctx, r.client, desired, existing, FieldOwner, r.legacyManager)
}

// deleteObject deletes one object (it is re-created by the next reconcile, which its
// deletion triggers).
func (r *Reconciler) deleteObject(ctx context.Context, obj client.Object) error {
	return deleteByUID(ctx, r.client, obj)
}

// upToDate reports whether the workload carries the desired config hash and labels.
func upToDate(have, want metav1.ObjectMeta) bool {
	return have.Annotations[AnnotationConfigHash] == want.Annotations[AnnotationConfigHash] && hubnames.HasAll(have.Labels, want.Labels)
}

func ptrEqual[T comparable](a, b *T) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// Delete removes the Envoy fleet of a tenant namespace (its Deployment, DaemonSet, bootstrap
// ConfigMap and client certificate Secret, found by label); objects of other tenants are
// never touched.
func Delete(ctx context.Context, c client.Client, namespace string) error {
	sel := client.MatchingLabelsSelector{Selector: fleetSelector()}
	for _, obj := range []client.Object{&appsv1.Deployment{}, &appsv1.DaemonSet{}, &corev1.ConfigMap{}} {
		if err := c.DeleteAllOf(ctx, obj, client.InNamespace(namespace), sel, client.PropagationPolicy("Background")); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the Envoy fleet (%T) of %s: %w", obj, namespace, err)
		}
	}
	// The rate-limit Service by name, when kubelb made it (Services are not deleted in bulk).
	svc := &corev1.Service{}
	err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: RateLimitName}, svc)
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("getting the rate-limit Service %s/%s: %w", namespace, RateLimitName, err)
	}
	if err == nil && IsRateLimitService(svc) {
		if err := deleteByUID(ctx, c, svc); err != nil {
			return err
		}
	}
	// The client Secret by name, and only when kubelb made it: the manager may not delete
	// Secrets in bulk (least privilege, docs/security.md).
	secret := &corev1.Secret{}
	err = c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: pki.ClientSecretName}, secret)
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("getting the Envoy fleet's Secret %s/%s: %w", namespace, pki.ClientSecretName, err)
	}
	if err == nil && xdsTLSSelector().Matches(labels.Set(secret.Labels)) {
		uid := secret.UID
		if err := c.Delete(ctx, secret, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the Envoy fleet's Secret %s/%s: %w", namespace, pki.ClientSecretName, err)
		}
	}
	metrics.ManagerEnvoyProxies.DeleteLabelValues(hubnames.TenantName(namespace))
	return nil
}

// BootstrapFor returns the Envoy bootstrap the manager generated for a tenant namespace, from
// ConfigMap envoy-bootstrap (key bootstrap.yaml). Start Envoy with it as the fleet's pods do:
// envoy -c <file> --service-node <any unique id> --service-cluster <namespace>. Its admin
// interface listens on 127.0.0.1:9901 and its readiness listener (GET /ready only) on
// 0.0.0.0:9903 (ReadyPort) and its stats listener (GET /stats/prometheus only) on 0.0.0.0:9904
// (StatsPort); to run several on one host, give each its own ports (the e2e harness does).
func BootstrapFor(ctx context.Context, c client.Reader, namespace string) ([]byte, error) {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: BootstrapConfigMapName}, cm); err != nil {
		return nil, fmt.Errorf("getting the Envoy bootstrap %s/%s: %w", namespace, BootstrapConfigMapName, err)
	}
	b, ok := cm.Data[BootstrapKey]
	if !ok {
		return nil, fmt.Errorf("ConfigMap %s/%s has no key %s", namespace, BootstrapConfigMapName, BootstrapKey)
	}
	return []byte(b), nil
}
