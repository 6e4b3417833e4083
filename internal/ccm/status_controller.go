package ccm

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/lbaddress"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/ssa"
)

// StatusReconciler copies the hub's LoadBalancer.status.loadBalancer onto the tenant Service's
// status.loadBalancer, with the condition kubelb.k8c.io/AddressAssigned that the hub's Ready
// condition gives (False with the hub's reason and message while the hub cannot give the
// Service an address, and a Warning Event once per change of them), and reports the hub's
// Programmed condition as Events on the Service: a Warning with the condition's reason and
// message when it is False, a Normal "Programmed" when it turns True again; once per change
// of the verdict. It has its own queue and workers, so a status change is never queued behind
// a backlog of mirror work; it only reads caches and writes only when the status differs.
//
// +kubebuilder:rbac:groups="",resources=services/status,verbs=get;patch
type StatusReconciler struct {
	// Tenant reads from the tenant cache and writes Service status.
	Tenant client.Client
	// Hub reads LoadBalancers from the hub cache.
	Hub client.Reader
	// Namespace is the tenant's namespace on the hub.
	Namespace string
	// UseClass limits the ccm to Services of loadBalancerClass kubelb.
	UseClass bool
	// Recorder records the Programmed Events on tenant Services.
	Recorder events.EventRecorder

	programmed *programmedEvents
	addresses  *lbaddress.Writer
}

// NewStatusReconciler returns a StatusReconciler that records Events with rec.
func NewStatusReconciler(tenant client.Client, hub client.Reader, rec events.EventRecorder, namespace string, useClass bool) *StatusReconciler {
	return &StatusReconciler{Tenant: tenant, Hub: hub, Recorder: rec, Namespace: namespace, UseClass: useClass,
		programmed: newProgrammedEvents(), addresses: &lbaddress.Writer{Client: tenant, Recorder: rec}}
}

// Reconcile copies the status of one Service's mirror onto it and reports the mirror's
// Programmed condition as an Event when it changed.
func (r *StatusReconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	start := time.Now()
	defer func() { metrics.CCMServiceStatusReconcile.Observe(req.Namespace, metrics.Result(err), start) }()
	defer func() { res, err = ssa.RetryConflict(res, err) }()

	svc := &corev1.Service{}
	if err := r.Tenant.Get(ctx, req.NamespacedName, svc); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("getting Service %s: %w", req.NamespacedName, err)
	}
	// Only Services we mirror (they carry our finalizer); releasing is the mirror
	// controller's job.
	if ServiceClass(svc, r.UseClass) != OurClass || svc.DeletionTimestamp != nil ||
		!controllerutil.ContainsFinalizer(svc, v1alpha1.CleanupFinalizer) {
		r.forget(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	lb := &v1alpha1.LoadBalancer{}
	if err := r.Hub.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: string(svc.UID)}, lb); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("getting LoadBalancer %s/%s: %w", r.Namespace, svc.UID, err)
	}
	if ev, ok := r.programmed.next(req.NamespacedName, svc.UID, programmedCondition(lb)); ok {
		record(r.Recorder, svc, ev.eventType, ev.reason, actionStatus, "%s", ev.note)
	}
	if err := r.copyReachable(ctx, svc, lb); err != nil {
		return reconcile.Result{}, err
	}
	want := tenantStatus(lb.Status.LoadBalancer)
	if cond, ok := addressCondition(lb, svc.Generation, want); ok {
		return reconcile.Result{}, r.addresses.WriteStatus(ctx, svc, want, cond)
	}
	if equality.Semantic.DeepEqual(svc.Status.LoadBalancer, want) {
		return reconcile.Result{}, nil
	}
	orig := svc.DeepCopy()
	svc.Status.LoadBalancer = want
	if err := r.Tenant.Status().Patch(ctx, svc, client.MergeFrom(orig)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("copying the status of LoadBalancer %s/%s to Service %s: %w", r.Namespace, lb.Name, req.NamespacedName, err))
	}
	return reconcile.Result{}, nil
}

// ConditionBackendsReachable is the condition of a tenant Service that tells whether the
// hub's Envoy proxies reach its backends (the nodes' NodePorts): a copy of the hub
// LoadBalancer's BackendsReachable condition (reasons Reachable, SomeBackendsUnreachable,
// NoBackendReachable, NotYetChecked, TooManyEndpoints), with a Warning Event when it becomes False.
const ConditionBackendsReachable = "kubelb.k8c.io/BackendsReachable"

// hubBackendsReachable is the hub LoadBalancer's condition (status.ConditionBackendsReachable).
const hubBackendsReachable = "BackendsReachable"

