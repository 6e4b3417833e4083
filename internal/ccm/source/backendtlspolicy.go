package source

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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

	"kubelb.dev/kubelb/internal/ssa"
)

// indexPolicyTargets: "namespace/name" of every Service a BackendTLSPolicy targets (tenant
// cache); indexPolicyConfigMaps: "namespace/name" of every ConfigMap it names.
const (
	indexPolicyTargets    = "ccm.kubelb.k8c.io/policy-targets"
	indexPolicyConfigMaps = "ccm.kubelb.k8c.io/policy-configmaps"
)

// policyKinds are the route kinds BackendTLSPolicies apply to. A TLSRoute's entries are
// used by the hub for the listeners that terminate TLS (mode Terminate), which re-encrypt
// towards the backend; Passthrough listeners forward the client's own TLS.
var policyKinds = []Kind{HTTPRoute, GRPCRoute, TLSRoute}

// appliesBackendTLS tells whether a kind's backends get the TLS of BackendTLSPolicies.
func appliesBackendTLS(k Kind) bool {
	return slices.ContainsFunc(policyKinds, func(p Kind) bool { return p.Name == k.Name })
}

// CACertOnly is the tenant cache's transform of ConfigMaps: only the key ca.crt is kept (the
// one BackendTLSPolicies read), so caching every ConfigMap of the cluster costs little.
func CACertOnly(o any) (any, error) {
	cm, ok := o.(*corev1.ConfigMap)
	if !ok {
		return o, nil
	}
	ca, has := cm.Data[caCertKey]
	cm.Data, cm.BinaryData = nil, nil
	if has {
		cm.Data = map[string]string{caCertKey: ca}
	}
	cm.ManagedFields = nil
	return cm, nil
}

// policyScope reads what the TLS of the policies targeting the Services of keys depends on:
// the policies (of those Services' namespaces), their verdicts and, when services is set,
// the Services themselves.
func policyScope(ctx context.Context, c client.Reader, keys []types.NamespacedName) ([]*gwapiv1.BackendTLSPolicy, map[types.NamespacedName]PolicyVerdict, error) {
	var policies []*gwapiv1.BackendTLSPolicy
	seen := map[types.NamespacedName]bool{}
	for _, k := range keys {
		list := &gwapiv1.BackendTLSPolicyList{}
		if err := c.List(ctx, list, client.InNamespace(k.Namespace), client.MatchingFields{indexPolicyTargets: k.String()}); err != nil {
			return nil, nil, fmt.Errorf("listing the BackendTLSPolicies of Service %s: %w", k, err)
		}
		for i := range list.Items {
			p := &list.Items[i]
			if key := client.ObjectKeyFromObject(p); !seen[key] {
				seen[key] = true
				policies = append(policies, p)
			}
		}
	}
	verdicts := make(map[types.NamespacedName]PolicyVerdict, len(policies))
	for _, p := range policies {
		v, err := resolvePolicy(ctx, c, p)
		if err != nil {
			return nil, nil, err
		}
		verdicts[client.ObjectKeyFromObject(p)] = v
	}
	return policies, verdicts, nil
}

// resolvePolicy reads the ConfigMaps a policy names and checks them (ResolvePolicy).
func resolvePolicy(ctx context.Context, c client.Reader, p *gwapiv1.BackendTLSPolicy) (PolicyVerdict, error) {
	cms := map[string]*corev1.ConfigMap{}
	for _, r := range p.Spec.Validation.CACertificateRefs {
		if r.Group != "" || r.Kind != "ConfigMap" {
			continue
		}
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: string(r.Name)}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return PolicyVerdict{}, fmt.Errorf("getting ConfigMap %s/%s: %w", p.Namespace, r.Name, err)
		}
		cms[cm.Name] = cm
	}
	return ResolvePolicy(p, cms), nil
}

