package translate

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/routekind"
)

// Settled keeps, for one tenant, the last version of each LoadBalancer and Gateway Route that
// was translated with every listener port it needs, with the hub Service that gave them.
// Translate serves that version while a newer one waits for a port the manager has not
// allocated yet (ReasonPortPending), so no change is served, or given a verdict, before its
// ports exist; an object with no settled version is served as it is (its allocated ports)
// without a verdict. A Settled is not safe for concurrent use; the zero value is ready.
type Settled struct {
	lbs    map[string]*settledLB
	routes map[string]*settledRoute
	// waits remembers, per LoadBalancer, whether its version and its hub Service's wait for
	// a port (lbWaits), so a rebuild checks only what changed.
	waits map[string]*lbWait
	run   uint64 // the Translate calls, to forget what a call did not see
}

type lbWait struct {
	uid, svcUID         types.UID
	version, svcVersion string
	waits               bool
	seen                uint64
}

type settledLB struct {
	lb   v1alpha1.LoadBalancer
	svc  *corev1.Service // nil when it had none
	seen uint64
}

type settledRoute struct {
	route v1alpha1.Route
	svc   *corev1.Service // a copy of its gateway-<route> Service; nil when it had none
	seen  uint64
}

// Waiting is what Translate held back for a listener port: no verdict is given on these
// objects until the translation that follows the allocation.
type Waiting struct {
	// Held are the objects not translated at their current version: LoadBalancers and Gateway
	// Routes served at their last settled version. The translated Input does not have them
	// at their current version, so their generations, problems and statuses are not theirs:
	// leave them out of a report.
	Held map[ir.ObjectRef]bool
	// Translated are objects translated at their current version although a listener port
	// is still pending, because none of theirs is settled (new objects, every object of a
	// manager that just started, Ingresses before the tenant's Ingress Service has its
	// ports): only their allocated ports are served, their tenant objects' statuses are
	// theirs (a Gateway's listener says Pending), but they get no Programmed verdict yet.
	Translated map[ir.ObjectRef]bool
}

// Untold leaves out of what a translation tells of the tenant's objects (their translated
// generations, the problems of the front and back ends, the Routes' statuses) the objects
// Held: not translated at their current version, nothing said of them is theirs yet.
// objects is changed in place; problems and routes are copied when something goes.
func (w Waiting) Untold(objects map[ir.ObjectRef]int64, problems ir.Problems, routes map[string]RouteStatus) (map[ir.ObjectRef]int64, ir.Problems, map[string]RouteStatus) {
	if len(w.Held) == 0 {
		return objects, problems, routes
	}
	cloned := false
	for ref := range w.Held {
		delete(objects, ref)
		if _, ok := routes[ref.Name]; ok && ref.Kind == KindRoute {
			if !cloned {
				routes, cloned = maps.Clone(routes), true
			}
			delete(routes, ref.Name)
		}
	}
	problems = slices.DeleteFunc(slices.Clone(problems), func(p ir.Problem) bool { return w.Held[p.Object.Object()] })
	return objects, problems, routes
}

// Translate runs run (Run, or an Incremental's Run) on in, with each object that waits for a
// listener port (a PortPending problem) at its settled version, or as it is when it has none. It returns the input
// translated last, its result without PortPending problems, and what waits. It remembers
// the objects translated with every port as their settled versions, and forgets those no
// longer in in.
func (s *Settled) Translate(in Input, run func(Input) (Result, error)) (Input, Result, Waiting, error) {
	s.run++
	// LoadBalancers whose own hub Service lacks a port are held before translating (a burst
	// of new LoadBalancers is not translated twice); what only the translation tells (a
	// Route's listener, the Ingress Service's port 443 for a hostname) is held after it.
	w := Waiting{Held: map[ir.ObjectRef]bool{}, Translated: map[ir.ObjectRef]bool{}}
	if pending := s.waitingLoadBalancers(&in); len(pending) > 0 {
		in = s.hold(in, pending, w)
	}
	out, err := run(in)
	if err != nil {
		return in, out, Waiting{}, err
	}
	if pending := pendingObjects(out.Problems); len(pending) > 0 {
		held := len(w.Held)
		in = s.hold(in, pending, w)
		if len(w.Held) > held {
			if out, err = run(in); err != nil {
				return in, out, Waiting{}, err
			}
			for ref := range pendingObjects(out.Problems) { // a settled version can wait too
				w.Translated[ref] = true
			}
		}
		out.Problems = slices.DeleteFunc(slices.Clone(out.Problems), func(p ir.Problem) bool { return p.Reason == ReasonPortPending })
	}
	s.remember(&in, w)
	return in, out, w, nil
}

