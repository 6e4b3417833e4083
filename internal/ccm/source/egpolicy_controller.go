package source

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/envoygatewaycrds"
	"kubelb.dev/kubelb/internal/ssa"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// indexPolicyKinds indexes the policies of each kind by target: trafficTargetKey of every
// object a policy targets (tenant cache; the policy's namespace).
func indexPolicyKinds(ctx context.Context, idx client.FieldIndexer, kinds []*PolicyKind) error {
	for _, k := range kinds {
		if err := idx.IndexField(ctx, k.New(), k.index, func(o client.Object) []string {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				return nil
			}
			var out []string
			for _, t := range trafficpolicy.Targets(trafficSpec(u)) {
				if t.Group == gatewayGroup {
					out = append(out, trafficTargetKey(t.Kind, t.Name))
				}
			}
			return out
		}); err != nil {
			return fmt.Errorf("indexing %ss by target: %w", k.Kind, err)
		}
	}
	return nil
}

// indexBasicAuthSecret indexes SecurityPolicies by the names of the Secrets their basicAuth
// and apiKeyAuth name (SecurityPolicySecretNames; the policy's namespace).
const indexBasicAuthSecret = "ccm.kubelb.k8c.io/security-policy-basic-auth"

// indexBasicAuthSecrets registers indexBasicAuthSecret (tenant cache).
func indexBasicAuthSecrets(ctx context.Context, idx client.FieldIndexer) error {
	if err := idx.IndexField(ctx, SecurityPolicyKind.New(), indexBasicAuthSecret, func(o client.Object) []string {
		if u, ok := o.(*unstructured.Unstructured); ok {
			return SecurityPolicySecretNames(u)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing SecurityPolicies by basicAuth Secret: %w", err)
	}
	return nil
}

// policiesOf lists the policies of the kind of namespace ns targeting the object kind/name
// (the tenant cache, which reads the kind as unstructured objects).
func (k *PolicyKind) policiesOf(ctx context.Context, c client.Reader, ns, kind, name string) ([]*unstructured.Unstructured, error) {
	list := k.NewList()
	if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingFields{k.index: trafficTargetKey(kind, name)}); err != nil {
		return nil, fmt.Errorf("listing the %ss of %s %s/%s: %w", k.Kind, kind, ns, name, err)
	}
	out := make([]*unstructured.Unstructured, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

// carryPolicies puts in a Route's context what obj (a Gateway, an HTTPRoute or a GRPCRoute)
// carries of each policy kind the Reconciler reads (PolicyKind.Desired).
func (r *Reconciler) carryPolicies(ctx context.Context, obj client.Object, c *v1alpha1.SourceContext) error {
	for _, k := range r.PolicyKinds {
		if !k.targets(r.Kind.String()) {
			continue // never targets such objects (a ClientTrafficPolicy, a route)
		}
		policies, err := k.policiesOf(ctx, r.Policies, obj.GetNamespace(), r.Kind.String(), obj.GetName())
		if err != nil {
			return err
		}
		k.carry(c, k.Desired(policies, obj.GetNamespace(), r.Kind.String(), obj.GetName()))
	}
	return nil
}

// TrafficPolicyReconciler writes kubelb's entries of the status of the policies of one of
// Envoy Gateway's kinds (ccm-backendtrafficpolicy, ccm-securitypolicy,
// ccm-clienttrafficpolicy; per object): get → PolicyKind.Read → PolicyKind.CheckBounds
// against the platform team's bounds the hub's TenantState publishes (HubBounds; re-checked
// when they change) → for each target, whether it
// exists and is served by kubelb, the policy that wins it (TrafficWinner) and its ancestors
// (a Gateway; a route's served Gateways) → DesiredTrafficPolicyStatus (pure) → one status
// patch when it differs. A policy none of whose targets kubelb serves gets no entry of
// kubelb's (another implementation's); a target that does not exist gets an ancestor naming
// it, Accepted False, TargetNotFound. What Routes carry is decided by the route controllers
// from the same functions.
//
// +kubebuilder:rbac:groups=gateway.envoyproxy.io,resources=backendtrafficpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.envoyproxy.io,resources=backendtrafficpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=gateway.envoyproxy.io,resources=securitypolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.envoyproxy.io,resources=securitypolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=gateway.envoyproxy.io,resources=clienttrafficpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.envoyproxy.io,resources=clienttrafficpolicies/status,verbs=get;update;patch
type TrafficPolicyReconciler struct {
	// Policy is the kind.
	Policy *PolicyKind
	// Tenant writes to the tenant; Reader reads from the tenant cache (unstructured policies
	// too).
	Tenant client.Client
	Reader client.Reader
	// Recorder records a Warning Event on a policy when its status comes to say that it does
	// not apply (once per status change).
	Recorder        events.EventRecorder
	UseGatewayClass bool
	// Kinds are the route kinds set up (HTTPRoute, GRPCRoute: their objects are read).
	Kinds []Kind
	// Secrets reads the Secrets a SecurityPolicy's basicAuth names from the tenant API server
	// (their data is not cached); nil: not checked.
	Secrets client.Reader
	// Hub reads the tenant's TenantStates in Namespace, the tenant's hub namespace (the hub
	// cache), for the platform team's bounds on policies (HubBounds); nil: not checked.
	Hub       client.Reader
	Namespace string
}

// Reconcile writes one policy's status.
func (r *TrafficPolicyReconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	defer func() { res, err = ssa.RetryConflict(res, err) }()
	p := r.Policy.New()
	if err := r.Reader.Get(ctx, req.NamespacedName, p); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if p.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, nil
	}
	v := r.Policy.Read(p)
	if v.Invalid == "" && r.Hub != nil {
		states := &v1alpha1.TenantStateList{}
		if err := r.Hub.List(ctx, states, client.InNamespace(r.Namespace)); err != nil {
			return reconcile.Result{}, fmt.Errorf("listing the TenantStates of %s: %w", r.Namespace, err)
		}
		v = r.Policy.CheckBounds(v, HubBounds(states.Items))
	}
	if v.Invalid == "" && r.Policy.Kind == trafficpolicy.SecurityKind {
		if v.Unusable, err = securitySecretsProblem(ctx, r.Secrets, v.Value); err != nil {
			return reconcile.Result{}, err
		}
		// The extAuth's Service, from the tenant cache (checked with the Secrets: r.Secrets set).
		if v.Unusable == "" && r.Secrets != nil {
			if v.Unusable, err = extAuthProblem(ctx, r.Reader, v.Value); err != nil {
				return reconcile.Result{}, err
			}
		}
	}
	var ancestors []TrafficAncestor
	for _, t := range trafficpolicy.Targets(trafficSpec(p)) {
		if !r.Policy.servedKind(t) {
			continue // named in v.Invalid
		}
		as, err := r.targetAncestors(ctx, p, t, v)
		if err != nil {
			return reconcile.Result{}, err
		}
		ancestors = append(ancestors, as...)
	}
	ancestors = MergeTrafficAncestors(ancestors)
	next := DesiredTrafficPolicyStatus(p, ancestors, metav1.NewTime(time.Now().Truncate(time.Second)))
	before := ReadPolicyStatus(p)
	if equality.Semantic.DeepEqual(before, next) {
		return reconcile.Result{}, nil
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&next)
	if err != nil {
		return reconcile.Result{}, err
	}
	updated := p.DeepCopy()
	updated.Object["status"] = raw
	if err := r.Tenant.Status().Patch(ctx, updated, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{})); err != nil {
		return reconcile.Result{}, fmt.Errorf("writing the status of %s %s: %w", r.Policy.Kind, req.NamespacedName, err)
	}
	if reason, note := TrafficWarning(ancestors); reason != "" && policyWarningChanged(before, next) {
		record(r.Recorder, p, corev1.EventTypeWarning, reason, "%s", note)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("wrote the status of "+r.Policy.Kind, "ancestors", len(ancestors), "invalid", v.Invalid != "")
	return reconcile.Result{}, nil
}

// targetAncestors are the ancestors of one served target of p with their verdict: the
// Gateway itself, or a route's served Gateways; the target itself when it does not exist;
// none when kubelb does not serve it.
func (r *TrafficPolicyReconciler) targetAncestors(ctx context.Context, p *unstructured.Unstructured, t trafficpolicy.Target, v EGPolicyVerdict) ([]TrafficAncestor, error) {
	ns := p.GetNamespace()
	var refs []gwapiv1.ParentReference
	exists := false
	if t.Kind == kindGateway {
		gw := &gwapiv1.Gateway{}
		if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.Name}, gw); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("getting Gateway %s/%s: %w", ns, t.Name, err)
		} else if err == nil {
			exists = true
			served, err := getGatewayServed(ctx, r.Reader, client.ObjectKey{Namespace: ns, Name: t.Name}, r.UseGatewayClass)
			if err != nil {
				return nil, err
			}
			if served {
				refs = append(refs, GatewayAncestor(ns, t.Name))
			}
		}
	} else {
		for _, k := range r.Kinds {
			if k.String() != t.Kind {
				continue
			}
			o := k.New()
			if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.Name}, o); client.IgnoreNotFound(err) != nil {
				return nil, fmt.Errorf("getting %s %s/%s: %w", t.Kind, ns, t.Name, err)
			} else if err != nil {
				break
			}
			exists = true
			for _, pr := range ParentRefs(toUnstructured(o), ns) {
				served, err := getGatewayServed(ctx, r.Reader, client.ObjectKey{Namespace: pr.Namespace, Name: pr.Name}, r.UseGatewayClass)
				if err != nil {
					return nil, err
				}
				if served {
					refs = append(refs, GatewayAncestor(pr.Namespace, pr.Name))
				}
			}
		}
	}
	what := fmt.Sprintf("%s %s/%s", t.Kind, ns, t.Name)
	if !exists {
		return []TrafficAncestor{{Ref: ObjectAncestor(ns, t.Kind, t.Name), Status: metav1.ConditionFalse,
			Reason: string(gwapiv1.PolicyReasonTargetNotFound), Message: what + " does not exist"}}, nil
	}
	a := TrafficAncestor{Status: metav1.ConditionTrue, Reason: string(gwapiv1.PolicyReasonAccepted),
		Message: "the policy applies to " + what + " on kubelb's Gateways"}
	switch {
	case v.Invalid != "":
		a.Status, a.Reason = metav1.ConditionFalse, string(gwapiv1.PolicyReasonInvalid)
		a.Message = v.Invalid + "; none of the policy applies until then"
	default:
		policies, err := r.Policy.policiesOf(ctx, r.Reader, ns, t.Kind, t.Name)
		if err != nil {
			return nil, err
		}
		if w := TrafficWinner(policies, ns, t.Kind, t.Name); w != nil && w.GetName() != p.GetName() {
			a.Status, a.Reason = metav1.ConditionFalse, string(gwapiv1.PolicyReasonConflicted)
			a.Message = fmt.Sprintf("%s %s/%s, older (or first by name), already targets %s; this one does not apply to it", r.Policy.Kind, ns, w.GetName(), what)
		} else if v.OverBound != "" {
			a.Status, a.Reason = metav1.ConditionFalse, trafficpolicy.ReasonOverPlatformBound
			a.Message = "the policy is over the platform team's bounds: " + v.OverBound + "; none of the policy applies to " + what + " until it is within them"
		} else if v.Unusable != "" {
			a.Status, a.Reason = metav1.ConditionFalse, string(gwapiv1.PolicyReasonInvalid)
			a.Message = v.Unusable + "; the routes of " + what + " answer 500 until then"
		}
	}
	out := make([]TrafficAncestor, 0, len(refs))
	for _, ref := range refs {
		a.Ref = ref
		out = append(out, a)
	}
	return out, nil
}

