package ccm

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/finalizer"
	"kubelb.dev/kubelb/internal/hubschema"
	"kubelb.dev/kubelb/internal/lbaddress"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/ssa"
)

// createdGrace is how long a mirror the ccm just created may be missing from the hub cache
// before the ccm creates it again.
const createdGrace = 5 * time.Second

// nodePortRetry is how soon a Service whose NodePorts are not all allocated is looked at
// again (the Service's own update event usually comes first).
const nodePortRetry = 2 * time.Second

// originOf returns the Service a hub LoadBalancer mirrors, from its origin labels. LoadBalancers
// without a kind label (made by KubeLB CE's ccm) count as Service mirrors.
func originOf(lb *v1alpha1.LoadBalancer) (types.NamespacedName, bool) {
	l := lb.GetLabels()
	if k, ok := l[v1alpha1.LabelOriginResourceKind]; ok && k != KindService {
		return types.NamespacedName{}, false
	}
	ns, name := l[v1alpha1.LabelOriginNamespace], l[v1alpha1.LabelOriginName]
	if ns == "" || name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

// ServiceReconciler mirrors tenant Services of type LoadBalancer into LoadBalancers named by
// the Service's UID in the tenant's namespace on the hub, and removes the mirror (and the
// status it copied) when the Service goes away, stops being a LoadBalancer or is no longer
// ours. Status flows back through StatusReconciler, on its own queue.
//
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=services/status,verbs=get;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
type ServiceReconciler struct {
	// Tenant reads from the tenant cache and writes to the tenant.
	Tenant client.Client
	// Hub reads from the hub cache and writes to the hub.
	Hub client.Client
	// Recorder records Events on tenant Services.
	Recorder events.EventRecorder
	// Namespace is the tenant's namespace on the hub.
	Namespace string
	// UseClass limits the ccm to Services of loadBalancerClass kubelb.
	UseClass bool
	// External is --enable-cloud-provider=false: another load balancer implementation serves
	// the Services; their mirrors send to the addresses it put in their status
	// (ExternalLoadBalancer), and the ccm never writes their status.
	External bool
	// LegacyFieldManager is the field manager of earlier ccm versions' creates and patches
	// of LoadBalancers, whose fields the ccm adopts (see hubApplier).
	LegacyFieldManager string
	// HubSchema is the hub's schema of kubelb's CRDs (nil: unknown, nothing left out).
	HubSchema *hubschema.Loader

	// hubNotes remembers, per Service, what the hub's schema made unavailable, so that it is
	// said once per change.
	hubNotes hubschema.Reported
	warn     *warnOnce
	managed  *metrics.ManagedSet
	// created remembers when the ccm created a mirror (Service UID → time), so that a
	// reconcile racing the hub cache does not try to create it again.
	created sync.Map
	// deleted remembers the mirrors the ccm deleted (name → deletedMirror) until the hub
	// cache sees them go, so that a reconcile racing the cache does not delete them again.
	deleted sync.Map
}

// Reconcile brings the hub mirror of one Service in line with it: get the Service (gone →
// remove mirrors left behind), release it when it is being deleted or no longer ours, load the
// scope (the hub's verdict in TenantState, the mirror as it is), compute the desired mirror
// (a pure function), ensure the finalizer and apply the mirror when it drifted.
func (r *ServiceReconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	start := time.Now()
	defer func() { metrics.CCMServiceReconcile.Observe(req.Namespace, metrics.Result(err), start) }()
	defer func() { res, err = ssa.RetryConflict(res, err) }()

	svc := &corev1.Service{}
	if err := r.Tenant.Get(ctx, req.NamespacedName, svc); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("getting Service %s: %w", req.NamespacedName, err)
		}
		// Gone (its finalizer was removed, by us or by hand): remove mirrors left behind.
		r.managed.Set(req.NamespacedName, false)
		r.hubNotes.Forget(req.NamespacedName.String())
		return reconcile.Result{}, r.deleteMirrors(ctx, nil, req.NamespacedName, "")
	}
	if ServiceClass(svc, r.UseClass) != OurClass || svc.DeletionTimestamp != nil {
		return reconcile.Result{}, r.release(ctx, svc)
	}
	// A Service re-created under the same name has a new UID: its old mirror goes.
	if err := r.deleteMirrors(ctx, svc, client.ObjectKeyFromObject(svc), svc.UID); err != nil {
		return reconcile.Result{}, err
	}
	sc, err := r.loadScope(ctx, svc)
	if err != nil {
		return reconcile.Result{}, err
	}
	desired, problems := desiredMirror(svc, r.Namespace, sc.current)
	if r.External {
		desired, problems = ExternalLoadBalancer(desired, svc)
		if len(desired.Spec.Endpoints[0].Addresses) == 0 && sc.current == nil {
			// No address from the other implementation yet: nothing to send to. Its status
			// write brings the Service back (mirrorPredicate).
			r.managed.Set(req.NamespacedName, false)
			return reconcile.Result{}, nil
		}
	}
	return r.mirror(ctx, svc, sc, desired, problems)
}

