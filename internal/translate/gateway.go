package translate

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/routekind"
)

// GatewayControllerName is the controllerName kubelb writes into the parents of route
// statuses (the GatewayClass of kubelb Gateways names it too).
const GatewayControllerName = "kubelb.k8c.io/gateway-controller"

// Kinds of the Gateway API objects the front end reads.
const (
	KindGateway   = "Gateway"
	KindHTTPRoute = "HTTPRoute"
	KindGRPCRoute = "GRPCRoute"
	KindTLSRoute  = "TLSRoute"
	KindTCPRoute  = "TCPRoute"
	KindUDPRoute  = "UDPRoute"
	// KindListenerSet adds listeners to a Gateway (gateway_listenerset.go).
	KindListenerSet = "ListenerSet"
)

// Reasons of Gateway API problems besides the shared ones (the route and listener
// condition reasons of gateway-api are used as they are).
const (
	// ReasonInvalidListener: a listener's name, port, hostname or TLS settings cannot be
	// served (the listener is not served).
	ReasonInvalidListener = "InvalidListener"
	// ReasonInvalidRule: a route rule (a match, a filter, a value) cannot be served; the rule
	// is not served, the route's other rules are.
	ReasonInvalidRule = "InvalidRule"
	// ReasonUnsupportedFilter: a filter kubelb does not implement yet.
	ReasonUnsupportedFilter = "UnsupportedFilter"
	// ReasonTooMany: a list is longer than kubelb serves; the rest is ignored.
	ReasonTooMany = "TooMany"
	// ReasonListenerTaken: a TCP or UDP listener forwards to its oldest route; a newer
	// route is attached (and accepted) but gets no traffic there.
	ReasonListenerTaken = "ListenerTaken"
)

// Limits on tenant-written lists (those of the Gateway API CRDs, enforced again because the
// hub does not validate the embedded object).
const (
	maxParentRefs  = 32
	maxHostnames   = 16
	maxRules       = 64
	maxMatches     = 64
	maxBackendRefs = 16
	maxFilters     = 16
	maxHeaders     = 16
	maxValueLen    = 4096
)

const gatewayGroup = gwv1.GroupName

// gateway is one Gateway Route being translated.
type gateway struct {
	route     *v1alpha1.Route
	obj       gwv1.Gateway
	namespace string // of the tenant object
	svc       *corev1.Service
	listeners []*gwListener
	addresses gatewayAddresses // what spec.addresses asks (gateway_addresses.go)
	// refused is why the Gateway is not accepted as a whole (nil: it may be;
	// gateway_infrastructure.go).
	refused *gatewayRefusal
	// own is how many of listeners are the Gateway's (they come first); the others are its
	// ListenerSets' (sets, in the order their listeners rank).
	own  int
	sets []*listenerSet
	// slots is how many of the Gateway's spec.listeners count against routekind.MaxListeners
	// (the first 64, named well or not): its ListenerSets have the rest.
	slots int
	// frontendCAs: the resolved client certificate validations (gateway_clientcert.go).
	frontendCAs map[*gwv1.FrontendTLSValidation]frontendCA
	// policyCAs: the ClientTrafficPolicy client certificate validation of each port
	// (clienttraffic_clientcert.go).
	policyCAs map[gwv1.PortNumber]*policyValidation
	// clientCert is the IR Secret presented to TLS backends ("" for none); clientCertCond
	// the Gateway's ResolvedRefs condition when spec.tls.backend's reference cannot be used.
	clientCert     string
	clientCertCond *metav1.Condition
}

// listener families: listeners of one family may share a port.
const (
	familyHTTP = "HTTP" // HTTP listeners
	familyTLS  = "TLS"  // HTTPS and TLS listeners (either mode): SNI chains
	familyTCP  = "TCP"  // one TCP listener
	familyUDP  = "UDP"  // one UDP listener
)