// setupTrafficPolicies adds the status controller of a policy kind: a policy is reconciled
// when it or a policy of its namespace (conflicts) changes, or a Gateway, a GatewayClass or a
// route of the kinds changes (targets appear, go, change Gateways).
func setupTrafficPolicies(mgr ctrl.Manager, hub cluster.Cluster, r *TrafficPolicyReconciler, workers int) error {
	c := mgr.GetCache()
	policiesWhere := func(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
		list := r.Policy.NewList()
		if err := c.List(ctx, list, opts...); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing "+r.Policy.Kind+"s")
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return out
	}
	inNamespace := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return policiesWhere(ctx, client.InNamespace(o.GetNamespace()))
	})
	b := builder.ControllerManagedBy(mgr).
		Named("ccm-"+strings.ToLower(r.Policy.Kind)).
		For(r.Policy.New(), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Kind[client.Object](c, r.Policy.New(), inNamespace, predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Kind[client.Object](c, &gwapiv1.Gateway{}, inNamespace, predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Kind(c, &gwapiv1.GatewayClass{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, _ *gwapiv1.GatewayClass) []reconcile.Request {
				return policiesWhere(ctx)
			}), predicate.TypedGenerationChangedPredicate[*gwapiv1.GatewayClass]{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers})
	for _, k := range r.Kinds {
		b = b.WatchesRawSource(source.Kind[client.Object](c, k.New(), inNamespace, predicate.GenerationChangedPredicate{}))
	}
	if r.Hub != nil && hub != nil { // the platform team's bounds change on the hub
		b = b.WatchesRawSource(source.Kind(hub.GetCache(), &v1alpha1.TenantState{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, _ *v1alpha1.TenantState) []reconcile.Request {
				return policiesWhere(ctx)
			}), boundsChanged))
	}
	if r.Secrets != nil { // a basicAuth's Secret appears, changes or goes (metadata only)
		secret := &metav1.PartialObjectMetadata{}
		secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		b = b.WatchesRawSource(source.Kind[client.Object](c, secret, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return policiesWhere(ctx, client.InNamespace(o.GetNamespace()), client.MatchingFields{indexBasicAuthSecret: o.GetName()})
		}), predicate.ResourceVersionChangedPredicate{}))
		// an extAuth's Service appears, changes or goes
		b = b.WatchesRawSource(source.Kind[client.Object](c, &corev1.Service{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return policiesWhere(ctx, client.InNamespace(o.GetNamespace()), client.MatchingFields{indexExtAuthService: o.GetName()})
		}), predicate.ResourceVersionChangedPredicate{}))
	}
	return b.Complete(r)
}

