package source

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// Envoy Gateway's policies (gateway.envoyproxy.io/v1alpha1: BackendTrafficPolicy,
// SecurityPolicy, ClientTrafficPolicy) in the ccm: which policy of a kind applies to a
// Gateway or a route (HTTP, GRPC, TLS, TCP, UDP; TrafficWinner), what its Route carries of it to the
// hub (DesiredBackendTraffic, DesiredSecurity, DesiredClientTraffic), and the policy's status
// (DesiredTrafficPolicyStatus). All pure, and the same for every kind but for how a policy's
// settings are read and which kinds of objects it may target (PolicyKind). The ccm reads the
// policies as unstructured objects: kubelb does not depend on Envoy Gateway's Go module
// (docs/l7.md, "Traffic policies").

// PolicyKind is one of Envoy Gateway's policy kinds the ccm reads.
type PolicyKind struct {
	// Kind is the kind's name (BackendTrafficPolicy).
	Kind string
	// index is the name of the tenant cache's index of the kind's policies by target.
	index string
	// read reads and checks a policy's settings (targets aside): what Routes carry, or why it
	// cannot be used.
	read func(namespace, name string, spec map[string]any) (any, error)
	// carry puts the settings read (nil: none) in a Route's context; carrySection in the
	// entry of one of its sections.
	carry        func(c *v1alpha1.SourceContext, v any)
	carrySection func(s *v1alpha1.PolicySection, v any)
	// bound checks the settings read against the platform team's bounds (an error wrapping
	// trafficpolicy.ErrOverBound).
	bound func(v any, b *trafficpolicy.Bounds) error
	// targetKinds are the kinds of objects its policies may target in kubelb (nil:
	// trafficTargetKinds).
	targetKinds []string
	// streamUnfit says why the settings read do not apply to a route of a stream kind
	// (TLSRoute, TCPRoute, UDPRoute): "" when they do (nil: they always do).
	streamUnfit func(routeKind string, v any) string
}

// BackendTrafficPolicyKind and SecurityPolicyKind are the kinds read (PolicyKinds).
var (
	BackendTrafficPolicyKind = &PolicyKind{
		Kind: trafficpolicy.Kind, index: "ccm.kubelb.k8c.io/traffic-policy-targets",
		read: func(ns, name string, spec map[string]any) (any, error) {
			bt, err := trafficpolicy.Read(ns, name, spec)
			if err != nil {
				return nil, err
			}
			_, err = trafficpolicy.Resolve(bt)
			return bt, err
		},
		carry:        func(c *v1alpha1.SourceContext, v any) { c.BackendTraffic, _ = v.(*v1alpha1.BackendTraffic) },
		carrySection: func(s *v1alpha1.PolicySection, v any) { s.BackendTraffic, _ = v.(*v1alpha1.BackendTraffic) },
		bound:        boundBy(trafficpolicy.Resolve, trafficpolicy.CheckBounds),
		streamUnfit: unfitBy(trafficpolicy.Resolve, func(kind string, s *trafficpolicy.Settings) string {
			return trafficpolicy.StreamUnfitMessage(kind, trafficpolicy.StreamUnfit(kind, s), false)
		}),
	}
	SecurityPolicyKind = &PolicyKind{
		Kind: trafficpolicy.SecurityKind, index: "ccm.kubelb.k8c.io/security-policy-targets",
		read: func(ns, name string, spec map[string]any) (any, error) {
			sec, err := trafficpolicy.ReadSecurity(ns, name, spec)
			if err != nil {
				return nil, err
			}
			_, err = trafficpolicy.ResolveSecurity(sec)
			return sec, err
		},
		carry:        func(c *v1alpha1.SourceContext, v any) { c.Security, _ = v.(*v1alpha1.Security) },
		carrySection: func(s *v1alpha1.PolicySection, v any) { s.Security, _ = v.(*v1alpha1.Security) },
		bound:        boundBy(trafficpolicy.ResolveSecurity, trafficpolicy.CheckSecurityBounds),
		streamUnfit: unfitBy(trafficpolicy.ResolveSecurity, func(kind string, s *trafficpolicy.SecuritySettings) string {
			return trafficpolicy.StreamUnfitMessage(kind, trafficpolicy.SecurityStreamUnfit(s), true)
		}),
		// Envoy's UDP proxy has no RBAC filter: Envoy Gateway's CRD refuses a SecurityPolicy
		// on a UDPRoute, kubelb says so for older CRDs.
		targetKinds: []string{kindGateway, "HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute"},
	}
	// ClientTrafficPolicyKind: the settings of a Gateway's listeners towards its clients;
	// its policies target Gateways only (as Envoy Gateway's).
	ClientTrafficPolicyKind = &PolicyKind{
		Kind: trafficpolicy.ClientKind, index: "ccm.kubelb.k8c.io/client-traffic-policy-targets",
		read: func(ns, name string, spec map[string]any) (any, error) {
			ct, err := trafficpolicy.ReadClient(ns, name, spec)
			if err != nil {
				return nil, err
			}
			_, err = trafficpolicy.ResolveClient(ct)
			return ct, err
		},
		carry:        func(c *v1alpha1.SourceContext, v any) { c.ClientTraffic, _ = v.(*v1alpha1.ClientTraffic) },
		carrySection: func(s *v1alpha1.PolicySection, v any) { s.ClientTraffic, _ = v.(*v1alpha1.ClientTraffic) },
		bound:        boundBy(trafficpolicy.ResolveClient, trafficpolicy.CheckClientBounds),
		targetKinds:  []string{kindGateway},
	}
	PolicyKinds = []*PolicyKind{BackendTrafficPolicyKind, SecurityPolicyKind, ClientTrafficPolicyKind}
)