// gwListener is one listener of a Gateway.
type gwListener struct {
	gw       *gateway
	set      *listenerSet // the ListenerSet it comes from; nil for the Gateway's own
	spec     gwv1.Listener
	section  string
	hostname string // "" for none; lower case
	family   string
	mode     gwv1.TLSModeType
	kinds    []gwv1.RouteGroupKind // supported kinds
	envoy    uint32                // Envoy listener port; 0 when not allocated

	accepted, conflicted, resolved, programmed metav1.Condition
	// attachable: accepted and not conflicted — routes may attach and are counted in
	// attachedRoutes even when the listener's references do not resolve (Gateway API: the
	// count depends on allowedRoutes and parentRefs only); valid: attachable with its refs
	// resolved; served: valid with its port allocated (it gets Envoy configuration).
	attachable bool
	valid      bool
	served     bool
	attached   int32

	secrets []string // HTTPS, TLS in mode Terminate: the certificates
	// someCertificates: some certificateRefs could not be used (ResolvedRefs False), the
	// listener is served with the others.
	someCertificates bool
	// validation (HTTPS): the client certificate validation of the Gateway for its port;
	// someCACertificates: some of its CA certificate references could not be used, the
	// listener is served with the others.
	validation         *ir.ClientValidation
	someCACertificates bool
	// vhosts (HTTP, HTTPS) by hostname ("*" for any): candidate routes, sorted at the end.
	vhosts map[string][]*candidate
	// stream (TCP, UDP): the one attached route's backends and owner.
	stream      streamTo
	streamOwner ir.ObjectRef
	streamRoute string
	// sni (TLS, either mode): the attached TLSRoutes' SNI names → backends, in attachment
	// order.
	sni []sniChain
}

type sniChain struct {
	names []string
	to    streamTo
	owner ir.ObjectRef
}

func (l *gwListener) ref(t *l7) ir.ObjectRef { return t.ref(l.route(), l.section) }

// route is the Route of the object the listener is written in: its Gateway's, or its
// ListenerSet's (its conditions, problems and owners are that object's).
func (l *gwListener) route() *v1alpha1.Route {
	if l.set != nil {
		return l.set.route
	}
	return l.gw.route
}

// namespace is the namespace of the object the listener is written in: allowedRoutes'
// "Same" and its certificateRefs' default namespace are that one.
func (l *gwListener) namespace() string {
	if l.set != nil {
		return l.set.namespace
	}
	return l.gw.namespace
}

// configName names the listener in Envoy route configurations: its name, with its
// ListenerSet's Route name before it for a ListenerSet's (names are unique only within the
// object that has them).
func (l *gwListener) configName() string {
	if l.set != nil {
		return l.set.route.Name + "/" + string(l.spec.Name)
	}
	return string(l.spec.Name)
}

// gateways is the Gateway API front end: the tenant's Gateway Routes and the routes attached
// to them (HTTPRoute, GRPCRoute, TLSRoute, TCPRoute, UDPRoute). See docs/l7.md.
func (t *l7) gateways() {
	var gws []*gateway
	for _, r := range t.byKind[routekind.Gateway] {
		if g := t.gateway(r); g != nil {
			gws = append(gws, g)
		}
	}
	a := &attacher{t: t, gateways: gws}
	sets := t.listenerSets(a)
	for _, g := range gws {
		t.finishGateway(g)
	}
	for _, r := range t.byKind[routekind.HTTPRoute] {
		a.rulesRoute(r, KindHTTPRoute)
	}
	for _, r := range t.byKind[routekind.GRPCRoute] {
		a.rulesRoute(r, KindGRPCRoute)
	}
	for _, r := range t.byKind[routekind.TLSRoute] {
		a.streamRoute(r, KindTLSRoute)
	}
	for _, r := range t.byKind[routekind.TCPRoute] {
		a.streamRoute(r, KindTCPRoute)
	}
	for _, r := range t.byKind[routekind.UDPRoute] {
		a.streamRoute(r, KindUDPRoute)
	}
	for _, g := range gws {
		t.emitGateway(g)
		t.gatewayStatus(g)
	}
	for _, s := range sets {
		t.listenerSetStatus(s)
	}
}

// transitionTime is the lastTransitionTime of every condition the front end writes: the
// hub Route's creationTimestamp, so the status is a pure function of the input (the status
// writer keeps existing transition times while a condition is unchanged). The Unix epoch
// stands in when it is unset: a zero metav1.Time is written as null, which the CRDs refuse.
func transitionTime(r *v1alpha1.Route) metav1.Time {
	if !r.CreationTimestamp.IsZero() {
		return metav1.NewTime(r.CreationTimestamp.UTC())
	}
	return metav1.NewTime(time.Unix(0, 0).UTC())
}

func (t *l7) cond(r *v1alpha1.Route, typ string, ok bool, reason, format string, args ...any) metav1.Condition {
	s := metav1.ConditionTrue
	if !ok {
		s = metav1.ConditionFalse
	}
	return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: fmt.Sprintf(format, args...),
		ObservedGeneration: t.generation(r), LastTransitionTime: transitionTime(r)}
}

