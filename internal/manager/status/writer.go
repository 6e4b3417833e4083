package status

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/reach"
	"kubelb.dev/kubelb/internal/translate"
)

// FieldOwner is the server-side apply field owner of the Programmed condition.
const FieldOwner = hubnames.FieldOwnerStatus

// controllerName names the Writer in logs and metrics.
const controllerName = "status"

// Writer applies the Programmed condition to a tenant's LoadBalancers, and
// status.resources.route (the tenant object's status and Programmed) to its Routes; only the
// leader runs it.
type Writer struct {
	client   client.Client
	store    *Store
	recorder events.EventRecorder
	now      func() time.Time
	// endpoints are a tenant's clusters (WithEndpoints).
	endpoints func(tenant string) reach.Clusters
	// sink writes every status (WithSink; one of its own otherwise).
	sink *Sink
	// applied tells whether the tenant's proxies answered a configuration (WithApplied);
	// nil: Route statuses do not wait for them.
	applied func(tenant string, versions map[string]string) bool

	mu      sync.Mutex
	tenants map[string]*tenantState
	// visited counts the LoadBalancers Reconcile looked at (tests).
	visited int
}

// tenantState is what the Writer keeps of a tenant between two Reconciles, so that a Report
// or an event that concerns a few LoadBalancers costs a look at those, not at the tenant's
// thousands: only the LoadBalancers whose verdict inputs changed are read.
type tenantState struct {
	// objects and byObject are the translated objects and the problems by object (the
	// Report's and the rejections') of the last Reconcile; nil before the first, which looks
	// at every LoadBalancer.
	objects  map[ir.ObjectRef]int64
	byObject map[ir.ObjectRef][]ir.Problem
	// report and rejections are what objects and byObject were made from: a Reconcile for
	// the same (a LoadBalancer's own status change, in a burst thousands of times per
	// Report) looks only at the LoadBalancers marked dirty, not at the whole tenant.
	report     *Report
	rejections []Rejected
	// dirty are the LoadBalancers an event concerned since the last Reconcile took them.
	dirty map[string]bool
	// judge decides the BackendsReachable verdicts of the LoadBalancers and Routes (refs
	// without namespace), again only for those whose inputs changed (nil before the first
	// look, which decides every one).
	judge *reach.Judge[ir.ObjectRef]
	// reach is the verdict the metric and the condition of each say; retry are those whose
	// write failed, applied again at the next look.
	reach map[ir.ObjectRef]reach.Verdict
	retry map[ir.ObjectRef]bool
	// waiting are the snapshot versions the Route statuses wait for the proxies to answer,
	// since when (routesMayGo).
	waiting      map[string]string
	waitingSince time.Time
	// reachAt is the earliest (monotonic) time of the tenant's next reachability pass
	// (boundedReachability).
	reachAt time.Time
}

// SetupWriterWithManager registers the Writer (leader only) with mgr.
func SetupWriterWithManager(mgr ctrl.Manager, store *Store, opts ...WriterOption) error {
	_, err := setupWriter(mgr, store, opts...)
	return err
}