// waitingLoadBalancers are the LoadBalancers of in with a port their hub Service has no
// listener port for and does not list as exhausted (the translation's PortPending),
// checked again only for those whose version or hub Service's changed.
func (s *Settled) waitingLoadBalancers(in *Input) map[ir.ObjectRef]bool {
	if s.waits == nil {
		s.waits = map[string]*lbWait{}
	}
	var out map[ir.ObjectRef]bool
	for i := range in.LoadBalancers {
		lb := &in.LoadBalancers[i]
		svc := in.HubServices[lb.Name]
		var svcUID types.UID
		var svcVersion string
		if svc != nil {
			svcUID, svcVersion = svc.UID, svc.ResourceVersion
		}
		c := s.waits[lb.Name]
		if c == nil || c.uid != lb.UID || c.version != lb.ResourceVersion || lb.ResourceVersion == "" ||
			c.svcUID != svcUID || c.svcVersion != svcVersion || svcVersion == "" {
			c = &lbWait{uid: lb.UID, version: lb.ResourceVersion, svcUID: svcUID, svcVersion: svcVersion, waits: lbWaits(lb, svc)}
			s.waits[lb.Name] = c
		}
		c.seen = s.run
		if c.waits {
			if out == nil {
				out = map[ir.ObjectRef]bool{}
			}
			out[ir.ObjectRef{Kind: KindLoadBalancer, Namespace: in.Tenant, Name: lb.Name}] = true
		}
	}
	if len(s.waits) > len(in.LoadBalancers) {
		maps.DeleteFunc(s.waits, func(_ string, c *lbWait) bool { return c.seen != s.run })
	}
	return out
}

// lbWaits tells whether a port of lb that the translation would serve has no listener port
// in its hub Service, which does not list it as exhausted either: the l4 front end's
// PortPending.
func lbWaits(lb *v1alpha1.LoadBalancer, svc *corev1.Service) bool {
	hub := indexHubPorts(svc)
	for _, p := range lb.Spec.Ports {
		proto := v1alpha1.ProtocolOrTCP(p.Protocol)
		if proto != corev1.ProtocolTCP && proto != corev1.ProtocolUDP || p.Port < 1 || p.Port > 65535 {
			continue
		}
		if hub.listenerPort(proto, p.Port) == 0 && !hub.exhausted[listenerKey{proto, p.Port}] {
			return true
		}
	}
	return false
}

// pendingObjects are the objects (refs without section) with a PortPending problem.
func pendingObjects(problems ir.Problems) map[ir.ObjectRef]bool {
	var out map[ir.ObjectRef]bool
	for _, p := range problems {
		if p.Reason == ReasonPortPending {
			if out == nil {
				out = map[ir.ObjectRef]bool{}
			}
			out[p.Object.Object()] = true
		}
	}
	return out
}

// hold returns in with the pending objects at their settled versions (those without one as
// they are), recording in w what it held and what waits as it is.
//
// It copies in's LoadBalancers and hub Services only when it serves a settled version: in a
// burst, most waiting LoadBalancers are new and served as they are.
func (s *Settled) hold(in Input, pending map[ir.ObjectRef]bool, w Waiting) Input {
	var lbs []v1alpha1.LoadBalancer // nil while none is replaced
	var hubServices map[string]*corev1.Service
	for i := range in.LoadBalancers {
		lb := &in.LoadBalancers[i]
		ref := ir.ObjectRef{Kind: KindLoadBalancer, Namespace: in.Tenant, Name: lb.Name}
		if !pending[ref] {
			continue
		}
		st := s.lbs[lb.Name]
		if st == nil || st.lb.UID != lb.UID {
			// None settled (new, or a manager that just started): served as it is, its
			// allocated ports only, with no verdict; dropping it would take a live
			// LoadBalancer's listeners away from the proxies.
			w.Translated[ref] = true
			continue
		}
		w.Held[ref] = true
		if lbs == nil {
			lbs, hubServices = slices.Clone(in.LoadBalancers), maps.Clone(in.HubServices)
		}
		lbs[i] = st.lb
		if st.svc != nil {
			hubServices[lb.Name] = st.svc
		} else {
			delete(hubServices, lb.Name)
		}
	}
	if lbs != nil {
		in.LoadBalancers, in.HubServices = lbs, hubServices
	}
	var routes []v1alpha1.Route
	var services []corev1.Service
	for i := range in.Routes {
		rt := &in.Routes[i]
		ref := ir.ObjectRef{Kind: KindRoute, Namespace: in.Tenant, Name: rt.Name}
		if !pending[ref] {
			continue
		}
		st := s.routes[rt.Name]
		if st == nil || st.route.UID != rt.UID || carried(rt) != routekind.Gateway {
			w.Translated[ref] = true
			continue
		}
		if routes == nil {
			routes, services = slices.Clone(in.Routes), slices.Clone(in.RouteServices)
		}
		w.Held[ref] = true
		routes[i] = st.route
		services = slices.DeleteFunc(services, func(svc corev1.Service) bool { return svc.Labels[v1alpha1.LabelRouteName] == rt.Name })
		if st.svc != nil {
			services = append(services, *st.svc)
		}
	}
	if routes != nil {
		in.Routes, in.RouteServices = routes, services
	}
	return in
}