// gateway reads a Gateway Route and validates its listeners; nil when it cannot be read.
func (t *l7) gateway(r *v1alpha1.Route) *gateway {
	g := &gateway{route: r}
	if !t.decode(r, &g.obj) {
		return nil
	}
	g.namespace = g.obj.Namespace
	g.svc = t.routeService(r.Name)
	g.addresses = readGatewayAddresses(g.obj.Spec.Addresses)
	g.refused = gatewayRefused(&g.obj.Spec, g.addresses)
	specs := g.obj.Spec.Listeners
	if n, problem := routekind.ListenersServed(len(specs)); problem != "" {
		t.problems.Add(t.ref(r, ""), ir.SeverityError, ReasonTooMany, "%s", problem)
		specs = specs[:n]
	}
	g.slots = len(specs)
	names := map[string]bool{}
	for i := range specs {
		l := &gwListener{gw: g, spec: specs[i], vhosts: map[string][]*candidate{}}
		if !t.listenerName(l, i, names) {
			continue // a listener without a usable name cannot have a status entry
		}
		t.checkListener(l)
		g.listeners = append(g.listeners, l)
	}
	g.own = len(g.listeners)
	own := make([]string, 0, g.own)
	for _, l := range g.listeners {
		own = append(own, string(l.spec.Name))
	}
	t.checkPolicySections(r, own, "listener")
	t.backendClientCertificate(g)
	return g
}

// finishGateway decides the conflicts among the listeners of a Gateway and of the
// ListenerSets it takes (the Gateway's first, then each ListenerSet's in rank), and which are
// served.
func (t *l7) finishGateway(g *gateway) {
	t.conflicts(g)
	for _, l := range g.listeners {
		t.finishListener(l)
	}
	if g.refused != nil {
		t.refuseListeners(g)
	}
}

// checkListener validates one listener and sets its Accepted, ResolvedRefs and (default)
// Conflicted conditions.
func (t *l7) checkListener(l *gwListener) {
	r := l.route()
	l.accepted = t.cond(r, string(gwv1.ListenerConditionAccepted), true, string(gwv1.ListenerReasonAccepted), "the listener is valid")
	l.resolved = t.cond(r, string(gwv1.ListenerConditionResolvedRefs), true, string(gwv1.ListenerReasonResolvedRefs), "every reference is resolved")
	l.conflicted = t.cond(r, string(gwv1.ListenerConditionConflicted), false, string(gwv1.ListenerReasonNoConflicts), "no conflict with another listener")
	refuse := func(reason gwv1.ListenerConditionReason, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		l.accepted = t.cond(r, string(gwv1.ListenerConditionAccepted), false, string(reason), "%s", msg)
		t.problems.Add(l.ref(t), ir.SeverityError, string(reason), "%s; the listener is not served", msg)
	}
	if l.spec.Port < 1 || l.spec.Port > 65535 {
		refuse(gwv1.ListenerReasonPortUnavailable, "port %d is out of range 1-65535", l.spec.Port)
		return
	}
	if h := l.spec.Hostname; h != nil && *h != "" {
		l.hostname = strings.ToLower(string(*h))
		if !validHostname(l.hostname, true) || strings.Contains(l.hostname, "*") && !strings.HasPrefix(l.hostname, "*.") {
			refuse(gwv1.ListenerReasonUnsupportedValue, "hostname %q is not a DNS name (a leading \"*.\" is allowed)", truncate(l.hostname))
			return
		}
	}
	var kinds []string
	switch l.spec.Protocol {
	case gwv1.HTTPProtocolType:
		l.family, kinds = familyHTTP, []string{KindHTTPRoute, KindGRPCRoute}
	case gwv1.HTTPSProtocolType:
		l.family, kinds = familyTLS, []string{KindHTTPRoute, KindGRPCRoute}
		l.mode = gwv1.TLSModeTerminate
		if tls := l.spec.TLS; tls != nil && tls.Mode != nil && *tls.Mode != gwv1.TLSModeTerminate {
			refuse(gwv1.ListenerReasonUnsupportedValue, "an HTTPS listener terminates TLS; tls.mode %q is not allowed (use protocol TLS for passthrough)", truncate(string(*tls.Mode)))
			return
		}
	case gwv1.TLSProtocolType:
		l.family, kinds = familyTLS, []string{KindTLSRoute}
		l.mode = gwv1.TLSModeTerminate
		if tls := l.spec.TLS; tls != nil && tls.Mode != nil {
			l.mode = *tls.Mode
		}
		if l.mode != gwv1.TLSModePassthrough && l.mode != gwv1.TLSModeTerminate {
			refuse(gwv1.ListenerReasonUnsupportedValue, "tls.mode %q is not Terminate or Passthrough", truncate(string(l.mode)))
			return
		}
	case gwv1.TCPProtocolType:
		l.family, kinds = familyTCP, []string{KindTCPRoute}
	case gwv1.UDPProtocolType:
		l.family, kinds = familyUDP, []string{KindUDPRoute}
	default:
		refuse(gwv1.ListenerReasonUnsupportedProtocol, "protocol %q is not supported (HTTP, HTTPS, TLS, TCP, UDP are)", truncate(string(l.spec.Protocol)))
		return
	}
	// Route kinds: the allowed kinds the protocol supports; any other is InvalidRouteKinds.
	if ar := l.spec.AllowedRoutes; ar != nil && len(ar.Kinds) > 0 {
		var bad []string
		for _, k := range ar.Kinds {
			group := gatewayGroup
			if k.Group != nil {
				group = string(*k.Group)
			}
			if group == gatewayGroup && slices.Contains(kinds, string(k.Kind)) {
				if !slices.ContainsFunc(l.kinds, func(o gwv1.RouteGroupKind) bool { return o.Kind == k.Kind }) {
					l.kinds = append(l.kinds, routeKind(string(k.Kind)))
				}
				continue
			}
			bad = append(bad, truncate(group+"/"+string(k.Kind)))
		}
		if len(bad) > 0 {
			msg := fmt.Sprintf("route kinds %s cannot attach to a %s listener", strings.Join(bad, ", "), l.spec.Protocol)
			l.resolved = t.cond(r, string(gwv1.ListenerConditionResolvedRefs), false, string(gwv1.ListenerReasonInvalidRouteKinds), "%s", msg)
			sev := ir.SeverityWarning
			if len(l.kinds) == 0 {
				sev = ir.SeverityError
			}
			t.problems.Add(l.ref(t), sev, string(gwv1.ListenerReasonInvalidRouteKinds), "%s", msg)
		}
	} else {
		for _, k := range kinds {
			l.kinds = append(l.kinds, routeKind(k))
		}
	}
	if l.mode == gwv1.TLSModeTerminate {
		t.listenerCertificate(l)
	}
	if l.spec.Protocol == gwv1.HTTPSProtocolType || l.mode == gwv1.TLSModeTerminate {
		t.clientValidation(l) // TLS listeners: a ClientTrafficPolicy's only
	}
}

