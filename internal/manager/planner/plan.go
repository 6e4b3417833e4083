// Package planner decides, for one tenant at a time, what the hub holds for the tenant's
// LoadBalancers and Routes in the hub-wide listener-port range: which objects the tenant's
// limits admit (the quota verdict, computed once per plan), which listener ports each
// holder asks for (a LoadBalancer, a Gateway's Route, the tenant's shared Ingress Service),
// and which hub Services exist. It has the per-tenant shape of docs/development.md:
// collect → pure plan → apply → publish. This file is the pure plan: Plan (a function of
// Input alone, deterministic, unit-tested without an API server) and its memo per object
// (Planner), so that a change of one object costs what that object touches.
//
// The plan keeps exactly what the LoadBalancer controller and the Route controller decide
// today, and what the tenant's shared Ingress Service needs; it does not allocate: the apply step hands each
// holder's Requests to portalloc.Allocator.Ensure (or releases the holder), in the plan's
// order.
package planner

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/quota"
	"kubelb.dev/kubelb/internal/routekind"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/translate"
)

// Kind is what holds listener ports.
type Kind string

// Holders of listener ports.
const (
	// LoadBalancer: a LoadBalancer, with its hub Service "envoy-<name>".
	LoadBalancer Kind = "LoadBalancer"
	// Gateway: a Route embedding a Gateway, with its hub Service "gateway-<route>".
	Gateway Kind = "Gateway"
	// Route: a Route of any other kind; it holds no ports of its own (what it held as a
	// Gateway, when its embedded object was replaced, is released).
	Route Kind = "Route"
	// Ingress: the tenant's shared Ingress Service "kubelb-ingress" (ports 80 and 443).
	Ingress Kind = "Ingress"
)

// Action says what the apply step does with a holder's allocation.
type Action int

const (
	// Keep leaves the holder's allocation as it is: something must be resolved first (a
	// stale or foreign Service in the way, a name that cannot label a hub Service).
	Keep Action = iota
	// Ensure makes the holder's allocation exactly Requests (portalloc.Allocator.Ensure);
	// with no Requests it frees every port of the holder.
	Ensure
)

// Input is what a tenant's plan reads, collected from the caches.
type Input struct {
	// Namespace is the tenant's hub namespace.
	Namespace string
	// Tenant is the tenant's settings (settings.Load).
	Tenant settings.Tenant
	// LoadBalancers and Routes are the tenant's objects; those being deleted hold nothing.
	LoadBalancers []*kubelbv1alpha1.LoadBalancer
	Routes        []*kubelbv1alpha1.Route
	// Services are the hub Services of the namespace that stand where the plan's hub
	// Services are ("envoy-…", "gateway-…", "kubelb-ingress"), by name, whoever made them.
	Services map[string]*corev1.Service
	// HeldElsewhere names the tenant's LoadBalancers whose hostname another tenant holds
	// (hostnames.HostnamesHeldElsewhere): they get no DNS record on the Ingress Service.
	HeldElsewhere map[string]bool
	// Allocated are the holders the port allocator has ports for in the namespace
	// (portalloc owners): those the plan does not name are released.
	Allocated []types.NamespacedName
	// Verdict is the tenant's quota verdict over the same objects, from the manager's one
	// quota.Store (shared with the Envoy control plane and the Tenant controller); nil: the
	// plan computes it (quota.Admission).
	Verdict *quota.Verdict
}

