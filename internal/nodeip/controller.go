package nodeip

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/lbaddress"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/ssa"
)

// EventSource is the reporting controller of the node-IP mode's Events.
const EventSource = "kubelb-node-ip"

// LabelNATShadowOf marks a 1:1 NAT shadow Service with the name of the LoadBalancer Service
// it serves (same namespace).
const LabelNATShadowOf = "kubelb.k8c.io/nat-shadow-of"

// ReasonNATServiceNameTaken (Warning): the name of a Service's NAT shadow is taken by a Service
// kubelb did not make; it is left alone, and the Service has its addresses without a shadow.
const ReasonNATServiceNameTaken = "NATServiceNameTaken"

// ReasonNATServiceRejected (Warning): the API server refused a Service's NAT shadow (invalid, or
// forbidden by admission such as the DenyServiceExternalIPs plugin); the Service has its
// addresses without a shadow, and the shadow is tried again every natRetry.
const ReasonNATServiceRejected = "NATServiceRejected"

// natRetry is how long a refused NAT shadow waits before it is tried again (an admission
// policy may change without any object kubelb watches changing).
const natRetry = 5 * time.Minute

// Options configure the node-IP controller for where it runs.
type Options struct {
	// Name of the controller.
	Name string
	// Owns tells which Services the mode serves (the ccm's class rule; in the hub, kubelb's
	// hub Services of the provider's class).
	Owns func(*corev1.Service) bool
	// NodeSet names the node set of a served Service (a standalone ccm: its annotation; the
	// hub: its tenant's spec.loadBalancer.nodeSet, never anything the tenant wrote).
	NodeSet func(context.Context, *corev1.Service) (string, error)
	// Hub: the Services are hub Services of several tenants: messages never name a Service of
	// another namespace, only Services with the condition are cleared, Tenants and the Config
	// are watched (they choose the node sets), and NodeSet depends on the namespace only (it
	// is asked once per namespace).
	Hub bool
	// Reserved are ports no Service may take on a node address (--reserved-ports).
	Reserved []PortRange
	// NAT keeps a 1:1 NAT shadow Service per served Service whose nodes have private
	// addresses other than their public ones (--node-ip-nat).
	NAT bool
	// Metrics, when set, counts the reconciles and the served Services by reason.
	Metrics *metrics.AddressProvider
	// Observe, when set, is told the number of serving labelled nodes after every decision.
	Observe func(servingNodes int)
}

// The rights the node-IP mode needs (package-level markers: controller-gen generates
// config/components/node-ip/role.yaml from them; the charts grant the same).
//
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services/status,verbs=get;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler gives every Service the mode serves the addresses of the Ready nodes of its node
// set (see AssignNodeIPs) in status.loadBalancer.ingress, for kube-proxy to program, with the
// condition kubelb.k8c.io/AddressAssigned; a pending Service gets the condition False and a
// Warning Event. It takes back what it gave a Service it no longer serves, and keeps the NAT
// shadow Services. The decision covers all Services at once (who came first holds a port), so
// the controller has one key: every relevant Service and Node event leads to it, and a burst
// of changes costs one reconcile.
type Reconciler struct {
	// Client reads from the cluster's cache and writes Services and their status.
	Client   client.Client
	Recorder events.EventRecorder
	Writer   *lbaddress.Writer
	Opts     Options

	// natWarnings records each Service's NAT shadow problem once per change.
	natWarnings lbaddress.Warnings
}

// key is the one key of the node-IP controller.
var key = reconcile.Request{NamespacedName: types.NamespacedName{Name: "node-ip"}}