// copyReachable copies the hub LoadBalancer's BackendsReachable condition onto the Service
// (message cleaned: it is untrusted), when it differs, and records a Warning Event when it
// becomes False (once per change of its reason or message); the message starts with
// "kubelb: ", as AddressAssigned's. A hub without the condition
// leaves the Service's alone.
func (r *StatusReconciler) copyReachable(ctx context.Context, svc *corev1.Service, lb *v1alpha1.LoadBalancer) error {
	hub := meta.FindStatusCondition(lb.Status.Conditions, hubBackendsReachable)
	if hub == nil {
		return nil
	}
	st := hub.Status
	if st != metav1.ConditionTrue && st != metav1.ConditionFalse {
		st = metav1.ConditionUnknown
	}
	want := metav1.Condition{Type: ConditionBackendsReachable, Status: st, Reason: eventReason(hub.Reason, "NotYetChecked"),
		Message: notePrefix + cleanText(hub.Message, maxHubMessage), ObservedGeneration: svc.Generation}
	prev := meta.FindStatusCondition(svc.Status.Conditions, ConditionBackendsReachable)
	if prev != nil && prev.Status == want.Status && prev.Reason == want.Reason && prev.Message == want.Message && prev.ObservedGeneration == want.ObservedGeneration {
		return nil
	}
	orig := svc.DeepCopy()
	meta.SetStatusCondition(&svc.Status.Conditions, want)
	if err := r.Tenant.Status().Patch(ctx, svc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("copying BackendsReachable of LoadBalancer %s/%s to Service %s/%s: %w", lb.Namespace, lb.Name, svc.Namespace, svc.Name, err))
	}
	if want.Status == metav1.ConditionFalse && (prev == nil || prev.Status != want.Status || prev.Reason != want.Reason || prev.Message != want.Message) {
		record(r.Recorder, svc, corev1.EventTypeWarning, want.Reason, actionStatus, "%s", want.Message)
	}
	return nil
}

// forget drops what is remembered of a Service that is gone or no longer the ccm's.
func (r *StatusReconciler) forget(key types.NamespacedName) {
	r.programmed.forget(key)
	r.addresses.Forget(key)
}

// ConditionReady is the condition the manager writes on a hub LoadBalancer: True when every
// port has a listener port and the hub Service its address (or the type the tenant asked for
// needs none), False with the reason otherwise (PortsExhausted, QuotaExceeded,
// WaitingForAddress, ...).
const ConditionReady = "Ready"

// addressCondition is the condition kubelb.k8c.io/AddressAssigned a tenant Service (of
// generation gen) gets from its LoadBalancer, whose status lb copies to it: True when the hub
// calls it Ready and it has an address; False with the hub's reason and message (cleaned,
// they are untrusted) when the hub says it is not Ready or Ready without an address (a hub
// Service of type ClusterIP); nothing (false) while the hub has not judged the current spec.
func addressCondition(lb *v1alpha1.LoadBalancer, gen int64, status corev1.LoadBalancerStatus) (metav1.Condition, bool) {
	ready := currentCondition(lb, ConditionReady)
	if ready == nil || (ready.Status != metav1.ConditionTrue && ready.Status != metav1.ConditionFalse) {
		return metav1.Condition{}, false
	}
	if ready.Status == metav1.ConditionTrue && len(status.Ingress) > 0 {
		return lbaddress.Condition(gen, len(status.Ingress), "", ""), true
	}
	reason := eventReason(ready.Reason, lbaddress.ReasonNoAddress)
	if reason == "AddressAssigned" || reason == lbaddress.ReasonAssigned { // no reason for a Service without address
		reason = lbaddress.ReasonNoAddress
	}
	msg := cleanText(ready.Message, maxHubMessage)
	if msg == "" {
		msg = "the management cluster has given this load balancer no address (no message given)"
	}
	return lbaddress.Condition(gen, 0, reason, notePrefix+msg), true
}

// tenantStatus is the status.loadBalancer a tenant Service gets from its LoadBalancer: a copy,
// with each ingress entry's ipMode — which the manager decides (Proxy when PROXY protocol is
// on, or as the Tenant, Config or the Service's kubelb.k8c.io/ip-mode annotation say) — and
// VIP for an IP entry without one, as the API server defaults it: a hub that writes none
// (an older manager) then does not make the ccm patch the same status on every reconcile.
func tenantStatus(in corev1.LoadBalancerStatus) corev1.LoadBalancerStatus {
	out := *in.DeepCopy()
	for i := range out.Ingress {
		if out.Ingress[i].IP != "" && out.Ingress[i].IPMode == nil {
			out.Ingress[i].IPMode = ptr.To(corev1.LoadBalancerIPModeVIP)
		}
	}
	return out
}