func routeKind(kind string) gwv1.RouteGroupKind {
	g := gwv1.Group(gatewayGroup)
	return gwv1.RouteGroupKind{Group: &g, Kind: gwv1.Kind(kind)}
}

// listenerCertificate resolves the certificates of a listener that terminates TLS (HTTPS, or
// TLS in mode Terminate): every certificateRef, in order (Envoy picks one per connection by
// SNI and the client's key types). A ref that cannot be used is reported (ResolvedRefs False
// with its reason) and left out; the listener is served with the others, and not at all
// when none is left.
func (t *l7) listenerCertificate(l *gwListener) {
	r := l.route()
	fail := func(reason gwv1.ListenerConditionReason, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		l.resolved = t.cond(r, string(gwv1.ListenerConditionResolvedRefs), false, string(reason), "%s", msg)
		t.problems.Add(l.ref(t), ir.SeverityError, string(reason), "%s; the listener is not served", msg)
	}
	if l.spec.TLS == nil || len(l.spec.TLS.CertificateRefs) == 0 {
		what := "an HTTPS listener"
		if l.spec.Protocol == gwv1.TLSProtocolType {
			what = "a TLS listener in tls.mode Terminate"
		}
		fail(gwv1.ListenerReasonInvalidCertificateRef, "%s needs tls.certificateRefs", what)
		return
	}
	refs := l.spec.TLS.CertificateRefs
	if len(refs) > maxCertificateRefs { // the CRD's bound, which a hub Route's embedded Gateway is not validated against
		t.problems.Add(l.ref(t), ir.SeverityWarning, ReasonTooMany, "only the first %d of %d certificateRefs are served", maxCertificateRefs, len(refs))
		refs = refs[:maxCertificateRefs]
	}
	var (
		reason gwv1.ListenerConditionReason
		msgs   []string
	)
	for i, ref := range refs {
		name, why, msg := t.listenerCertificateRef(l, ref)
		if why != "" {
			if reason == "" || why == gwv1.ListenerReasonRefNotPermitted { // RefNotPermitted wins: the user must add a grant
				reason = why
			}
			if len(refs) > 1 {
				msg = fmt.Sprintf("certificateRefs[%d]: %s", i, msg)
			}
			msgs = append(msgs, msg)
			continue
		}
		if !slices.Contains(l.secrets, name) {
			l.secrets = append(l.secrets, name)
		}
	}
	switch {
	case reason == "":
	case len(l.secrets) == 0:
		fail(reason, "%s", strings.Join(msgs, "; "))
	default:
		msg := strings.Join(msgs, "; ")
		l.resolved = t.cond(r, string(gwv1.ListenerConditionResolvedRefs), false, string(reason), "%s", msg)
		l.someCertificates = true
		t.problems.Add(l.ref(t), ir.SeverityWarning, string(reason), "%s; the listener is served with its other certificates", msg)
	}
}