// remember keeps the objects of in that were translated with every port as settled (a copy
// only when their version changed), and forgets the objects no longer in in. Held objects keep
// what was settled.
func (s *Settled) remember(in *Input, w Waiting) {
	if s.lbs == nil {
		s.lbs, s.routes = map[string]*settledLB{}, map[string]*settledRoute{}
	}
	for i := range in.LoadBalancers {
		lb := &in.LoadBalancers[i]
		st := s.lbs[lb.Name]
		ref := ir.ObjectRef{Kind: KindLoadBalancer, Namespace: in.Tenant, Name: lb.Name}
		if !w.Held[ref] && !w.Translated[ref] {
			svc := in.HubServices[lb.Name]
			if st == nil || st.lb.UID != lb.UID || st.lb.ResourceVersion != lb.ResourceVersion || st.lb.ResourceVersion == "" || !sameService(st.svc, svc) {
				// Copies: a pointer into the caller's lists would keep the whole list of
				// this rebuild alive for as long as the version stays settled.
				st = &settledLB{lb: *lb, svc: copyService(svc)}
				s.lbs[lb.Name] = st
			}
		}
		if st != nil {
			st.seen = s.run
		}
	}
	for ref := range w.Held { // held and left out: keep what was settled
		if st := s.lbs[ref.Name]; st != nil && ref.Kind == KindLoadBalancer {
			st.seen = s.run
		}
	}
	var gatewayServices map[string]*corev1.Service
	for i := range in.Routes {
		rt := &in.Routes[i]
		if carried(rt) != routekind.Gateway {
			continue
		}
		st := s.routes[rt.Name]
		ref := ir.ObjectRef{Kind: KindRoute, Namespace: in.Tenant, Name: rt.Name}
		if !w.Held[ref] && !w.Translated[ref] {
			if gatewayServices == nil {
				gatewayServices = routeServicesByName(in.RouteServices)
			}
			svc := gatewayServices[rt.Name]
			if st == nil || st.route.UID != rt.UID || st.route.ResourceVersion != rt.ResourceVersion || st.route.ResourceVersion == "" || !sameService(st.svc, svc) {
				st = &settledRoute{route: *rt, svc: copyService(svc)}
				s.routes[rt.Name] = st
			}
		}
		if st != nil {
			st.seen = s.run
		}
	}
	maps.DeleteFunc(s.lbs, func(_ string, st *settledLB) bool { return st.seen != s.run })
	maps.DeleteFunc(s.routes, func(_ string, st *settledRoute) bool { return st.seen != s.run })
}

// routeServicesByName are the Routes' own hub Services by Route name (the first of a name).
func routeServicesByName(services []corev1.Service) map[string]*corev1.Service {
	out := make(map[string]*corev1.Service, len(services))
	for i := range services {
		svc := &services[i]
		if name := svc.Labels[v1alpha1.LabelRouteName]; name != "" {
			if _, dup := out[name]; !dup {
				out[name] = svc
			}
		}
	}
	return out
}

// sameService tells whether a and b are one version of one Service.
// copyService is a shallow copy of svc (nil for nil): what Settled keeps holds no pointer
// into a list it was given.
func copyService(svc *corev1.Service) *corev1.Service {
	if svc == nil {
		return nil
	}
	c := *svc
	return &c
}

func sameService(a, b *corev1.Service) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UID == b.UID && a.ResourceVersion == b.ResourceVersion && a.ResourceVersion != ""
}