// serviceScope is what the mirror of a Service depends on besides the Service.
type serviceScope struct {
	// current is the mirror as the hub cache has it (nil: none).
	current *v1alpha1.LoadBalancer
	// disabled: the hub disables load balancing for the tenant (TenantState).
	disabled bool
}

// loadScope reads the Service's mirror and the hub's verdict from the hub cache.
func (r *ServiceReconciler) loadScope(ctx context.Context, svc *corev1.Service) (serviceScope, error) {
	current, err := r.currentMirror(ctx, svc)
	if err != nil {
		return serviceScope{}, err
	}
	disabled, err := loadBalancingDisabled(ctx, r.Hub, r.Namespace)
	if err != nil {
		return serviceScope{}, err
	}
	return serviceScope{current: current, disabled: disabled}, nil
}

// desiredMirror is DesiredLoadBalancer for a Service whose mirror is current (nil: none).
// New mirrors carry no finalizer; one that carries the cleanup finalizer (set by an earlier
// ccm, which applied it) keeps it, so that the ccm's apply does not remove it (a write per
// LoadBalancer at upgrade): the manager removes it when the LoadBalancer is deleted.
func desiredMirror(svc *corev1.Service, namespace string, current *v1alpha1.LoadBalancer) (*v1alpha1.LoadBalancer, []PortProblem) {
	desired, problems := DesiredLoadBalancer(svc, namespace)
	if current != nil && controllerutil.ContainsFinalizer(current, v1alpha1.CleanupFinalizer) {
		desired.Finalizers = []string{v1alpha1.CleanupFinalizer}
	}
	return desired, problems
}

// mirror applies the LoadBalancer of a Service the ccm handles when it drifted.
func (r *ServiceReconciler) mirror(ctx context.Context, svc *corev1.Service, sc serviceScope, desired *v1alpha1.LoadBalancer, problems []PortProblem) (reconcile.Result, error) {
	key := client.ObjectKeyFromObject(svc)
	log := ctrl.LoggerFrom(ctx)
	current := sc.current
	// Only what the hub's CRDs declare is written (and compared); what that costs is said on
	// the Service once.
	removed, lost := r.HubSchema.Fit("LoadBalancer", desired)
	noteHubFeatures(r.Recorder, &r.hubNotes, svc, "LoadBalancer", removed, lost)
	applier := hubApplier{hub: r.Hub, legacy: r.LegacyFieldManager}
	drifted, err := applier.drifted(present(current), desired)
	if err != nil {
		return reconcile.Result{}, err
	}

	r.warn.observe(sc.disabled)
	if sc.disabled {
		// Existing mirrors are left alone; nothing is created or updated.
		r.managed.Set(key, current != nil)
		if drifted && r.warn.first(svc.UID) {
			what := "created"
			if current != nil {
				what = "updated"
			}
			record(r.Recorder, svc, corev1.EventTypeWarning, ReasonLoadBalancingDisabled, actionMirror,
				"Load balancing is disabled for this tenant by the management cluster (TenantState); the LoadBalancer is not %s.", what)
		}
		return reconcile.Result{}, nil
	}

	if _, err := finalizer.Ensure(ctx, r.Tenant, svc, v1alpha1.CleanupFinalizer); err != nil {
		return reconcile.Result{}, err
	}

	var res reconcile.Result
	pending := false
	for _, p := range problems {
		pending = pending || p.Pending
	}
	if pending && !nodePortsDisabled(svc) {
		res.RequeueAfter = nodePortRetry
	}

	if current != nil {
		r.created.Delete(svc.UID)
	} else if at, ok := r.created.Load(svc.UID); ok && time.Since(at.(time.Time)) < createdGrace {
		// Created a moment ago; the hub cache has not seen it yet. Its create event brings us
		// back; the requeue covers a mirror deleted before the cache ever saw it.
		r.managed.Set(key, true)
		return reconcile.Result{RequeueAfter: createdGrace}, nil
	}

	wrote := false
	switch {
	case current == nil:
		if len(desired.Spec.Ports) == 0 {
			// Nothing to load balance yet (NodePorts pending), or no usable port at all.
			r.reportPorts(svc, problems)
			break
		}
		if err := applier.apply(ctx, nil, desired); err != nil {
			recordHubError(ctx, r.Recorder, svc, actionMirror, "creating the LoadBalancer", err)
			return reconcile.Result{}, fmt.Errorf("creating LoadBalancer %s/%s for Service %s: %w", r.Namespace, desired.Name, key, err)
		}
		wrote = true
		r.created.Store(svc.UID, time.Now())
		log.Info("created LoadBalancer", "loadBalancer", client.ObjectKeyFromObject(desired))
		record(r.Recorder, svc, corev1.EventTypeNormal, ReasonLoadBalancerCreated, actionMirror,
			"Created LoadBalancer %s/%s in the management cluster.", r.Namespace, desired.Name)
	case current.DeletionTimestamp != nil:
		// Someone deletes it; its delete event brings us back to create it anew.
		return res, nil
	case drifted:
		if err := applier.apply(ctx, current, desired); err != nil {
			recordHubError(ctx, r.Recorder, svc, actionMirror, "updating the LoadBalancer", err)
			return reconcile.Result{}, fmt.Errorf("updating LoadBalancer %s/%s for Service %s: %w", r.Namespace, current.Name, key, err)
		}
		wrote = true
		log.Info("updated LoadBalancer", "loadBalancer", client.ObjectKeyFromObject(current))
	}
	r.managed.Set(key, current != nil || wrote)
	if wrote {
		r.reportPorts(svc, problems)
		if msg := SourceRanges(svc).Problem(); msg != "" {
			record(r.Recorder, svc, corev1.EventTypeWarning, ReasonInvalidSourceRanges, actionMirror, "%s.", msg)
		}
	}
	return res, nil
}

