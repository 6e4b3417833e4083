package ccm

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// StatusReconciler copies the hub's LoadBalancer.status.loadBalancer onto the tenant Service's
// status.loadBalancer. It has its own queue and workers, so a status change is never queued
// behind a backlog of mirror work; it only reads caches and writes only when the status
// differs.
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
}

// Reconcile copies the status of one Service's mirror onto it.
func (r *StatusReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	svc := &corev1.Service{}
	if err := r.Tenant.Get(ctx, req.NamespacedName, svc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	// Only Services we mirror (they carry our finalizer); releasing is the mirror
	// controller's job.
	if ServiceClass(svc, r.UseClass) != OurClass || svc.DeletionTimestamp != nil ||
		!controllerutil.ContainsFinalizer(svc, v1alpha1.CleanupFinalizer) {
		return reconcile.Result{}, nil
	}
	lb := &v1alpha1.LoadBalancer{}
	if err := r.Hub.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: string(svc.UID)}, lb); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading LoadBalancer %s/%s: %w", r.Namespace, svc.UID, err)
	}
	if equality.Semantic.DeepEqual(svc.Status.LoadBalancer, lb.Status.LoadBalancer) {
		return reconcile.Result{}, nil
	}
	orig := svc.DeepCopy()
	svc.Status.LoadBalancer = *lb.Status.LoadBalancer.DeepCopy()
	if err := r.Tenant.Status().Patch(ctx, svc, client.MergeFrom(orig)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("copying the status of LoadBalancer %s/%s to Service %s: %w", r.Namespace, lb.Name, req.NamespacedName, err))
	}
	return reconcile.Result{}, nil
}
