package status

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/reach"
	"kubelb.dev/kubelb/internal/translate"
)

// ConditionBackendsReachable tells whether the tenant's Envoy proxies reach a LoadBalancer's
// (or a Route's, in status.resources.route.conditions) endpoints (the tenant's NodePorts or
// endpoint addresses); reasons in internal/reach.
const ConditionBackendsReachable = "BackendsReachable"

// StaleHealthTTL is how long an entry of status.backendHealth that names unreachable
// endpoints counts without being confirmed (its replica re-writes it every HealthRefresh),
// and how long an entry about endpoints that are no longer current stays before the leader
// removes it.
const StaleHealthTTL = 3 * HealthRefresh

// WriterOption configures the Writer.
type WriterOption func(*Writer)

// WithSink makes the Writer write through s, the one writer of LoadBalancer and Route
// status shared with the LoadBalancer and Route controllers.
func WithSink(s *Sink) WriterOption {
	return func(w *Writer) { w.sink = s }
}

// WithApplied makes the Writer write a Route's status only once the tenant's Envoy proxies
// connected to this replica answered the configuration that carries it
// (xds.Server.Applied), or after MaxAppliedWait.
func WithApplied(applied func(tenant string, versions map[string]string) bool) WriterOption {
	return func(w *Writer) { w.applied = applied }
}

// WithEndpoints gives the Writer the clusters of a tenant (the leader's own xDS snapshot,
// xds.Server.ClusterEndpoints), whose endpoints the BackendsReachable condition judges;
// without it the Writer writes no BackendsReachable condition.
func WithEndpoints(endpoints func(tenant string) reach.Clusters) WriterOption {
	return func(w *Writer) { w.endpoints = endpoints }
}

// reachability applies the BackendsReachable condition of every LoadBalancer and Route of
// the tenant whose verdict changed since the last look, and sets the metric of each
// LoadBalancer whose verdict changed. The tenant's reach.Judge decides again only the
// objects whose clusters' endpoints, health entries or set of clusters changed (every one
// when the clusters checked changed): a Report that changed one LoadBalancer costs a look
// at that one. It returns when to look again (an entry that goes stale).
func (w *Writer) reachability(ctx context.Context, st *tenantState, tenant string, report *Report) (time.Duration, error) {
	if w.endpoints == nil {
		return 0, nil
	}
	if st.judge == nil {
		st.judge, st.reach = &reach.Judge[ir.ObjectRef]{}, map[ir.ObjectRef]reach.Verdict{}
	}
	st.judge.SetClusters(w.endpoints(tenant))
	found, omitted, requeue, err := w.backendHealth(ctx, tenant, st.judge.Hash)
	if err != nil {
		return 0, err
	}
	verdicts, gone := st.judge.Look(report.Owners[resource.ClusterType], judged, found, omitted)
	for ref := range st.retry { // a write that failed
		if v, ok := st.judge.Verdict(ref); ok {
			if _, decided := verdicts[ref]; !decided {
				verdicts[ref] = v
			}
		}
	}
	st.retry = nil
	for _, ref := range gone {
		delete(st.reach, ref)
		if ref.Kind == translate.KindLoadBalancer {
			// Its two series by their labels: DeletePartialMatch walks every series of the
			// metric, and a tenant's delete of thousands would walk them once per LoadBalancer.
			for _, state := range backendStates {
				metrics.ManagerLoadBalancerBackends.DeleteLabelValues(tenant, ref.Name, state)
			}
		}
	}
	var errs []error
	refs := slices.SortedFunc(maps.Keys(verdicts), func(a, b ir.ObjectRef) int { return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name)) })
	for _, ref := range refs {
		v := verdicts[ref]
		if prev, ok := st.reach[ref]; ok && prev == v {
			continue // the metric and the condition say this already
		}
		if ref.Kind == translate.KindLoadBalancer {
			metrics.ManagerLoadBalancerBackends.WithLabelValues(tenant, ref.Name, backendStates[0]).Set(float64(v.Reachable))
			metrics.ManagerLoadBalancerBackends.WithLabelValues(tenant, ref.Name, backendStates[1]).Set(float64(v.Unreachable))
		}
		if err := w.reachableOf(ctx, tenant, ref, v); err != nil {
			errs = append(errs, err)
			delete(st.reach, ref)
			if st.retry == nil {
				st.retry = map[ir.ObjectRef]bool{}
			}
			st.retry[ref] = true // looked at again next time
			continue
		}
		st.reach[ref] = v
	}
	if len(errs) > 0 {
		return 0, fmt.Errorf("applying BackendsReachable in %s: %v", tenant, errs)
	}
	return requeue, nil
}

