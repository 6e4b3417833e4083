// Package syncsecret is the hub's SyncSecret controller. For every SyncSecret in a namespace
// labelled kubelb.k8c.io/managed-by=kubelb it keeps a Secret in the same namespace, named by
// the SyncSecret's UID (KubeLB CE's convention), controlled by the SyncSecret (so it is
// garbage-collected with it), labelled with the SyncSecret's origin labels, managed-by and
// LabelSyncSecret, holding the SyncSecret's data merged with its stringData, type and
// immutable. It never takes over a Secret of that name it did not make: that is reported in
// the SyncSecret's Synced condition. The Envoy control plane finds a tenant's Secret ns/name
// by the origin labels.
//
// A tenant's SyncSecrets are bounded by its limits (spec.limits.syncSecrets and
// syncSecretBytes): oldest first, the SyncSecret beyond the count, or whose data would take
// the tenant past the byte limit, gets no Secret (one it had is deleted) and shows Synced=False
// with reason QuotaExceeded and a Warning Event. The manager's cache holds SyncSecrets
// without their data (hubcache.TransformSyncSecret); the data is read from the API server by
// name, one SyncSecret at a time, when it is copied.
package syncsecret

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/finalizer"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/fairqueue"
	"kubelb.dev/kubelb/internal/manager/hubcache"
	"kubelb.dev/kubelb/internal/manager/namespaces"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/quota"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/ssa"
)

// controllerName names the controller (logs, controller-runtime's metrics).
const controllerName = "syncsecret"

// FieldOwner is the server-side apply field owner of the hub Secrets and of the SyncSecrets'
// status.
const FieldOwner = hubnames.FieldOwnerSyncSecret

// The Synced condition, its reasons and the phases.
const (
	ConditionSynced = "Synced"

	ReasonSynced = "Synced"
	// ReasonSecretConflict: a Secret of the hub Secret's name exists and was not made for
	// this SyncSecret.
	ReasonSecretConflict = "SecretConflict"
	// ReasonInvalid: the SyncSecret cannot become a Secret (labels, keys, size, TLS keys).
	ReasonInvalid = "InvalidSyncSecret"
	// ReasonSecretRejected: the API server refused the Secret.
	ReasonSecretRejected = "SecretRejected"

	PhaseSynced = "Synced"
	PhaseFailed = "Failed"

	// MessageSynced is KubeLB CE's message of a Synced condition.
	MessageSynced = "Secret synced successfully"
)

// conflictRetry is how often a SyncSecret blocked by a foreign Secret looks again (the
// foreign Secret is not in the cache, so its removal brings no event).
const conflictRetry = time.Minute

// Options configure the controller.
type Options struct {
	// MaxConcurrentReconciles is the number of workers; zero means 4.
	MaxConcurrentReconciles int
	// Namespace is the manager's namespace, where Config "default" is (the tenants' limits).
	Namespace string
}

// Reconciler keeps the hub Secret of each SyncSecret.
type Reconciler struct {
	client    client.Client // the manager's: SyncSecrets, namespaces (cached); writes
	secrets   client.Reader // cache of the Secrets this controller made (by label)
	apiReader client.Reader // uncached: a Secret of that name this controller did not make; a SyncSecret's data
	recorder  events.EventRecorder
	namespace string // the manager's (Config "default")

	// refusing holds the namespaces whose last verdict refused a SyncSecret: a deletion there
	// requeues the namespace's SyncSecrets, as it may admit one.
	refusing sync.Map
}

