package source

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/internal/hubschema"
	"kubelb.dev/kubelb/internal/ssa"
)

// Event reasons of the Gateway Service controller.
const (
	// ReasonGatewayServiceConflict: a Service of the Gateway Service's name exists and is not
	// kubelb's, or the name is not a valid Service name.
	ReasonGatewayServiceConflict = "GatewayServiceConflict"
	// ReasonInfrastructureDropped: labels or annotations of spec.infrastructure that the
	// Gateway Service does not carry.
	ReasonInfrastructureDropped = "InfrastructureMetadataDropped"
)

// GatewayServiceReconciler keeps, for each Gateway the ccm serves, a Service in the Gateway's
// namespace (DesiredGatewayService) that resolves to the Gateway's addresses and carries its
// spec.infrastructure labels and annotations, and that Service's EndpointSlices
// (DesiredGatewaySlices). Keyed by Gateway: get → not served, gone or being deleted: delete
// the Service → desired (pure) → apply the Service when drifted (re-made when its type
// changes) → apply the drifted slices under hubnames.FieldOwnerCCM, delete the stale ones. No status: the
// Gateway's is the hub's; what cannot be done is a Warning Event on the Gateway.
//
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch;create;update;patch;delete
type GatewayServiceReconciler struct {
	// Tenant reads from the tenant cache and writes to the tenant.
	Tenant client.Client
	// Recorder records Events on Gateways.
	Recorder events.EventRecorder
	// UseGatewayClass is --use-gateway-class.
	UseGatewayClass bool

	// notes remembers, per Gateway, the last Warning told (one Event per change).
	notes hubschema.Reported
}

// Reconcile brings the Service of one Gateway in line with it.
func (r *GatewayServiceReconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	defer func() { res, err = ssa.RetryConflict(res, err) }()
	gw := &gwapiv1.Gateway{}
	if err := r.Tenant.Get(ctx, req.NamespacedName, gw); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("getting Gateway %s: %w", req.NamespacedName, err)
		}
		r.notes.Forget(req.String())
		return reconcile.Result{}, r.deleteService(ctx, req.NamespacedName)
	}
	served, err := getGatewayServed(ctx, r.Tenant, req.NamespacedName, r.UseGatewayClass)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !served || gw.DeletionTimestamp != nil {
		r.notes.Forget(req.String())
		return reconcile.Result{}, r.deleteService(ctx, req.NamespacedName)
	}
	desired, dropped, ok := DesiredGatewayService(gw)
	if !ok {
		name, _ := GatewayServiceName(gw.Name)
		r.warn(gw, ReasonGatewayServiceConflict, fmt.Sprintf("The Gateway's Service %q cannot be made: not a valid Service name (at most 63 characters); shorten the Gateway's name to reach it by a DNS name in the cluster.", name))
		return reconcile.Result{}, nil
	}
	if len(dropped) > 0 {
		r.warn(gw, ReasonInfrastructureDropped, fmt.Sprintf("Service %s/%s does not carry these spec.infrastructure entries: %s.", desired.Namespace, desired.Name, strings.Join(dropped, ", ")))
	} else {
		r.notes.Forget(req.String())
	}
	svc, err := r.applyService(ctx, gw, desired)
	if err != nil || svc == nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.applySlices(ctx, gw, svc)
}

// warn records a Warning Event on the Gateway when note is new for it.
func (r *GatewayServiceReconciler) warn(gw *gwapiv1.Gateway, reason, note string) {
	if r.notes.Changed(client.ObjectKeyFromObject(gw).String(), string(gw.UID)+reason+note) {
		record(r.Recorder, gw, corev1.EventTypeWarning, reason, "%s", note)
	}
}