// backendStates are the values of the state label of kubelb_manager_loadbalancer_backends.
var backendStates = [...]string{"reachable", "unreachable"}

// judged tells the objects that own clusters the Writer judges, LoadBalancers and Routes, as
// refs without namespace.
func judged(o ir.ObjectRef) (ir.ObjectRef, bool) {
	return ir.ObjectRef{Kind: o.Kind, Name: o.Name}, o.Kind == translate.KindLoadBalancer || o.Kind == translate.KindRoute
}

// backendHealth reads what the replicas wrote of the tenant's backends, and whether a replica
// left clusters out (omitted); current is the EndpointsHash of a cluster's current
// endpoints. Entries naming unreachable endpoints, and omitted counts, that were not
// confirmed within StaleHealthTTL (their replica is gone) are not used; those, and entries
// about endpoints no longer current (the replica moved on, or is gone), are removed once
// older than StaleHealthTTL.
func (w *Writer) backendHealth(ctx context.Context, tenant string, current func(cluster string) string) (_ []reach.Found, omitted bool, _ time.Duration, _ error) {
	ts := &v1alpha1.TenantState{}
	// Not copied: read only, copied before it is changed.
	if err := w.client.Get(ctx, types.NamespacedName{Namespace: tenant, Name: hubnames.TenantStateName}, ts, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, 0, nil
		}
		return nil, false, 0, fmt.Errorf("getting TenantState %s/%s: %w", tenant, hubnames.TenantStateName, err)
	}
	entries := ts.Status.BackendHealth
	out := make([]reach.Found, 0, len(entries))
	var keep []v1alpha1.BackendHealth // the entries that stay, once one goes
	var requeue time.Duration
	for i, e := range entries {
		age := w.now().Sub(e.Time.Time)
		stale := age >= StaleHealthTTL
		isCurrent := current(e.Cluster) == e.Endpoints
		// Unconfirmed (its replica is gone), or about endpoints no longer current.
		if stale && (e.UnreachableCount > 0 || !isCurrent) {
			if keep == nil {
				keep = append(make([]v1alpha1.BackendHealth, 0, len(entries)), entries[:i]...)
			}
			continue
		}
		if keep != nil {
			keep = append(keep, e)
		}
		out = append(out, reach.Found{Cluster: e.Cluster, Endpoints: e.Endpoints, UnreachableCount: int(e.UnreachableCount), Unreachable: e.Unreachable})
		if e.UnreachableCount > 0 || !isCurrent {
			if left := StaleHealthTTL - age; requeue == 0 || left < requeue {
				requeue = max(left, time.Second)
			}
		}
	}
	var keepOmitted []v1alpha1.BackendHealthOmitted // once one goes
	for i, o := range ts.Status.BackendHealthOmitted {
		age := w.now().Sub(o.Time.Time)
		if age >= StaleHealthTTL {
			if keepOmitted == nil {
				keepOmitted = append(make([]v1alpha1.BackendHealthOmitted, 0, len(ts.Status.BackendHealthOmitted)), ts.Status.BackendHealthOmitted[:i]...)
			}
			continue
		}
		if keepOmitted != nil {
			keepOmitted = append(keepOmitted, o)
		}
		omitted = omitted || o.Clusters > 0
		if left := StaleHealthTTL - age; requeue == 0 || left < requeue {
			requeue = max(left, time.Second)
		}
	}
	if keep != nil || keepOmitted != nil {
		retry, err := w.dropEntries(ctx, ts.DeepCopy(), "backend health", func(ts *v1alpha1.TenantState) {
			if keep != nil {
				ts.Status.BackendHealth = keep
			}
			if keepOmitted != nil {
				ts.Status.BackendHealthOmitted = keepOmitted
			}
		})
		if err != nil {
			return nil, false, 0, err
		}
		requeue = cmp.Or(retry, requeue)
	}
	return out, omitted, requeue, nil
}

