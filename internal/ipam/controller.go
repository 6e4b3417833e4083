package ipam

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/lbaddress"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/ssa"
	"kubelb.dev/kubelb/internal/textcut"
)

// EventSource is the reporting controller of the address pools' Events.
const EventSource = "kubelb-ipam"

// Options say which Services the address pools serve and which pool each takes from.
type Options struct {
	// Owns tells whether a Service (not being deleted) is one the pools serve.
	Owns func(*corev1.Service) bool
	// Pool names the pool a served Service takes from ("": the default pool). A PoolError
	// leaves the Service pending (ReasonInvalidAddressPool); any other error fails the
	// reconcile, which is retried, and nothing is written.
	Pool func(context.Context, *corev1.Service) (string, error)
	// PoolByNamespace: Pool depends only on the Service's namespace (the hub: the tenant's
	// settings), so it is called once per namespace per decision.
	PoolByNamespace bool
	// Hub: the Services are the manager's hub Services (Input.Hub). The Tenants and the
	// Config are watched too, since they choose the pools.
	Hub bool
	// Name of the controller (its logs); "ipam" when empty.
	Name string
	// Metrics, when set, counts the reconciles, the served Services by reason and the pools'
	// sizes and allocations.
	Metrics *metrics.AddressProvider
}

// PoolError is a Service's choice of pool that cannot be read.
type PoolError struct{ Message string }

func (e *PoolError) Error() string { return e.Message }

// PoolFromAnnotation is the standalone mode's Options.Pool: the annotation
// kubelb.k8c.io/address-pool, which must be an object name when set.
func PoolFromAnnotation(_ context.Context, svc *corev1.Service) (string, error) {
	v := strings.TrimSpace(svc.Annotations[kubelbv1alpha1.AnnotationAddressPool])
	if v == "" {
		return "", nil
	}
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		return "", &PoolError{Message: fmt.Sprintf("The annotation %s: %q is not an AddressPool name: %s",
			kubelbv1alpha1.AnnotationAddressPool, textcut.Cut(v, 70, textcut.Dots), strings.Join(errs, "; "))}
	}
	return v, nil
}

// The rights the address pools need are below. They are granted only where the pools run:
// the manager's chart gives them in a ClusterRole of their own when addressProvider.type is
// ipam (the manager's main role, generated from internal/manager, does not hold them), and
// the ccm's chart in standalone mode with standalone.addressProvider ipam.
//
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=addresspools,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=addresspools/status,verbs=update;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services/status,verbs=get;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler gives the served Services addresses from the AddressPools. The decision covers
// all Services at once (who came first keeps an address), so the controller has one key:
// every relevant Service and AddressPool event leads to it, and a burst costs one reconcile.
type Reconciler struct {
	// Client reads from the cache and writes statuses.
	Client client.Client
	// Writer puts the verdicts on the Services.
	Writer *lbaddress.Writer
	Opts   Options
}

// key is the one key of the controller.
var key = reconcile.Request{NamespacedName: types.NamespacedName{Name: "ipam"}}

