package translate

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
)

// attacher attaches the tenant's routes to its Gateways' listeners.
type attacher struct {
	t        *l7
	gateways []*gateway
	byName   map[nsName]*gateway // the first Gateway of each namespace and name
	// setsByName are the tenant's ListenerSets, the first of each namespace and name.
	setsByName map[nsName]*listenerSet
	// listeners: the Gateways' listeners by listenerID (listenerIndex), made on first use.
	listeners map[listenerID]*gwListener
}

// gateway finds a Gateway of the tenant by namespace and name; nil when there is none.
func (a *attacher) gateway(namespace, name string) *gateway {
	if a.byName == nil {
		a.byName = make(map[nsName]*gateway, len(a.gateways))
		for _, g := range a.gateways {
			if _, dup := a.byName[nsName{g.namespace, g.obj.Name}]; !dup {
				a.byName[nsName{g.namespace, g.obj.Name}] = g
			}
		}
	}
	return a.byName[nsName{namespace, name}]
}

// routeObj is what attachment needs of any route kind.
type routeObj struct {
	r         *v1alpha1.Route
	kind      string
	meta      metav1.ObjectMeta // of the tenant object
	parents   []gwv1.ParentReference
	hostnames []string // valid, lower case; nil for TCPRoute and UDPRoute
	// timeouts (HTTPRoute, GRPCRoute) of its routes to backends where a rule sets none.
	timeouts routeTimeouts
}

// parentResult is one parentRef that names a Gateway of the tenant.
type parentResult struct {
	ref      gwv1.ParentReference
	section  string
	accepted metav1.Condition
	// listeners the route attached to, with the hostnames it serves there ("*" for any).
	listeners []*gwListener
	hosts     [][]string
}

// created is the route's age for precedence: the tenant object's creationTimestamp, else
// the hub Route's.
func (ro *routeObj) created() metav1.Time {
	if !ro.meta.CreationTimestamp.IsZero() {
		return ro.meta.CreationTimestamp
	}
	return ro.r.CreationTimestamp
}

// newRouteObj reads the parts every route kind shares. hostnames is nil for kinds without.
func (a *attacher) newRouteObj(r *v1alpha1.Route, kind string, meta metav1.ObjectMeta, common gwv1.CommonRouteSpec, hostnames []gwv1.Hostname) *routeObj {
	t := a.t
	ro := &routeObj{r: r, kind: kind, meta: meta, parents: common.ParentRefs}
	if len(ro.parents) > maxParentRefs {
		t.problems.Add(t.ref(r, ""), ir.SeverityWarning, ReasonTooMany, "the route has %d parentRefs; only the first %d are used", len(ro.parents), maxParentRefs)
		ro.parents = ro.parents[:maxParentRefs]
	}
	if len(hostnames) > maxHostnames {
		t.problems.Add(t.ref(r, ""), ir.SeverityWarning, ReasonTooMany, "the route has %d hostnames; only the first %d are used", len(hostnames), maxHostnames)
		hostnames = hostnames[:maxHostnames]
	}
	for _, h := range hostnames {
		s := strings.ToLower(string(h))
		if !validHostname(s, true) {
			t.problems.Add(t.ref(r, ""), ir.SeverityWarning, string(gwv1.RouteReasonUnsupportedValue), "hostname %q is not a DNS name (a leading \"*.\" is allowed); ignored", truncate(s))
			continue
		}
		if !slices.Contains(ro.hostnames, s) {
			ro.hostnames = append(ro.hostnames, s)
		}
	}
	if len(hostnames) > 0 && len(ro.hostnames) == 0 {
		ro.hostnames = []string{} // every hostname invalid: matches no listener
	}
	return ro
}

// validHostname: a DNS subdomain (not an IP address), optionally with a leading "*." label.
func validHostname(h string, wildcard bool) bool {
	if wildcard && strings.HasPrefix(h, "*.") {
		h = h[2:]
	}
	if strings.Contains(h, "*") || len(validation.IsDNS1123Subdomain(h)) > 0 {
		return false
	}
	_, err := netip.ParseAddr(h)
	return err != nil
}