// Holder is the plan of one holder of listener ports.
type Holder struct {
	Kind Kind
	// Name is the object's name (kubelb-ingress for the Ingress Service).
	Name string
	// UID and Generation are the object's (empty for the Ingress Service).
	UID        types.UID
	Generation int64
	// Owner is the holder's owner in the port allocator.
	Owner types.NamespacedName
	// Service is the name of the holder's hub Service ("" for a Route of another kind).
	Service string
	// Refused is why the tenant's limits refuse the object ("" when admitted).
	Refused string
	// Disabled: the tenant's settings disable what the object is (load balancing, Gateway
	// API, Ingress); it holds no ports and has no hub Service.
	Disabled bool
	// InvalidName: the Route's name cannot label its hub Service (routekind.ValidRouteName).
	InvalidName bool
	// Action and Requests are what the apply step does with the allocation.
	Action   Action
	Requests []portalloc.Request
	// Problems are the object's ports left out (repeats, invalid listeners).
	Problems []string
	// LoadBalancerPorts are a LoadBalancer's ports (quota.LoadBalancerPorts), GatewayPorts a
	// Gateway's with those of the ListenerSets it takes and the UDP ports of its HTTP/3
	// (routekind.GatewayRoutePorts); set
	// when the holder asks for ports (Action Ensure, Requests).
	LoadBalancerPorts []quota.LoadBalancerPort
	GatewayPorts      []routekind.ListenerPort
	// Foreign: a Service of the hub Service's name is not kubelb's for this holder; it is
	// never touched, and no hub Service is applied.
	Foreign bool
	// Stale: the hub Service was made for an earlier object of this name; it is deleted
	// (DeleteService), and the object's made once its deletion is seen (a LoadBalancer:
	// not Wanted yet) or at once (a Gateway: Wanted).
	Stale bool
	// DeleteService: the existing hub Service (Input.Services[Service]) is deleted first.
	DeleteService bool
	// Wanted: after the allocation, the hub Service is applied with the ports that got a
	// listener port, or deleted when none did.
	Wanted bool
}

// Plan is a tenant's plan.
type Plan struct {
	Namespace string
	// Verdict is the tenant's quota verdict (Input.Verdict).
	Verdict quota.Verdict
	// Holders are the tenant's holders of listener ports, sorted by kind then name; the
	// Ingress Service is among them only while it is wanted, held, or stands in the
	// namespace.
	Holders []Holder
	// Hostnames are the LoadBalancer hostnames the Ingress Service's DNS annotation lists
	// (sorted, no repeats).
	Hostnames []string
	// KeepClientAddresses: an admitted LoadBalancer served on its hostname has source ranges,
	// or an admitted Ingress has an allow list of client addresses; the Ingress Service then
	// keeps the clients' addresses up to Envoy (externalTrafficPolicy Local).
	KeepClientAddresses bool
	// GatewaysKeepClientAddresses: an admitted Route carries a policy that decides by client
	// address (routekind.DecidesByClientAddress: a SecurityPolicy's authorization, a rate
	// limit by sourceCIDR); the tenant's Gateway Services then keep the clients' addresses up
	// to Envoy (externalTrafficPolicy Local).
	GatewaysKeepClientAddresses bool
	// Release are the allocator's owners in the namespace that no holder names (objects
	// gone or being deleted): their ports are freed.
	Release []types.NamespacedName
	// DeleteServices are the hub Services made for objects gone or being deleted (sorted):
	// they are deleted before the objects' ports are freed, since a hub Service is the record
	// of its ports.
	DeleteServices []string
}

// Holder returns the plan of the holder of kind and name.
func (p Plan) Holder(kind Kind, name string) (Holder, bool) {
	i, ok := slices.BinarySearchFunc(p.Holders, Holder{Kind: kind, Name: name}, compareHolders)
	if !ok {
		return Holder{}, false
	}
	return p.Holders[i], true
}

func compareHolders(a, b Holder) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
}

// Make is the plan of in, with no memo (Planner.Plan remembers per object).
func Make(in Input) Plan {
	return (&Planner{}).Plan(in)
}

// Planner makes plans, remembering what it worked out per object (by UID, valid for the
// object's resourceVersion, its hub Service's and the settings it read), so that a plan
// after a change of one object works out that object again, not the tenant's thousands.
// One Planner serves one tenant; it is not safe for concurrent use (one reconcile per
// tenant at a time, by the queue).
type Planner struct {
	lbs memo[lbPlan]
	gws memo[gwPlan]
}

// memo is what was worked out per object UID.
type memo[T any] map[types.UID]memoEntry[T]

type memoEntry[T any] struct {
	key   memoKey
	value T
	ok    bool
}

// memoKey is what a remembered value was worked out from.
type memoKey struct {
	resourceVersion string
	service         string // the hub Service's UID and resourceVersion ("" none)
	settings        settingsKey
	extra           string // a Gateway's ListenerSets (UIDs and resourceVersions)
}

