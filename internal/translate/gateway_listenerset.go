package translate

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/routekind"
)

// listenerSet is one ListenerSet Route being translated (Gateway API v1.6, GEP-1713): its
// listeners join those of the Gateway its spec.parentRef names when that Gateway's
// spec.allowedListeners takes it (routekind.ListenerSetAllowed, the rule the Route controller
// allocates their ports by). They are served on the Gateway's hub Service and Envoy
// listeners, after the Gateway's own and those of older ListenerSets, which win conflicts.
type listenerSet struct {
	route     *v1alpha1.Route
	obj       gwv1.ListenerSet
	namespace string
	gw        *gateway // the Gateway that takes it; nil when none does
	// listeners are all of its listeners with a usable name, in spec order: those its
	// Gateway serves and those beyond the Gateway's listener limit.
	listeners []*gwListener
	// refused is the reason of its Accepted condition when no Gateway takes it, why the
	// message; "" when one does.
	refused gwv1.ListenerSetConditionReason
	why     string
}

// listenerSets reads the tenant's ListenerSet Routes, gives each Gateway the listeners of the
// ListenerSets it takes (at most routekind.MaxListeners with its own: the others are refused
// with TooManyListeners) and returns them all, for their status.
func (t *l7) listenerSets(a *attacher) []*listenerSet {
	var all []*listenerSet
	taken := map[*gateway][]*listenerSet{}
	for _, r := range t.byKind[routekind.ListenerSet] {
		s := &listenerSet{route: r}
		if !t.decode(r, &s.obj) {
			continue
		}
		s.namespace = s.obj.Namespace
		all = append(all, s)
		if a.setsByName == nil {
			a.setsByName = map[nsName]*listenerSet{}
		}
		if _, dup := a.setsByName[nsName{s.namespace, s.obj.Name}]; !dup {
			a.setsByName[nsName{s.namespace, s.obj.Name}] = s
		}
		ns, name, ok := routekind.ListenerSetParent(&r.Spec.Source.Kubernetes.Route)
		if !ok {
			s.refuse(t, gwv1.ListenerSetReasonNotAllowed, "spec.parentRef does not name a Gateway (group gateway.networking.k8s.io, kind Gateway)")
			continue
		}
		g := a.gateway(ns, name)
		switch {
		case g == nil:
			s.refuse(t, gwv1.ListenerSetReasonParentNotAccepted, fmt.Sprintf("Gateway %s/%s is not among the tenant's Gateways kubelb serves", truncate(ns), truncate(name)))
			continue
		case g.refused != nil:
			s.refuse(t, gwv1.ListenerSetReasonParentNotAccepted, fmt.Sprintf("Gateway %s/%s is not accepted (see its Accepted condition)", truncate(ns), truncate(name)))
			continue
		}
		var from string
		var sel *metav1.LabelSelector
		if al := g.obj.Spec.AllowedListeners; al != nil && al.Namespaces != nil {
			if al.Namespaces.From != nil {
				from = string(*al.Namespaces.From)
			}
			sel = al.Namespaces.Selector
		}
		if ok, why := routekind.ListenerSetAllowed(from, sel, g.namespace, s.namespace, sourceContext(r)); !ok {
			s.refuse(t, gwv1.ListenerSetReasonNotAllowed, why)
			continue
		}
		taken[g] = append(taken[g], s)
	}
	for _, g := range a.gateways {
		sets := taken[g]
		slices.SortStableFunc(sets, func(x, y *listenerSet) int { return routekind.CompareListenerSets(x.route, y.route) })
		room := routekind.MaxListeners - g.slots
		for _, s := range sets {
			s.gw = g
			g.sets = append(g.sets, s)
			room = t.setListeners(g, s, room)
		}
	}
	return all
}

// refuse records that no Gateway takes the ListenerSet.
func (s *listenerSet) refuse(t *l7, reason gwv1.ListenerSetConditionReason, why string) {
	s.refused, s.why = reason, why
	sev := ir.SeverityError
	t.problems.Add(t.ref(s.route, ""), sev, string(reason), "%s; the ListenerSet's listeners are not served", why)
}