// maxCertificateRefs is Gateway API's bound on a listener's tls.certificateRefs.
const maxCertificateRefs = 64

// listenerCertificateRef resolves one certificateRef of a listener into the name of its IR
// Secret, or says why it cannot be used.
func (t *l7) listenerCertificateRef(l *gwListener, ref gwv1.SecretObjectReference) (string, gwv1.ListenerConditionReason, string) {
	group, kind := "", "Secret"
	if ref.Group != nil {
		group = string(*ref.Group)
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	if (group != "" && group != "core") || kind != "Secret" {
		return "", gwv1.ListenerReasonInvalidCertificateRef, fmt.Sprintf("certificateRef %s/%s is not a Secret", truncate(group), truncate(kind))
	}
	ns := l.namespace()
	if ref.Namespace != nil && *ref.Namespace != "" {
		ns = string(*ref.Namespace)
	}
	if ns != l.namespace() && !t.granted(l.route(), "", "Secret", ns, string(ref.Name)) {
		return "", gwv1.ListenerReasonRefNotPermitted, fmt.Sprintf("Secret %s/%s is in another namespace and no ReferenceGrant there permits it%s",
			truncate(ns), truncate(string(ref.Name)), noContext(l.route()))
	}
	name, reason, msg := t.certificate(l.ref(t), ns, string(ref.Name))
	if reason != "" {
		return "", gwv1.ListenerReasonInvalidCertificateRef, fmt.Sprintf("%s: %s", reason, msg)
	}
	return name, "", ""
}

// noContext explains a refusal caused by a Route without source context.
func noContext(r *v1alpha1.Route) string {
	if sourceContext(r) == nil {
		return " (the Route carries no source context, as from a KubeLB CE ccm: cross-namespace references are refused)"
	}
	return ""
}

func sourceContext(r *v1alpha1.Route) *v1alpha1.SourceContext {
	if r.Spec.Source.Kubernetes == nil {
		return nil
	}
	return r.Spec.Source.Kubernetes.Context
}

// granted reports whether the Route's source context lists a cross-namespace reference as
// permitted by a ReferenceGrant.
func (t *l7) granted(r *v1alpha1.Route, group, kind, namespace, name string) bool {
	ctx := sourceContext(r)
	if ctx == nil {
		return false
	}
	for _, g := range ctx.GrantedRefs {
		gg := g.Group
		if gg == "core" {
			gg = ""
		}
		if gg == group && g.Kind == kind && g.Namespace == namespace && g.Name == name {
			return true
		}
	}
	return false
}

// conflicts marks listeners that cannot share their port with an earlier listener of the
// Gateway: another family (ProtocolConflict), a second TCP or UDP listener, or the same
// hostname (HostnameConflict). The earlier listener keeps the port.
func (t *l7) conflicts(g *gateway) {
	type key struct {
		port int32
		udp  bool
	}
	first := map[key]*gwListener{}
	hosts := map[key]map[string]bool{}
	for _, l := range g.listeners {
		if l.family == "" { // not accepted
			continue
		}
		k := key{int32(l.spec.Port), l.family == familyUDP}
		f, ok := first[k]
		if !ok {
			first[k], hosts[k] = l, map[string]bool{l.hostname: true}
			continue
		}
		var reason gwv1.ListenerConditionReason
		var msg string
		switch {
		case f.family != l.family:
			reason, msg = gwv1.ListenerReasonProtocolConflict, fmt.Sprintf("port %d is already used by listener %s (%s)", l.spec.Port, truncate(string(f.spec.Name)), f.spec.Protocol)
		case l.family == familyTCP || l.family == familyUDP:
			reason, msg = gwv1.ListenerReasonProtocolConflict, fmt.Sprintf("port %d already carries %s listener %s; a %s port serves one listener", l.spec.Port, f.spec.Protocol, truncate(string(f.spec.Name)), l.spec.Protocol)
		case hosts[k][l.hostname]:
			reason, msg = gwv1.ListenerReasonHostnameConflict, fmt.Sprintf("another listener on port %d already has hostname %q", l.spec.Port, cmp.Or(l.hostname, "(none)"))
		default:
			hosts[k][l.hostname] = true
			continue
		}
		// Gateway API: a conflicted listener is not accepted, nor programmed, for that reason.
		l.conflicted = t.cond(l.route(), string(gwv1.ListenerConditionConflicted), true, string(reason), "%s", msg)
		l.accepted = t.cond(l.route(), string(gwv1.ListenerConditionAccepted), false, string(reason), "%s", msg)
		t.problems.Add(l.ref(t), ir.SeverityError, string(reason), "%s; the listener is not served", msg)
	}
}

// finishListener decides whether the listener is served and sets Programmed.
func (t *l7) finishListener(l *gwListener) {
	r := l.route()
	l.attachable = l.accepted.Status == metav1.ConditionTrue && l.conflicted.Status == metav1.ConditionFalse
	ok := l.attachable &&
		(l.resolved.Status == metav1.ConditionTrue || len(l.kinds) > 0 && l.resolved.Reason == string(gwv1.ListenerReasonInvalidRouteKinds) ||
			l.someCertificates && len(l.secrets) > 0 || l.someCACertificates && l.validation != nil)
	if !ok {
		reason := gwv1.ListenerReasonInvalid
		if l.conflicted.Status == metav1.ConditionTrue {
			reason = gwv1.ListenerConditionReason(l.conflicted.Reason)
		}
		l.programmed = t.cond(r, string(gwv1.ListenerConditionProgrammed), false, string(reason), "the listener is not served: see its other conditions")
		return
	}
	l.valid = true
	proto := corev1.ProtocolTCP
	if l.family == familyUDP {
		proto = corev1.ProtocolUDP
	}
	l.envoy = listenerPort(l.gw.svc, int32(l.spec.Port), proto)
	if l.envoy == 0 {
		if exhaustedPort(l.gw.svc, int32(l.spec.Port), proto) {
			msg := fmt.Sprintf("the hub's listener port range has no port left for %s/%d", proto, l.spec.Port)
			l.programmed = t.cond(r, string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerReasonPending), "%s", msg)
			t.problems.Add(l.ref(t), ir.SeverityError, ReasonListenerPortNotAllocated, "%s; the listener is not served until ports are freed", msg)
			return
		}
		msg := fmt.Sprintf("the hub Service %s%s has no Envoy listener port for %s/%d yet", v1alpha1.GatewayServicePrefix, truncate(l.gw.route.Name), proto, l.spec.Port)
		l.programmed = t.cond(r, string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerReasonPending), "%s", msg)
		t.problems.Add(l.ref(t), ir.SeverityWarning, ReasonPortPending, "%s; the manager has not allocated it yet", msg)
		return
	}
	l.served = true
	l.programmed = t.cond(r, string(gwv1.ListenerConditionProgrammed), true, string(gwv1.ListenerReasonProgrammed), "the listener is served")
}

