// Package loadbalancer is the hub's LoadBalancer controller. For every LoadBalancer in a
// namespace labelled kubelb.k8c.io/managed-by=kubelb it takes from the tenant's plan
// (internal/manager/planner) the tenant's quota verdict, one listener port on the tenant's
// Envoy fleet per port, and what became of its hub Service ("envoy-<lb name>", same
// namespace, which the plan applies: of the type spec.type asks, ClusterIP, NodePort or
// LoadBalancer, selecting the tenant's Envoy pods and mapping each requested port to its
// listener port); it makes the hostname's Certificate and writes the allocations, the hub
// Service's address (type LoadBalancer only) and NodePorts and the Ready and Hostname
// conditions into the LoadBalancer status. Until the plan knows the LoadBalancer at its
// generation, it writes nothing; the plan's outcome requeues it.
//
// The port allocator (portalloc.Shared, one for the whole manager) is rebuilt lazily: the
// first reconcile after the controller starts (i.e. after this replica won leader election
// and the caches synced) lists the manager's hub Services straight from the API server and
// rebuilds the allocations from their targetPorts (portalloc.Rebuild), before any port is
// handed out. Until then no reconcile proceeds. The LoadBalancer status reports the
// allocations to the tenant but is never read back for them: tenants can write it.
package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/finalizer"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/lbaddress"
	"kubelb.dev/kubelb/internal/manager/dropped"
	"kubelb.dev/kubelb/internal/manager/fairqueue"
	"kubelb.dev/kubelb/internal/manager/hostnames"
	"kubelb.dev/kubelb/internal/manager/hubcache"
	"kubelb.dev/kubelb/internal/manager/perobject"
	"kubelb.dev/kubelb/internal/manager/planner"
	statuspkg "kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/translate"
)

// DefaultMaxConcurrentReconciles is the number of workers when Options leaves it unset.
const DefaultMaxConcurrentReconciles = 8

// controllerName names the controller (logs, metrics) and the event reporter.
const controllerName = "loadbalancer"

// Options configure the LoadBalancer controller.
type Options struct {
	// Namespace the manager runs in; holds Config "default".
	Namespace string
	// PortRange is the hub-wide listener port range (--envoy-port-range); zero means
	// portalloc.DefaultRange. Ignored when Ports is set.
	PortRange portalloc.Range
	// Shared is what the LoadBalancer and Route controllers share (the port allocator, the
	// status Sink, the tenants' planner, the waiting tenants, Ingress Service problems); what
	// is nil is made for this controller alone, the port allocator over PortRange.
	perobject.Shared
	// MaxConcurrentReconciles is the number of workers; zero means
	// DefaultMaxConcurrentReconciles.
	MaxConcurrentReconciles int
	// Status is the translation reports' store (every replica has one): when set, the
	// controller's status write carries the Programmed condition the leader-only status
	// writer would write, when it is known, so that a new LoadBalancer's status is written
	// once. Nil leaves Programmed to the status writer alone.
	Status *statuspkg.Store
	// AddressWait is how long the first status write of a LoadBalancer whose hub Service
	// is of type LoadBalancer waits for the hub's load balancer to give it an address, so
	// that ports and address are written at once; zero means DefaultAddressWait.
	AddressWait time.Duration
}

// DefaultAddressWait is Options.AddressWait when unset.
const DefaultAddressWait = 10 * time.Second

// Reconciler reconciles LoadBalancers into hub Services and port allocations.
type Reconciler struct {
	client    client.Client
	apiReader client.Reader
	recorder  events.EventRecorder
	opts      Options

	ports   *portalloc.Shared // rebuilt on the first reconcile
	secrets client.Reader     // Secrets labelled managed-by: kubelb and lb-name (hostname certificates)
	certs   *certAPI          // whether cert-manager's Certificate API is served

	plans *planner.Controller                           // the tenants' plans: quota verdicts and listener ports
	steps perobject.Steps[*kubelbv1alpha1.LoadBalancer] // get, gone, deleting, managed; the gauge

	sink *statuspkg.Sink // the one writer of LoadBalancer status
}

