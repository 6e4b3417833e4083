package status

import (
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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/reach"
	"kubelb.dev/kubelb/internal/translate"
)

// ConditionBackendsReachable tells whether the tenant's Envoy proxies reach a LoadBalancer's
// endpoints (the tenant's NodePorts or endpoint addresses); reasons in internal/reach.
const ConditionBackendsReachable = "BackendsReachable"

// ReachFieldOwner is the server-side apply field owner of the BackendsReachable condition:
// its own, so that its applies and the Programmed condition's (FieldOwner) never remove each
// other's condition.
const ReachFieldOwner = "kubelb-reach"

// StaleHealthTTL is how long an entry of status.backendHealth that names unreachable
// endpoints counts without being confirmed (its replica re-writes it every HealthRefresh),
// and how long an entry about endpoints that are no longer current stays before the leader
// removes it.
const StaleHealthTTL = 3 * HealthRefresh

// WriterOption configures the Writer.
type WriterOption func(*Writer)

// WithEndpoints gives the Writer the current endpoints of a tenant's clusters (the leader's
// own xDS snapshot, xds.Server.ClusterEndpoints), which the BackendsReachable condition
// judges; without it the Writer writes no BackendsReachable condition.
func WithEndpoints(endpoints func(tenant string) map[string][]string) WriterOption {
	return func(w *Writer) { w.endpoints = endpoints }
}

// reachability applies the BackendsReachable condition of every LoadBalancer of the tenant
// whose verdict changed since the last look, and sets the metric of each. It returns when to
// look again (an entry that goes stale).
func (w *Writer) reachability(ctx context.Context, st *tenantState, tenant string, report *Report) (time.Duration, error) {
	if w.endpoints == nil {
		return 0, nil
	}
	found, requeue, err := w.backendHealth(ctx, tenant)
	if err != nil {
		return 0, err
	}
	endpoints := w.endpoints(tenant)
	clustersOf := map[string]map[string][]string{} // LoadBalancer → cluster → endpoints
	for cluster, owners := range report.Owners[resource.ClusterType] {
		for _, o := range owners {
			if o.Kind != translate.KindLoadBalancer {
				continue
			}
			if clustersOf[o.Name] == nil {
				clustersOf[o.Name] = map[string][]string{}
			}
			clustersOf[o.Name][cluster] = endpoints[cluster]
		}
	}
	verdicts := make(map[string]reach.Verdict, len(clustersOf))
	for name, clusters := range clustersOf {
		verdicts[name] = reach.Decide(clusters, found)
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(verdicts)) {
		v := verdicts[name]
		metrics.ManagerLoadBalancerBackends.WithLabelValues(tenant, name, "reachable").Set(float64(v.Reachable))
		metrics.ManagerLoadBalancerBackends.WithLabelValues(tenant, name, "unreachable").Set(float64(v.Unreachable))
		if prev, ok := st.reach[name]; ok && prev == v {
			continue
		}
		lb := &v1alpha1.LoadBalancer{}
		if err := w.client.Get(ctx, types.NamespacedName{Namespace: tenant, Name: name}, lb); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("getting LoadBalancer %s/%s: %w", tenant, name, err))
				delete(verdicts, name) // looked at again next time
			}
			continue
		}
		if !lb.DeletionTimestamp.IsZero() {
			continue
		}
		if err := w.applyReachable(ctx, lb, v); err != nil {
			errs = append(errs, err)
			delete(verdicts, name)
		}
	}
	for name := range st.reach {
		if _, ok := clustersOf[name]; !ok {
			metrics.ManagerLoadBalancerBackends.DeletePartialMatch(map[string]string{"tenant": tenant, "loadbalancer": name})
		}
	}
	st.reach = verdicts
	if len(errs) > 0 {
		return 0, fmt.Errorf("applying BackendsReachable in %s: %v", tenant, errs)
	}
	return requeue, nil
}