// PolicyReconciler writes the status of BackendTLSPolicies (ccm-backendtlspolicy, per
// object): get → its namespace's policies that share a target (conflicts), its ConfigMaps
// (ResolvePolicy), the Gateways of the served HTTPRoutes, GRPCRoutes and TLSRoutes that use a target
// (ancestors) → DesiredPolicyStatus (pure) → one status patch when it differs. What the
// routes' Routes carry is decided by the route controllers (DesiredBackendTLS) from the same
// functions.
//
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=backendtlspolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=backendtlspolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
type PolicyReconciler struct {
	Tenant client.Client
	// Recorder records a Warning Event on a policy when its status comes to say that it
	// cannot be used as written (once per status change).
	Recorder        events.EventRecorder
	UseGatewayClass bool
	// Kinds are the route kinds set up (whose indexes exist).
	Kinds []Kind
}

// Reconcile writes one BackendTLSPolicy's status.
func (r *PolicyReconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	defer func() { res, err = ssa.RetryConflict(res, err) }()
	p := &gwapiv1.BackendTLSPolicy{}
	if err := r.Tenant.Get(ctx, req.NamespacedName, p); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if p.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	var targets []types.NamespacedName
	for _, t := range p.Spec.TargetRefs {
		if t.Group == "" && t.Kind == kindService {
			targets = append(targets, types.NamespacedName{Namespace: p.Namespace, Name: string(t.Name)})
		}
	}
	policies, verdicts, err := policyScope(ctx, r.Tenant, targets)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !slices.ContainsFunc(policies, func(o *gwapiv1.BackendTLSPolicy) bool { return o.Name == p.Name }) {
		policies = append(policies, p)
	}
	v, ok := verdicts[req.NamespacedName]
	if !ok {
		if v, err = resolvePolicy(ctx, r.Tenant, p); err != nil {
			return reconcile.Result{}, err
		}
	}
	conflicted, by := PolicyConflicted(p, policies)
	ancestors, err := r.ancestors(ctx, targets)
	if err != nil {
		return reconcile.Result{}, err
	}
	next := DesiredPolicyStatus(p, v, conflicted, by, ancestors, metav1.NewTime(time.Now().Truncate(time.Second)))
	if equality.Semantic.DeepEqual(p.Status, next) {
		return reconcile.Result{}, nil
	}
	updated := p.DeepCopy()
	updated.Status = next
	if err := r.Tenant.Status().Patch(ctx, updated, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{})); err != nil {
		return reconcile.Result{}, fmt.Errorf("writing the status of BackendTLSPolicy %s: %w", req.NamespacedName, err)
	}
	if reason, note := PolicyWarning(v, conflicted, by); reason != "" && policyWarningChanged(p.Status, next) {
		record(r.Recorder, p, corev1.EventTypeWarning, reason, "%s", note)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("wrote the status of BackendTLSPolicy", "ancestors", len(ancestors), "accepted", !conflicted && v.Usable)
	return reconcile.Result{}, nil
}

// PolicyWarning is the Warning a policy's verdict gives (reason "" for none): why its
// backends fail (no usable CA certificate, an unsupported well-known set), why it does not
// apply (Conflicted), or which of its CA certificate references cannot be used.
func PolicyWarning(v PolicyVerdict, conflicted bool, by string) (string, string) {
	switch {
	case conflicted:
		return string(gwapiv1.PolicyReasonConflicted), fmt.Sprintf("BackendTLSPolicy %s takes precedence for the same targets; this one is not applied", by)
	case !v.Usable:
		return v.InvalidReason, v.InvalidMessage
	case !v.Resolved:
		return v.ResolvedReason, v.ResolvedMessage + "; the other CA certificates are used"
	}
	return "", ""
}

// policyWarningChanged tells whether the conditions of kubelb's ancestors differ in status
// or reason between two statuses (a Warning is recorded once per such change; Overridden
// comes and goes without one).
func policyWarningChanged(before, after gwapiv1.PolicyStatus) bool {
	verdict := func(st gwapiv1.PolicyStatus) string {
		for _, a := range st.Ancestors {
			if a.ControllerName == ControllerName {
				var out []string
				for _, c := range a.Conditions {
					if c.Type != PolicyConditionOverridden { // not a warning
						out = append(out, c.Type+"="+string(c.Status)+"/"+c.Reason)
					}
				}
				return strings.Join(out, ",")
			}
		}
		return ""
	}
	return verdict(before) != verdict(after)
}