// settingsKey is what of the tenant's settings the per-object work reads.
type settingsKey struct {
	disableLoadBalancer, disableGatewayAPI, disableIngress, allocateNodePorts bool
	wildcardDomain                                                            string
	allowExplicit                                                             bool
	reservedDomains                                                           string
	// clientTraffic: the tenant's bounds allow ClientTrafficPolicies (whose http3 adds UDP
	// ports to a Gateway's hub Service: routekind.HTTP3Ports).
	clientTraffic bool
}

func keyOf(t settings.Tenant) settingsKey {
	return settingsKey{disableLoadBalancer: t.DisableLoadBalancer, disableGatewayAPI: t.DisableGatewayAPI, disableIngress: t.DisableIngress,
		allocateNodePorts: t.AllocateNodePorts, wildcardDomain: t.DNS.WildcardDomain, allowExplicit: t.DNS.AllowExplicitHostnames,
		reservedDomains: strings.Join(t.DNS.ReservedDomains, ","),
		clientTraffic:   routekind.ClientTrafficAllowed(t.Upstream.TrafficPolicies)}
}

// remember returns m's value for uid when it was worked out from key, else work's, kept.
func remember[T any](m *memo[T], uid types.UID, key memoKey, work func() (T, bool)) (T, bool) {
	if *m == nil {
		*m = memo[T]{}
	}
	if e, hit := (*m)[uid]; hit && e.key == key && uid != "" {
		return e.value, e.ok
	}
	v, ok := work()
	if uid != "" {
		(*m)[uid] = memoEntry[T]{key: key, value: v, ok: ok}
	}
	return v, ok
}

// prune forgets the objects not in keep once the memo holds many more.
func prune[T any](m memo[T], keep map[types.UID]bool) {
	if len(m) <= 2*len(keep)+64 {
		return
	}
	for uid := range m {
		if !keep[uid] {
			delete(m, uid)
		}
	}
}

// serviceKey is what the memo keys of a hub Service: its UID and resourceVersion.
func serviceKey(svc *corev1.Service) string {
	if svc == nil {
		return ""
	}
	return string(svc.UID) + "@" + svc.ResourceVersion
}

// lbPlan is what is worked out of one LoadBalancer and its hub Service.
type lbPlan struct {
	ports      []quota.LoadBalancerPort
	problems   []string
	requests   []portalloc.Request
	hostname   string
	restricted bool // it has source ranges
}

// gwPlan is what is worked out of one Gateway Route, its ListenerSets and its hub Service.
type gwPlan struct {
	ports    []routekind.ListenerPort
	problems []string
	requests []portalloc.Request
}