// applyService applies the Service when it drifted and returns it as the API server has it;
// nil when a Service of that name is not kubelb's (a Warning Event says so).
func (r *GatewayServiceReconciler) applyService(ctx context.Context, gw *gwapiv1.Gateway, desired *corev1.Service) (*corev1.Service, error) {
	cur := &corev1.Service{}
	err := r.Tenant.Get(ctx, client.ObjectKeyFromObject(desired), cur)
	switch {
	case apierrors.IsNotFound(err):
		cur = nil
	case err != nil:
		return nil, fmt.Errorf("getting Service %s/%s: %w", desired.Namespace, desired.Name, err)
	case !isGatewayService(cur, gw.Name):
		r.warn(gw, ReasonGatewayServiceConflict, fmt.Sprintf("Service %s/%s exists and was not made by kubelb, so the Gateway cannot be reached through it; rename one of them.", cur.Namespace, cur.Name))
		return nil, nil
	case cur.DeletionTimestamp != nil:
		return nil, nil // its delete event brings us back
	case cur.Spec.Type != desired.Spec.Type:
		// From headless to ExternalName and back: made anew rather than converted.
		if err := r.Tenant.Delete(ctx, cur, client.Preconditions{UID: &cur.UID}); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("deleting Service %s/%s to change its type: %w", cur.Namespace, cur.Name, err)
		}
		return nil, nil
	case !gatewayServiceDrifted(cur, desired):
		return cur, nil
	}
	return applyTenantService(ctx, r.Tenant, desired, cur, "Gateway Service")
}

// applySlices applies the drifted EndpointSlices of the Gateway's Service svc and deletes
// the stale ones.
func (r *GatewayServiceReconciler) applySlices(ctx context.Context, gw *gwapiv1.Gateway, svc *corev1.Service) error {
	current := &discoveryv1.EndpointSliceList{}
	if err := r.Tenant.List(ctx, current, client.InNamespace(svc.Namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: GatewaySliceManagedBy}); err != nil {
		return fmt.Errorf("listing the EndpointSlices of Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return syncSlices(ctx, r.Tenant, DesiredGatewaySlices(gw, svc), current.Items)
}

// deleteService deletes the Service of Gateway key when it is kubelb's (its EndpointSlices go
// with it).
func (r *GatewayServiceReconciler) deleteService(ctx context.Context, key types.NamespacedName) error {
	name, ok := GatewayServiceName(key.Name)
	if !ok {
		return nil
	}
	svc := &corev1.Service{}
	if err := r.Tenant.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: name}, svc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !isGatewayService(svc, key.Name) || svc.DeletionTimestamp != nil {
		return nil
	}
	if err := r.Tenant.Delete(ctx, svc, client.Preconditions{UID: &svc.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("deleted Gateway Service", "service", client.ObjectKeyFromObject(svc))
	return nil
}

// setupGatewayServices registers the Gateway Service controller: a Gateway (any change: its
// status has its addresses), its Service and EndpointSlices (repaired when changed or
// deleted), and a GatewayClass (which Gateways are served) enqueue the Gateway.
func setupGatewayServices(mgr ctrl.Manager, r *GatewayServiceReconciler, workers int) error {
	byLabel := func(o client.Object) []reconcile.Request {
		gw := o.GetLabels()[gwapiv1.GatewayNameLabelKey]
		if gw == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: gw}}}
	}
	return builder.ControllerManagedBy(mgr).
		Named("ccm-gatewayservice").
		For(&gwapiv1.Gateway{}).
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.Service{},
			handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, s *corev1.Service) []reconcile.Request {
				if gw := s.Labels[gwapiv1.GatewayNameLabelKey]; gw == "" || !isGatewayService(s, gw) {
					return nil
				}
				return byLabel(s)
			}))).
		WatchesRawSource(source.Kind(mgr.GetCache(), &discoveryv1.EndpointSlice{},
			handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, s *discoveryv1.EndpointSlice) []reconcile.Request {
				if s.Labels[discoveryv1.LabelManagedBy] != GatewaySliceManagedBy {
					return nil
				}
				return byLabel(s)
			}))).
		WatchesRawSource(source.Kind(mgr.GetCache(), &gwapiv1.GatewayClass{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, _ *gwapiv1.GatewayClass) []reconcile.Request {
				list := &gwapiv1.GatewayList{}
				if err := mgr.GetClient().List(ctx, list); err != nil {
					ctrl.LoggerFrom(ctx).Error(err, "listing Gateways")
					return nil
				}
				out := make([]reconcile.Request, 0, len(list.Items))
				for i := range list.Items {
					out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
				}
				return out
			}), predicate.TypedGenerationChangedPredicate[*gwapiv1.GatewayClass]{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}
