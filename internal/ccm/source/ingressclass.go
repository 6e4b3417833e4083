package source

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ssa"
)

// IngressControllerName is the spec.controller of the IngressClass kubelb.
const IngressControllerName = "kubelb.k8c.io/ingress-controller"

// IngressClassReconciler makes the IngressClass kubelb when it is missing (also after it was
// deleted), so that `kubectl get ingressclass` shows who serves class kubelb. An existing
// one is never changed. The ccm owns it, not the chart: it is there whenever the ccm serves
// Ingresses, however the ccm was installed.
//
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingressclasses,verbs=get;list;watch;create
type IngressClassReconciler struct {
	// Tenant reads from the tenant cache and writes to the tenant.
	Tenant client.Client
}

// DesiredIngressClass is the IngressClass kubelb the ccm makes when it is missing.
func DesiredIngressClass() *networkingv1.IngressClass {
	return &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultClass,
			Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}},
		Spec: networkingv1.IngressClassSpec{Controller: IngressControllerName},
	}
}

// Reconcile makes the IngressClass kubelb when it is missing.
func (r *IngressClassReconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	defer func() { res, err = ssa.RetryConflict(res, err) }()
	if req.Name != v1alpha1.DefaultClass {
		return reconcile.Result{}, nil
	}
	err = r.Tenant.Get(ctx, req.NamespacedName, &networkingv1.IngressClass{})
	if !apierrors.IsNotFound(err) {
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("getting IngressClass %s: %w", req.Name, err)
		}
		return reconcile.Result{}, nil
	}
	ic := DesiredIngressClass()
	if err := r.Tenant.Create(ctx, ic); err != nil && !apierrors.IsAlreadyExists(err) {
		return reconcile.Result{}, fmt.Errorf("creating IngressClass %s: %w", ic.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("created IngressClass", "ingressClass", ic.Name)
	return reconcile.Result{}, nil
}

// setupIngressClass adds the IngressClass controller to mgr: one event at start, and the
// deletion of the class kubelb.
func setupIngressClass(mgr ctrl.Manager) error {
	start := make(chan event.TypedGenericEvent[*networkingv1.IngressClass], 1)
	start <- event.TypedGenericEvent[*networkingv1.IngressClass]{Object: DesiredIngressClass()}
	return builder.ControllerManagedBy(mgr).
		Named("ccm-ingressclass").
		For(&networkingv1.IngressClass{}, builder.WithPredicates(onlyDeletes)).
		WatchesRawSource(source.Channel(start, &handler.TypedEnqueueRequestForObject[*networkingv1.IngressClass]{})).
		Complete(&IngressClassReconciler{Tenant: mgr.GetClient()})
}