// SetupWithManager registers the LoadBalancer controller with mgr.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	_, err := setup(mgr, opts, nil)
	return err
}

// setup builds and registers the reconciler; wrap (tests) may wrap it.
func setup(mgr ctrl.Manager, opts Options, wrap func(reconcile.Reconciler) reconcile.Reconciler) (*Reconciler, error) {
	if opts.PortRange == (portalloc.Range{}) {
		opts.PortRange = portalloc.DefaultRange
	}
	if err := errors.Join(opts.PortRange.Validate(), ir.CheckPortRange(opts.PortRange.Min, opts.PortRange.Max)); err != nil {
		return nil, fmt.Errorf("setting up the LoadBalancer controller: %w", err)
	}
	if opts.MaxConcurrentReconciles <= 0 {
		opts.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	if opts.AddressWait <= 0 {
		opts.AddressWait = DefaultAddressWait
	}
	if opts.Ports == nil {
		opts.Ports = NewSharedPorts(mgr, opts.PortRange)
	}
	var err error
	if opts.Shared, err = opts.WithDefaults(mgr, opts.Namespace, 0); err != nil {
		return nil, fmt.Errorf("setting up the LoadBalancer controller: %w", err)
	}
	opts.PortRange = opts.Ports.Range()
	hasLB, err := labels.NewRequirement(kubelbv1alpha1.LabelLoadBalancerName, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	owned, err := hubcache.NewLabelledCluster(mgr, controllerName, map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Label: hubcache.ManagedSelector(nil).Add(*hasLB)},
	})
	if err != nil {
		return nil, err
	}
	if err := hostnames.IndexHostnames(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, fmt.Errorf("setting up the LoadBalancer controller: %w", err)
	}
	r := &Reconciler{
		secrets:   owned.GetClient(),
		certs:     &certAPI{mapper: mgr.GetRESTMapper()},
		ports:     opts.Ports,
		client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		recorder:  mgr.GetEventRecorder("kubelb-manager"),
		opts:      opts,
		sink:      opts.Sink,
		plans:     opts.Plans,
	}
	r.steps = perobject.Steps[*kubelbv1alpha1.LoadBalancer]{Kind: "LoadBalancer", Client: r.client, Ports: r.ports,
		Namespace: opts.Namespace, Count: perobject.NewCount(metrics.ManagerLoadBalancers), Metric: metrics.ManagerLoadBalancerReconcile, Gone: r.reconcileGone, Delete: r.reconcileDelete}
	var rec reconcile.Reconciler = r
	if wrap != nil {
		rec = wrap(r)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		For(&kubelbv1alpha1.LoadBalancer{})
	b = perobject.WatchSettings(b, opts.Namespace, r.loadBalancersIn).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(serviceToLoadBalancer),
			builder.WithPredicates(predicate.NewPredicateFuncs(hubnames.LooksLikeLoadBalancerService))).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(r.ingressServiceToLoadBalancers),
			builder.WithPredicates(dnsAnnotationChanged())).
		WatchesRawSource(source.Kind(owned.GetCache(), client.Object(&corev1.Secret{}),
			handler.EnqueueRequestsFromMapFunc(secretToLoadBalancer))).
		Watches(&kubelbv1alpha1.LoadBalancer{}, handler.EnqueueRequestsFromMapFunc(r.sameHostnameElsewhere),
			builder.WithPredicates(predicate.NewPredicateFuncs(hostnames.HasExplicitHostname))).
		WatchesRawSource(r.plans.LoadBalancers()).
		WatchesRawSource(opts.Ingress.LoadBalancers(r.loadBalancerKeysIn))
	if opts.Status != nil { // a LoadBalancer whose first write awaits its verdict
		b = b.WatchesRawSource(opts.Status.AwaitedVerdicts())
	}
	err = b.
		// Requests go out round robin across tenant namespaces: one tenant's flood of
		// objects does not hold back another's (fairqueue.New).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles, NewQueue: fairqueue.New}).
		Complete(rec)
	if err != nil {
		return nil, fmt.Errorf("setting up the LoadBalancer controller: %w", err)
	}
	return r, nil
}

// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=loadbalancers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=loadbalancers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=loadbalancers/finalizers,verbs=update
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=routes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;list;watch;create;update;patch;delete

// Reconcile brings one LoadBalancer's hostname Certificate and status in line. It has the
// manager's per-object shape (docs/development.md): get (gone → forget), no finalizer, scope
// (settings, the tenant's plan, the hub Service), the hostname's Certificate (server-side
// apply), and one status write at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return r.steps.Reconcile(ctx, req, &kubelbv1alpha1.LoadBalancer{}, func(ctx context.Context, ports *portalloc.Allocator, lb *kubelbv1alpha1.LoadBalancer) (reconcile.Result, error) {
		requeue, err := r.reconcile(ctx, ports, lb)
		return reconcile.Result{RequeueAfter: requeue}, err
	})
}

func (r *Reconciler) reconcile(ctx context.Context, ports *portalloc.Allocator, lb *kubelbv1alpha1.LoadBalancer) (requeue time.Duration, err error) {
	owner := types.NamespacedName{Namespace: lb.Namespace, Name: lb.Name}
	// No finalizer of the manager's own: the tenant's plan deletes the hub Service on the
	// LoadBalancer's delete event (it is owned, too), and the orphan sweep at start-up
	// (sweepOrphans) catches deletions missed while no manager ran.

	// Scope: the tenant's settings and the hub Service as it is.
	tenant, err := settings.Load(ctx, r.client, r.opts.Namespace, hubnames.TenantName(lb.Namespace))
	if err != nil {
		return 0, err
	}
	// The tenant's plan (internal/manager/planner): its limits' verdict (a refused
	// LoadBalancer holds no ports and has no hub Service) and the LoadBalancer's listener
	// ports. Until the plan knows the LoadBalancer as it is, nothing is decided: the plan's
	// next outcome requeues it.
	plan, ok := r.plans.OutcomeOf(true, owner)
	if !ok || !plan.For(lb, tenant) {
		return 0, nil
	}
	refusal, refused := plan.Refused, plan.Refused != ""
	var host hostnameState
	if refused { // no hostname, and no Certificate: a refused LoadBalancer holds nothing
		requeue, err = r.syncCertificate(ctx, lb, &host, "")
	} else {
		host, requeue, err = r.reconcileHostname(ctx, lb, hubnames.TenantName(lb.Namespace), tenant.DNS, tenant.DefaultClusterIssuer)
	}
	if err != nil {
		return 0, err
	}
	if plan.Kept {
		// The plan keeps the ports as they are while an earlier LoadBalancer's hub Service of
		// this name goes: its deletion brings the next plan, which requeues this LoadBalancer.
		return requeue, nil
	}
	// The hub Service, as the plan applied it (plan.Service) and the cache shows it (its
	// address and NodePorts; nil when it is not there yet, or not this LoadBalancer's).
	svc, err := r.hubService(ctx, lb)
	if err != nil {
		return 0, err
	}
	planned, problems := planPorts(lb)
	alloc := plan.Alloc

	out := outcome{disabled: tenant.DisableLoadBalancer, quota: refusal, noPorts: len(planned) == 0, exhausted: plan.Exhausted, problems: problems, hostname: host,
		lbClass: tenant.LoadBalancerClass, hubService: lb.Namespace + "/" + hubnames.LoadBalancerServiceName(lb.Name),
		serviceErr: plan.Service.Err, familyErr: plan.Service.FamilyErr, serviceType: plan.Service.Type}
	typ, supported := planner.HubServiceType(lb, tenant.AllocateNodePorts)
	if !supported {
		out.unsupportedType = lb.Spec.Type
	}
	out.ipMode = translate.IPMode(lb, tenant.IPMode)
	if out.serviceType == "" {
		svc = nil // none is applied: the one in the cache is on its way out
	}
	out.hasAddress = svc != nil && svc.Spec.Type == typ && len(svc.Status.LoadBalancer.Ingress) > 0
	if svc != nil && !out.hasAddress {
		if c := meta.FindStatusCondition(svc.Status.Conditions, lbaddress.ConditionAddressAssigned); c != nil && c.Status == metav1.ConditionFalse {
			out.addressPending = c.Message
		}
	}
	if wait := r.waitForAddress(lb, svc, out); wait > 0 {
		return minRequeue(requeue, wait), nil // the address (an update of the hub Service) or the requeue brings it back
	}
	wait, err := r.waitForVerdict(ctx, lb, svc, out)
	if err != nil || wait > 0 {
		return minRequeue(requeue, wait), err // the Report with the verdict (AwaitVerdict) or the requeue brings it back
	}
	return requeue, r.writeStatus(ctx, lb, svc, typ, planned, alloc, out)
}