// Reconcile lists the Services and AddressPools from the cache, decides every served
// Service's addresses at once (Allocate, pure), writes the verdicts of the Services whose
// status differs, takes back what it gave a Service it no longer serves, and updates the
// pools' status when it changed. Errors of single objects are joined; the others are still
// written.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (res reconcile.Result, err error) {
	start := time.Now()
	defer func() {
		if r.Opts.Metrics != nil {
			r.Opts.Metrics.Reconcile.Observe("", metrics.Result(err), start)
		}
	}()
	defer func() { res, err = ssa.RetryConflict(res, err) }()
	services := &corev1.ServiceList{}
	if err := r.Client.List(ctx, services); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing Services: %w", err)
	}
	pools := &kubelbv1alpha1.AddressPoolList{}
	if err := r.Client.List(ctx, pools); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing AddressPools: %w", err)
	}
	in := Input{Pools: pools.Items, Hub: r.Opts.Hub}
	byNamespace := map[string]Request{}
	for i := range services.Items {
		svc := &services.Items[i]
		if svc.DeletionTimestamp != nil || !r.Opts.Owns(svc) {
			continue
		}
		req, ok := byNamespace[svc.Namespace]
		if !ok || !r.Opts.PoolByNamespace {
			name, err := r.Opts.Pool(ctx, svc)
			var pe *PoolError
			switch {
			case errors.As(err, &pe):
				req = Request{PoolError: pe.Message}
			case err != nil:
				return reconcile.Result{}, fmt.Errorf("choosing the address pool of Service %s/%s: %w", svc.Namespace, svc.Name, err)
			default:
				req = Request{Pool: name}
			}
			byNamespace[svc.Namespace] = req
		}
		req.Service = svc
		in.Services = append(in.Services, req)
	}
	out := Allocate(in)
	if r.Opts.Metrics != nil {
		r.Opts.Metrics.SetServices(lbaddress.CountByReason(out.Verdicts))
		r.Opts.Metrics.SetPools(PoolUsage(pools.Items, out))
	}

	seen := make(map[types.NamespacedName]bool, len(in.Services))
	var errs []error
	for i := range services.Items {
		svc := &services.Items[i]
		k := client.ObjectKeyFromObject(svc)
		if v, ok := out.Verdicts[k]; ok {
			seen[k] = true
			errs = append(errs, r.Writer.Write(ctx, svc, v))
			continue
		}
		if svc.DeletionTimestamp == nil && lbaddress.Serves(svc) {
			// Not served any more: take back the condition, and the addresses when they are
			// the pools' (another implementation's are left alone).
			if err := r.Writer.Clear(ctx, svc, inPools(svc.Status.LoadBalancer, out.Pools)); err != nil {
				errs = append(errs, err)
			} else {
				ctrl.LoggerFrom(ctx).Info("cleared the pool addresses of a Service that is no longer served", "service", k)
			}
		}
	}
	r.Writer.ForgetExcept(seen)
	for i := range pools.Items {
		errs = append(errs, r.writePoolStatus(ctx, &pools.Items[i], out))
	}
	return reconcile.Result{}, errors.Join(errs...)
}