// Plan is the tenant's plan for in (see Plan), deterministic whatever the order of in's
// slices and maps.
func (pl *Planner) Plan(in Input) Plan {
	t, ns := in.Tenant, in.Namespace
	sk := keyOf(t)
	tenantName := hubnames.TenantName(ns)
	keep := map[types.UID]bool{}

	for _, lb := range in.LoadBalancers {
		keep[lb.UID] = true
	}
	for _, rt := range in.Routes {
		keep[rt.UID] = true
	}
	p := Plan{Namespace: ns}
	if in.Verdict != nil {
		p.Verdict = *in.Verdict
	} else {
		p.Verdict = admission(in)
	}

	named := map[types.NamespacedName]bool{}

	// LoadBalancers.
	var admittedHosts []string
	for _, lb := range in.LoadBalancers {
		name := hubnames.LoadBalancerServiceName(lb.Name)
		svc := in.Services[name]
		if !lb.DeletionTimestamp.IsZero() {
			// Its hub Service (or an earlier one's of its name) goes, then its ports.
			if s, _, foreign := hubnames.LoadBalancerServiceOf(lb, svc); s != nil && !foreign && s.DeletionTimestamp.IsZero() {
				p.DeleteServices = append(p.DeleteServices, name)
			}
			continue
		}
		h := Holder{Kind: LoadBalancer, Name: lb.Name, UID: lb.UID, Generation: lb.Generation, Owner: types.NamespacedName{Namespace: ns, Name: lb.Name}, Service: name}
		named[h.Owner] = true
		var stale bool
		svc, stale, h.Foreign = hubnames.LoadBalancerServiceOf(lb, svc)
		h.Refused, _ = p.Verdict.Refused(quota.KindLoadBalancer, lb.Name)
		h.Disabled = t.DisableLoadBalancer
		lp, _ := remember(&pl.lbs, lb.UID, memoKey{resourceVersion: lb.ResourceVersion, service: serviceKey(svc), settings: sk}, func() (lbPlan, bool) {
			ports, problems := quota.LoadBalancerPorts(lb)
			v := lbPlan{ports: ports, problems: problems, requests: LoadBalancerRequests(ports, svc), restricted: len(lb.Spec.SourceRanges) > 0}
			if !t.DNS.IsZero() {
				if host, err := translate.LoadBalancerHostname(lb, tenantName, t.DNS); err == nil {
					v.hostname = host
				}
			}
			return v, true
		})
		h.Problems = lp.problems
		switch {
		case stale:
			// The hub Service of an earlier LoadBalancer of this name goes; this one's is made
			// once its deletion is seen. Its ports stay allocated to this name meanwhile.
			h.Stale, h.DeleteService, h.Action = true, true, Keep
		case h.Disabled || h.Refused != "":
			h.Action, h.DeleteService = Ensure, svc != nil && !h.Foreign
		default: // a foreign Service keeps the ports allocated, and is never touched
			h.Action, h.Requests, h.Wanted, h.LoadBalancerPorts = Ensure, lp.requests, !h.Foreign, lp.ports
		}
		if !t.DisableLoadBalancer && h.Refused == "" && lp.hostname != "" && !in.HeldElsewhere[lb.Name] {
			admittedHosts = append(admittedHosts, lp.hostname)
			p.KeepClientAddresses = p.KeepClientAddresses || lp.restricted
		}
		p.Holders = append(p.Holders, h)
	}

	// Routes: a Gateway's hub Service and ports; an Ingress rides on the tenant's Ingress
	// Service; others hold nothing.
	var sets []*kubelbv1alpha1.Route // the admitted ListenerSets, candidates of every Gateway
	ingressWanted := false
	for _, rt := range in.Routes {
		if !rt.DeletionTimestamp.IsZero() || !p.Verdict.Admitted(quota.KindRoute, rt.Name) {
			continue
		}
		if routekind.DecidesByClientAddress(rt) {
			p.GatewaysKeepClientAddresses = true
		}
		switch k, _ := routekind.Of(rt); {
		case k == routekind.ListenerSet:
			sets = append(sets, rt)
		case k.HubService() == routekind.SharedIngressService:
			ingressWanted = ingressWanted || !t.DisableIngress
			p.KeepClientAddresses = p.KeepClientAddresses ||
				(!t.DisableIngress && translate.NginxRestrictsClients(rt.Spec.Source.Kubernetes.Route.GetAnnotations()))
		}
	}
	slices.SortFunc(sets, func(a, b *kubelbv1alpha1.Route) int { return cmp.Compare(a.Name, b.Name) })
	for _, rt := range in.Routes {
		name := hubnames.GatewayServiceName(rt.Name)
		svc := in.Services[name]
		if !rt.DeletionTimestamp.IsZero() {
			// As a LoadBalancer being deleted: its Gateway Service goes, then its ports.
			if svc != nil && hubnames.RouteControlled(svc, rt.Name) && svc.DeletionTimestamp.IsZero() {
				p.DeleteServices = append(p.DeleteServices, name)
			}
			continue
		}
		kind, _ := routekind.Of(rt)
		owner := portalloc.RouteOwner(ns, rt.Name)
		named[owner] = true
		h := Holder{Kind: Route, Name: rt.Name, UID: rt.UID, Generation: rt.Generation, Owner: owner}
		h.Refused, _ = p.Verdict.Refused(quota.KindRoute, rt.Name)
		routeSvc := svc != nil && hubnames.RouteControlled(svc, rt.Name)
		if kind.HubService() != routekind.OwnHubService || h.Refused != "" {
			// What it had as a Gateway (its embedded object was replaced), or as an admitted
			// one, goes: the Service of its name a Route of that name controls, and its ports.
			h.Action, h.DeleteService = Ensure, routeSvc
			if routeSvc {
				h.Service = name
			}
			if kind.HubService() == routekind.OwnHubService {
				h.Kind = Gateway // refused
			}
			h.Disabled = h.Refused == "" && ((kind.HubService() == routekind.SharedIngressService && t.DisableIngress) ||
				(kind.GatewayAPI() && t.DisableGatewayAPI))
			p.Holders = append(p.Holders, h)
			continue
		}
		h.Kind, h.Service = Gateway, name
		if !routekind.ValidRouteName(rt.Name) {
			h.InvalidName, h.Action = true, Keep
			p.Holders = append(p.Holders, h)
			continue
		}
		h.Foreign = svc != nil && !routeSvc
		if routeSvc && metav1.GetControllerOfNoCopy(svc).UID != rt.UID {
			// An earlier Route's: it goes, and this Route's is applied in its place.
			h.Stale, h.DeleteService, svc = true, true, nil
		}
		if t.DisableGatewayAPI {
			h.Disabled, h.Action = true, Ensure
			h.DeleteService = h.DeleteService || (svc != nil && !h.Foreign)
			p.Holders = append(p.Holders, h)
			continue
		}
		if h.Foreign {
			h.Action = Keep
			p.Holders = append(p.Holders, h)
			continue
		}
		taken := routekind.GatewaySets(rt, sets)
		gp, _ := remember(&pl.gws, rt.UID, memoKey{resourceVersion: rt.ResourceVersion, service: serviceKey(svc), settings: sk, extra: setsKey(taken)}, func() (gwPlan, bool) {
			us := make([]*unstructured.Unstructured, 0, len(taken))
			for _, s := range taken {
				us = append(us, &s.Spec.Source.Kubernetes.Route)
			}
			ports, problems := routekind.GatewayRoutePorts(rt, us, sk.clientTraffic)
			return gwPlan{ports: ports, problems: problems, requests: GatewayRequests(ns, rt.Name, ports, svc)}, true
		})
		h.Problems, h.Action, h.Requests, h.Wanted, h.GatewayPorts = gp.problems, Ensure, gp.requests, true, gp.ports
		p.Holders = append(p.Holders, h)
	}

	// The tenant's Ingress Service: while an admitted Ingress Route or a LoadBalancer
	// hostname needs it.
	if !t.DisableLoadBalancer && !t.DNS.IsZero() {
		slices.Sort(admittedHosts)
		p.Hostnames = slices.Compact(admittedHosts)
	}
	ingress := in.Services[kubelbv1alpha1.IngressServiceName]
	iowner := portalloc.IngressOwner(ns)
	wanted := ingressWanted || len(p.Hostnames) > 0
	if wanted || ingress != nil || slices.Contains(in.Allocated, iowner) {
		h := Holder{Kind: Ingress, Name: kubelbv1alpha1.IngressServiceName, Owner: iowner, Service: kubelbv1alpha1.IngressServiceName}
		named[iowner] = true
		h.Foreign = ingress != nil && !hubnames.IsIngressService(ingress)
		switch {
		case !wanted:
			h.Action, h.DeleteService = Ensure, ingress != nil && !h.Foreign
		case h.Foreign:
			h.Action = Keep
		default:
			h.Action, h.Requests, h.Wanted = Ensure, IngressRequests(ns, ingress), true
		}
		p.Holders = append(p.Holders, h)
	}
	slices.SortFunc(p.Holders, compareHolders)

	// What is gone: the hub Services made for objects no longer there, and the ports of
	// owners no holder names.
	present := map[objectKey]bool{}
	for _, lb := range in.LoadBalancers {
		present[objectKey{loadBalancer: true, name: lb.Name}] = true
	}
	for _, rt := range in.Routes {
		present[objectKey{name: rt.Name}] = true
	}
	p.DeleteServices = append(p.DeleteServices, goneServices(in, func(lb bool, name string) bool { return present[objectKey{loadBalancer: lb, name: name}] })...)
	slices.Sort(p.DeleteServices)
	p.DeleteServices = slices.Compact(p.DeleteServices)
	for _, o := range in.Allocated {
		if o.Namespace == ns && !named[o] {
			p.Release = append(p.Release, o)
		}
	}
	slices.SortFunc(p.Release, func(a, b types.NamespacedName) int { return cmp.Compare(a.Name, b.Name) })
	p.Release = slices.Compact(p.Release)

	prune(pl.lbs, keep)
	prune(pl.gws, keep)
	return p
}