// boundBy is a kind's bound: the settings read (a *P) resolved by resolve and checked by
// check against the platform team's bounds. Settings that do not resolve are no business of
// the bounds (Read refused them already).
func boundBy[P, S any](resolve func(*P) (*S, error), check func(*trafficpolicy.Bounds, *S) error) func(any, *trafficpolicy.Bounds) error {
	return func(v any, b *trafficpolicy.Bounds) error {
		p, _ := v.(*P)
		if p == nil {
			return nil
		}
		s, err := resolve(p)
		if err != nil {
			return nil
		}
		return check(b, s)
	}
}

// unfitBy is a kind's streamUnfit: the settings read (a *P) resolved by resolve and checked
// by unfit for a stream route kind.
func unfitBy[P, S any](resolve func(*P) (*S, error), unfit func(string, *S) string) func(string, any) string {
	return func(kind string, v any) string {
		p, _ := v.(*P)
		if p == nil {
			return ""
		}
		s, err := resolve(p)
		if err != nil {
			return ""
		}
		return unfit(kind, s)
	}
}

// ForKind is v for an object of kind kind: Invalid when the policy asks of a TLSRoute,
// TCPRoute or UDPRoute what its connections cannot take (an HTTP feature), naming it. Pure.
func (k *PolicyKind) ForKind(v EGPolicyVerdict, kind string) EGPolicyVerdict {
	if v.Invalid != "" || v.Value == nil || k.streamUnfit == nil || !slices.Contains(trafficpolicy.StreamRouteKinds, kind) {
		return v
	}
	if msg := k.streamUnfit(kind, v.Value); msg != "" {
		return EGPolicyVerdict{Invalid: msg}
	}
	return v
}

// kinds are the kinds of objects the kind's policies may target in kubelb.
func (k *PolicyKind) kinds() []string {
	if k.targetKinds != nil {
		return k.targetKinds
	}
	return trafficTargetKinds
}

// targets tells whether the kind's policies may target objects of kind kind.
func (k *PolicyKind) targets(kind string) bool { return slices.Contains(k.kinds(), kind) }

// GVK is the kind's group, version and kind.
func (k *PolicyKind) GVK() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: trafficpolicy.Group, Version: trafficpolicy.Version, Kind: k.Kind}
}