// intersectHostnames returns the hostnames a route serves on a listener, as Gateway API
// defines: a listener without hostname takes the route's, a route without hostnames takes
// the listener's ("*" when neither has one); otherwise every pair that matches gives the
// more specific of the two ("*.example.com" matches "a.example.com" and "a.b.example.com",
// not "example.com"). Empty means the route does not match the listener.
func intersectHostnames(listener string, route []string) []string {
	if route == nil {
		if listener == "" {
			return []string{"*"}
		}
		return []string{listener}
	}
	var out []string
	for _, h := range route {
		m := h
		if listener != "" {
			m = intersectHostname(listener, h)
		}
		if m != "" && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

func intersectHostname(l, r string) string {
	switch {
	case l == r:
		return l
	case strings.HasPrefix(l, "*.") && strings.HasPrefix(r, "*."):
		if strings.HasSuffix(r[1:], l[1:]) {
			return r
		}
		if strings.HasSuffix(l[1:], r[1:]) {
			return l
		}
	case strings.HasPrefix(l, "*."):
		if strings.HasSuffix(r, l[1:]) {
			return r
		}
	case strings.HasPrefix(r, "*."):
		if strings.HasSuffix(l, r[1:]) {
			return l
		}
	}
	return ""
}

// attach resolves the route's parentRefs to Gateways of the tenant and their listeners.
func (a *attacher) attach(ro *routeObj) []*parentResult {
	t := a.t
	r := ro.r
	var out []*parentResult
	for i, p := range ro.parents {
		section := fmt.Sprintf("parent %d", i)
		group, kind := gatewayGroup, KindGateway
		if p.Group != nil {
			group = string(*p.Group)
		}
		if p.Kind != nil {
			kind = string(*p.Kind)
		}
		if group != gatewayGroup || (kind != KindGateway && kind != KindListenerSet) {
			t.problems.Add(t.ref(r, section), ir.SeverityWarning, string(gwv1.RouteReasonNoMatchingParent), "parentRef %s/%s is not a Gateway or a ListenerSet; ignored", truncate(group), truncate(kind))
			continue
		}
		ns := ro.meta.Namespace
		if p.Namespace != nil && *p.Namespace != "" {
			ns = string(*p.Namespace)
		}
		// The listeners the parentRef can reach: a Gateway's own (never its ListenerSets'),
		// or a ListenerSet's.
		var listeners []*gwListener
		var parent string
		var set *listenerSet
		if kind == KindGateway {
			g := a.gateway(ns, string(p.Name))
			if g == nil {
				t.problems.Add(t.ref(r, section), ir.SeverityError, string(gwv1.RouteReasonNoMatchingParent), "Gateway %s/%s is not among the tenant's Gateways; the route is not served there", truncate(ns), truncate(string(p.Name)))
				continue
			}
			listeners, parent = g.listeners[:g.own], fmt.Sprintf("Gateway %s/%s", truncate(ns), truncate(string(p.Name)))
		} else {
			set = a.setsByName[nsName{ns, string(p.Name)}]
			if set == nil {
				t.problems.Add(t.ref(r, section), ir.SeverityError, string(gwv1.RouteReasonNoMatchingParent), "ListenerSet %s/%s is not among the tenant's ListenerSets; the route is not served there", truncate(ns), truncate(string(p.Name)))
				continue
			}
			listeners, parent = set.listeners, fmt.Sprintf("ListenerSet %s/%s", truncate(ns), truncate(string(p.Name)))
		}
		pr := &parentResult{ref: p, section: section}
		out = append(out, pr)
		refuse := func(reason gwv1.RouteConditionReason, format string, args ...any) {
			msg := fmt.Sprintf(format, args...)
			pr.accepted = t.cond(r, string(gwv1.RouteConditionAccepted), false, string(reason), "%s", msg)
			t.problems.Add(t.ref(r, section), ir.SeverityError, string(reason), "%s", msg)
		}
		if ns != ro.meta.Namespace && sourceContext(r) == nil {
			refuse(gwv1.RouteReasonNotAllowedByListeners, "%s is in another namespace; the Route carries no source context (as from a KubeLB CE ccm), so only parents of the route's own namespace are used", parent)
			continue
		}
		if set != nil && set.gw == nil {
			refuse(gwv1.RouteReasonNotAllowedByListeners, "%s is not accepted: %s", parent, set.why)
			continue
		}
		var candidates []*gwListener
		for _, l := range listeners {
			if p.SectionName != nil && string(*p.SectionName) != string(l.spec.Name) {
				continue
			}
			if p.Port != nil && *p.Port != l.spec.Port {
				continue
			}
			candidates = append(candidates, l)
		}
		if len(candidates) == 0 {
			refuse(gwv1.RouteReasonNoMatchingParent, "%s has no listener matching sectionName %s and port %s", parent, optString(p.SectionName), optPort(p.Port))
			continue
		}
		var notAllowed, noHost []string
		for _, l := range candidates {
			if why := a.allowed(l, ro); why != "" {
				notAllowed = append(notAllowed, fmt.Sprintf("listener %s: %s", truncate(string(l.spec.Name)), why))
				continue
			}
			hosts := []string{"*"} // TCP and UDP listeners have no hostnames
			if l.family == familyHTTP || l.family == familyTLS {
				hosts = intersectHostnames(l.hostname, ro.hostnames)
			}
			if len(hosts) == 0 {
				noHost = append(noHost, truncate(string(l.spec.Name)))
				continue
			}
			pr.listeners = append(pr.listeners, l)
			pr.hosts = append(pr.hosts, hosts)
		}
		switch {
		case len(pr.listeners) > 0:
			// Attaching to some listeners of a Gateway and not to others is normal.
			pr.accepted = t.cond(r, string(gwv1.RouteConditionAccepted), true, string(gwv1.RouteReasonAccepted), "the route is attached to %s", parent)
		case len(noHost) > 0 && len(notAllowed) == 0:
			refuse(gwv1.RouteReasonNoMatchingListenerHostname, "no hostname of the route matches listener(s) %s", strings.Join(noHost, ", "))
		default:
			for i, h := range noHost {
				noHost[i] = fmt.Sprintf("listener %s: no hostname of the route matches", h)
			}
			refuse(gwv1.RouteReasonNotAllowedByListeners, "%s", strings.Join(append(notAllowed, noHost...), "; "))
		}
	}
	return out
}

// allowed says why a listener does not allow the route ("" when it does): its kinds and
// allowedRoutes.namespaces.
func (a *attacher) allowed(l *gwListener, ro *routeObj) string {
	if !l.attachable {
		if l.gw.refused != nil {
			return "the Gateway is not accepted (see its Accepted condition)"
		}
		return "the listener is not accepted or is conflicted (see its conditions)"
	}
	if !slices.ContainsFunc(l.kinds, func(k gwv1.RouteGroupKind) bool { return string(k.Kind) == ro.kind }) {
		return fmt.Sprintf("%s is not among its allowed route kinds", ro.kind)
	}
	from := gwv1.NamespacesFromSame
	var sel *metav1.LabelSelector
	if ar := l.spec.AllowedRoutes; ar != nil && ar.Namespaces != nil {
		if ar.Namespaces.From != nil {
			from = *ar.Namespaces.From
		}
		sel = ar.Namespaces.Selector
	}
	same := ro.meta.Namespace == l.namespace()
	ctx := sourceContext(ro.r)
	switch from {
	case gwv1.NamespacesFromSame:
		if !same {
			return "it allows routes from its own namespace only"
		}
	case gwv1.NamespacesFromAll:
		if !same && ctx == nil {
			return "cross-namespace attachment needs the Route's source context, which it does not carry (as from a KubeLB CE ccm)"
		}
	case gwv1.NamespacesFromSelector:
		if ctx == nil {
			return "its namespace selector cannot be evaluated: the Route carries no namespace labels (no source context, as from a KubeLB CE ccm)"
		}
		if sel == nil {
			return "allowedRoutes.namespaces.from is Selector but no selector is set"
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return fmt.Sprintf("its namespace selector is invalid: %s", truncate(err.Error()))
		}
		if !s.Matches(labels.Set(ctx.NamespaceLabels)) {
			return fmt.Sprintf("namespace %s does not match its namespace selector", truncate(ro.meta.Namespace))
		}
	default:
		return fmt.Sprintf("allowedRoutes.namespaces.from %q is not supported", truncate(string(from)))
	}
	return ""
}

func optString(s *gwv1.SectionName) string {
	if s == nil {
		return "(any)"
	}
	return fmt.Sprintf("%q", truncate(string(*s)))
}

func optPort(p *gwv1.PortNumber) string {
	if p == nil {
		return "(any)"
	}
	return fmt.Sprint(*p)
}

// countAttached adds the route to the attachedRoutes of every listener it attached to.
func countAttached(parents []*parentResult) {
	seen := map[*gwListener]bool{}
	for _, p := range parents {
		for _, l := range p.listeners {
			if !seen[l] {
				seen[l] = true
				l.attached++
			}
		}
	}
}

// refs collects the ResolvedRefs verdict of a route over all its backendRefs.
type refs struct {
	reason   gwv1.RouteConditionReason
	messages []string
	partial  []string // rules not served (PartiallyInvalid)
}

func (rs *refs) fail(reason gwv1.RouteConditionReason, msg string) {
	if rs.reason == "" {
		rs.reason = reason
	}
	if len(rs.messages) < 8 {
		rs.messages = append(rs.messages, msg)
	}
}

// routeStatus records a route's status: one parent entry per parentRef naming a Gateway
// of the tenant.
func (a *attacher) routeStatus(ro *routeObj, parents []*parentResult, rs *refs) {
	t := a.t
	r := ro.r
	resolved := t.cond(r, string(gwv1.RouteConditionResolvedRefs), true, string(gwv1.RouteReasonResolvedRefs), "every backend is resolved")
	if rs.reason != "" {
		resolved = t.cond(r, string(gwv1.RouteConditionResolvedRefs), false, string(rs.reason), "%s", strings.Join(rs.messages, "; "))
	}
	st := gwv1.RouteStatus{Parents: []gwv1.RouteParentStatus{}}
	for _, p := range parents {
		ps := gwv1.RouteParentStatus{ParentRef: p.ref, ControllerName: GatewayControllerName}
		ps.Conditions = []metav1.Condition{p.accepted, resolved}
		if len(rs.partial) > 0 {
			ps.Conditions = append(ps.Conditions, t.cond(r, string(gwv1.RouteConditionPartiallyInvalid), true, string(gwv1.RouteReasonUnsupportedValue), "not served: %s", strings.Join(rs.partial, "; ")))
		}
		st.Parents = append(st.Parents, ps)
	}
	switch ro.kind {
	case KindHTTPRoute:
		t.setStatus(r, ro.kind, gwv1.HTTPRouteStatus{RouteStatus: st})
	case KindGRPCRoute:
		t.setStatus(r, ro.kind, gwv1.GRPCRouteStatus{RouteStatus: st})
	case KindTLSRoute:
		t.setStatus(r, ro.kind, gwv1.TLSRouteStatus{RouteStatus: st})
	case KindTCPRoute:
		t.setStatus(r, ro.kind, gwv1.TCPRouteStatus{RouteStatus: st})
	case KindUDPRoute:
		t.setStatus(r, ro.kind, gwv1.UDPRouteStatus{RouteStatus: st})
	}
}

// backendRef is a checked backendRef: the Service port it names, or why it cannot be used.
type backendRef struct {
	namespace, name string
	port            int32
	weight          int32
	reason          gwv1.RouteConditionReason
	message         string
}

// checkBackendRef validates a backendRef's kind, namespace permission and port.
func (a *attacher) checkBackendRef(ro *routeObj, ref gwv1.BackendRef) backendRef {
	b := backendRef{namespace: ro.meta.Namespace, name: string(ref.Name), weight: 1}
	if ref.Weight != nil {
		b.weight = *ref.Weight
	}
	group, kind := "", "Service"
	if ref.Group != nil {
		group = string(*ref.Group)
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	if ref.Namespace != nil && *ref.Namespace != "" {
		b.namespace = string(*ref.Namespace)
	}
	switch {
	case (group != "" && group != "core") || kind != "Service":
		b.reason, b.message = gwv1.RouteReasonInvalidKind, fmt.Sprintf("backendRef %s/%s %s is not a Service", truncate(group), truncate(kind), truncate(b.name))
	case b.namespace != ro.meta.Namespace && !a.t.granted(ro.r, "", "Service", b.namespace, b.name):
		b.reason, b.message = gwv1.RouteReasonRefNotPermitted, fmt.Sprintf("Service %s/%s is in another namespace and no ReferenceGrant there permits it%s", truncate(b.namespace), truncate(b.name), noContext(ro.r))
	case ref.Port == nil || *ref.Port < 1 || *ref.Port > 65535:
		b.reason, b.message = gwv1.RouteReasonBackendNotFound, fmt.Sprintf("backendRef Service %s/%s has no valid port", truncate(b.namespace), truncate(b.name))
	case b.weight < 0 || b.weight > 1000000:
		b.reason, b.message = gwv1.RouteReasonBackendNotFound, fmt.Sprintf("backendRef Service %s/%s has weight %d, out of range 0-1000000", truncate(b.namespace), truncate(b.name), b.weight)
	default:
		b.port = *ref.Port
	}
	return b
}

// dryResolve checks that a valid backendRef's Service port exists without adding a cluster
// (for routes attached nowhere, whose ResolvedRefs is still reported).
func (a *attacher) dryResolve(ro *routeObj, b *backendRef) {
	if b.reason != "" {
		return
	}
	svc := a.t.service(ro.r, b.namespace, b.name)
	if svc == nil {
		b.reason, b.message = gwv1.RouteReasonBackendNotFound, fmt.Sprintf("Service %s/%s is not among the Services the route carries", truncate(b.namespace), truncate(b.name))
		return
	}
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == b.port }) {
		b.reason, b.message = gwv1.RouteReasonBackendNotFound, fmt.Sprintf("Service %s/%s has no port %d", truncate(b.namespace), truncate(b.name), b.port)
	}
}
