package ccm

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/ssa"
)

// NodeReconciler publishes the addresses of the tenant's serving nodes to Addresses/default
// in the tenant's namespace on the hub. Every Node event leads to the same single key, so a
// burst of node changes costs one reconcile.
//
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
type NodeReconciler struct {
	// Tenant reads Nodes from the tenant cache.
	Tenant client.Reader
	// Hub reads from the hub cache and writes to the hub.
	Hub client.Client
	// Namespace is the tenant's namespace on the hub.
	Namespace string
	// AddressType is the configured node address type.
	AddressType string
	// LegacyFieldManager is the field manager of earlier ccm versions' creates and patches
	// of Addresses, whose fields the ccm adopts (see hubApplier).
	LegacyFieldManager string
}

// nodeKey is the one key of the node controller.
var nodeKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: v1alpha1.DefaultAddressesName}}

// Reconcile brings Addresses/default in line with the serving nodes: applied when there are
// addresses and it drifted, deleted when there are none (the CRD needs at least one address,
// and a missing Addresses gives the hub no endpoints, which is the truth). The controller has
// no object of its own: its one key stands for the tenant's nodes, which are its scope with
// Addresses/default as it is.
func (r *NodeReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (res reconcile.Result, err error) {
	start := time.Now()
	defer func() { metrics.CCMNodeReconcile.Observe("", metrics.Result(err), start) }()
	defer func() { res, err = ssa.RetryConflict(res, err) }()

	nodes := &corev1.NodeList{}
	if err := r.Tenant.List(ctx, nodes); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing nodes: %w", err)
	}
	want, serving := NodeAddresses(nodes.Items, r.AddressType)
	metrics.CCMNodes.Set(float64(serving))

	key := client.ObjectKey{Namespace: r.Namespace, Name: v1alpha1.DefaultAddressesName}
	current := &v1alpha1.Addresses{}
	err = r.Hub.Get(ctx, key, current)
	switch {
	case apierrors.IsNotFound(err):
		current = nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("getting Addresses %s: %w", key, err)
	}
	log := ctrl.LoggerFrom(ctx)

	desired := DesiredAddresses(r.Namespace, want)
	if desired == nil {
		if current == nil || current.DeletionTimestamp != nil {
			return reconcile.Result{}, nil
		}
		if err := r.Hub.Delete(ctx, current, client.Preconditions{UID: &current.UID}); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("deleting Addresses %s (no serving nodes): %w", key, err)
		}
		log.Info("no serving nodes; deleted Addresses", "addresses", key)
		return reconcile.Result{}, nil
	}
	if current != nil && current.DeletionTimestamp != nil {
		// Being deleted by someone else: its delete event brings us back to create it anew.
		return reconcile.Result{}, nil
	}
	cur := present(current)
	applier := hubApplier{hub: r.Hub, legacy: r.LegacyFieldManager}
	drifted, err := applier.drifted(cur, desired)
	if err != nil || !drifted {
		return reconcile.Result{}, err
	}
	if err := applier.apply(ctx, cur, desired); err != nil {
		return reconcile.Result{}, fmt.Errorf("applying Addresses %s: %w", key, err)
	}
	what := "updated Addresses"
	if current == nil {
		what = "created Addresses"
	}
	log.Info(what, "addresses", key, "count", len(want))
	return reconcile.Result{}, nil
}

// setupNodeController registers the node controller: Nodes of the tenant and Addresses/default
// on the hub (so that a change made there by someone else is undone) map to the one key.
func setupNodeController(mgr ctrl.Manager, hub cluster.Cluster, hubc client.Client, opts Options) error {
	r := &NodeReconciler{Tenant: mgr.GetClient(), Hub: hubc, Namespace: opts.ClusterName, AddressType: opts.NodeAddressType,
		LegacyFieldManager: ssa.LegacyFieldManager(hub.GetConfig())}
	toKey := func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{nodeKey} }
	addressesToKey := func(_ context.Context, a *v1alpha1.Addresses) []reconcile.Request {
		if a.Name != v1alpha1.DefaultAddressesName {
			return nil
		}
		return []reconcile.Request{nodeKey}
	}
	return builder.ControllerManagedBy(mgr).
		Named("ccm-node").
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(toKey), builder.WithPredicates(nodeChanged)).
		WatchesRawSource(source.Kind(hub.GetCache(), &v1alpha1.Addresses{},
			handler.TypedEnqueueRequestsFromMapFunc(addressesToKey))).
		Complete(r)
}
