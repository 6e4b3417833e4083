// Package lbaddress is what kubelb's address providers share: the node-IP mode
// (internal/nodeip) and the address pools (internal/ipam) each decide, for every
// LoadBalancer Service they serve, a Verdict — the addresses it gets, or why it is pending —
// and a Writer puts the verdict on the Service: status.loadBalancer.ingress, the condition
// ConditionAddressAssigned, and a Warning Event once per change of a pending verdict.
//
// The providers run where the Services are: in a standalone ccm (the tenant's own Services)
// or in the manager (the hub Services of the Envoy fleets).
package lbaddress

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"kubelb.dev/kubelb/internal/textcut"
)

// ConditionAddressAssigned is the Service condition an address provider keeps: True with
// ReasonAssigned when the Service has its addresses, False with the reason it is pending
// (the same reason as the Warning Event) otherwise.
const ConditionAddressAssigned = "kubelb.k8c.io/AddressAssigned"

// ReasonAssigned is the reason of a True ConditionAddressAssigned.
const ReasonAssigned = "Assigned"

// actionStatus is the action of the Events (the events.k8s.io "action" field).
const actionStatus = "AssignAddress"

// maxNote keeps Event notes under the 1 kB the events API accepts.
const maxNote = 1000

// Verdict is what a provider decides for one Service it serves.
type Verdict struct {
	// Addresses is the Service's status.loadBalancer.ingress; empty while it is pending.
	Addresses []netip.Addr
	// Reason and Message say why it is pending (a CamelCase reason, a sentence a user can
	// act on); empty when it has its addresses.
	Reason  string
	Message string
	// Holder is the Service holding what keeps this one pending (a port, an address), when
	// there is one.
	Holder types.NamespacedName
}

// Pending tells whether the verdict leaves the Service without addresses.
func (v Verdict) Pending() bool { return v.Reason != "" || len(v.Addresses) == 0 }

// LoadBalancer is the status.loadBalancer the verdict gives the Service (ipMode VIP:
// kube-proxy programs the address, as for a cloud's load balancer IP).
func (v Verdict) LoadBalancer() corev1.LoadBalancerStatus {
	var st corev1.LoadBalancerStatus
	if v.Reason != "" {
		return st
	}
	for _, ip := range v.Addresses {
		st.Ingress = append(st.Ingress, corev1.LoadBalancerIngress{IP: ip.String(), IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)})
	}
	return st
}

// ConditionReason is the reason of the ConditionAddressAssigned the verdict gives: ReasonAssigned,
// or why the Service waits (ReasonNoAddress when the provider gave no reason).
func (v Verdict) ConditionReason() string {
	switch {
	case v.Reason != "":
		return v.Reason
	case len(v.Addresses) == 0:
		return ReasonNoAddress
	}
	return ReasonAssigned
}

// ReasonNoAddress is the reason of a False ConditionAddressAssigned when no other is known.
const ReasonNoAddress = "NoAddress"

// CountByReason counts verdicts (a Verdict, or a provider's type embedding one) by
// ConditionReason, for the address providers' metrics.
func CountByReason[K comparable, V interface{ ConditionReason() string }](verdicts map[K]V) map[string]int {
	out := map[string]int{}
	for _, v := range verdicts {
		out[v.ConditionReason()]++
	}
	return out
}

// condition is the ConditionAddressAssigned the verdict gives a Service of generation gen.
func (v Verdict) condition(gen int64) metav1.Condition {
	reason := v.ConditionReason()
	if reason == ReasonAssigned {
		reason = ""
	}
	return Condition(gen, len(v.Addresses), reason, v.Message)
}

// Condition is the ConditionAddressAssigned of a Service of generation gen: False with reason
// and message when reason is set (why the Service has no address), else True with the number
// of addresses it has.
func Condition(gen int64, addresses int, reason, message string) metav1.Condition {
	if reason != "" {
		return metav1.Condition{Type: ConditionAddressAssigned, Status: metav1.ConditionFalse,
			ObservedGeneration: gen, Reason: reason, Message: message}
	}
	return metav1.Condition{Type: ConditionAddressAssigned, Status: metav1.ConditionTrue,
		ObservedGeneration: gen, Reason: ReasonAssigned, Message: fmt.Sprintf("The Service has %d address(es).", addresses)}
}