// New and NewList are empty objects of the kind, for the cache.
func (k *PolicyKind) New() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(k.GVK())
	return u
}

func (k *PolicyKind) NewList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(k.GVK().GroupVersion().WithKind(k.Kind + "List"))
	return l
}

// trafficTargetKinds are the kinds a policy may target in kubelb: whole objects, or one
// section (sectionName: a Gateway's listener, a route's rule). On TLSRoutes, TCPRoutes and
// UDPRoutes only what acts on connections applies (PolicyKind.ForKind).
var trafficTargetKinds = []string{kindGateway, "HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute"}

// appliesPolicies tells whether a kind's Routes carry Envoy Gateway's policies.
func appliesPolicies(k Kind) bool {
	return slices.Contains(trafficTargetKinds, k.String())
}

// trafficTargetKey is the index key of a policy's target: "Kind/name" (the policy's namespace).
func trafficTargetKey(kind, name string) string { return kind + "/" + name }

// trafficSpec is a policy's spec (nil when it has none).
func trafficSpec(p *unstructured.Unstructured) map[string]any {
	spec, _ := p.Object["spec"].(map[string]any)
	return spec
}

// servedKind tells whether kubelb serves targets of t's group and kind for policies of the
// kind.
func (k *PolicyKind) servedKind(t trafficpolicy.Target) bool {
	return t.Group == gatewayGroup && k.targets(t.Kind)
}

// EGPolicyVerdict is what kubelb makes of a policy: the settings Routes carry
// (*v1alpha1.BackendTraffic, *v1alpha1.Security), or why the policy cannot be used as written
// (Invalid; then none of it applies).
type EGPolicyVerdict struct {
	Value   any
	Invalid string
	// Unusable says why what the policy refers to (a basicAuth's Secret) cannot be used; the
	// Routes still carry the policy, and the hub answers 500 on its routes rather than serve
	// them without it.
	Unusable string
	// OverBound says which of the platform team's bounds the policy is over (CheckBounds).
	// The Routes still carry it: the hub checks it against the bounds itself, and leaves it
	// out (its Route's own, then its Gateway's policy applies).
	OverBound string
}

// CheckBounds is v with OverBound set when the policy v read is over the platform team's
// bounds b (nil: none, from the hub's TenantState: HubBounds). Pure.
func (k *PolicyKind) CheckBounds(v EGPolicyVerdict, b *trafficpolicy.Bounds) EGPolicyVerdict {
	if v.Invalid != "" || v.Value == nil || b == nil {
		return v
	}
	if err := k.bound(v.Value, b); err != nil {
		msg := strings.ReplaceAll(strings.TrimPrefix(err.Error(), trafficpolicy.ErrOverBound.Error()+": "), "\n", "; ")
		if len(msg) > 2048 {
			msg = msg[:2048] + "…"
		}
		v.OverBound = msg
	}
	return v
}