// reachableOf applies the verdict to the LoadBalancer or Route ref of the tenant.
func (w *Writer) reachableOf(ctx context.Context, tenant string, ref ir.ObjectRef, v reach.Verdict) error {
	key := types.NamespacedName{Namespace: tenant, Name: ref.Name}
	var obj client.Object = &v1alpha1.LoadBalancer{}
	if ref.Kind == translate.KindRoute {
		obj = &v1alpha1.Route{}
	}
	if err := w.client.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("getting %s %s/%s: %w", ref.Kind, tenant, ref.Name, err)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	cond := Reachable(obj.GetGeneration(), v)
	var prev *metav1.Condition
	var err error
	wrote := false
	switch o := obj.(type) {
	case *v1alpha1.LoadBalancer:
		var known v1alpha1.LoadBalancerStatus
		known, wrote, err = w.sink.LoadBalancer(ctx, o, func(st *v1alpha1.LoadBalancerStatus) { w.setReachable(&st.Conditions, cond) })
		prev = meta.FindStatusCondition(known.Conditions, ConditionBackendsReachable)
	case *v1alpha1.Route:
		var known v1alpha1.RouteStatus
		known, wrote, err = w.sink.Route(ctx, o, func(st *v1alpha1.RouteStatus) { w.setReachable(&st.Resources.Route.Conditions, cond) })
		prev = meta.FindStatusCondition(known.Resources.Route.Conditions, ConditionBackendsReachable)
	}
	if err != nil {
		return fmt.Errorf("applying the BackendsReachable condition of %s %s/%s: %w", ref.Kind, tenant, ref.Name, err)
	}
	if !wrote || (prev != nil && prev.Status == cond.Status && prev.Reason == cond.Reason && prev.Message == cond.Message) {
		return nil
	}
	switch {
	case cond.Status == metav1.ConditionFalse:
		w.recorder.Eventf(obj, nil, corev1.EventTypeWarning, cond.Reason, "CheckBackends", "%s", cond.Message)
	case cond.Status == metav1.ConditionTrue && prev != nil && prev.Status == metav1.ConditionFalse:
		w.recorder.Eventf(obj, nil, corev1.EventTypeNormal, cond.Reason, "CheckBackends", "%s", cond.Message)
	}
	return nil
}

// setReachable sets the BackendsReachable condition in conds, except a first one that
// knows nothing yet: NotYetChecked, with nothing said before, is no write (a new
// LoadBalancer's status costs one write less; its first report writes the condition).
// TooManyEndpoints is written: no report will come.
func (w *Writer) setReachable(conds *[]metav1.Condition, cond metav1.Condition) {
	if meta.FindStatusCondition(*conds, ConditionBackendsReachable) == nil && cond.Reason == reach.ReasonNotYetChecked {
		return
	}
	w.setCondition(conds, cond)
}

// Reachable is the BackendsReachable condition of a verdict.
func Reachable(generation int64, v reach.Verdict) metav1.Condition {
	return metav1.Condition{Type: ConditionBackendsReachable, Status: metav1.ConditionStatus(v.Status), Reason: v.Reason,
		Message: bounded(v.Message), ObservedGeneration: generation}
}

// ReachShare bounds the CPU a tenant's reachability passes take: after a pass that took d,
// the next waits (ReachShare−1)·d, at most MaxReachWait, so the passes of a tenant take
// at most about 1/ReachShare of a core. A pass costs little in a small tenant (microseconds:
// no wait to speak of) and milliseconds in a tenant of 10 000 clusters, whose Reports and
// status changes come several times a second in a burst; its inputs that matter most, the
// replicas' health reports, come every HealthRefresh.
const ReachShare = 100

// MaxReachWait is the longest a BackendsReachable verdict waits for the pass after its last.
const MaxReachWait = 2 * time.Second

// boundedReachability runs the tenant's reachability pass, or, when the last one was too
// recent (ReachShare), returns when to run it: every change since is seen then, as the
// Judge compares with what it last looked at.
func (w *Writer) boundedReachability(ctx context.Context, st *tenantState, tenant string, report *Report) (time.Duration, error) {
	start := time.Now() // monotonic: the Writer's clock (w.now) may be a test's fixed one
	if wait := st.reachAt.Sub(start); wait > 0 {
		return wait, nil
	}
	again, err := w.reachability(ctx, st, tenant, report)
	end := time.Now()
	st.reachAt = end.Add(reachWait(end.Sub(start)))
	return again, err
}

// reachWait is how long the next pass waits after one that took took.
func reachWait(took time.Duration) time.Duration {
	return min((ReachShare-1)*took, MaxReachWait)
}