// ancestors are the served Gateways of the HTTPRoutes, GRPCRoutes and TLSRoutes whose
// backends include one of the Services, sorted.
func (r *PolicyReconciler) ancestors(ctx context.Context, services []types.NamespacedName) ([]gwapiv1.ParentReference, error) {
	var gws []ParentRef
	for _, k := range r.Kinds {
		for _, svc := range services {
			list := k.NewList()
			if err := r.Tenant.List(ctx, list, client.MatchingFields{indexBackends: svc.String()}); err != nil {
				return nil, fmt.Errorf("listing %ss of Service %s: %w", k.String(), svc, err)
			}
			items, err := listObjects(list)
			if err != nil {
				return nil, err
			}
			for _, o := range items {
				for _, pr := range ParentRefs(toUnstructured(o), o.GetNamespace()) {
					if slices.Contains(gws, pr) {
						continue
					}
					served, err := getGatewayServed(ctx, r.Tenant, client.ObjectKey{Namespace: pr.Namespace, Name: pr.Name}, r.UseGatewayClass)
					if err != nil {
						return nil, err
					}
					if served {
						gws = append(gws, pr)
					}
				}
			}
		}
	}
	slices.SortFunc(gws, func(a, b ParentRef) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	out := make([]gwapiv1.ParentReference, 0, len(gws))
	for _, g := range gws {
		out = append(out, GatewayAncestor(g.Namespace, g.Name))
	}
	return out, nil
}

// setupPolicies adds the BackendTLSPolicy status controller: a policy is reconciled when it,
// a policy of its namespace (conflicts), a ConfigMap it names, a route using one of its
// targets, or a Gateway changes.
func setupPolicies(mgr ctrl.Manager, r *PolicyReconciler, workers int) error {
	c := mgr.GetClient()
	policiesWhere := func(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
		list := &gwapiv1.BackendTLSPolicyList{}
		if err := c.List(ctx, list, opts...); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing BackendTLSPolicies")
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return out
	}
	b := builder.ControllerManagedBy(mgr).
		Named("ccm-backendtlspolicy").
		For(&gwapiv1.BackendTLSPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Kind(mgr.GetCache(), &gwapiv1.BackendTLSPolicy{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, p *gwapiv1.BackendTLSPolicy) []reconcile.Request {
				return policiesWhere(ctx, client.InNamespace(p.Namespace))
			}), predicate.TypedGenerationChangedPredicate[*gwapiv1.BackendTLSPolicy]{})).
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.ConfigMap{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, cm *corev1.ConfigMap) []reconcile.Request {
				return policiesWhere(ctx, client.InNamespace(cm.Namespace), client.MatchingFields{indexPolicyConfigMaps: client.ObjectKeyFromObject(cm).String()})
			}))).
		WatchesRawSource(source.Kind(mgr.GetCache(), &gwapiv1.Gateway{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, _ *gwapiv1.Gateway) []reconcile.Request {
				return policiesWhere(ctx)
			}), predicate.TypedGenerationChangedPredicate[*gwapiv1.Gateway]{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers})
	for _, k := range r.Kinds {
		b = b.WatchesRawSource(source.Kind[client.Object](mgr.GetCache(), k.New(),
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				var out []reconcile.Request
				for _, ref := range ObjectRefs(k, toUnstructured(o), o.GetNamespace()) {
					if ref.isService() {
						out = append(out, policiesWhere(ctx, client.InNamespace(ref.Namespace), client.MatchingFields{indexPolicyTargets: ref.Namespace + "/" + ref.Name})...)
					}
				}
				return out
			}), predicate.GenerationChangedPredicate{}))
	}
	return b.Complete(r)
}

// listObjects are the items of a list as client.Objects.
func listObjects(list client.ObjectList) ([]client.Object, error) {
	var out []client.Object
	err := meta.EachListItem(list, func(o runtime.Object) error {
		if co, ok := o.(client.Object); ok {
			out = append(out, co)
		}
		return nil
	})
	return out, err
}