// minRequeue is the sooner of two requeue delays, 0 meaning none.
func minRequeue(a, b time.Duration) time.Duration {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// waitForAddress is how long the LoadBalancer's first status write waits for the hub
// Service's address, 0 to write now. Only a first write (no Ready condition yet) of a
// LoadBalancer whose only news is "waiting for the address" waits, and at most AddressWait
// from the hub Service's creation: the allocated ports and the address are then written at
// once, not one after the other (a burst of new LoadBalancers costs one status write each).
// Anything else to report (a refusal, exhausted ports, a rejected hub Service) is written at
// once, and so is a status already written.
func (r *Reconciler) waitForAddress(lb *kubelbv1alpha1.LoadBalancer, svc *corev1.Service, out outcome) time.Duration {
	if out.serviceType != corev1.ServiceTypeLoadBalancer || out.hasAddress || readyCondition(out, lb.Generation).Reason != ReasonWaitingForAddress {
		return 0
	}
	if meta.FindStatusCondition(r.sink.KnownLoadBalancer(lb).Conditions, ConditionReady) != nil {
		return 0
	}
	if svc == nil { // just created by this reconcile
		return r.opts.AddressWait
	}
	return max(r.opts.AddressWait-time.Since(svc.CreationTimestamp.Time), 0)
}

// waitForVerdict is how long the LoadBalancer's first status write waits for its Programmed
// verdict, 0 to write now. A LoadBalancer with its address and nothing wrong usually gets
// its address before its translation (the hub Service's ports and address come first, the
// Envoy control plane translates after): written at once, its status would need a second
// write for Programmed — in a burst, one per LoadBalancer. So only that first write waits
// for the Report that describes the LoadBalancer (the Store requeues it then), at most
// AddressWait from the hub Service's creation, and ports, address, Ready and Programmed are
// written at once. Anything else to report, and a status already written, is written now.
func (r *Reconciler) waitForVerdict(ctx context.Context, lb *kubelbv1alpha1.LoadBalancer, svc *corev1.Service, out outcome) (time.Duration, error) {
	if r.opts.Status == nil {
		return 0, nil
	}
	key := types.NamespacedName{Namespace: lb.Namespace, Name: lb.Name}
	wait := r.opts.AddressWait
	if svc != nil {
		wait = max(wait-time.Since(svc.CreationTimestamp.Time), 0)
	}
	if wait == 0 || readyCondition(out, lb.Generation).Status != metav1.ConditionTrue ||
		meta.FindStatusCondition(r.sink.KnownLoadBalancer(lb).Conditions, ConditionReady) != nil {
		r.opts.Status.StopAwaiting(key)
		return 0, nil
	}
	// Awaited before looking, so a Report published in between is not missed.
	r.opts.Status.AwaitVerdict(key)
	_, known, err := r.opts.Status.LoadBalancerProgrammed(ctx, r.client, lb)
	if err != nil || known {
		r.opts.Status.StopAwaiting(key)
		return 0, err
	}
	return wait, nil
}

// writeStatus hands the LoadBalancer's status (the fields this controller decides: ports,
// address, IP families, Ready and Hostname) to the status Sink, the one writer of
// LoadBalancer status, and emits a Warning Event when Ready turns False for a reason a user
// must act on. When the status is written anyway, it carries Programmed as the status
// writer would write it, when that is known: a new LoadBalancer's status is one write. The
// API server keeps times to the second.
func (r *Reconciler) writeStatus(ctx context.Context, lb *kubelbv1alpha1.LoadBalancer, svc *corev1.Service, typ corev1.ServiceType, planned []lbPort,
	alloc map[portalloc.Key]int32, out outcome) error {
	cond := readyCondition(out, lb.Generation)
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	var programmed *metav1.Condition
	var programmedErr error
	known, wrote, err := r.sink.LoadBalancer(ctx, lb, func(st *kubelbv1alpha1.LoadBalancerStatus) {
		base := *lb
		base.Status = *st
		next := nextStatus(&base, svc, typ, planned, alloc, cond, now)
		if out.ipMode != "" { // the tenant's kube-proxy reads it (Proxy: no short-cut past Envoy)
			translate.SetIPMode(&next.LoadBalancer, out.ipMode)
		}
		setHostnameStatus(&next, out.hostname, lb.Generation, now)
		if r.opts.Status != nil && !equality.Semantic.DeepEqual(*st, next) {
			c, ok, err := r.opts.Status.LoadBalancerProgrammed(ctx, r.client, lb)
			if err != nil {
				programmedErr = err
				return
			}
			if ok {
				c.LastTransitionTime = now
				meta.SetStatusCondition(&next.Conditions, c)
				programmed = &c
			}
		}
		*st = next
	})
	if err := errors.Join(programmedErr, err); err != nil {
		return err
	}
	if wrote && programmed != nil {
		statuspkg.ProgrammedEvent(r.recorder, lb, meta.FindStatusCondition(known.Conditions, statuspkg.ConditionProgrammed), *programmed)
	}
	prev := meta.FindStatusCondition(known.Conditions, ConditionReady)
	if cond.Status == metav1.ConditionFalse && (prev == nil || prev.Reason != cond.Reason) {
		switch cond.Reason {
		case ReasonPortsExhausted, ReasonServiceFailed, ReasonInvalidPorts, ReasonQuotaExceeded, ReasonUnsupportedType, ReasonIPFamilyUnavailable, ReasonNodePortsNotAllowed:
			r.recorder.Eventf(lb, nil, corev1.EventTypeWarning, cond.Reason, "Reconcile", "%s", cond.Message)
		}
	}
	prevHost := meta.FindStatusCondition(known.Conditions, ConditionHostname)
	if hc := hostnameCondition(out.hostname, lb.Generation); hc != nil && hc.Status == metav1.ConditionFalse && (prevHost == nil || prevHost.Reason != hc.Reason) {
		r.recorder.Eventf(lb, nil, corev1.EventTypeWarning, hc.Reason, "Reconcile", "%s", hc.Message)
	}
	return nil
}

// reconcileDelete cleans up after a LoadBalancer being deleted (something else's finalizer
// holds it, or the cleanup finalizer an older ccm or manager set): the legacy cleanup
// finalizer is removed. The tenant's plan deletes its hub Service, then frees its ports.
func (r *Reconciler) reconcileDelete(ctx context.Context, _ *portalloc.Allocator, lb *kubelbv1alpha1.LoadBalancer) error {
	if _, err := finalizer.Remove(ctx, r.client, lb, kubelbv1alpha1.CleanupFinalizer); err != nil {
		return err
	}
	r.forget(types.NamespacedName{Namespace: lb.Namespace, Name: lb.Name})
	return nil
}

// reconcileGone forgets a LoadBalancer that no longer exists. The tenant's plan, which its
// delete event brings too, deletes its hub Service and then frees its ports.
func (r *Reconciler) reconcileGone(_ context.Context, _ *portalloc.Allocator, lb types.NamespacedName) error {
	r.forget(lb)
	return nil
}

// forget drops what the controller remembers of a LoadBalancer that is gone.
func (r *Reconciler) forget(lb types.NamespacedName) {
	r.sink.Forget("LoadBalancer", lb)
	r.steps.Count.Forget(lb)
	if r.opts.Status != nil {
		r.opts.Status.StopAwaiting(lb)
	}
}

// sameHostnameElsewhere maps a LoadBalancer with an explicit hostname to the LoadBalancers
// of other tenants asking for the same hostname (hostnames.SameHostnameElsewhere).
func (r *Reconciler) sameHostnameElsewhere(ctx context.Context, o client.Object) []reconcile.Request {
	keys := hostnames.SameHostnameElsewhere(ctx, r.client, o)
	out := make([]reconcile.Request, 0, len(keys))
	for _, k := range keys {
		out = append(out, reconcile.Request{NamespacedName: k})
	}
	return out
}

// ReasonAnnotationsDropped is the reason of the Warning Event of a LoadBalancer whose
// steering annotations were not copied to its hub Service.
const ReasonAnnotationsDropped = dropped.ReasonAnnotationsDropped

// NewSharedPorts returns the manager's one port allocator over r (zero: portalloc.DefaultRange),
// rebuilt on first use from the hub Services read through mgr's API reader, logging as
// the LoadBalancer controller. Before the rebuild, the hub Services of LoadBalancers that
// are gone are deleted (sweepOrphans), so their ports are free. Give it to every controller
// that allocates listener ports.
func NewSharedPorts(mgr ctrl.Manager, r portalloc.Range) *portalloc.Shared {
	if r == (portalloc.Range{}) {
		r = portalloc.DefaultRange
	}
	log := mgr.GetLogger().WithName("portalloc")
	info := func(msg string, kv ...any) { log.Info(msg, kv...) }
	s := portalloc.NewShared(r, mgr.GetAPIReader(), info)
	s.SetSweep(func(ctx context.Context, svcs []corev1.Service) ([]corev1.Service, error) {
		return sweepOrphans(ctx, mgr.GetAPIReader(), mgr.GetClient(), info, svcs)
	})
	return s
}

// hubService returns the LoadBalancer's hub Service from the cache, nil when there is none
// or the Service of its name is not this LoadBalancer's (hubnames.LoadBalancerServiceOf: an
// earlier LoadBalancer's, or someone else's, which the plan reports).
func (r *Reconciler) hubService(ctx context.Context, lb *kubelbv1alpha1.LoadBalancer) (*corev1.Service, error) {
	svc := &corev1.Service{}
	key := client.ObjectKey{Namespace: lb.Namespace, Name: hubnames.LoadBalancerServiceName(lb.Name)}
	if err := r.client.Get(ctx, key, svc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting hub Service %s: %w", key, err)
	}
	if svc, stale, foreign := hubnames.LoadBalancerServiceOf(lb, svc); svc != nil && !stale && !foreign {
		return svc, nil
	}
	return nil, nil
}

// serviceToLoadBalancer maps a hub Service back to its LoadBalancer
// (hubnames.LoadBalancerNamedBy).
func serviceToLoadBalancer(_ context.Context, o client.Object) []reconcile.Request {
	ns, name := hubnames.LoadBalancerNamedBy(o)
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// ingressServiceToLoadBalancers requeues the LoadBalancers of the namespace of the tenant's
// Ingress Service, whose DNS annotation their status reports.
func (r *Reconciler) ingressServiceToLoadBalancers(ctx context.Context, o client.Object) []reconcile.Request {
	return r.loadBalancersIn(ctx, o.GetNamespace())
}

// secretToLoadBalancer maps a hostname certificate Secret to its LoadBalancer (label lb-name).
func secretToLoadBalancer(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[kubelbv1alpha1.LabelLoadBalancerName]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

// loadBalancerKeysIn lists the keys of the LoadBalancers of a namespace from the cache.
func (r *Reconciler) loadBalancerKeysIn(ctx context.Context, namespace string) []types.NamespacedName {
	reqs := r.loadBalancersIn(ctx, namespace)
	keys := make([]types.NamespacedName, len(reqs))
	for i, req := range reqs {
		keys[i] = req.NamespacedName
	}
	return keys
}

// loadBalancersIn lists LoadBalancers of a namespace ("" = all) from the cache.
func (r *Reconciler) loadBalancersIn(ctx context.Context, namespace string) []reconcile.Request {
	return perobject.Requests(ctx, r.client, &kubelbv1alpha1.LoadBalancerList{}, namespace, nil)
}
