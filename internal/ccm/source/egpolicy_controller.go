package source

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/envoygatewaycrds"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ssa"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// indexBasicAuthSecret indexes SecurityPolicies by the names of the Secrets their basicAuth
// and apiKeyAuth name (SecurityPolicySecretNames; the policy's namespace).
const indexBasicAuthSecret = "ccm.kubelb.k8c.io/security-policy-basic-auth"

// selectorKey is the index key of the policies with a targetSelector of kind (their
// namespace): "selector:Kind".
func selectorKey(kind string) string { return "selector:" + kind }

// policiesOf lists the policies of the kind of namespace ns that may target the object
// kind/name: by a targetRef naming it (the whole object or a section) or by a targetSelector
// of its kind (which the object's labels may not match: targetsObject tells). The tenant
// cache reads the kind as unstructured objects.
func (k *PolicyKind) policiesOf(ctx context.Context, c client.Reader, ns, kind, name string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, key := range []string{trafficTargetKey(kind, name), selectorKey(kind)} {
		list := k.NewList()
		if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingFields{k.index: key}); err != nil {
			return nil, fmt.Errorf("listing the %ss of %s %s/%s: %w", k.Kind, kind, ns, name, err)
		}
		for i := range list.Items {
			if !slices.ContainsFunc(out, func(o *unstructured.Unstructured) bool { return o.GetName() == list.Items[i].GetName() }) {
				out = append(out, &list.Items[i])
			}
		}
	}
	return out, nil
}

// listKind is an empty list of the objects of kind a policy may target (nil: none of kinds).
func listKind(kind string, kinds []Kind) client.ObjectList {
	if kind == kindGateway {
		return Gateway.NewList()
	}
	for _, k := range kinds {
		if k.String() == kind {
			return k.NewList()
		}
	}
	return nil
}