// reportPorts records a Warning for ports that the mirror had to leave out for good.
func (r *ServiceReconciler) reportPorts(svc *corev1.Service, problems []PortProblem) {
	var msgs []string
	for _, p := range problems {
		if p.Pending && !nodePortsDisabled(svc) {
			continue
		}
		msg := p.Message
		if p.Pending {
			msg = "no NodePort (spec.allocateLoadBalancerNodePorts is false); the hub needs NodePorts to reach the nodes"
		}
		msgs = append(msgs, fmt.Sprintf("port %s: %s", p.Port, msg))
	}
	if len(msgs) > 0 {
		record(r.Recorder, svc, corev1.EventTypeWarning, ReasonPortNotMirrored, actionMirror,
			"Ports left out of the load balancer: %s.", strings.Join(msgs, "; "))
	}
}

// nodePortsDisabled tells whether the Service asks for no NodePorts.
func nodePortsDisabled(svc *corev1.Service) bool {
	a := svc.Spec.AllocateLoadBalancerNodePorts
	return a != nil && !*a
}

// currentMirror reads the LoadBalancer named by the Service's UID from the hub cache.
func (r *ServiceReconciler) currentMirror(ctx context.Context, svc *corev1.Service) (*v1alpha1.LoadBalancer, error) {
	lb := &v1alpha1.LoadBalancer{}
	err := r.Hub.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: string(svc.UID)}, lb)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("getting LoadBalancer %s/%s: %w", r.Namespace, svc.UID, err)
	}
	return lb, nil
}

// release removes the mirror of a Service the ccm no longer handles (deleted, not a
// LoadBalancer any more, or of another class), clears the status it copied and removes the
// finalizer. It does not wait for the hub to finish deleting: the manager cleans up after the
// LoadBalancer once it is gone, and the tenant Service is not held hostage by the hub.
func (r *ServiceReconciler) release(ctx context.Context, svc *corev1.Service) error {
	key := client.ObjectKeyFromObject(svc)
	hasFinalizer := controllerutil.ContainsFinalizer(svc, v1alpha1.CleanupFinalizer)
	defer r.warn.forget(svc.UID)
	defer r.created.Delete(svc.UID)
	defer r.managed.Set(key, false)

	current, err := r.currentMirror(ctx, svc)
	if err != nil {
		return err
	}
	if err := r.deleteMirrors(ctx, svc, key, ""); err != nil {
		return err
	}
	if !hasFinalizer {
		return nil
	}
	return r.releaseTenant(ctx, svc, current)
}

