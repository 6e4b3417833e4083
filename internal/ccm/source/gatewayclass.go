package source

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/ssa"
	"kubelb.dev/kubelb/internal/textcut"
)

// GatewayClassReconciler keeps the GatewayClass kubelb (made with kubelb's controllerName when
// missing; an existing one is never changed) and sets Accepted (ClassAccepted: True only
// when the hub answers and serves the tenant's Gateway API objects) and the supported
// features (SupportedFeatures) on every GatewayClass of kubelb's controllerName.
//
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gatewayclasses,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gatewayclasses/status,verbs=get;update;patch
type GatewayClassReconciler struct {
	// Tenant reads from the tenant cache and writes to the tenant.
	Tenant client.Client
	// Hub reads the tenant's TenantStates straight from the hub (not a cache: whether the
	// hub answers is part of the verdict); Namespace is the tenant's namespace there.
	Hub       client.Reader
	Namespace string
}

// retryHub is how soon a GatewayClass that is not Accepted because the hub did not answer
// is looked at again; recheckHub how soon an Accepted one is (a hub that stops answering
// later makes it Pending then: one List of the tenant's TenantStates a minute).
const (
	retryHub   = 30 * time.Second
	recheckHub = time.Minute
)

// ReasonClassDisabled is the reason of Accepted=False when the hub's platform team disabled
// Gateway API for the tenant.
const ReasonClassDisabled = "Disabled"

// ClassAccepted is the Accepted condition of kubelb's GatewayClasses (pure): Pending when
// the hub's TenantStates could not be read (readErr), False (ReasonClassDisabled, with the
// hub's message) when a TenantState says the hub does not serve the tenant's Gateway API
// objects, True otherwise.
func ClassAccepted(states []v1alpha1.TenantState, readErr error, generation int64) metav1.Condition {
	c := metav1.Condition{Type: string(gwapiv1.GatewayClassConditionStatusAccepted), ObservedGeneration: generation,
		Status: metav1.ConditionTrue, Reason: string(gwapiv1.GatewayClassReasonAccepted), Message: "Gateways of this class are served by kubelb."}
	if readErr != nil {
		c.Status, c.Reason = metav1.ConditionFalse, string(gwapiv1.GatewayClassReasonPending)
		c.Message = textcut.Cut("The management cluster does not answer ("+readErr.Error()+"); check the ccm's hub kubeconfig and the hub's reachability (kubectl kubelb check tenant).", maxProblemNote, textcut.Dots)
		return c
	}
	for i := range states {
		if gw := meta.FindStatusCondition(states[i].Status.Conditions, v1alpha1.TenantStateConditionGatewayAPI); gw != nil && gw.Status == metav1.ConditionFalse {
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonClassDisabled, gw.Message
			return c
		}
	}
	return c
}

// DesiredGatewayClass is the GatewayClass kubelb the ccm makes when it is missing.
func DesiredGatewayClass() *gwapiv1.GatewayClass {
	return &gwapiv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultClass,
			Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}},
		Spec: gwapiv1.GatewayClassSpec{
			ControllerName: ControllerName,
			Description:    ptr.To("Served by kubelb (mirrored to the management cluster)."),
		},
	}
}

// Reconcile makes the GatewayClass kubelb when it is missing, and accepts a class of kubelb's
// controllerName.
func (r *GatewayClassReconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	start := time.Now()
	defer func() { metrics.CCMGatewayClassReconcile.Observe("", metrics.Result(err), start) }()
	defer func() { res, err = ssa.RetryConflict(res, err) }()

	gc := &gwapiv1.GatewayClass{}
	if err := r.Tenant.Get(ctx, req.NamespacedName, gc); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("getting GatewayClass %s: %w", req.Name, err)
		}
		if req.Name != v1alpha1.DefaultClass {
			return reconcile.Result{}, nil
		}
		gc = DesiredGatewayClass()
		if err := r.Tenant.Create(ctx, gc); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, fmt.Errorf("creating GatewayClass %s: %w", gc.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("created GatewayClass", "gatewayClass", gc.Name)
		return reconcile.Result{}, nil // its create event brings us back to accept it
	}
	if gc.Spec.ControllerName != ControllerName {
		return reconcile.Result{}, nil
	}
	states := &v1alpha1.TenantStateList{}
	readErr := r.Hub.List(ctx, states, client.InNamespace(r.Namespace))
	if meta.IsNoMatchError(readErr) || apierrors.IsNotFound(readErr) {
		readErr = nil // a hub without TenantStates answered: it allows everything
	}
	res.RequeueAfter = recheckHub
	if readErr != nil {
		res.RequeueAfter = retryHub
	}
	orig := gc.DeepCopy()
	changed := meta.SetStatusCondition(&gc.Status.Conditions, ClassAccepted(states.Items, readErr, gc.Generation))
	if want := supportedFeaturesStatus(); !slices.Equal(gc.Status.SupportedFeatures, want) {
		gc.Status.SupportedFeatures = want
		changed = true
	}
	if !changed {
		return res, nil
	}
	if err := r.Tenant.Status().Patch(ctx, gc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return reconcile.Result{}, fmt.Errorf("writing the status of GatewayClass %s: %w", gc.Name, err)
	}
	return res, nil
}