// HubBounds are the platform team's bounds on the tenant's policies, as the hub tells the
// ccm in its TenantState (status.trafficPolicies; the one named "default" first): nil when
// none says any. Pure.
func HubBounds(states []v1alpha1.TenantState) *trafficpolicy.Bounds {
	states = slices.Clone(states)
	slices.SortFunc(states, func(a, b v1alpha1.TenantState) int {
		if (a.Name == "default") != (b.Name == "default") {
			if a.Name == "default" {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	for i := range states {
		if b := trafficpolicy.BoundsOf(states[i].Status.TrafficPolicies); b != nil {
			return b
		}
	}
	return nil
}

// Read reads and checks a policy of the kind: its targets (Gateways and routes
// of Gateway API's group, whole objects or one section of them) and targetSelectors, its
// fields (those kubelb serves only) and their values.
func (k *PolicyKind) Read(p *unstructured.Unstructured) EGPolicyVerdict {
	spec := trafficSpec(p)
	var problems []string
	targets := trafficpolicy.Targets(spec)
	selectors, err := trafficpolicy.Selectors(spec)
	if err != nil {
		problems = append(problems, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if len(targets) == 0 && len(selectors) == 0 && err == nil {
		problems = append(problems, "the policy has no targetRefs and no targetSelectors")
	}
	for _, t := range targets {
		if t.Group != gatewayGroup || !k.targets(t.Kind) {
			problems = append(problems, fmt.Sprintf("targetRef %s %s: kubelb serves a %s on %s (%s) only; other kinds are not yet supported",
				truncateName(refKind(t.Group, t.Kind)), truncateName(t.Name), k.Kind, targetKindsText(k.kinds()), gatewayGroup))
		}
	}
	for _, s := range selectors {
		if s.Group != gatewayGroup || !k.targets(s.Kind) {
			problems = append(problems, fmt.Sprintf("targetSelector of %s: kubelb serves a %s on %s (%s) only; other kinds are not yet supported",
				truncateName(refKind(s.Group, s.Kind)), k.Kind, targetKindsText(k.kinds()), gatewayGroup))
		}
	}
	v, err := k.read(p.GetNamespace(), p.GetName(), spec)
	if err != nil {
		problems = append(problems, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if len(problems) > 0 {
		msg := strings.Join(problems, "; ")
		if len(msg) > 2048 {
			msg = msg[:2048] + "…"
		}
		return EGPolicyVerdict{Invalid: msg}
	}
	return EGPolicyVerdict{Value: v}
}

// PolicyTarget is what a policy may target: the object Kind/Name of the policy's namespace
// (its Labels, for targetSelectors), or one Section of it (a Gateway's listener, a route's
// rule; "" for the whole object).
type PolicyTarget struct {
	Kind, Name, Section string
	Labels              map[string]string
}

// String names the target in messages: "HTTPRoute app/web", "HTTPRoute app/web rule a".
func (t PolicyTarget) String(ns string) string {
	s := fmt.Sprintf("%s %s/%s", t.Kind, ns, truncateName(t.Name))
	if t.Section != "" {
		s += " " + sectionWord(t.Kind) + " " + truncateName(t.Section)
	}
	return s
}

// sectionWord is what a section of an object of kind is: a Gateway's listener, a route's
// rule.
func sectionWord(kind string) string {
	if kind == kindGateway {
		return "listener"
	}
	return "rule"
}

// targetsObject tells whether policy p targets t (of its namespace): a section by a targetRef
// with that sectionName; the whole object by a targetRef without one or by a targetSelector
// matching its labels.
func targetsObject(p *unstructured.Unstructured, t PolicyTarget) bool {
	spec := trafficSpec(p)
	if slices.ContainsFunc(trafficpolicy.Targets(spec), func(r trafficpolicy.Target) bool {
		return r.Group == gatewayGroup && r.Kind == t.Kind && r.Name == t.Name && r.SectionName == t.Section
	}) {
		return true
	}
	if t.Section != "" {
		return false
	}
	selectors, _ := trafficpolicy.Selectors(spec)
	return slices.ContainsFunc(selectors, func(s trafficpolicy.Selector) bool { return s.Matches(gatewayGroup, t.Kind, t.Labels) })
}

// trafficBefore orders policies by precedence: the older first, then by name.
func trafficBefore(a, b *unstructured.Unstructured) int {
	ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
	if c := ta.Compare(tb.Time); c != 0 {
		return c
	}
	return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
}

// TrafficWinner is the policy that applies to the object kind/name of namespace ns: the first
// by precedence among policies (in any order) of its namespace targeting it; nil when none.
// A winner that cannot be used applies nothing: the others stay Conflicted (as Envoy
// Gateway, which attaches the oldest before checking it).
func TrafficWinner(policies []*unstructured.Unstructured, ns, kind, name string) *unstructured.Unstructured {
	return TrafficWinnerOf(policies, ns, PolicyTarget{Kind: kind, Name: name})
}

// TrafficWinnerOf is the policy that applies to t (of namespace ns), as TrafficWinner: the
// first by precedence among those targeting t itself. A section's winner and its object's
// both apply, the section's to the section, the object's to the rest (as Envoy Gateway).
func TrafficWinnerOf(policies []*unstructured.Unstructured, ns string, t PolicyTarget) *unstructured.Unstructured {
	var best *unstructured.Unstructured
	for _, p := range policies {
		if p.GetNamespace() == ns && p.GetDeletionTimestamp() == nil && targetsObject(p, t) && (best == nil || trafficBefore(p, best) < 0) {
			best = p
		}
	}
	return best
}

// Desired is what the Route of the object kind/name carries of policies of the kind (in any
// order, of the kind): the settings of the policy that applies to it, nil when none does or
// when it cannot be used.
func (k *PolicyKind) Desired(policies []*unstructured.Unstructured, ns, kind, name string) any {
	whole, _ := k.DesiredOf(policies, ns, PolicyTarget{Kind: kind, Name: name}, nil, k.Read)
	return whole
}

// DesiredOf is what the Route of object o (Section unset) carries of policies of the kind
// (in any order): the settings of the policy that applies to the whole object, and those of
// the policy that applies to each of its sections (names) that one targets; each nil when
// none does or when the policy cannot be used (read says, k.Read or one that also counts
// what a policy's selectors select).
func (k *PolicyKind) DesiredOf(policies []*unstructured.Unstructured, ns string, o PolicyTarget, sections []string,
	read func(*unstructured.Unstructured) EGPolicyVerdict) (any, map[string]any) {
	var whole any
	if _, v := usableWinner(policies, ns, o, read); v != nil {
		whole = v
	}
	var out map[string]any
	for _, s := range sections {
		t := o
		t.Section = s
		if _, v := usableWinner(policies, ns, t, read); v != nil {
			if out == nil {
				out = map[string]any{}
			}
			out[s] = v
		}
	}
	return whole, out
}

// usableWinner is the policy that applies to t (TrafficWinnerOf) and its settings as read
// says; nil, nil when none does or when it cannot be used (the next level applies).
func usableWinner(policies []*unstructured.Unstructured, ns string, t PolicyTarget,
	read func(*unstructured.Unstructured) EGPolicyVerdict) (*unstructured.Unstructured, any) {
	w := TrafficWinnerOf(policies, ns, t)
	if w == nil {
		return nil, nil
	}
	v := read(w).Value
	if v == nil {
		return nil, nil
	}
	return w, v
}

// CarryOf puts in a Route's context c what DesiredOf gave: whole, and an entry per section
// (c.PolicySections stays sorted by name, one entry per section).
func (k *PolicyKind) CarryOf(c *v1alpha1.SourceContext, whole any, sections map[string]any) {
	k.carry(c, whole)
	for _, name := range slices.Sorted(maps.Keys(sections)) {
		e := c.PolicySection(name)
		if e == nil {
			c.PolicySections = append(c.PolicySections, v1alpha1.PolicySection{Name: name})
			e = &c.PolicySections[len(c.PolicySections)-1]
		}
		k.carrySection(e, sections[name])
	}
	slices.SortFunc(c.PolicySections, func(a, b v1alpha1.PolicySection) int { return strings.Compare(a.Name, b.Name) })
}

// ObjectSections are the names of the sections of an object of kind a policy may target
// (obj unstructured): a Gateway's listeners, a route's named rules; at most 64.
func ObjectSections(kind string, obj map[string]any) []string {
	spec, _ := obj["spec"].(map[string]any)
	field := "rules"
	if kind == kindGateway {
		field = "listeners"
	}
	list, _ := spec[field].([]any)
	var out []string
	for _, e := range list {
		m, _ := e.(map[string]any)
		if n, _ := m["name"].(string); n != "" && !slices.Contains(out, n) && len(out) < maxPolicySections {
			out = append(out, n)
		}
	}
	return out
}

// maxPolicySections bounds the sections a Route's context carries policies of (the CRD's
// maxItems: a Gateway has at most 64 listeners, a route 16 rules).
const maxPolicySections = 64

// DesiredBackendTraffic is what the Route of the object kind/name carries of
// BackendTrafficPolicies.
func DesiredBackendTraffic(policies []*unstructured.Unstructured, ns, kind, name string) *v1alpha1.BackendTraffic {
	bt, _ := BackendTrafficPolicyKind.Desired(policies, ns, kind, name).(*v1alpha1.BackendTraffic)
	return bt
}

// DesiredSecurity is what the Route of the object kind/name carries of SecurityPolicies.
func DesiredSecurity(policies []*unstructured.Unstructured, ns, kind, name string) *v1alpha1.Security {
	sec, _ := SecurityPolicyKind.Desired(policies, ns, kind, name).(*v1alpha1.Security)
	return sec
}

// DesiredClientTraffic is what the Route of Gateway name carries of ClientTrafficPolicies.
func DesiredClientTraffic(policies []*unstructured.Unstructured, ns, name string) *v1alpha1.ClientTraffic {
	ct, _ := ClientTrafficPolicyKind.Desired(policies, ns, kindGateway, name).(*v1alpha1.ClientTraffic)
	return ct
}

// targetKindsText names target kinds in a message: "Gateways, HTTPRoutes and GRPCRoutes".
func targetKindsText(kinds []string) string {
	out := ""
	for i, k := range kinds {
		switch {
		case i == 0:
		case i == len(kinds)-1:
			out += " and "
		default:
			out += ", "
		}
		out += k + "s"
	}
	return out
}

// TrafficAncestor is one ancestor kubelb writes on a policy, with its Accepted condition's
// status, reason and message, and, when Accepted, where other policies of its kind override
// it (OverriddenBy: "HTTPRoute app/web (for-web)"; the Overridden condition).
type TrafficAncestor struct {
	Ref             gwapiv1.ParentReference
	Status          metav1.ConditionStatus
	Reason, Message string
	OverriddenBy    []string
}

// Envoy Gateway's condition on a policy's ancestor that is Accepted but that more specific
// policies of its kind override somewhere (its type and its reason).
const (
	PolicyConditionOverridden = "Overridden"
	PolicyReasonOverridden    = "Overridden"
)

// maxOverriddenBy bounds the overrides an Overridden message names (then "…").
const maxOverriddenBy = 8

// addOverride appends entry to by (once), keeping at most maxOverriddenBy+1 entries (one
// more tells the message to end in "…"); false when by is full.
func addOverride(by []string, entry string) ([]string, bool) {
	if len(by) > maxOverriddenBy {
		return by, false
	}
	if !slices.Contains(by, entry) {
		by = append(by, entry)
	}
	return by, len(by) <= maxOverriddenBy
}

// OverriddenMessage is the message of the Overridden condition of a policy of kind overridden
// where by names (at most maxOverriddenBy, then "…").
func OverriddenMessage(kind string, by []string) string {
	names := by
	if len(names) > maxOverriddenBy {
		names = append(slices.Clone(names[:maxOverriddenBy]), "…")
	}
	return fmt.Sprintf("other %sies take precedence for %s; this one applies to the rest",
		strings.TrimSuffix(kind, "y"), strings.Join(names, ", "))
}

// worse tells whether a replaces b for one ancestor: a refusal over an acceptance.
func (a TrafficAncestor) worse(b TrafficAncestor) bool {
	return a.Status == metav1.ConditionFalse && b.Status != metav1.ConditionFalse
}

// MergeTrafficAncestors keeps one entry per ancestor (the worst verdict of the targets under
// it; the overrides of all its Accepted ones), sorted by kind, namespace and name.
func MergeTrafficAncestors(in []TrafficAncestor) []TrafficAncestor {
	var out []TrafficAncestor
	for _, a := range in {
		if i := slices.IndexFunc(out, func(o TrafficAncestor) bool { return equalParentRef(o.Ref, a.Ref) }); i >= 0 {
			switch {
			case a.worse(out[i]):
				out[i] = a
			case a.Status == metav1.ConditionTrue && out[i].Status == metav1.ConditionTrue:
				by := slices.Clone(out[i].OverriddenBy)
				for _, e := range a.OverriddenBy {
					by, _ = addOverride(by, e)
				}
				out[i].OverriddenBy = by
			}
			continue
		}
		out = append(out, a)
	}
	key := func(a TrafficAncestor) string {
		k := kindGateway
		if a.Ref.Kind != nil {
			k = string(*a.Ref.Kind)
		}
		ns := ""
		if a.Ref.Namespace != nil {
			ns = string(*a.Ref.Namespace)
		}
		return k + "/" + ns + "/" + string(a.Ref.Name)
	}
	slices.SortFunc(out, func(a, b TrafficAncestor) int { return strings.Compare(key(a), key(b)) })
	return out
}

// ObjectAncestor is the ancestorRef naming a target itself (a route that does not exist, whose
// Gateways are unknown).
func ObjectAncestor(namespace, kind, name string) gwapiv1.ParentReference {
	g, k, ns := gwapiv1.Group(gatewayGroup), gwapiv1.Kind(kind), gwapiv1.Namespace(namespace)
	return gwapiv1.ParentReference{Group: &g, Kind: &k, Namespace: &ns, Name: gwapiv1.ObjectName(name)}
}

// ReadPolicyStatus reads a policy's status.ancestors.
func ReadPolicyStatus(p *unstructured.Unstructured) gwapiv1.PolicyStatus {
	st := gwapiv1.PolicyStatus{}
	if raw, ok := p.Object["status"].(map[string]any); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &st)
	}
	return st
}

// DesiredTrafficPolicyStatus is a policy's status: the other controllers' ancestors as they
// are, then kubelb's (ancestors, at most 16 in all) with their Accepted condition at the
// policy's generation, and an Overridden condition (True, as Envoy Gateway; none when not
// overridden) where an Accepted one is overridden; the transition times of unchanged
// conditions are kept, now stamps the changed ones.
func DesiredTrafficPolicyStatus(p *unstructured.Unstructured, ancestors []TrafficAncestor, now metav1.Time) gwapiv1.PolicyStatus {
	cur := ReadPolicyStatus(p)
	out := gwapiv1.PolicyStatus{Ancestors: []gwapiv1.PolicyAncestorStatus{}}
	for _, a := range cur.Ancestors {
		if a.ControllerName != ControllerName {
			out.Ancestors = append(out.Ancestors, a)
		}
	}
	for _, an := range ancestors {
		if len(out.Ancestors) == maxPolicyAncestors {
			break
		}
		var conds []metav1.Condition
		for _, a := range cur.Ancestors {
			if a.ControllerName == ControllerName && equalParentRef(a.AncestorRef, an.Ref) {
				conds = slices.Clone(a.Conditions)
			}
		}
		c := metav1.Condition{Type: string(gwapiv1.PolicyConditionAccepted), Status: an.Status, Reason: an.Reason, Message: an.Message,
			ObservedGeneration: p.GetGeneration(), LastTransitionTime: now}
		meta.SetStatusCondition(&conds, c)
		overridden := an.Status == metav1.ConditionTrue && len(an.OverriddenBy) > 0
		if overridden {
			meta.SetStatusCondition(&conds, metav1.Condition{Type: PolicyConditionOverridden, Status: metav1.ConditionTrue,
				Reason: PolicyReasonOverridden, Message: OverriddenMessage(p.GetKind(), an.OverriddenBy),
				ObservedGeneration: p.GetGeneration(), LastTransitionTime: now})
		}
		conds = slices.DeleteFunc(conds, func(x metav1.Condition) bool {
			return x.Type != c.Type && (x.Type != PolicyConditionOverridden || !overridden)
		})
		out.Ancestors = append(out.Ancestors, gwapiv1.PolicyAncestorStatus{AncestorRef: an.Ref, ControllerName: ControllerName, Conditions: conds})
	}
	return out
}

// TrafficWarning is the Warning of kubelb's ancestors of a status (reason "" for none): the
// first refusal.
func TrafficWarning(ancestors []TrafficAncestor) (string, string) {
	for _, a := range ancestors {
		if a.Status == metav1.ConditionFalse {
			return a.Reason, a.Message
		}
	}
	return "", ""
}