// gatewayStatus records the Gateway's status.
func (t *l7) gatewayStatus(g *gateway) {
	r := g.route
	st := gwv1.GatewayStatus{}
	if g.svc != nil {
		for _, ing := range g.svc.Status.LoadBalancer.Ingress {
			switch {
			case ing.IP != "":
				typ := gwv1.IPAddressType
				st.Addresses = append(st.Addresses, gwv1.GatewayStatusAddress{Type: &typ, Value: ing.IP})
			case ing.Hostname != "":
				typ := gwv1.HostnameAddressType
				st.Addresses = append(st.Addresses, gwv1.GatewayStatusAddress{Type: &typ, Value: ing.Hostname})
			}
		}
	}
	if static := t.staticStatusAddresses(g); static != nil {
		st.Addresses = static // exactly the asked address, not the others the hub Service shows
	}
	own := g.listeners[:g.own] // the ListenerSets' have their own status
	valid := 0
	for _, l := range own {
		if l.accepted.Status == metav1.ConditionTrue && l.conflicted.Status == metav1.ConditionFalse {
			valid++
		}
	}
	switch {
	case valid == len(own) && len(own) > 0:
		meta.SetStatusCondition(&st.Conditions, t.cond(r, string(gwv1.GatewayConditionAccepted), true, string(gwv1.GatewayReasonAccepted), "the Gateway is accepted"))
	case valid > 0:
		meta.SetStatusCondition(&st.Conditions, t.cond(r, string(gwv1.GatewayConditionAccepted), true, string(gwv1.GatewayReasonListenersNotValid), "%d of %d listeners are not valid", len(own)-valid, len(own)))
	default:
		meta.SetStatusCondition(&st.Conditions, t.cond(r, string(gwv1.GatewayConditionAccepted), false, string(gwv1.GatewayReasonListenersNotValid), "no listener is valid"))
		t.problems.Add(t.ref(r, ""), ir.SeverityError, string(gwv1.GatewayReasonListenersNotValid), "no listener of the Gateway is valid; nothing is served")
	}
	if len(st.Addresses) == 0 {
		meta.SetStatusCondition(&st.Conditions, t.cond(r, string(gwv1.GatewayConditionProgrammed), false, string(gwv1.GatewayReasonAddressNotAssigned), "the hub Service %s%s has no address yet", v1alpha1.GatewayServicePrefix, truncate(r.Name)))
		t.problems.Add(t.ref(r, ""), ir.SeverityError, string(gwv1.GatewayReasonAddressNotAssigned), "the hub Service %s%s has no address yet", v1alpha1.GatewayServicePrefix, truncate(r.Name))
	} else {
		meta.SetStatusCondition(&st.Conditions, t.cond(r, string(gwv1.GatewayConditionProgrammed), true, string(gwv1.GatewayReasonProgrammed), "the Gateway is served"))
	}
	if c := t.resolvedRefsCondition(g); c != nil {
		meta.SetStatusCondition(&st.Conditions, *c)
	}
	if ports := g.insecureFallback(); len(ports) > 0 {
		meta.SetStatusCondition(&st.Conditions, t.cond(r, string(gwv1.GatewayConditionInsecureFrontendValidationMode), true, string(gwv1.GatewayReasonConfigurationChanged),
			"client certificate validation (%s) is AllowInsecureFallback: clients without a certificate, or with one that does not verify, are accepted", strings.Join(ports, ", ")))
	}
	t.addressConditions(g, &st)
	st.AttachedListenerSets = g.attachedListenerSets()
	for _, l := range own {
		kinds, conds := l.statusParts()
		st.Listeners = append(st.Listeners, gwv1.ListenerStatus{Name: l.spec.Name, SupportedKinds: kinds, AttachedRoutes: l.attached, Conditions: conds})
	}
	t.setStatus(r, KindGateway, st)
}