// SetupWithManager registers the SyncSecret controller with mgr.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	if opts.MaxConcurrentReconciles <= 0 {
		opts.MaxConcurrentReconciles = 4
	}
	made, err := labels.NewRequirement(LabelSyncSecret, selection.Exists, nil)
	if err != nil {
		return err
	}
	owned, err := hubcache.NewLabelledCluster(mgr, controllerName, map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Label: hubcache.ManagedSelector(nil).Add(*made)},
	})
	if err != nil {
		return err
	}
	r := &Reconciler{
		client:    mgr.GetClient(),
		secrets:   owned.GetClient(),
		apiReader: mgr.GetAPIReader(),
		recorder:  mgr.GetEventRecorder("kubelb-" + controllerName),
		namespace: opts.Namespace,
	}
	err = ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		For(&kubelbv1alpha1.SyncSecret{}, builder.WithPredicates(syncSecretChanged())).
		WatchesRawSource(source.Kind(owned.GetCache(), &corev1.Secret{},
			handler.TypedEnqueueRequestForOwner[*corev1.Secret](mgr.GetScheme(), mgr.GetRESTMapper(), &kubelbv1alpha1.SyncSecret{}, handler.OnlyControllerOwner()))).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.namespaceToSyncSecrets),
			builder.WithPredicates(namespaces.ManagedLabelChanged())).
		// The verdict over a tenant's SyncSecrets changes with its limits and with a SyncSecret
		// that grows, shrinks or goes: its SyncSecrets are looked at again.
		Watches(&kubelbv1alpha1.SyncSecret{}, handler.EnqueueRequestsFromMapFunc(r.siblings),
			builder.WithPredicates(r.quotaInputChanged())).
		Watches(&kubelbv1alpha1.Tenant{}, handler.EnqueueRequestsFromMapFunc(r.tenantToSyncSecrets),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&kubelbv1alpha1.Config{}, handler.EnqueueRequestsFromMapFunc(r.configToSyncSecrets),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// Requests go out round robin across tenant namespaces: one tenant's flood of
		// objects does not hold back another's (fairqueue.New).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles, NewQueue: fairqueue.New}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the SyncSecret controller: %w", err)
	}
	return nil
}

// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=syncsecrets,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=syncsecrets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=syncsecrets/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=tenants;configs,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one SyncSecret's hub Secret and status in line. It has the manager's
// controller shape (docs/development.md): get (gone → nothing: the Secret is
// garbage-collected), deletion (a finalizer KubeLB CE's manager left is removed), scope (the
// namespace's label, the Secret as it is), desired Secret (pure, desired.go), server-side
// apply skipped when unchanged, one status apply at the end. The controller adds no
// finalizer: the ownerReference cleans up.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	result := ""
	defer metrics.ManagerSyncSecretReconcile.ObserveDeferred(req.Namespace, time.Now(), &result, &err)
	defer func() { res, err = ssa.RetryConflict(res, err) }()

	ss := &kubelbv1alpha1.SyncSecret{}
	if err := r.client.Get(ctx, req.NamespacedName, ss); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("getting SyncSecret %s: %w", req.NamespacedName, err)
	}
	if !ss.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, r.reconcileDelete(ctx, ss)
	}
	managed, err := namespaces.Managed(ctx, r.client, ss.Namespace)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !managed {
		result = metrics.ResultSkipped
		return reconcile.Result{}, nil
	}

	var cond metav1.Condition // zero: the state is unknown (an error is retried), no status write
	defer func() {
		if cond.Type != "" {
			err = errors.Join(err, r.writeStatus(ctx, ss, cond))
		}
	}()
	verdict, err := r.admission(ctx, ss.Namespace)
	if err != nil {
		return reconcile.Result{}, err
	}
	if msg, refused := verdict.Refused(ss.Name); refused {
		cond = failed(quota.ReasonQuotaExceeded, "The SyncSecret is not copied into a Secret: "+msg+".")
		return reconcile.Result{}, r.deleteSecret(ctx, ss)
	}
	// The cache holds no data: the SyncSecret is read whole, by name, to be copied.
	full := &kubelbv1alpha1.SyncSecret{}
	if err := r.apiReader.Get(ctx, req.NamespacedName, full); err != nil {
		cond = metav1.Condition{}
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("getting SyncSecret %s: %w", req.NamespacedName, err)
	}
	if full.UID != ss.UID || !full.DeletionTimestamp.IsZero() {
		return reconcile.Result{Requeue: true}, nil // the cache is behind: look again
	}
	ss = full
	if msg := validate(ss); msg != "" {
		cond = failed(ReasonInvalid, "The SyncSecret cannot become a Secret: "+msg+".")
		return reconcile.Result{}, nil
	}
	current, foreign, err := r.currentSecret(ctx, ss)
	if err != nil {
		return reconcile.Result{}, err
	}
	if foreign {
		cond = failed(ReasonSecretConflict, fmt.Sprintf("Secret %s/%s exists and was not made by kubelb for this SyncSecret; kubelb does not take it over. Delete or rename it.", ss.Namespace, SecretName(ss)))
		return reconcile.Result{RequeueAfter: conflictRetry}, nil
	}
	cond, err = r.applySecret(ctx, current, DesiredSecret(ss))
	return reconcile.Result{}, err
}