// setsKey is what the memo keys of a Gateway's ListenerSets.
func setsKey(sets []*kubelbv1alpha1.Route) string {
	if len(sets) == 0 {
		return ""
	}
	var b strings.Builder
	for _, s := range sets {
		b.WriteString(string(s.UID))
		b.WriteByte('@')
		b.WriteString(s.ResourceVersion)
		b.WriteByte(',')
	}
	return b.String()
}

// admission is the quota verdict over in's objects, for a plan made without the manager's
// quota.Store (Make).
func admission(in Input) quota.Verdict {
	lbs := make([]kubelbv1alpha1.LoadBalancer, 0, len(in.LoadBalancers))
	for _, lb := range in.LoadBalancers {
		lbs = append(lbs, *lb)
	}
	routes := make([]kubelbv1alpha1.Route, 0, len(in.Routes))
	for _, rt := range in.Routes {
		routes = append(routes, *rt)
	}
	return quota.Admission(in.Namespace, lbs, routes, in.Tenant)
}

// LoadBalancerRequests asks for a listener port per LoadBalancer port. A port not allocated
// yet prefers the target port of the existing hub Service's port of the same name (a named
// port) or of the same number and protocol: after a restart the allocator is rebuilt from
// the hub Services, so this keeps the port of a LoadBalancer port whose recorded key was
// ambiguous (named like a generated name) or whose number changed. The LoadBalancer status
// is never a hint: the tenant can write it.
func LoadBalancerRequests(ports []quota.LoadBalancerPort, svc *corev1.Service) []portalloc.Request {
	reqs := make([]portalloc.Request, 0, len(ports))
	for _, p := range ports {
		rq := portalloc.Request{Key: p.Key}
		if svc != nil {
			for _, sp := range svc.Spec.Ports {
				sameName := p.Name != "" && sp.Name == p.Name
				sameNumber := sp.Port == p.Port && kubelbv1alpha1.ProtocolOrTCP(sp.Protocol) == p.Protocol
				if (sameName || sameNumber) && sp.TargetPort.Type == intstr.Int && sp.TargetPort.IntVal != 0 {
					rq.Hints = append(rq.Hints, sp.TargetPort.IntVal)
				}
			}
		}
		reqs = append(reqs, rq)
	}
	return reqs
}