// releaseTenant is the tenant half of release for a Service carrying the finalizer: the
// status copied from the mirror current (nil: none, or unknown because the hub is out of
// reach) and the AddressAssigned and BackendsReachable conditions are cleared, then the
// finalizer goes.
func (r *ServiceReconciler) releaseTenant(ctx context.Context, svc *corev1.Service, current *v1alpha1.LoadBalancer) error {
	key := client.ObjectKeyFromObject(svc)
	if !r.External && svc.DeletionTimestamp == nil {
		orig := svc.DeepCopy()
		if len(svc.Status.LoadBalancer.Ingress) > 0 {
			// Clear the status we copied: when it is the mirror's, or when no other
			// implementation can have written it (no foreign class).
			ours := current != nil && equality.Semantic.DeepEqual(svc.Status.LoadBalancer, tenantStatus(current.Status.LoadBalancer))
			foreign := svc.Spec.LoadBalancerClass != nil && *svc.Spec.LoadBalancerClass != v1alpha1.DefaultClass
			if ours || !foreign {
				svc.Status.LoadBalancer = corev1.LoadBalancerStatus{}
			}
		}
		// The conditions are kubelb's, whoever wrote the addresses.
		meta.RemoveStatusCondition(&svc.Status.Conditions, lbaddress.ConditionAddressAssigned)
		meta.RemoveStatusCondition(&svc.Status.Conditions, ConditionBackendsReachable)
		if !equality.Semantic.DeepEqual(orig.Status, svc.Status) {
			// Optimistic lock: the patch replaces the whole conditions list.
			if err := r.Tenant.Status().Patch(ctx, svc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
				return fmt.Errorf("clearing status of Service %s: %w", key, err)
			}
		}
	}
	if _, err := finalizer.Remove(ctx, r.Tenant, svc, v1alpha1.CleanupFinalizer); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("released Service")
	return nil
}

// deleteMirrors deletes the hub LoadBalancers mirroring Service key, except the one named
// keep. svc (may be nil) receives Events about hub errors.
func (r *ServiceReconciler) deleteMirrors(ctx context.Context, svc *corev1.Service, key types.NamespacedName, keep types.UID) error {
	list := &v1alpha1.LoadBalancerList{}
	if err := r.Hub.List(ctx, list, client.InNamespace(r.Namespace), client.MatchingFields{indexOrigin: key.String()}); err != nil {
		return fmt.Errorf("listing LoadBalancers of Service %s: %w", key, err)
	}
	names := make([]string, 0, len(list.Items))
	for i := range list.Items {
		names = append(names, list.Items[i].Name)
	}
	// The mirror named by the UID is deleted even if someone stripped its labels.
	if svc != nil && keep == "" && !slices.Contains(names, string(svc.UID)) {
		names = append(names, string(svc.UID))
	}
	for _, name := range names {
		if name == string(keep) {
			continue
		}
		lb := &v1alpha1.LoadBalancer{}
		err := r.Hub.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, lb)
		if apierrors.IsNotFound(err) || (err == nil && lb.DeletionTimestamp != nil) {
			r.deleted.Delete(name)
			continue
		}
		if err != nil {
			return fmt.Errorf("getting LoadBalancer %s/%s: %w", r.Namespace, name, err)
		}
		if at, ok := r.deleted.Load(name); ok && at.(deletedMirror).uid == lb.UID && time.Since(at.(deletedMirror).at) < createdGrace {
			// Deleted a moment ago; the hub cache has not seen it yet (a second DELETE would
			// be a wasted hub write).
			continue
		}
		if err := r.Hub.Delete(ctx, lb, client.Preconditions{UID: &lb.UID}); client.IgnoreNotFound(err) != nil {
			if svc != nil {
				recordHubError(ctx, r.Recorder, svc, actionCleanup, "deleting the LoadBalancer", err)
			}
			return fmt.Errorf("deleting LoadBalancer %s/%s of Service %s: %w", r.Namespace, name, key, err)
		}
		r.deleted.Range(func(k, v any) bool { // forget what the cache has surely seen by now
			if time.Since(v.(deletedMirror).at) >= createdGrace {
				r.deleted.Delete(k)
			}
			return true
		})
		r.deleted.Store(name, deletedMirror{uid: lb.UID, at: time.Now()})
		ctrl.LoggerFrom(ctx).Info("deleted LoadBalancer", "loadBalancer", client.ObjectKeyFromObject(lb))
	}
	return nil
}

// deletedMirror is a LoadBalancer the ccm deleted, and when.
type deletedMirror struct {
	uid types.UID
	at  time.Time
}

// sameMeta tells whether two objects agree on everything but status and bookkeeping.
func sameMeta(a, b client.Object) bool {
	return maps.Equal(a.GetLabels(), b.GetLabels()) && maps.Equal(a.GetAnnotations(), b.GetAnnotations()) &&
		slices.Equal(a.GetFinalizers(), b.GetFinalizers()) &&
		(a.GetDeletionTimestamp() == nil) == (b.GetDeletionTimestamp() == nil)
}