// Writer writes verdicts on Services and records each pending verdict's Warning Event once
// per change. It is safe for concurrent use; one Writer serves one provider.
type Writer struct {
	// Client reads and writes the Services' cluster (the status subresource).
	Client client.Client
	// Recorder records the Events.
	Recorder events.EventRecorder

	warnings Warnings
}

// Write makes svc's status show v: status.loadBalancer and ConditionAddressAssigned (other
// conditions are kept). It patches only when something differs, with optimistic locking (a
// conflict is retried by the caller's reconcile, see ssa.RetryConflict). A Service that is
// gone is not an error.
func (w *Writer) Write(ctx context.Context, svc *corev1.Service, v Verdict) error {
	w.report(svc, v.Reason, v.Message)
	return w.write(ctx, svc, v.LoadBalancer(), v.condition(svc.Generation))
}

// WriteStatus is Write for a status decided elsewhere (the ccm copies the hub's): svc gets
// lb as status.loadBalancer and cond (a ConditionAddressAssigned, see Condition); a False
// cond has its Warning Event recorded once per change of reason and message.
func (w *Writer) WriteStatus(ctx context.Context, svc *corev1.Service, lb corev1.LoadBalancerStatus, cond metav1.Condition) error {
	if cond.Status == metav1.ConditionFalse {
		w.report(svc, cond.Reason, cond.Message)
	} else {
		w.report(svc, "", "")
	}
	return w.write(ctx, svc, lb, cond)
}

func (w *Writer) write(ctx context.Context, svc *corev1.Service, lb corev1.LoadBalancerStatus, cond metav1.Condition) error {
	want := svc.Status.DeepCopy()
	want.LoadBalancer = lb
	meta.SetStatusCondition(&want.Conditions, cond)
	return w.patch(ctx, svc, *want)
}

// Clear takes back what a provider gave a Service it no longer serves: its
// status.loadBalancer (when clearIngress; the caller knows whether those addresses are ours)
// and ConditionAddressAssigned.
func (w *Writer) Clear(ctx context.Context, svc *corev1.Service, clearIngress bool) error {
	w.Forget(client.ObjectKeyFromObject(svc))
	want := svc.Status.DeepCopy()
	if clearIngress {
		want.LoadBalancer = corev1.LoadBalancerStatus{}
	}
	meta.RemoveStatusCondition(&want.Conditions, ConditionAddressAssigned)
	return w.patch(ctx, svc, *want)
}

// Serves tells whether svc carries the provider's condition: something to Clear.
func Serves(svc *corev1.Service) bool {
	return meta.FindStatusCondition(svc.Status.Conditions, ConditionAddressAssigned) != nil
}