// setListeners reads a ListenerSet's listeners as listeners of Gateway g, which has room
// for that many more; those beyond are refused (TooManyListeners). It returns the room left.
func (t *l7) setListeners(g *gateway, s *listenerSet, room int) int {
	r := s.route
	specs := s.obj.Spec.Listeners
	if len(specs) > routekind.MaxListeners {
		t.problems.Add(t.ref(r, ""), ir.SeverityError, ReasonTooMany, "the ListenerSet has %d listeners; only the first %d are read", len(specs), routekind.MaxListeners)
		specs = specs[:routekind.MaxListeners]
	}
	names := map[string]bool{}
	for i := range specs {
		e := &specs[i]
		l := &gwListener{gw: g, set: s, vhosts: map[string][]*candidate{}, spec: gwv1.Listener{
			Name: e.Name, Hostname: e.Hostname, Port: e.Port, Protocol: e.Protocol, TLS: e.TLS, AllowedRoutes: e.AllowedRoutes}}
		if !t.listenerName(l, i, names) {
			continue
		}
		s.listeners = append(s.listeners, l)
		if room == 0 {
			msg := fmt.Sprintf("Gateway %s/%s already has %d listeners with its own and those of older ListenerSets", truncate(g.namespace), truncate(g.obj.Name), routekind.MaxListeners)
			l.accepted = t.cond(r, string(gwv1.ListenerConditionAccepted), false, string(gwv1.ListenerEntryReasonTooManyListeners), "%s", msg)
			l.conflicted = t.cond(r, string(gwv1.ListenerConditionConflicted), false, string(gwv1.ListenerReasonNoConflicts), "no conflict with another listener")
			l.resolved = t.cond(r, string(gwv1.ListenerConditionResolvedRefs), true, string(gwv1.ListenerReasonResolvedRefs), "not checked: the listener is not accepted")
			l.programmed = t.cond(r, string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerEntryReasonTooManyListeners), "the listener is not served: see Accepted")
			t.problems.Add(l.ref(t), ir.SeverityError, string(gwv1.ListenerEntryReasonTooManyListeners), "%s; the listener is not served", msg)
			continue
		}
		room--
		t.checkListener(l)
		g.listeners = append(g.listeners, l)
	}
	return room
}

// accepted tells whether the ListenerSet is accepted: its Gateway takes it and at least one
// of its listeners is valid (accepted, not conflicted, references resolved).
func (s *listenerSet) accepted() bool {
	return s.gw != nil && slices.ContainsFunc(s.listeners, func(l *gwListener) bool { return l.valid })
}

// attachedListenerSets is the Gateway's status.attachedListenerSets: how many ListenerSets
// it takes are accepted; nil while its spec.allowedListeners allows none and none is.
func (g *gateway) attachedListenerSets() *int32 {
	n := int32(0)
	for _, s := range g.sets {
		if s.accepted() {
			n++
		}
	}
	al := g.obj.Spec.AllowedListeners
	if n == 0 && (al == nil || al.Namespaces == nil || al.Namespaces.From == nil || *al.Namespaces.From == gwv1.NamespacesFromNone) {
		return nil
	}
	return ptr.To(n)
}

// listenerSetStatus records a ListenerSet's status: Accepted and Programmed, and its
// listeners' (as a Gateway's: supportedKinds, attachedRoutes, conditions).
func (t *l7) listenerSetStatus(s *listenerSet) {
	r := s.route
	st := gwv1.ListenerSetStatus{}
	set := func(typ gwv1.ListenerSetConditionType, ok bool, reason gwv1.ListenerSetConditionReason, format string, args ...any) {
		meta.SetStatusCondition(&st.Conditions, t.cond(r, string(typ), ok, string(reason), format, args...))
	}
	valid, served := 0, 0
	for _, l := range s.listeners {
		if l.valid {
			valid++
		}
		if l.served {
			served++
		}
	}
	switch {
	case s.gw == nil:
		set(gwv1.ListenerSetConditionAccepted, false, s.refused, "%s", s.why)
		set(gwv1.ListenerSetConditionProgrammed, false, s.refused, "not served: %s", s.why)
	case valid == 0:
		msg := "no listener of the ListenerSet is valid (see the listeners' conditions)"
		set(gwv1.ListenerSetConditionAccepted, false, gwv1.ListenerSetReasonListenersNotValid, "%s", msg)
		set(gwv1.ListenerSetConditionProgrammed, false, gwv1.ListenerSetReasonListenersNotValid, "%s", msg)
		t.problems.Add(t.ref(r, ""), ir.SeverityError, string(gwv1.ListenerSetReasonListenersNotValid), "%s; nothing of it is served", msg)
	default:
		if valid == len(s.listeners) {
			set(gwv1.ListenerSetConditionAccepted, true, gwv1.ListenerSetReasonAccepted, "Gateway %s/%s takes the ListenerSet", truncate(s.gw.namespace), truncate(s.gw.obj.Name))
		} else {
			set(gwv1.ListenerSetConditionAccepted, true, gwv1.ListenerSetReasonListenersNotValid, "%d of %d listeners are not valid", len(s.listeners)-valid, len(s.listeners))
		}
		if served > 0 {
			set(gwv1.ListenerSetConditionProgrammed, true, gwv1.ListenerSetReasonProgrammed, "served on Gateway %s/%s", truncate(s.gw.namespace), truncate(s.gw.obj.Name))
		} else {
			set(gwv1.ListenerSetConditionProgrammed, false, gwv1.ListenerSetReasonPending, "no listener has its port on the Gateway's hub Service yet")
		}
	}
	for _, l := range s.listeners {
		kinds, conds := l.statusParts()
		st.Listeners = append(st.Listeners, gwv1.ListenerEntryStatus{Name: l.spec.Name, SupportedKinds: kinds, AttachedRoutes: l.attached, Conditions: conds})
	}
	t.setStatus(r, KindListenerSet, st)
}
