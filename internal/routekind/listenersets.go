package routekind

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/textcut"
)

// A ListenerSet (Gateway API v1.6, GEP-1713) adds listeners to the Gateway its spec.parentRef
// names, when that Gateway's spec.allowedListeners allows the ListenerSet's namespace. Its
// listeners are served on the Gateway's hub Service and Envoy listeners. The Route controller
// (ports) and the translation front end (listeners, status) decide which ListenerSets a
// Gateway takes with the functions below, so that both take the same ones.

// ListenerSetParent returns the Gateway a ListenerSet (the embedded object u) names in
// spec.parentRef: its namespace (the ListenerSet's by default) and name; ok is false when the
// reference is not to a Gateway of Gateway API or names nothing.
func ListenerSetParent(u *unstructured.Unstructured) (namespace, name string, ok bool) {
	ref, found, err := unstructured.NestedMap(u.Object, "spec", "parentRef")
	if err != nil || !found {
		return "", "", false
	}
	group, kind := GroupGatewayAPI, "Gateway"
	if g, ok := ref["group"].(string); ok {
		group = g
	}
	if k, ok := ref["kind"].(string); ok && k != "" {
		kind = k
	}
	name, _ = ref["name"].(string)
	if group != GroupGatewayAPI || kind != "Gateway" || name == "" {
		return "", "", false
	}
	namespace = u.GetNamespace()
	if ns, ok := ref["namespace"].(string); ok && ns != "" {
		namespace = ns
	}
	return namespace, name, true
}

// Values of a Gateway's spec.allowedListeners.namespaces.from.
const (
	ListenersFromNone     = "None"
	ListenersFromSame     = "Same"
	ListenersFromAll      = "All"
	ListenersFromSelector = "Selector"
)

// ListenerSetAllowed tells whether a Gateway of namespace gwNS, whose
// spec.allowedListeners.namespaces has from (""; the default: None) and selector, takes a
// ListenerSet of namespace lsNS; ctx is the ListenerSet Route's source context (nil: none, as
// from a KubeLB CE ccm, which mirrors no ListenerSet; then only its own namespace counts). When
// it does not, why says so in words for the ListenerSet's Accepted condition.
func ListenerSetAllowed(from string, selector *metav1.LabelSelector, gwNS, lsNS string, ctx *v1alpha1.SourceContext) (ok bool, why string) {
	switch from {
	case "", ListenersFromNone:
		return false, "the Gateway does not allow ListenerSets (its spec.allowedListeners.namespaces.from is None, the default)"
	case ListenersFromSame:
		if lsNS != gwNS {
			return false, "the Gateway allows ListenerSets of its own namespace only (spec.allowedListeners.namespaces.from: Same)"
		}
	case ListenersFromAll:
		if lsNS != gwNS && ctx == nil {
			return false, "the ListenerSet's Route carries no source context, so only a Gateway of its own namespace takes it"
		}
	case ListenersFromSelector:
		if ctx == nil {
			return false, "the Gateway's namespace selector cannot be evaluated: the Route carries no namespace labels"
		}
		if selector == nil {
			return false, "the Gateway's spec.allowedListeners.namespaces.from is Selector but it sets no selector"
		}
		s, err := metav1.LabelSelectorAsSelector(selector)
		if err != nil {
			return false, "the Gateway's spec.allowedListeners.namespaces.selector is invalid: " + cut(err.Error())
		}
		if !s.Matches(labels.Set(ctx.NamespaceLabels)) {
			return false, fmt.Sprintf("namespace %s does not match the Gateway's spec.allowedListeners.namespaces.selector", cut(lsNS))
		}
	default:
		return false, fmt.Sprintf("the Gateway's spec.allowedListeners.namespaces.from %q is not supported", cut(from))
	}
	return true, ""
}

// cut bounds tenant text quoted in a message.
func cut(s string) string { return textcut.Cut(s, 100, textcut.Ellipsis) }

// GatewayAllowedListeners reads spec.allowedListeners.namespaces of an embedded Gateway: from
// ("" when unset) and the selector (nil when unset or unreadable).
func GatewayAllowedListeners(u *unstructured.Unstructured) (from string, selector *metav1.LabelSelector) {
	ns, found, err := unstructured.NestedMap(u.Object, "spec", "allowedListeners", "namespaces")
	if err != nil || !found {
		return "", nil
	}
	from, _ = ns["from"].(string)
	if raw, ok := ns["selector"].(map[string]any); ok {
		s := &metav1.LabelSelector{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(raw, s) == nil {
			selector = s
		}
	}
	return from, selector
}

// ListenerSetCreated is when the ListenerSet a Route embeds was created: its
// metadata.creationTimestamp (the ccm embeds it for ListenerSets), else the Route's.
func ListenerSetCreated(r *v1alpha1.Route) time.Time {
	if src := r.Spec.Source.Kubernetes; src != nil {
		if ts := src.Route.GetCreationTimestamp(); !ts.IsZero() {
			return ts.Time
		}
	}
	return r.CreationTimestamp.Time
}

// CompareListenerSets orders ListenerSet Routes as Gateway API ranks their listeners after
// the Gateway's own: the oldest ListenerSet first, then by namespace and name.
func CompareListenerSets(a, b *v1alpha1.Route) int {
	if c := ListenerSetCreated(a).Compare(ListenerSetCreated(b)); c != 0 {
		return c
	}
	ua, ub := embedded(a), embedded(b)
	return cmp.Or(cmp.Compare(ua.GetNamespace(), ub.GetNamespace()), cmp.Compare(ua.GetName(), ub.GetName()), cmp.Compare(a.Name, b.Name))
}

func embedded(r *v1alpha1.Route) *unstructured.Unstructured {
	if r.Spec.Source.Kubernetes == nil {
		return &unstructured.Unstructured{}
	}
	return &r.Spec.Source.Kubernetes.Route
}

// GatewaySets are the ListenerSet Routes among sets (any Routes of the tenant) that a Gateway
// Route takes: those naming the Gateway in spec.parentRef and allowed by its
// spec.allowedListeners, in the order their listeners rank (CompareListenerSets). The caller
// leaves out Routes being deleted or refused by the tenant's limits.
func GatewaySets(gw *v1alpha1.Route, sets []*v1alpha1.Route) []*v1alpha1.Route {
	if gw.Spec.Source.Kubernetes == nil {
		return nil
	}
	g := &gw.Spec.Source.Kubernetes.Route
	from, selector := GatewayAllowedListeners(g)
	if from == "" || from == ListenersFromNone {
		return nil
	}
	var out []*v1alpha1.Route
	for _, ls := range sets {
		if k, _ := Of(ls); k != ListenerSet {
			continue
		}
		u := &ls.Spec.Source.Kubernetes.Route
		ns, name, ok := ListenerSetParent(u)
		if !ok || ns != g.GetNamespace() || name != g.GetName() {
			continue
		}
		if ok, _ := ListenerSetAllowed(from, selector, g.GetNamespace(), u.GetNamespace(), ls.Spec.Source.Kubernetes.Context); ok {
			out = append(out, ls)
		}
	}
	slices.SortStableFunc(out, CompareListenerSets)
	return out
}
