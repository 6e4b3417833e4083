package ccm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"kubelb.dev/kubelb/internal/apply"
	"kubelb.dev/kubelb/internal/metrics"
)

// NodeIPReconciler is the standalone node-IP mode (ccm --mode=standalone): it gives every
// LoadBalancer Service the ccm owns the addresses of the Ready nodes of its node set (see
// AssignNodeIPs) in status.loadBalancer.ingress, for kube-proxy to program, and clears the
// addresses it gave a Service that is pending, no longer of type LoadBalancer or no longer of
// our class. The decision covers all Services at once (who came first holds a port), so the
// controller has one key, like the node controller: every Service and Node event leads to
// it, and a burst of changes costs one reconcile.
//
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services/status,verbs=get;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
type NodeIPReconciler struct {
	// Tenant reads from the cluster's cache and writes Service status.
	Tenant client.Client
	// Recorder records Events on Services.
	Recorder events.EventRecorder
	// UseClass limits the ccm to Services of loadBalancerClass kubelb.
	UseClass bool
	// Reserved are ports no Service may take on a node address (--reserved-ports).
	Reserved []PortRange

	mu sync.Mutex
	// pending remembers the last Warning recorded per Service (UID and message), so that a
	// verdict is reported once per change.
	pending map[types.NamespacedName]string
}

// nodeIPKey is the one key of the node-IP controller.
var nodeIPKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "node-ip"}}

// Reconcile lists the Services and Nodes from the cache (the scope), decides the addresses of
// every owned Service (AssignNodeIPs, pure), and patches the status of each Service whose
// status.loadBalancer differs: the addresses, or empty while pending. A Service that is not
// ours any more loses the addresses the ccm gave it. Errors of single Services are joined; the
// others are still written.
func (r *NodeIPReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (res reconcile.Result, err error) {
	start := time.Now()
	defer func() { metrics.CCMNodeReconcile.Observe("", metrics.Result(err), start) }()
	defer func() { res, err = apply.RetryConflict(res, err) }()

	services := &corev1.ServiceList{}
	if err := r.Tenant.List(ctx, services); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing Services: %w", err)
	}
	nodes := &corev1.NodeList{}
	if err := r.Tenant.List(ctx, nodes); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing Nodes: %w", err)
	}
	var owned []*corev1.Service
	for i := range services.Items {
		svc := &services.Items[i]
		if svc.DeletionTimestamp == nil && ServiceClass(svc, r.UseClass) == OurClass {
			owned = append(owned, svc)
		}
	}
	verdicts := AssignNodeIPs(owned, nodes.Items, r.Reserved)
	metrics.CCMNodes.Set(float64(servingLabelledNodes(nodes.Items)))
	given := labelledNodeIPs(nodes.Items)

	seen := make(map[types.NamespacedName]bool, len(owned))
	var errs []error
	for i := range services.Items {
		svc := &services.Items[i]
		key := client.ObjectKeyFromObject(svc)
		v, ours := verdicts[key]
		var want corev1.LoadBalancerStatus
		switch {
		case ours:
			seen[key] = true
			want = v.Status()
			r.report(svc, v)
		case svc.DeletionTimestamp != nil || len(svc.Status.LoadBalancer.Ingress) == 0 || !onlyNodeIPs(svc.Status.LoadBalancer, given):
			// Not ours, and no addresses of ours to take back.
			continue
		}
		if equality.Semantic.DeepEqual(svc.Status.LoadBalancer, want) {
			continue
		}
		orig := svc.DeepCopy()
		svc.Status.LoadBalancer = want
		if err := r.Tenant.Status().Patch(ctx, svc, client.MergeFrom(orig)); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("writing the status of Service %s: %w", key, err))
			continue
		}
		if !ours {
			ctrl.LoggerFrom(ctx).Info("cleared the node addresses of a Service that is no longer ours", "service", key)
		}
	}
	r.forgetExcept(seen)
	return reconcile.Result{}, errors.Join(errs...)
}

// report records a Warning Event on a pending Service once per change of its verdict.
func (r *NodeIPReconciler) report(svc *corev1.Service, v NodeIPVerdict) {
	key := client.ObjectKeyFromObject(svc)
	memo := ""
	if v.Reason != "" {
		memo = string(svc.UID) + "/" + v.Reason + "/" + v.Message
	}
	r.mu.Lock()
	last := r.pending[key]
	if memo == "" {
		delete(r.pending, key)
	} else {
		r.pending[key] = memo
	}
	r.mu.Unlock()
	if memo != "" && memo != last {
		record(r.Recorder, svc, corev1.EventTypeWarning, v.Reason, actionStatus, "%s", v.Message)
	}
}