func (w *Writer) patch(ctx context.Context, svc *corev1.Service, want corev1.ServiceStatus) error {
	if equality.Semantic.DeepEqual(svc.Status, want) {
		return nil
	}
	orig := svc.DeepCopy()
	svc.Status = want
	err := w.Client.Status().Patch(ctx, svc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	if err != nil {
		return client.IgnoreNotFound(fmt.Errorf("writing the status of Service %s/%s: %w", svc.Namespace, svc.Name, err))
	}
	return nil
}

// report records a Warning Event on a pending Service (reason set) once per change of
// reason and message.
func (w *Writer) report(svc *corev1.Service, reason, message string) {
	w.warnings.Report(w.Recorder, svc, reason, message)
}

// Forget drops what is remembered of a Service (gone, or no longer served).
func (w *Writer) Forget(key types.NamespacedName) { w.warnings.Forget(key) }

// ForgetExcept forgets the verdicts of the Services not in seen (gone or no longer served),
// so that the memory follows the Services that exist.
func (w *Writer) ForgetExcept(seen map[types.NamespacedName]bool) { w.warnings.ForgetExcept(seen) }

// Warnings records a Warning Event about a Service once per change of what is wrong with it
// (reason and note), not once per reconcile. Memory only: after a restart a problem that
// remains is reported once more. The zero value is ready; it is safe for concurrent use.
type Warnings struct {
	mu sync.Mutex
	// last is what was reported last per Service (UID, reason, note).
	last map[types.NamespacedName]string
}

// Report records a Warning Event with reason and note (action AssignAddress) on svc with rec
// (nil: none) unless it is what was reported last; an empty reason means nothing is wrong
// any more.
func (o *Warnings) Report(rec events.EventRecorder, svc *corev1.Service, reason, note string) {
	key := client.ObjectKeyFromObject(svc)
	memo := ""
	if reason != "" {
		memo = string(svc.UID) + "/" + reason + "/" + note
	}
	o.mu.Lock()
	if o.last == nil {
		o.last = map[types.NamespacedName]string{}
	}
	last := o.last[key]
	if memo == "" {
		delete(o.last, key)
	} else {
		o.last[key] = memo
	}
	o.mu.Unlock()
	if memo != "" && memo != last && rec != nil {
		rec.Eventf(svc, nil, corev1.EventTypeWarning, reason, actionStatus, "%s", textcut.Cut(note, maxNote, textcut.Dots))
	}
}

// Forget drops what was reported about a Service.
func (o *Warnings) Forget(key types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.last, key)
}

// ForgetExcept forgets the Services not in seen.
func (o *Warnings) ForgetExcept(seen map[types.NamespacedName]bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k := range o.last {
		if !seen[k] {
			delete(o.last, k)
		}
	}
}

// Relevant tells whether a Service may concern an address provider: of type LoadBalancer,
// with addresses in its status, or carrying the provider's condition.
func Relevant(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer || len(svc.Status.LoadBalancer.Ingress) > 0 || Serves(svc)
}

// ServiceChanged tells whether an update of a Service changed what every provider decides on:
// its type, class, labels, ports, IP families, deletion, status.loadBalancer (a status
// someone else rewrote is put back) or the provider's condition. A resync (same
// resourceVersion) counts as a change.
func ServiceChanged(o, n *corev1.Service) bool {
	return o.ResourceVersion == n.ResourceVersion || o.Spec.Type != n.Spec.Type ||
		!equality.Semantic.DeepEqual(o.Spec.LoadBalancerClass, n.Spec.LoadBalancerClass) ||
		!equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
		!equality.Semantic.DeepEqual(o.Spec.Ports, n.Spec.Ports) ||
		!slices.Equal(o.Spec.IPFamilies, n.Spec.IPFamilies) ||
		(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
		!equality.Semantic.DeepEqual(o.Status.LoadBalancer, n.Status.LoadBalancer) ||
		!equality.Semantic.DeepEqual(meta.FindStatusCondition(o.Status.Conditions, ConditionAddressAssigned),
			meta.FindStatusCondition(n.Status.Conditions, ConditionAddressAssigned))
}

// ServicePredicate passes the Service events a provider must see: creations and deletions of
// Services relevant says so of, and updates where either version is relevant and changed says
// the update matters (ServiceChanged, or'ed with the provider's own fields).
func ServicePredicate(relevant func(*corev1.Service) bool, changed func(o, n *corev1.Service) bool) predicate.TypedFuncs[client.Object] {
	is := func(o client.Object) bool {
		svc, ok := o.(*corev1.Service)
		return ok && relevant(svc)
	}
	return predicate.TypedFuncs[client.Object]{
		CreateFunc: func(e event.TypedCreateEvent[client.Object]) bool { return is(e.Object) },
		DeleteFunc: func(e event.TypedDeleteEvent[client.Object]) bool { return is(e.Object) },
		UpdateFunc: func(e event.TypedUpdateEvent[client.Object]) bool {
			o, ok1 := e.ObjectOld.(*corev1.Service)
			n, ok2 := e.ObjectNew.(*corev1.Service)
			return ok1 && ok2 && (relevant(o) || relevant(n)) && changed(o, n)
		},
	}
}