// admission is the verdict over the SyncSecrets of namespace (not being deleted) under the
// tenant's limits, from the cache (which knows each one's data size without its data).
func (r *Reconciler) admission(ctx context.Context, namespace string) (quota.ItemVerdict, error) {
	t, err := settings.Load(ctx, r.client, r.namespace, hubnames.TenantName(namespace))
	if err != nil {
		return quota.ItemVerdict{}, err
	}
	list := &kubelbv1alpha1.SyncSecretList{}
	if err := r.client.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return quota.ItemVerdict{}, fmt.Errorf("listing the SyncSecrets of %s: %w", namespace, err)
	}
	items := make([]quota.Item, 0, len(list.Items))
	for i := range list.Items {
		o := &list.Items[i]
		if o.DeletionTimestamp.IsZero() {
			items = append(items, quota.Item{Name: o.Name, Created: o.CreationTimestamp.Time, Bytes: hubcache.SyncSecretDataBytes(o)})
		}
	}
	v := quota.AdmitItems(namespace, quota.KindSyncSecret, items, quota.ItemLimits{
		Count: t.Limits.SyncSecrets, CountField: "syncSecrets",
		Bytes: t.Limits.SyncSecretBytes, BytesField: "syncSecretBytes",
	})
	if len(v.RefusedNames()) > 0 {
		r.refusing.Store(namespace, true)
	} else {
		r.refusing.Delete(namespace)
	}
	return v, nil
}