// statusParts are what a listener's status says, in a Gateway's and in a ListenerSet's alike:
// its supported kinds (never null, which the CRDs refuse) and its conditions.
func (l *gwListener) statusParts() ([]gwv1.RouteGroupKind, []metav1.Condition) {
	kinds := l.kinds
	if kinds == nil {
		kinds = []gwv1.RouteGroupKind{}
	}
	var conds []metav1.Condition
	for _, c := range []metav1.Condition{l.accepted, l.conflicted, l.resolved, l.programmed} {
		meta.SetStatusCondition(&conds, c)
	}
	return kinds, conds
}

// emitGateway adds the Envoy listeners of a Gateway's served listeners: one per port and
// transport protocol.
func (t *l7) emitGateway(g *gateway) {
	type key struct {
		port uint32
		udp  bool
	}
	byPort := map[key][]*gwListener{}
	var keys []key
	for _, l := range g.listeners {
		if !l.served {
			continue
		}
		k := key{l.envoy, l.family == familyUDP}
		if _, ok := byPort[k]; !ok {
			keys = append(keys, k)
		}
		byPort[k] = append(byPort[k], l)
	}
	for _, k := range keys {
		ls := byPort[k]
		first := ls[0]
		proto := "tcp"
		if k.udp {
			proto = "udp"
		}
		il := &ir.Listener{
			Name:       fmt.Sprintf("gateway/%s/%s-%d", g.route.Name, proto, first.spec.Port),
			Address:    t.opts.ListenerAddress,
			Port:       k.port,
			StatPrefix: fmt.Sprintf("%s/%s/%s-%d", g.namespace, g.obj.Name, proto, first.spec.Port),
			AccessLog:  t.opts.AccessLog && !k.udp,
		}
		if other := t.boundBy(il.Address, k.port, k.udp); other != "" {
			for _, l := range ls {
				t.problems.Add(l.ref(t), ir.SeverityError, ReasonListenerPortConflict, "Envoy listener port %d is already used by %s; the listener is not served", k.port, other)
			}
			continue
		}
		for _, l := range ls {
			il.Owners = append(il.Owners, l.ref(t))
		}
		var quic *ir.Listener
		switch first.family {
		case familyHTTP:
			il.Protocol = ir.ProtocolHTTP
			il.HeaderLimits, il.StreamIdleTimeout, il.ClientTraffic = t.in.HeaderLimits, ir.Duration(t.opts.StreamIdleTimeout), t.clientTrafficFor(g, ls)
			t.http3NotHere(ls, gwv1.HTTPProtocolType, "it is an HTTP listener, and HTTP/3 needs TLS (HTTPS listeners only)") // clienttraffic_http3.go
			rc := &ir.RouteConfig{Name: fmt.Sprintf("gateway/%s/http-%d", g.route.Name, first.spec.Port)}
			rc.VirtualHosts = isolatedVirtualHosts(ls, t.vhosts)
			il.RouteConfig, il.CORS, il.StatefulSession = rc.Name, rc.HasCORS(), rc.HasSessionPersistence()
			t.cfg.RouteConfigs = append(t.cfg.RouteConfigs, rc)
		case familyTLS:
			il.Protocol = ir.ProtocolHTTPS
			s := t.clientSettingsFor(g, ls)
			il.HeaderLimits, il.StreamIdleTimeout, il.ClientTraffic = t.in.HeaderLimits, ir.Duration(t.opts.StreamIdleTimeout), t.clientTrafficOf(g, ls, s)
			t.http3NotHere(ls, gwv1.TLSProtocolType, "it is a TLS listener (HTTPS listeners only)")
			made := len(t.cfg.RouteConfigs)
			il.TLS, il.Owners, il.CORS, il.StatefulSession = t.tlsChains(g, ls, il.Owners)
			if len(il.TLS) == 0 {
				continue // nothing to serve yet (TLS listeners without routes)
			}
			quic = t.http3Listener(g, ls, il, s, t.cfg.RouteConfigs[made:]) // clienttraffic_http3.go
		case familyTCP, familyUDP:
			if len(first.stream.backends) == 0 {
				continue // no route attached: nothing to forward to
			}
			il.Cluster, il.Backends, il.FailedWeight = first.stream.target()
			il.Authorization, il.HashSourceIP = first.stream.authorization, first.stream.hashSourceIP // gateway_stream_policy.go
			il.Owners = append(il.Owners, first.streamOwner)
			il.Protocol = ir.ProtocolTCP
			if !k.udp {
				il.ClientTraffic = t.clientTrafficForTCP(g, ls)
			}
			if k.udp {
				il.Protocol = ir.ProtocolUDP
				il.IdleTimeout = ir.Duration(t.opts.UDPSessionIdleTimeout)
			}
		}
		t.cfg.Listeners = append(t.cfg.Listeners, il)
		if quic != nil {
			t.cfg.Listeners = append(t.cfg.Listeners, quic)
		}
	}
}