// backendHealth reads what the replicas wrote of the tenant's backends. Entries naming
// unreachable endpoints that were not confirmed within StaleHealthTTL (their replica is
// gone) are not used; those, and entries about endpoints no longer current (the replica
// moved on, or is gone), are removed once older than StaleHealthTTL.
func (w *Writer) backendHealth(ctx context.Context, tenant string) ([]reach.Found, time.Duration, error) {
	ts := &v1alpha1.TenantState{}
	if err := w.client.Get(ctx, types.NamespacedName{Namespace: tenant, Name: TenantStateName}, ts); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, 0, nil
		}
		return nil, 0, fmt.Errorf("getting TenantState %s/%s: %w", tenant, TenantStateName, err)
	}
	current := map[string]string{}
	for c, addrs := range w.endpoints(tenant) {
		current[c] = reach.EndpointsHash(addrs)
	}
	var out []reach.Found
	keep := make([]v1alpha1.BackendHealth, 0, len(ts.Status.BackendHealth))
	var requeue time.Duration
	for _, e := range ts.Status.BackendHealth {
		age := w.now().Sub(e.Time.Time)
		stale := age >= StaleHealthTTL
		if e.UnreachableCount > 0 && stale {
			continue // not confirmed: its replica is gone
		}
		if current[e.Cluster] != e.Endpoints && stale {
			continue
		}
		keep = append(keep, e)
		out = append(out, reach.Found{Cluster: e.Cluster, Endpoints: e.Endpoints, UnreachableCount: int(e.UnreachableCount), Unreachable: e.Unreachable})
		if e.UnreachableCount > 0 || current[e.Cluster] != e.Endpoints {
			if left := StaleHealthTTL - age; requeue == 0 || left < requeue {
				requeue = max(left, time.Second)
			}
		}
	}
	if len(keep) < len(ts.Status.BackendHealth) {
		orig := ts.DeepCopy()
		ts.Status.BackendHealth = keep
		// A patch, as for stale rejections: the entries belong to other field owners.
		if err := w.client.Status().Patch(ctx, ts, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(FieldOwner)); err != nil {
			if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				return nil, 0, fmt.Errorf("removing stale backend health from TenantState %s/%s: %w", tenant, TenantStateName, err)
			}
			requeue = time.Second
		}
	}
	return out, requeue, nil
}

// Reachable is the BackendsReachable condition of a verdict.
func Reachable(generation int64, v reach.Verdict) metav1.Condition {
	return metav1.Condition{Type: ConditionBackendsReachable, Status: metav1.ConditionStatus(v.Status), Reason: v.Reason,
		Message: bounded(v.Message), ObservedGeneration: generation}
}

// applyReachable writes lb's BackendsReachable condition when it differs from the one it
// has, and records an Event when its meaning changed: a Warning when it becomes False, a
// Normal one when it becomes True after being False.
func (w *Writer) applyReachable(ctx context.Context, lb *v1alpha1.LoadBalancer, v reach.Verdict) error {
	cond := Reachable(lb.Generation, v)
	prev := meta.FindStatusCondition(lb.Status.Conditions, ConditionBackendsReachable)
	if prev != nil && prev.Status == cond.Status && prev.Reason == cond.Reason && prev.Message == cond.Message &&
		prev.ObservedGeneration == cond.ObservedGeneration {
		return nil
	}
	cond.LastTransitionTime = metav1.NewTime(w.now().Truncate(time.Second))
	if prev != nil && prev.Status == cond.Status {
		cond.LastTransitionTime = prev.LastTransitionTime
	}
	c, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cond)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "LoadBalancer",
		"metadata":   map[string]any{"name": lb.Name, "namespace": lb.Namespace},
		"status":     map[string]any{"conditions": []any{c}},
	}}
	if err := w.client.Status().Patch(ctx, u, client.Apply, client.FieldOwner(ReachFieldOwner), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("applying the BackendsReachable condition of LoadBalancer %s/%s: %w", lb.Namespace, lb.Name, err)
	}
	if prev != nil && prev.Status == cond.Status && prev.Reason == cond.Reason && prev.Message == cond.Message {
		return nil
	}
	switch {
	case cond.Status == metav1.ConditionFalse:
		w.recorder.Eventf(lb, nil, corev1.EventTypeWarning, cond.Reason, "CheckBackends", "%s", cond.Message)
	case cond.Status == metav1.ConditionTrue && prev != nil && prev.Status == metav1.ConditionFalse:
		w.recorder.Eventf(lb, nil, corev1.EventTypeNormal, cond.Reason, "CheckBackends", "%s", cond.Message)
	}
	return nil
}