// GatewayRequests asks for a listener port per Gateway port of the Route route, preferring
// the target port the existing hub Service (svc, may be nil) already has for it.
func GatewayRequests(namespace, route string, ports []routekind.ListenerPort, svc *corev1.Service) []portalloc.Request {
	reqs := make([]portalloc.Request, 0, len(ports))
	for _, p := range ports {
		reqs = append(reqs, portalloc.Request{Key: portalloc.RouteKey(namespace, route, p.Protocol, p.Port), Hints: targetHints(svc, p)})
	}
	return reqs
}

// IngressPorts are the ports of a tenant's shared Ingress Service, by name.
var IngressPorts = []struct {
	Name string
	Port int32
}{{"http", 80}, {"https", 443}}

// IngressRequests asks for the two listener ports of the shared Ingress Service.
func IngressRequests(namespace string, svc *corev1.Service) []portalloc.Request {
	reqs := make([]portalloc.Request, 0, len(IngressPorts))
	for _, p := range IngressPorts {
		reqs = append(reqs, portalloc.Request{Key: portalloc.IngressKey(namespace, p.Port),
			Hints: targetHints(svc, routekind.ListenerPort{Protocol: corev1.ProtocolTCP, Port: p.Port})})
	}
	return reqs
}

// targetHints is the target port svc has for p, if any.
func targetHints(svc *corev1.Service, p routekind.ListenerPort) []int32 {
	if svc == nil {
		return nil
	}
	for _, sp := range svc.Spec.Ports {
		if sp.Port == p.Port && kubelbv1alpha1.ProtocolOrTCP(sp.Protocol) == p.Protocol && sp.TargetPort.Type == intstr.Int && sp.TargetPort.IntVal != 0 {
			return []int32{sp.TargetPort.IntVal}
		}
	}
	return nil
}