// deleteSecret deletes the hub Secret a refused SyncSecret had (made before a limit was
// lowered or an older SyncSecret grew).
func (r *Reconciler) deleteSecret(ctx context.Context, ss *kubelbv1alpha1.SyncSecret) error {
	current, _, err := r.currentSecret(ctx, ss)
	if err != nil || current == nil {
		return err
	}
	if err := r.client.Delete(ctx, current, client.Preconditions{UID: &current.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting hub Secret %s/%s of a SyncSecret over the tenant's limits: %w", current.Namespace, current.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("deleted the hub Secret of a SyncSecret over the tenant's limits", "secret", client.ObjectKeyFromObject(current))
	return nil
}

// siblings requeues the SyncSecrets of an object's namespace.
func (r *Reconciler) siblings(ctx context.Context, o client.Object) []reconcile.Request {
	return r.syncSecretsIn(ctx, o.GetNamespace())
}

// tenantToSyncSecrets requeues the SyncSecrets of one tenant.
func (r *Reconciler) tenantToSyncSecrets(ctx context.Context, o client.Object) []reconcile.Request {
	return r.syncSecretsIn(ctx, hubnames.TenantNamespace(o.GetName()))
}

// configToSyncSecrets requeues every SyncSecret when Config "default" of the manager's
// namespace changes.
func (r *Reconciler) configToSyncSecrets(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetNamespace() != r.namespace || o.GetName() != kubelbv1alpha1.DefaultConfigName {
		return nil
	}
	return r.syncSecretsIn(ctx, "")
}

// failed is a False Synced condition.
func failed(reason, msg string) metav1.Condition {
	return metav1.Condition{Type: ConditionSynced, Status: metav1.ConditionFalse, Reason: reason, Message: msg}
}

// currentSecret returns the SyncSecret's hub Secret (nil: none), or foreign when a Secret of
// that name exists that this SyncSecret does not control.
func (r *Reconciler) currentSecret(ctx context.Context, ss *kubelbv1alpha1.SyncSecret) (*corev1.Secret, bool, error) {
	key := client.ObjectKey{Namespace: ss.Namespace, Name: SecretName(ss)}
	s := &corev1.Secret{}
	err := r.secrets.Get(ctx, key, s)
	if apierrors.IsNotFound(err) {
		// Not one of ours as far as the cache knows: ask the API server whether a Secret of
		// that name is in the way (or ours, just made or with its labels stripped).
		err = r.apiReader.Get(ctx, key, s)
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("getting hub Secret %s: %w", key, err)
	}
	if !ownedBy(s, ss) {
		return nil, true, nil
	}
	return s, false, nil
}

// applySecret applies desired unless the fields this controller owns already match. A type
// change, or a change of an immutable Secret, recreates it. A Secret the API server refuses
// is reported in the condition; other errors are returned (and retried).
func (r *Reconciler) applySecret(ctx context.Context, current *corev1.Secret, desired *corev1ac.SecretApplyConfiguration) (metav1.Condition, error) {
	synced := metav1.Condition{Type: ConditionSynced, Status: metav1.ConditionTrue, Reason: ReasonSynced, Message: MessageSynced}
	if current != nil {
		if current.Type != *desired.Type || (current.Immutable != nil && *current.Immutable && !sameData(current, desired)) {
			if err := r.client.Delete(ctx, current, client.Preconditions{UID: &current.UID}); client.IgnoreNotFound(err) != nil {
				return metav1.Condition{}, fmt.Errorf("deleting hub Secret %s/%s to recreate it: %w", current.Namespace, current.Name, err)
			}
			ctrl.LoggerFrom(ctx).Info("deleted hub Secret to recreate it", "secret", client.ObjectKeyFromObject(current))
			current = nil
		}
	}
	if current != nil {
		owned, err := corev1ac.ExtractSecret(current, FieldOwner)
		if err != nil {
			return metav1.Condition{}, fmt.Errorf("reading the fields of hub Secret %s/%s: %w", current.Namespace, current.Name, err)
		}
		if equality.Semantic.DeepEqual(owned, desired) {
			return synced, nil
		}
	}
	if err := r.client.Apply(ctx, desired, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsRequestEntityTooLargeError(err) {
			return failed(ReasonSecretRejected, fmt.Sprintf("The API server refused Secret %s/%s: %v", *desired.Namespace, *desired.Name, err)), nil
		}
		return metav1.Condition{}, fmt.Errorf("applying hub Secret %s/%s: %w", *desired.Namespace, *desired.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("applied hub Secret", "secret", types.NamespacedName{Namespace: *desired.Namespace, Name: *desired.Name}, "created", current == nil)
	return synced, nil
}

// sameData tells whether a Secret holds the desired data.
func sameData(s *corev1.Secret, desired *corev1ac.SecretApplyConfiguration) bool {
	if len(s.Data) == 0 && len(desired.Data) == 0 {
		return true
	}
	return equality.Semantic.DeepEqual(s.Data, desired.Data)
}

// writeStatus applies observedGeneration, phase and the Synced condition when they differ
// from the SyncSecret's, and records a Warning Event when Synced turns False (or changes its
// reason while False).
func (r *Reconciler) writeStatus(ctx context.Context, ss *kubelbv1alpha1.SyncSecret, cond metav1.Condition) error {
	prev := meta.FindStatusCondition(ss.Status.Conditions, ConditionSynced)
	next := ss.Status.DeepCopy()
	next.ObservedGeneration = ss.Generation
	next.Phase = PhaseSynced
	if cond.Status != metav1.ConditionTrue {
		next.Phase = PhaseFailed
	}
	cond.ObservedGeneration = ss.Generation
	meta.SetStatusCondition(&next.Conditions, cond)
	if cond.Status == metav1.ConditionFalse && (prev == nil || prev.Status != metav1.ConditionFalse || prev.Reason != cond.Reason) {
		r.recorder.Eventf(ss, nil, corev1.EventTypeWarning, cond.Reason, "Sync", "%s", cond.Message)
	}
	if equality.Semantic.DeepEqual(ss.Status, *next) {
		return nil
	}
	owned := &kubelbv1alpha1.SyncSecretStatus{
		ObservedGeneration: next.ObservedGeneration,
		Phase:              next.Phase,
		Conditions:         ssa.OwnConditions(next.Conditions, ConditionSynced),
	}
	return ssa.ApplyStatus(ctx, r.client, ss, FieldOwner, owned)
}

// reconcileDelete handles a SyncSecret being deleted: its Secret goes with it (ownerReference).
// A cleanup finalizer (set by KubeLB CE's manager) is honoured: the Secret is deleted, then the
// finalizer removed.
func (r *Reconciler) reconcileDelete(ctx context.Context, ss *kubelbv1alpha1.SyncSecret) error {
	if !controllerutil.ContainsFinalizer(ss, kubelbv1alpha1.CleanupFinalizer) {
		return nil
	}
	current, _, err := r.currentSecret(ctx, ss)
	if err != nil {
		return err
	}
	if current != nil {
		if err := r.client.Delete(ctx, current, client.Preconditions{UID: &current.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting hub Secret %s/%s: %w", current.Namespace, current.Name, err)
		}
	}
	_, err = finalizer.Remove(ctx, r.client, ss, kubelbv1alpha1.CleanupFinalizer)
	return err
}

// namespaceToSyncSecrets requeues the SyncSecrets of a namespace.
func (r *Reconciler) namespaceToSyncSecrets(ctx context.Context, o client.Object) []reconcile.Request {
	return r.syncSecretsIn(ctx, o.GetName())
}

// syncSecretsIn requeues the SyncSecrets of namespace ("": of every namespace).
func (r *Reconciler) syncSecretsIn(ctx context.Context, namespace string) []reconcile.Request {
	list := &kubelbv1alpha1.SyncSecretList{}
	if err := r.client.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing SyncSecrets to requeue", "namespace", namespace)
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}})
	}
	return out
}