func setupWriter(mgr ctrl.Manager, store *Store, opts ...WriterOption) (*Writer, error) {
	w := &Writer{client: mgr.GetClient(), store: store, recorder: mgr.GetEventRecorder("kubelb-manager"), now: time.Now}
	for _, o := range opts {
		o(w)
	}
	if w.sink == nil {
		w.sink = NewSink(mgr.GetClient())
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		WatchesRawSource(source.Func(func(_ context.Context, q workqueueOf) error { store.setQueue(q); return nil })).
		Watches(&v1alpha1.TenantState{}, handler.EnqueueRequestsFromMapFunc(namespaceOf),
			builder.WithPredicates(rejectionsChanged())).
		Watches(&v1alpha1.LoadBalancer{}, handler.EnqueueRequestsFromMapFunc(w.loadBalancerTouched),
			builder.WithPredicates(programmedTouched())).
		Watches(&v1alpha1.Route{}, handler.EnqueueRequestsFromMapFunc(namespaceOf),
			builder.WithPredicates(routeStatusTouched())).
		Complete(w)
	if err != nil {
		return nil, fmt.Errorf("setting up the status writer: %w", err)
	}
	return w, nil
}

// loadBalancerTouched marks the LoadBalancer for the next Reconcile of its tenant, which it
// requests.
func (w *Writer) loadBalancerTouched(_ context.Context, o client.Object) []reconcile.Request {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.state(o.GetNamespace())
	if st.dirty == nil {
		st.dirty = map[string]bool{}
	}
	st.dirty[o.GetName()] = true
	return []reconcile.Request{tenantRequest(o.GetNamespace())}
}

// state returns the tenant's state, made when missing. The caller holds w.mu.
func (w *Writer) state(tenant string) *tenantState {
	if w.tenants == nil {
		w.tenants = map[string]*tenantState{}
	}
	st := w.tenants[tenant]
	if st == nil {
		st = &tenantState{}
		w.tenants[tenant] = st
	}
	return st
}

func namespaceOf(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{tenantRequest(o.GetNamespace())}
}

// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=loadbalancers;routes;tenantstates,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=loadbalancers/status;routes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile applies the Programmed condition of every LoadBalancer of the tenant req.Name
// whose condition differs from what the latest Report and the current rejections say, and
// status.resources.route of every Route whose tenant object's status or Programmed
// condition differs.
func (w *Writer) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, err error) {
	tenant := req.Name
	start := time.Now()
	defer func() { metrics.ManagerStatusReconcile.Observe(tenant, metrics.Result(err), start) }()

	report := w.store.Get(tenant)
	if report == nil {
		w.mu.Lock()
		delete(w.tenants, tenant)
		w.mu.Unlock()
		metrics.ManagerLoadBalancerBackends.DeletePartialMatch(map[string]string{"tenant": tenant})
		return reconcile.Result{}, nil
	}
	rejections, requeue, err := w.rejections(ctx, tenant, report)
	if err != nil {
		return reconcile.Result{}, err
	}
	w.mu.Lock()
	st := w.state(tenant)
	dirty := st.dirty
	st.dirty = nil
	w.mu.Unlock()
	same := st.objects != nil && st.report == report && slices.Equal(st.rejections, rejections)
	byObject := st.byObject
	if !same {
		problems := append(append(ir.Problems{}, report.Problems...), rejectionProblems(report, rejections)...)
		byObject = problems.ByObject()
	}
	var errs []error
	visit := func(lb *v1alpha1.LoadBalancer) {
		if err := w.program(ctx, report, byObject, lb); err != nil {
			errs = append(errs, err)
		}
	}
	if st.objects == nil { // the first look, or after an error: every LoadBalancer
		lbs := &v1alpha1.LoadBalancerList{}
		if err := w.client.List(ctx, lbs, client.InNamespace(tenant), client.UnsafeDisableDeepCopy); err != nil {
			return reconcile.Result{}, fmt.Errorf("listing LoadBalancers of %s: %w", tenant, err)
		}
		for i := range lbs.Items {
			visit(&lbs.Items[i])
		}
	} else if !same {
		var oldWaiting map[ir.ObjectRef]bool
		if st.report != nil {
			oldWaiting = st.report.Waiting
		}
		for name := range changedLoadBalancers(st.objects, report.Objects, st.byObject, byObject, oldWaiting, report.Waiting) {
			if dirty == nil {
				dirty = map[string]bool{}
			}
			dirty[name] = true
		}
	}
	if st.objects != nil {
		for _, name := range slices.Sorted(maps.Keys(dirty)) {
			lb := &v1alpha1.LoadBalancer{}
			if err := w.client.Get(ctx, types.NamespacedName{Namespace: tenant, Name: name}, lb); err != nil {
				if apierrors.IsNotFound(err) {
					w.sink.Forget("LoadBalancer", types.NamespacedName{Namespace: tenant, Name: name})
					continue
				}
				errs = append(errs, fmt.Errorf("getting LoadBalancer %s/%s: %w", tenant, name, err))
				continue
			}
			visit(lb)
		}
	}
	st.objects, st.byObject, st.report, st.rejections = report.Objects, byObject, report, rejections
	if len(errs) > 0 {
		st.objects = nil // the retry looks at every LoadBalancer
	}
	routes := &v1alpha1.RouteList{}
	if wait := w.routesMayGo(tenant, st, report); wait > 0 {
		if requeue == 0 || wait < requeue { // the Routes' statuses come at the next look
			requeue = wait
		}
	} else if err := w.client.List(ctx, routes, client.InNamespace(tenant), client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing Routes of %s: %w", tenant, err)
	}
	for i := range routes.Items {
		route := &routes.Items[i]
		ref := ir.ObjectRef{Kind: translate.KindRoute, Namespace: tenant, Name: route.Name}
		gen, translated := report.Objects[ref]
		if !translated || !route.DeletionTimestamp.IsZero() {
			continue
		}
		rs, ok := report.Routes[route.Name]
		var cond *metav1.Condition // none while a listener port is pending: the next Report's
		if report.GivesVerdict(ref) {
			c := routeProgrammed(route, gen, ok, byObject[ref])
			cond = &c
		}
		if err := w.applyRoute(ctx, route, rs, ok, cond); err != nil {
			errs = append(errs, err)
		}
	}
	reachAgain, err := w.boundedReachability(ctx, st, tenant, report)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return reconcile.Result{}, fmt.Errorf("applying statuses in %s: %v", tenant, errs)
	}
	if reachAgain > 0 && (requeue == 0 || reachAgain < requeue) {
		requeue = reachAgain
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// AppliedPoll is how often the Writer looks again whether the tenant's proxies answered the
// configuration a Route's status waits for; MaxAppliedWait how long it waits at most (a
// proxy that neither accepts nor rejects does not hold every status back).
var (
	AppliedPoll    = 50 * time.Millisecond
	MaxAppliedWait = 10 * time.Second
)

// routesMayGo returns 0 when the Routes' statuses may be written: the tenant's proxies
// connected to this replica answered (accepted or rejected) the snapshot the Report
// describes, or they were waited for MaxAppliedWait. Otherwise it returns when to look
// again. A Route's status is what the ccm copies back to the tenant's Gateway API objects,
// where clients wait for Accepted before they send traffic: written before the proxies
// took the configuration, the first request could still meet the previous one.
func (w *Writer) routesMayGo(tenant string, st *tenantState, report *Report) time.Duration {
	if w.applied == nil {
		return 0
	}
	if !maps.Equal(st.waiting, report.Versions) {
		st.waiting, st.waitingSince = report.Versions, w.now()
	}
	if w.applied(tenant, report.Versions) {
		return 0
	}
	waited := w.now().Sub(st.waitingSince)
	if waited >= MaxAppliedWait {
		if waited < MaxAppliedWait+AppliedPoll { // once per snapshot
			ctrl.Log.WithName(controllerName).Info("Envoy proxies did not answer the configuration in time; writing the Routes' statuses anyway",
				"tenant", tenant, "waited", waited.Round(time.Millisecond))
		}
		return 0
	}
	return AppliedPoll
}

// program applies lb's Programmed condition when the Report has a verdict for it that its
// status lacks.
func (w *Writer) program(ctx context.Context, report *Report, byObject map[ir.ObjectRef][]ir.Problem, lb *v1alpha1.LoadBalancer) error {
	w.mu.Lock()
	w.visited++
	w.mu.Unlock()
	ref := ir.ObjectRef{Kind: translate.KindLoadBalancer, Namespace: lb.Namespace, Name: lb.Name}
	gen, translated := report.Objects[ref]
	if !translated || !lb.DeletionTimestamp.IsZero() {
		return nil
	}
	// Not before the LoadBalancer controller's first status write, which carries the
	// verdict itself, nor while a port is pending (the Report leaves it out or lists it in
	// Waiting).
	if meta.FindStatusCondition(lb.Status.Conditions, ConditionReady) == nil || !report.GivesVerdict(ref) {
		return nil
	}
	cond := Programmed(gen, byObject[ref])
	known, wrote, err := w.sink.LoadBalancer(ctx, lb, func(st *v1alpha1.LoadBalancerStatus) {
		w.setCondition(&st.Conditions, cond)
	})
	if err != nil {
		return fmt.Errorf("applying the Programmed condition of LoadBalancer %s/%s: %w", lb.Namespace, lb.Name, err)
	}
	if wrote {
		w.event(lb, meta.FindStatusCondition(known.Conditions, ConditionProgrammed), cond)
	}
	return nil
}

// setCondition sets cond in conds unless the same condition (status, reason, message,
// observed generation) is there: its lastTransitionTime is now when its status changed, the
// one it had otherwise.
func (w *Writer) setCondition(conds *[]metav1.Condition, cond metav1.Condition) {
	if prev := meta.FindStatusCondition(*conds, cond.Type); prev != nil && prev.Status == cond.Status && prev.Reason == cond.Reason &&
		prev.Message == cond.Message && prev.ObservedGeneration == cond.ObservedGeneration {
		return
	}
	cond.LastTransitionTime = metav1.NewTime(w.now().Truncate(time.Second))
	meta.SetStatusCondition(conds, cond) // keeps the time when the status did not change
}

// changedLoadBalancers are the LoadBalancers whose verdict inputs differ between two looks:
// translated at another generation (or newly), with other problems, or that started or
// stopped waiting for a listener port (Report.Waiting: no verdict while waiting, so the
// Report that ends the wait gives one even when nothing else of the LoadBalancer changed).
func changedLoadBalancers(oldObjects, objects map[ir.ObjectRef]int64, oldProblems, problems map[ir.ObjectRef][]ir.Problem, oldWaiting, waiting map[ir.ObjectRef]bool) map[string]bool {
	out := map[string]bool{}
	for _, pair := range [2][2]map[ir.ObjectRef]bool{{oldWaiting, waiting}, {waiting, oldWaiting}} {
		for ref, w := range pair[0] {
			if ref.Kind == translate.KindLoadBalancer && w != pair[1][ref] {
				out[ref.Name] = true
			}
		}
	}
	for ref, gen := range objects {
		if g, ok := oldObjects[ref]; ref.Kind == translate.KindLoadBalancer && (!ok || g != gen) {
			out[ref.Name] = true
		}
	}
	for ref, ps := range problems {
		if ref.Kind == translate.KindLoadBalancer && !slices.Equal(ps, oldProblems[ref]) {
			out[ref.Name] = true
		}
	}
	for ref := range oldProblems {
		if _, ok := problems[ref]; ref.Kind == translate.KindLoadBalancer && !ok {
			out[ref.Name] = true
		}
	}
	return out
}

// StaleRejectionTTL is how long a rejection of a version that is no longer current stays in
// the TenantState before the leader removes it. Each replica removes its own entries when
// the proxy accepts a later version or disconnects; this cleans up after replicas that died.
const StaleRejectionTTL = 10 * time.Minute

// rejections reads the tenant's rejections from its TenantState, and removes those of
// versions that are no longer current once they are older than StaleRejectionTTL. It returns
// when to look again for entries that are stale but not old enough yet.
func (w *Writer) rejections(ctx context.Context, tenant string, report *Report) ([]Rejected, time.Duration, error) {
	ts := &v1alpha1.TenantState{}
	if err := w.client.Get(ctx, types.NamespacedName{Namespace: tenant, Name: hubnames.TenantStateName}, ts); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, 0, nil
		}
		return nil, 0, fmt.Errorf("getting TenantState %s/%s: %w", tenant, hubnames.TenantStateName, err)
	}
	out := make([]Rejected, 0, len(ts.Status.Rejections))
	keep := make([]v1alpha1.ConfigRejection, 0, len(ts.Status.Rejections))
	var requeue time.Duration
	for _, r := range ts.Status.Rejections {
		out = append(out, Rejected{Proxy: r.Proxy, TypeURL: r.TypeURL, Version: r.Version, Message: r.Message})
		if r.Version == report.Versions[r.TypeURL] {
			keep = append(keep, r)
			continue
		}
		age := w.now().Sub(r.Time.Time)
		if age < StaleRejectionTTL {
			keep = append(keep, r)
			if left := StaleRejectionTTL - age; requeue == 0 || left < requeue {
				requeue = left
			}
		}
	}
	if len(keep) < len(ts.Status.Rejections) {
		retry, err := w.dropEntries(ctx, ts, "rejections", func(ts *v1alpha1.TenantState) { ts.Status.Rejections = keep })
		if err != nil {
			return nil, 0, err
		}
		requeue = cmp.Or(retry, requeue)
	}
	return out, requeue, nil
}