// Reconcile lists the Services and Nodes from the cache (the scope), decides the addresses of
// every served Service (AssignNodeIPs, pure), writes each verdict whose status differs, and
// keeps the NAT shadows in line. Errors of single Services are joined; the others are still
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
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing Nodes: %w", err)
	}
	var owned []*corev1.Service
	sets := map[types.NamespacedName]string{}
	setErrs := map[types.NamespacedName]error{}
	// In the hub the node set is the tenant's: read once per namespace, not per Service.
	type nsSet struct {
		set string
		err error
	}
	byNamespace := map[string]nsSet{}
	for i := range services.Items {
		svc := &services.Items[i]
		if svc.DeletionTimestamp != nil || !r.Opts.Owns(svc) {
			continue
		}
		owned = append(owned, svc)
		k := client.ObjectKeyFromObject(svc)
		if m, ok := byNamespace[svc.Namespace]; ok && r.Opts.Hub {
			sets[k], setErrs[k] = m.set, m.err
			continue
		}
		sets[k], setErrs[k] = r.Opts.NodeSet(ctx, svc)
		byNamespace[svc.Namespace] = nsSet{sets[k], setErrs[k]}
	}
	setOf := func(svc *corev1.Service) (string, error) {
		k := client.ObjectKeyFromObject(svc)
		return sets[k], setErrs[k]
	}
	verdicts := AssignNodeIPs(owned, nodes.Items, r.Opts.Reserved, setOf, r.Opts.Hub)
	if r.Opts.Metrics != nil {
		r.Opts.Metrics.SetServices(lbaddress.CountByReason(verdicts))
	}
	if r.Opts.Observe != nil {
		r.Opts.Observe(servingLabelledNodes(nodes.Items))
	}
	given := labelledNodeIPs(nodes.Items)

	seen := make(map[types.NamespacedName]bool, len(owned))
	shadows := map[types.NamespacedName]*corev1.Service{} // shadow Services by their LB Service
	var errs []error
	retry := false
	for i := range services.Items {
		svc := &services.Items[i]
		if of, ok := svc.Labels[LabelNATShadowOf]; ok && hubnames.IsManaged(svc) {
			shadows[types.NamespacedName{Namespace: svc.Namespace, Name: of}] = svc
		}
	}
	for i := range services.Items {
		svc := &services.Items[i]
		k := client.ObjectKeyFromObject(svc)
		v, ours := verdicts[k]
		switch {
		case ours:
			seen[k] = true
			if err := r.Writer.Write(ctx, svc, v.Verdict); err != nil {
				errs = append(errs, err)
			}
			if r.Opts.NAT && !v.Pending() && len(v.Private) > 0 {
				refused, err := r.keepShadow(ctx, svc, v.Private, shadows[k], services.Items)
				if err != nil {
					errs = append(errs, err)
				}
				retry = retry || refused
				delete(shadows, k)
			}
		case svc.DeletionTimestamp != nil:
		case lbaddress.Serves(svc):
			if err := r.Writer.Clear(ctx, svc, onlyNodeIPs(svc.Status.LoadBalancer, given)); err != nil {
				errs = append(errs, err)
			}
		case !r.Opts.Hub && len(svc.Status.LoadBalancer.Ingress) > 0 && onlyNodeIPs(svc.Status.LoadBalancer, given) && svc.Labels[LabelNATShadowOf] == "":
			// What a standalone ccm of an earlier version gave a Service it no longer serves.
			if err := r.Writer.Clear(ctx, svc, true); err != nil {
				errs = append(errs, err)
			}
			ctrl.LoggerFrom(ctx).Info("cleared the node addresses of a Service that is no longer ours", "service", k)
		}
	}
	// The shadows left serve nothing: their Service is pending, gone or not served.
	for _, sh := range shadows {
		if err := r.Client.Delete(ctx, sh, client.Preconditions{UID: &sh.UID}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting NAT shadow Service %s/%s: %w", sh.Namespace, sh.Name, err))
		}
	}
	r.Writer.ForgetExcept(seen)
	r.natWarnings.ForgetExcept(seen)
	if retry {
		return reconcile.Result{RequeueAfter: natRetry}, errors.Join(errs...)
	}
	return reconcile.Result{}, errors.Join(errs...)
}

// servingLabelledNodes counts the serving nodes of any node set.
func servingLabelledNodes(nodes []corev1.Node) int {
	n := 0
	for i := range nodes {
		if _, ok := nodes[i].Labels[LabelUseAsLoadBalancer]; ok && NodeServes(&nodes[i]) {
			n++
		}
	}
	return n
}

// labelledNodeIPs returns every IP of a node carrying the node-set label, whatever its
// readiness, with the public addresses of its annotation: the addresses the node-IP mode may
// have given a Service.
func labelledNodeIPs(nodes []corev1.Node) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	for i := range nodes {
		n := &nodes[i]
		if _, ok := n.Labels[LabelUseAsLoadBalancer]; !ok {
			continue
		}
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				out[ip.Unmap()] = true
			}
		}
		for _, item := range strings.Split(n.Annotations[AnnotationPublicAddresses], ",") {
			if ip, err := netip.ParseAddr(strings.TrimSpace(item)); err == nil {
				out[ip.Unmap()] = true
			}
		}
	}
	return out
}

// onlyNodeIPs tells whether a status holds only IPs of labelled nodes (and no hostnames or
// ports): the mark of what the node-IP mode wrote, so that a Service that stopped being ours
// loses them, while what another implementation wrote is left alone.
func onlyNodeIPs(st corev1.LoadBalancerStatus, given map[netip.Addr]bool) bool {
	for _, in := range st.Ingress {
		ip, err := netip.ParseAddr(in.IP)
		if err != nil || in.Hostname != "" || len(in.Ports) > 0 || !given[ip.Unmap()] {
			return false
		}
	}
	return true
}

// serviceChanged passes Service events that can change a verdict: those every provider
// watches (lbaddress.ServicePredicate, lbaddress.ServiceChanged), the events of NAT shadow
// Services, and updates of the selector, the external IPs or the node-set annotation.
var serviceChanged = lbaddress.ServicePredicate(relevant, func(o, n *corev1.Service) bool {
	return lbaddress.ServiceChanged(o, n) ||
		!equality.Semantic.DeepEqual(o.Spec.Selector, n.Spec.Selector) ||
		!slices.Equal(o.Spec.ExternalIPs, n.Spec.ExternalIPs) ||
		o.Annotations[LabelUseAsLoadBalancer] != n.Annotations[LabelUseAsLoadBalancer]
})

// relevant tells whether a Service may concern the node-IP mode.
func relevant(svc *corev1.Service) bool {
	return lbaddress.Relevant(svc) || svc.Labels[LabelNATShadowOf] != ""
}

// Setup adds the node-IP controller to mgr (a manager on the cluster whose Services it
// serves).
func Setup(mgr ctrl.Manager, opts Options) error {
	if opts.Name == "" {
		opts.Name = "node-ip"
	}
	rec := mgr.GetEventRecorder(EventSource)
	r := &Reconciler{Client: mgr.GetClient(), Recorder: rec, Opts: opts,
		Writer: &lbaddress.Writer{Client: mgr.GetClient(), Recorder: rec}}
	toKey := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{key} })
	b := builder.ControllerManagedBy(mgr).
		Named(opts.Name).
		Watches(&corev1.Service{}, toKey, builder.WithPredicates(serviceChanged)).
		Watches(&corev1.Node{}, toKey, builder.WithPredicates(nodeSetChanged))
	if opts.Hub {
		b = b.Watches(&kubelbv1alpha1.Tenant{}, toKey, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
			Watches(&kubelbv1alpha1.Config{}, toKey, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	return b.Complete(r)
}