// inPools tells whether a status holds only IPs of the pools (no hostname, no ports): what
// the pools gave.
func inPools(st corev1.LoadBalancerStatus, pools map[string]*Pool) bool {
	for _, in := range st.Ingress {
		a, err := netip.ParseAddr(in.IP)
		if err != nil || in.Hostname != "" || len(in.Ports) > 0 {
			return false
		}
		a = a.Unmap()
		found := false
		for _, p := range pools {
			if found = p.Contains(a); found {
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// PoolUsage is the size and allocated addresses of each family of each pool after a decision
// (the pools' metrics), in the order of pools.
func PoolUsage(pools []kubelbv1alpha1.AddressPool, out Result) []metrics.PoolUsage {
	var usage []metrics.PoolUsage
	for i := range pools {
		name := pools[i].Name
		p := out.Pools[name]
		for f, family := range []string{"IPv4", "IPv6"} {
			if p == nil || !p.Has(f) {
				continue
			}
			size, _ := new(big.Float).SetInt(p.Size(f)).Float64()
			usage = append(usage, metrics.PoolUsage{Pool: name, Family: family, Size: size, Allocated: float64(out.Allocated[name][f])})
		}
	}
	return usage
}

// PoolStatus is the status a pool gets from a decision: its counts per family, Ready (every
// entry readable), and Default when it is marked default.
func PoolStatus(ap *kubelbv1alpha1.AddressPool, out Result) kubelbv1alpha1.AddressPoolStatus {
	st := *ap.Status.DeepCopy()
	st.ObservedGeneration = ap.Generation
	p := out.Pools[ap.Name]
	used := out.Allocated[ap.Name]
	fam := func(f int) *kubelbv1alpha1.AddressPoolFamilyStatus {
		if !p.Has(f) {
			return nil
		}
		return &kubelbv1alpha1.AddressPoolFamilyStatus{Size: p.Size(f).String(), Allocated: used[f]}
	}
	st.IPv4, st.IPv6 = fam(v4), fam(v6)
	ready := metav1.Condition{Type: kubelbv1alpha1.AddressPoolConditionReady, Status: metav1.ConditionTrue,
		Reason: kubelbv1alpha1.AddressPoolReasonValid, Message: "Every entry of spec.addresses is valid.", ObservedGeneration: ap.Generation}
	if len(p.Invalid) > 0 {
		ready.Status, ready.Reason = metav1.ConditionFalse, kubelbv1alpha1.AddressPoolReasonInvalidAddresses
		ready.Message = textcut.Cut(fmt.Sprintf("These entries of spec.addresses are ignored: %s. The pool hands out its other entries' addresses.",
			strings.Join(p.Invalid, "; ")), 1000, textcut.Dots)
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	switch {
	case !ap.Spec.Default:
		meta.RemoveStatusCondition(&st.Conditions, kubelbv1alpha1.AddressPoolConditionDefault)
	case out.Default == ap.Name:
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: kubelbv1alpha1.AddressPoolConditionDefault, Status: metav1.ConditionTrue,
			Reason: kubelbv1alpha1.AddressPoolReasonDefault, Message: "Services that name no pool take their addresses from this one.", ObservedGeneration: ap.Generation})
	default:
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: kubelbv1alpha1.AddressPoolConditionDefault, Status: metav1.ConditionFalse,
			Reason: kubelbv1alpha1.AddressPoolReasonNotDefault, ObservedGeneration: ap.Generation, Message: fmt.Sprintf(
				"AddressPool %q is marked default too and is older (or first by name): Services that name no pool take from it, not from this one.", out.Default)})
	}
	return st
}

// writePoolStatus patches a pool's status when it differs.
func (r *Reconciler) writePoolStatus(ctx context.Context, ap *kubelbv1alpha1.AddressPool, out Result) error {
	want := PoolStatus(ap, out)
	if equality.Semantic.DeepEqual(ap.Status, want) {
		return nil
	}
	orig := ap.DeepCopy()
	ap.Status = want
	if err := r.Client.Status().Patch(ctx, ap, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("writing the status of AddressPool %s: %w", ap.Name, err))
	}
	return nil
}

// serviceChanged passes Service events that can change a decision: those every provider
// watches (lbaddress.ServicePredicate, lbaddress.ServiceChanged), and updates of the IP family
// policy, the pool, address and sharing annotations and spec.loadBalancerIP.
var serviceChanged = lbaddress.ServicePredicate(lbaddress.Relevant, func(o, n *corev1.Service) bool {
	annotations := []string{kubelbv1alpha1.AnnotationAddressPool, kubelbv1alpha1.AnnotationLoadBalancerIPs, kubelbv1alpha1.AnnotationAllowSharedIP}
	return lbaddress.ServiceChanged(o, n) ||
		!equality.Semantic.DeepEqual(o.Spec.IPFamilyPolicy, n.Spec.IPFamilyPolicy) ||
		o.Spec.LoadBalancerIP != n.Spec.LoadBalancerIP ||
		slices.ContainsFunc(annotations, func(k string) bool { return o.Annotations[k] != n.Annotations[k] })
})

// Setup adds the address pool controller to mgr.
func Setup(mgr ctrl.Manager, opts Options) error {
	if opts.Name == "" {
		opts.Name = "ipam"
	}
	r := &Reconciler{Client: mgr.GetClient(), Opts: opts,
		Writer: &lbaddress.Writer{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(EventSource)}}
	toKey := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{key} })
	b := builder.ControllerManagedBy(mgr).
		Named(opts.Name).
		Watches(&corev1.Service{}, toKey, builder.WithPredicates(serviceChanged)).
		Watches(&kubelbv1alpha1.AddressPool{}, toKey, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	if opts.Hub {
		b = b.Watches(&kubelbv1alpha1.Tenant{}, toKey, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
			Watches(&kubelbv1alpha1.Config{}, toKey, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	return b.Complete(r)
}