// dropEntries removes entries of other field owners (replicas) from the TenantState's status
// (drop sets what stays) by a patch, not an apply: only an update can remove them. Named
// "kubelb-status", the Tenant controller's status apply leaves the entry alone
// (ssa.ApplyStatus adopts only legacy updaters). It returns when to retry (a conflict),
// 0 when done.
func (w *Writer) dropEntries(ctx context.Context, ts *v1alpha1.TenantState, what string, drop func(*v1alpha1.TenantState)) (time.Duration, error) {
	orig := ts.DeepCopy()
	drop(ts)
	if err := w.client.Status().Patch(ctx, ts, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(FieldOwner)); err != nil {
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("removing stale %s from TenantState %s/%s: %w", what, ts.Namespace, hubnames.TenantStateName, err)
		}
		return time.Second, nil // retried on the next look
	}
	return 0, nil
}

// olderThan tells whether a cached resourceVersion is older than rv (etcd's are numbers;
// one that is not never counts as older).
func olderThan(cached string, rv int64) bool {
	c, err := strconv.ParseInt(cached, 10, 64)
	return err == nil && c < rv
}

// event records an Event on obj when the meaning of its Programmed condition changed from
// prev (nil: none) to cond: a Warning when it is False or has warnings, a Normal one when it
// recovered.
func (w *Writer) event(obj runtime.Object, prev *metav1.Condition, cond metav1.Condition) {
	if prev != nil && prev.Status == cond.Status && prev.Reason == cond.Reason && prev.Message == cond.Message {
		return // only the observed generation (or the status copied back) moved
	}
	switch {
	case cond.Status == metav1.ConditionFalse:
		w.recorder.Eventf(obj, nil, corev1.EventTypeWarning, cond.Reason, "Program", "%s", cond.Message)
	case cond.Reason == ReasonProgrammedWithWarnings:
		w.recorder.Eventf(obj, nil, corev1.EventTypeWarning, cond.Reason, "Program", "%s", cond.Message)
	case prev != nil && prev.Reason != ReasonProgrammed:
		w.recorder.Eventf(obj, nil, corev1.EventTypeNormal, cond.Reason, "Program", "%s", cond.Message)
	}
}

func equalRejections(a, b []v1alpha1.ConfigRejection) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Proxy != y.Proxy || x.TypeURL != y.TypeURL || x.Version != y.Version || x.Message != y.Message {
			return false
		}
	}
	return true
}