// boundsChanged passes the TenantState events that change the bounds on policies (a
// TenantState changes often: rejections, backend health).
var boundsChanged = predicate.TypedFuncs[*v1alpha1.TenantState]{
	UpdateFunc: func(e event.TypedUpdateEvent[*v1alpha1.TenantState]) bool {
		return !equality.Semantic.DeepEqual(e.ObjectOld.Status.TrafficPolicies, e.ObjectNew.Status.TrafficPolicies)
	},
}

// trafficTargetsOfKind are requests for the objects of kind k a policy targets (its
// namespace): their Routes carry the policy.
func trafficTargetsOfKind(k Kind, p client.Object) []reconcile.Request {
	u, ok := p.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	var out []reconcile.Request
	for _, t := range trafficpolicy.Targets(trafficSpec(u)) {
		if t.Group == gatewayGroup && strings.EqualFold(t.Kind, k.String()) && t.Name != "" {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: p.GetNamespace(), Name: t.Name}})
		}
	}
	return out
}

// InstallPolicyCRDs creates each of Envoy Gateway's policy CRDs kubelb reads (of
// envoygatewaycrds.Version, field owner kubelb-ccm) that the tenant does not have, and waits
// until it is established; a CRD already there (Envoy Gateway's own, of any version) is never
// changed. It returns the names of those it created.
func InstallPolicyCRDs(ctx context.Context, c client.Client, reader client.Reader) ([]string, error) {
	crds, err := envoygatewaycrds.All()
	if err != nil {
		return nil, err
	}
	var created []string
	for _, crd := range crds {
		made, err := installAbsentCRD(ctx, c, reader, crd)
		if made {
			created = append(created, crd.Name)
		}
		if err != nil {
			return created, err
		}
	}
	return created, nil
}

// installAbsentCRD creates crd when the cluster has none of its name and waits until it is
// established; it tells whether it created it.
func installAbsentCRD(ctx context.Context, c client.Client, reader client.Reader, crd *apiextensionsv1.CustomResourceDefinition) (bool, error) {
	cur := &apiextensionsv1.CustomResourceDefinition{}
	switch err := reader.Get(ctx, client.ObjectKey{Name: crd.Name}, cur); {
	case err == nil:
		return false, nil
	case !apierrors.IsNotFound(err):
		return false, fmt.Errorf("getting CRD %s: %w", crd.Name, err)
	}
	crd.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	if err := c.Create(ctx, crd, client.FieldOwner(FieldOwner)); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("installing CRD %s: %w", crd.Name, err)
	}
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := reader.Get(ctx, client.ObjectKey{Name: crd.Name}, cur); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		for _, cond := range cur.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return true, fmt.Errorf("waiting for CRD %s to be established: %w", crd.Name, err)
	}
	return true, nil
}