// forgetExcept forgets the verdicts of Services that are not owned any more.
func (r *NodeIPReconciler) forgetExcept(seen map[types.NamespacedName]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.pending {
		if !seen[k] {
			delete(r.pending, k)
		}
	}
}

// servingLabelledNodes counts the serving nodes of any node set.
func servingLabelledNodes(nodes []corev1.Node) int {
	n := 0
	for i := range nodes {
		if _, ok := nodes[i].Labels[LabelUseAsLoadBalancer]; ok && nodeServes(&nodes[i]) {
			n++
		}
	}
	return n
}

// labelledNodeIPs returns every IP of a node carrying the node-set label, whatever its
// readiness: the addresses the node-IP mode may have given a Service.
func labelledNodeIPs(nodes []corev1.Node) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	for i := range nodes {
		if _, ok := nodes[i].Labels[LabelUseAsLoadBalancer]; !ok {
			continue
		}
		for _, a := range nodes[i].Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil {
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

// nodeIPServiceChanged passes Service events that can change a verdict: creations and
// deletions of Services of type LoadBalancer or with addresses in their status, and updates
// of type, class, ports, IP families, the node-set annotation or status.loadBalancer (a
// status someone else rewrote is put back). Resyncs pass.
var nodeIPServiceChanged = predicate.TypedFuncs[client.Object]{
	CreateFunc: func(e event.TypedCreateEvent[client.Object]) bool { return nodeIPRelevant(e.Object) },
	DeleteFunc: func(e event.TypedDeleteEvent[client.Object]) bool { return nodeIPRelevant(e.Object) },
	UpdateFunc: func(e event.TypedUpdateEvent[client.Object]) bool {
		o, ok1 := e.ObjectOld.(*corev1.Service)
		n, ok2 := e.ObjectNew.(*corev1.Service)
		if !ok1 || !ok2 || !(nodeIPRelevant(o) || nodeIPRelevant(n)) {
			return false
		}
		return o.ResourceVersion == n.ResourceVersion || o.Spec.Type != n.Spec.Type ||
			!equality.Semantic.DeepEqual(o.Spec.LoadBalancerClass, n.Spec.LoadBalancerClass) ||
			!equality.Semantic.DeepEqual(o.Spec.Ports, n.Spec.Ports) ||
			!slices.Equal(o.Spec.IPFamilies, n.Spec.IPFamilies) ||
			o.Annotations[LabelUseAsLoadBalancer] != n.Annotations[LabelUseAsLoadBalancer] ||
			(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
			!equality.Semantic.DeepEqual(o.Status.LoadBalancer, n.Status.LoadBalancer)
	},
}

// nodeIPRelevant tells whether a Service event may concern the node-IP mode.
func nodeIPRelevant(o client.Object) bool {
	svc, ok := o.(*corev1.Service)
	return ok && (svc.Spec.Type == corev1.ServiceTypeLoadBalancer || len(svc.Status.LoadBalancer.Ingress) > 0)
}

// nodeSetChanged passes Node events that can change the selected addresses: creations,
// deletions, resyncs, and updates of readiness, addresses, the node-set and exclusion labels,
// or deletion.
var nodeSetChanged = predicate.TypedFuncs[client.Object]{
	UpdateFunc: func(e event.TypedUpdateEvent[client.Object]) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		if !ok1 || !ok2 || o.ResourceVersion == n.ResourceVersion {
			return true
		}
		ov, oHas := o.Labels[LabelUseAsLoadBalancer]
		nv, nHas := n.Labels[LabelUseAsLoadBalancer]
		return ov != nv || oHas != nHas || nodeChanged.Update(e)
	},
}

// SetupStandalone adds the controllers of the standalone node-IP mode to mgr (a manager on
// the cluster itself; there is no hub): the node-IP controller only.
func SetupStandalone(mgr ctrl.Manager, opts Options) error {
	r := &NodeIPReconciler{
		Tenant:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder(EventSource),
		UseClass: opts.UseLoadBalancerClass,
		Reserved: opts.ReservedPorts,
		pending:  map[types.NamespacedName]string{},
	}
	toKey := func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{nodeIPKey} }
	return builder.ControllerManagedBy(mgr).
		Named("ccm-node-ip").
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(toKey), builder.WithPredicates(nodeIPServiceChanged)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(toKey), builder.WithPredicates(nodeSetChanged)).
		Complete(r)
}