// boundBy names the IR listener already bound to the same address, port and transport, or "".
// The listeners are indexed as they are appended (the first bound wins), so a tenant of many
// Gateways costs one lookup per Envoy port.
func (t *l7) boundBy(address string, port uint32, udp bool) string {
	if t.bound == nil {
		t.bound = map[boundKey]string{}
	}
	for _, o := range t.cfg.Listeners[t.boundIndexed:] {
		k := boundKey{o.Address, o.Port, o.Protocol.BindsUDP()}
		if _, dup := t.bound[k]; !dup {
			t.bound[k] = o.Name
		}
	}
	t.boundIndexed = len(t.cfg.Listeners)
	if name, ok := t.bound[boundKey{address, port, udp}]; ok {
		return "listener " + name
	}
	return ""
}

type boundKey struct {
	address string
	port    uint32
	udp     bool
}

// listenerName gives listener i of a Gateway or ListenerSet its section, and reports whether
// its name is usable: a DNS subdomain not taken by an earlier listener of the same object
// (names). An unusable one is reported under its index and is not served.
func (t *l7) listenerName(l *gwListener, i int, names map[string]bool) bool {
	name := string(l.spec.Name)
	l.section = "listener " + truncate(name)
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 || names[name] {
		l.section = fmt.Sprintf("listener %d", i)
		msg := "the listener name is repeated"
		if len(errs) > 0 {
			msg = fmt.Sprintf("the listener name %q is not a DNS subdomain: %s", truncate(name), strings.Join(errs, "; "))
		}
		t.problems.Add(l.ref(t), ir.SeverityError, ReasonInvalidListener, "%s; the listener is not served", msg)
		return false
	}
	names[name] = true
	return true
}