// selected lists the objects p's targetSelectors select (of its namespace, of the kinds
// kubelb serves for the policy's kind; kinds: the route kinds set up), sorted by kind and
// name, without duplicates.
func (k *PolicyKind) selected(ctx context.Context, c client.Reader, p *unstructured.Unstructured, kinds []Kind) ([]PolicyTarget, error) {
	selectors, _ := trafficpolicy.Selectors(trafficSpec(p))
	var out []PolicyTarget
	for _, s := range selectors {
		if s.Group != gatewayGroup || !k.targets(s.Kind) {
			continue
		}
		list := listKind(s.Kind, kinds)
		if list == nil {
			continue
		}
		if err := c.List(ctx, list, client.InNamespace(p.GetNamespace()), client.MatchingLabelsSelector{Selector: s.Labels}); err != nil {
			return nil, fmt.Errorf("listing the %ss %s %s/%s selects: %w", s.Kind, k.Kind, p.GetNamespace(), p.GetName(), err)
		}
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			if obj, ok := o.(client.Object); ok {
				t := PolicyTarget{Kind: s.Kind, Name: obj.GetName(), Labels: obj.GetLabels()}
				if !slices.ContainsFunc(out, func(x PolicyTarget) bool { return x.Kind == t.Kind && x.Name == t.Name }) {
					out = append(out, t)
				}
			}
			return nil
		})
	}
	slices.SortFunc(out, func(a, b PolicyTarget) int {
		return cmp.Or(strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
	return out, nil
}

// OverSelected is why policy p cannot be used when its targetSelectors select more than
// trafficpolicy.MaxSelected objects (selected: SelectedTargets), "" when they do not.
func OverSelected(selected []PolicyTarget) string {
	if len(selected) <= trafficpolicy.MaxSelected {
		return ""
	}
	return fmt.Sprintf("the targetSelectors select %d objects; at most %d: narrow them (labels, matchExpressions) or use targetRefs",
		len(selected), trafficpolicy.MaxSelected)
}

// readSelected is k.Read(p), Invalid also when p's targetSelectors select too many objects.
func (k *PolicyKind) readSelected(ctx context.Context, c client.Reader, p *unstructured.Unstructured, kinds []Kind) (EGPolicyVerdict, []PolicyTarget, error) {
	v := k.Read(p)
	if v.Invalid != "" {
		return v, nil, nil
	}
	sel, err := k.selected(ctx, c, p, kinds)
	if err != nil {
		return v, nil, err
	}
	if over := OverSelected(sel); over != "" {
		return EGPolicyVerdict{Invalid: over}, sel, nil
	}
	return v, sel, nil
}

// carryPolicies puts in a Route's context what obj (a Gateway or a route;
// u unstructured) carries of each policy kind the Reconciler reads (PolicyKind.DesiredOf):
// for the whole object and for each of its sections (listeners, named rules). A policy whose
// targetSelectors select too many objects applies to none.
func (r *Reconciler) carryPolicies(ctx context.Context, obj client.Object, u map[string]any, c *v1alpha1.SourceContext) error {
	sections := ObjectSections(r.Kind.String(), u)
	o := PolicyTarget{Kind: r.Kind.String(), Name: obj.GetName(), Labels: obj.GetLabels()}
	for _, k := range r.PolicyKinds {
		if !k.targets(r.Kind.String()) {
			continue // never targets such objects (a ClientTrafficPolicy, a route)
		}
		policies, err := k.policiesOf(ctx, r.Policies, obj.GetNamespace(), r.Kind.String(), obj.GetName())
		if err != nil {
			return err
		}
		var readErr error
		read := func(p *unstructured.Unstructured) EGPolicyVerdict {
			v, _, err := k.readSelected(ctx, r.Policies, p, r.PolicyTargetKinds)
			readErr = cmp.Or(readErr, err)
			return k.ForKind(v, r.Kind.String()) // a TCPRoute's policy with HTTP features: none of it

		}
		whole, secs := k.DesiredOf(policies, obj.GetNamespace(), o, sections, read)
		if readErr != nil {
			return readErr
		}
		k.CarryOf(c, whole, secs)
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
	// Kinds are the route kinds set up (HTTPRoute, GRPCRoute, TLSRoute, TCPRoute, UDPRoute: their objects are read).
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
	v, selected, err := r.Policy.readSelected(ctx, r.Reader, p, r.Kinds)
	if err != nil {
		return reconcile.Result{}, err
	}
	var bounds *trafficpolicy.Bounds // the platform team's, nil: not checked
	if v.Invalid == "" && r.Hub != nil {
		states := &v1alpha1.TenantStateList{}
		if err := r.Hub.List(ctx, states, client.InNamespace(r.Namespace)); err != nil {
			return reconcile.Result{}, fmt.Errorf("listing the TenantStates of %s: %w", r.Namespace, err)
		}
		bounds = HubBounds(states.Items)
		v = r.Policy.CheckBounds(v, bounds)
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
	var targets []PolicyTarget
	for _, t := range trafficpolicy.Targets(trafficSpec(p)) {
		if r.Policy.servedKind(t) { // others: named in v.Invalid
			targets = append(targets, PolicyTarget{Kind: t.Kind, Name: t.Name, Section: t.SectionName})
		}
	}
	if len(selected) > trafficpolicy.MaxSelected { // the first ones carry the verdict
		selected = selected[:trafficpolicy.MaxSelected]
	}
	for _, t := range selected {
		if !slices.ContainsFunc(targets, func(x PolicyTarget) bool { return x.Kind == t.Kind && x.Name == t.Name && x.Section == "" }) {
			targets = append(targets, t)
		}
	}
	var ancestors []TrafficAncestor
	for _, t := range targets {
		as, err := r.targetAncestors(ctx, p, t, v, bounds)
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
// none when kubelb does not serve it. bounds are the platform team's (nil: not checked).
func (r *TrafficPolicyReconciler) targetAncestors(ctx context.Context, p *unstructured.Unstructured, t PolicyTarget, v EGPolicyVerdict, bounds *trafficpolicy.Bounds) ([]TrafficAncestor, error) {
	ns := p.GetNamespace()
	var refs []gwapiv1.ParentReference
	exists := false
	var sections []string // the object's
	if t.Kind == kindGateway {
		gw := &gwapiv1.Gateway{}
		if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.Name}, gw); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("getting Gateway %s/%s: %w", ns, t.Name, err)
		} else if err == nil {
			exists = true
			t.Labels, sections = gw.Labels, ObjectSections(kindGateway, toUnstructured(gw))
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
			u := toUnstructured(o)
			t.Labels, sections = o.GetLabels(), ObjectSections(t.Kind, u)
			for _, pr := range ParentRefs(u, ns) {
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
	what := t.String(ns)
	if !exists {
		return []TrafficAncestor{{Ref: ObjectAncestor(ns, t.Kind, t.Name), Status: metav1.ConditionFalse,
			Reason: string(gwapiv1.PolicyReasonTargetNotFound), Message: fmt.Sprintf("%s %s/%s does not exist", t.Kind, ns, truncateName(t.Name))}}, nil
	}
	if t.Section != "" && !slices.Contains(sections, t.Section) {
		// As Envoy Gateway: the policy does not attach (TargetNotFound), under the object's
		// ancestors.
		a := TrafficAncestor{Status: metav1.ConditionFalse, Reason: string(gwapiv1.PolicyReasonTargetNotFound),
			Message: fmt.Sprintf("no section named %s found for %s %s/%s: it has no %s of that name (sectionName names a Gateway's listener, a route's rule by spec.rules[].name)",
				truncateName(t.Section), t.Kind, ns, truncateName(t.Name), sectionWord(t.Kind))}
		if len(refs) == 0 {
			refs = append(refs, ObjectAncestor(ns, t.Kind, t.Name))
		}
		out := make([]TrafficAncestor, 0, len(refs))
		for _, ref := range refs {
			a.Ref = ref
			out = append(out, a)
		}
		return out, nil
	}
	a := TrafficAncestor{Status: metav1.ConditionTrue, Reason: string(gwapiv1.PolicyReasonAccepted),
		Message: "the policy applies to " + what + " on kubelb's Gateways"}
	v = r.Policy.ForKind(v, t.Kind) // HTTP features on a TLSRoute, TCPRoute or UDPRoute: Invalid there
	switch {
	case v.Invalid != "":
		a.Status, a.Reason = metav1.ConditionFalse, string(gwapiv1.PolicyReasonInvalid)
		a.Message = v.Invalid + "; none of the policy applies until then"
	default:
		policies, err := r.Policy.policiesOf(ctx, r.Reader, ns, t.Kind, t.Name)
		if err != nil {
			return nil, err
		}
		if w := TrafficWinnerOf(policies, ns, t); w != nil && w.GetName() != p.GetName() {
			a.Status, a.Reason = metav1.ConditionFalse, string(gwapiv1.PolicyReasonConflicted)
			a.Message = fmt.Sprintf("%s %s/%s, older (or first by name), already targets %s; this one does not apply to it", r.Policy.Kind, ns, w.GetName(), what)
		} else if v.OverBound != "" {
			a.Status, a.Reason = metav1.ConditionFalse, trafficpolicy.ReasonOverPlatformBound
			a.Message = "the policy is over the platform team's bounds: " + v.OverBound + "; none of the policy applies to " + what + " until it is within them"
		} else if v.Unusable != "" {
			a.Status, a.Reason = metav1.ConditionFalse, string(gwapiv1.PolicyReasonInvalid)
			a.Message = v.Unusable + "; the routes of " + what + " answer 500 until then"
		} else if a.OverriddenBy, err = r.overriddenBy(ctx, policies, ns, t, sections, p.GetName(), bounds); err != nil {
			return nil, err
		}
	}
	out := make([]TrafficAncestor, 0, len(refs))
	for _, ref := range refs {
		a.Ref = ref
		out = append(out, a)
	}
	return out, nil
}

// overriddenBy names where policy name, Accepted on t (policies: those of its kind that may
// target t) does not apply because a more specific usable policy of its kind does (the
// precedence rule → route → listener → Gateway, docs/l7.md "Precedence"): on a whole object,
// its sections (listeners, named rules) with a policy of their own; on a Gateway or one of its
// listeners, the routes of its namespace attached to it (to that listener) with a policy of
// their own or, else, of some of their rules. Sections come first, then routes by kind and
// name; at most maxOverriddenBy+1 entries ("HTTPRoute app/web (for-web)"). A policy
// that cannot be used (Invalid, over the platform team's bounds) overrides nothing.
func (r *TrafficPolicyReconciler) overriddenBy(ctx context.Context, policies []*unstructured.Unstructured, ns string, t PolicyTarget, sections []string, name string, bounds *trafficpolicy.Bounds) ([]string, error) {
	var readErr error
	read := func(kind string) func(*unstructured.Unstructured) EGPolicyVerdict {
		return func(w *unstructured.Unstructured) EGPolicyVerdict {
			v, _, err := r.Policy.readSelected(ctx, r.Reader, w, r.Kinds)
			readErr = cmp.Or(readErr, err)
			if v = r.Policy.CheckBounds(r.Policy.ForKind(v, kind), bounds); v.OverBound != "" {
				v.Value = nil // the hub skips it for the next level
			}
			return v
		}
	}
	var by []string
	more := true
	override := func(o PolicyTarget, w *unstructured.Unstructured) {
		if w.GetName() != name { // a policy naming both the object and its section
			by, more = addOverride(by, o.String(ns)+" ("+truncateName(w.GetName())+")")
		}
	}
	if t.Section == "" {
		for _, s := range sections {
			st := t
			st.Section = s
			if w, _ := usableWinner(policies, ns, st, read(t.Kind)); w != nil && more {
				override(st, w)
			}
		}
	}
	if t.Kind != kindGateway {
		return by, readErr
	}
	for _, k := range r.Kinds {
		if !more || !r.Policy.targets(k.String()) {
			continue
		}
		list := k.NewList()
		if err := r.Reader.List(ctx, list, client.InNamespace(ns), client.MatchingFields{indexParents: ns + "/" + t.Name}); err != nil {
			return nil, fmt.Errorf("listing the %ss of Gateway %s/%s: %w", k.String(), ns, t.Name, err)
		}
		routes, err := listObjects(list)
		if err != nil {
			return nil, err
		}
		slices.SortFunc(routes, func(a, b client.Object) int { return strings.Compare(a.GetName(), b.GetName()) })
		for _, rt := range routes {
			u := toUnstructured(rt)
			if !more || !attachedTo(u, ns, t.Name, t.Section) {
				continue
			}
			rp, err := r.Policy.policiesOf(ctx, r.Reader, ns, k.String(), rt.GetName())
			if err != nil {
				return nil, err
			}
			o := PolicyTarget{Kind: k.String(), Name: rt.GetName(), Labels: rt.GetLabels()}
			if w, _ := usableWinner(rp, ns, o, read(o.Kind)); w != nil {
				override(o, w)
				continue
			}
			for _, s := range ObjectSections(o.Kind, u) {
				so := o
				so.Section = s
				if w, _ := usableWinner(rp, ns, so, read(o.Kind)); w != nil && more {
					override(so, w)
				}
			}
		}
	}
	return by, readErr
}

// attachedTo tells whether a route (u, of namespace ns) names Gateway ns/gateway as a parent:
// any of its listeners, or listener (when set) by sectionName or by naming no section.
func attachedTo(u map[string]any, ns, gateway, listener string) bool {
	for _, p := range list(u, "spec", "parentRefs") {
		ref, _ := p.(map[string]any)
		if group(ref, gatewayGroup, "group") != gatewayGroup || str(ref, kindGateway, "kind") != kindGateway ||
			str(ref, ns, "namespace") != ns || str(ref, "", "name") != gateway {
			continue
		}
		if s := str(ref, "", "sectionName"); listener == "" || s == "" || s == listener {
			return true
		}
	}
	return false
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
		WatchesRawSource(source.Kind[client.Object](c, &gwapiv1.Gateway{}, inNamespace, specOrLabelsChanged)).
		WatchesRawSource(source.Kind(c, &gwapiv1.GatewayClass{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, _ *gwapiv1.GatewayClass) []reconcile.Request {
				return policiesWhere(ctx)
			}), predicate.TypedGenerationChangedPredicate[*gwapiv1.GatewayClass]{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers})
	for _, k := range r.Kinds {
		b = b.WatchesRawSource(source.Kind[client.Object](c, k.New(), inNamespace, specOrLabelsChanged))
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

// trafficTargetsOfKind are requests for the objects of kind k a policy targets (its
// namespace): their Routes carry the policy. Those its targetSelectors select are read from c
// (the tenant cache; nil: not read).
func trafficTargetsOfKind(ctx context.Context, c client.Reader, k Kind, p client.Object) []reconcile.Request {
	u, ok := p.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	var out []reconcile.Request
	add := func(name string) {
		r := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: p.GetNamespace(), Name: name}}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	for _, t := range trafficpolicy.Targets(trafficSpec(u)) {
		if t.Group == gatewayGroup && strings.EqualFold(t.Kind, k.String()) && t.Name != "" {
			add(t.Name)
		}
	}
	selectors, _ := trafficpolicy.Selectors(trafficSpec(u))
	for _, s := range selectors {
		if c == nil || s.Group != gatewayGroup || s.Kind != k.String() {
			continue
		}
		list := k.NewList()
		if err := c.List(ctx, list, client.InNamespace(p.GetNamespace()), client.MatchingLabelsSelector{Selector: s.Labels}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing the objects a policy selects", "kind", k.String())
			continue
		}
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			if obj, ok := o.(client.Object); ok {
				add(obj.GetName())
			}
			return nil
		})
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
	if err := c.Create(ctx, crd, client.FieldOwner(hubnames.FieldOwnerCCM)); err != nil && !apierrors.IsAlreadyExists(err) {
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
