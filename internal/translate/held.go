package translate

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/routekind"
)

// ReasonLoadBalancingDisabled is the problem of a LoadBalancer of a tenant whose Tenant or
// Config disables load balancing: it is not translated.
const ReasonLoadBalancingDisabled = "LoadBalancingDisabled"

// Holds are what the tenant's settings and limits decide of its objects before any is
// translated. The manager reads them (its settings, the quota verdict); Hold applies them.
type Holds struct {
	// LoadBalancingDisabled holds back every LoadBalancer (spec.loadBalancer.disable of the
	// Tenant or Config).
	LoadBalancingDisabled bool `json:"loadBalancingDisabled,omitempty"`
	// IngressDisabled leaves the Ingress Routes out, with no problem: kubelb-ingress may still
	// exist for LoadBalancer hostnames, and then serves only those.
	IngressDisabled bool `json:"ingressDisabled,omitempty"`
	// RefusedLoadBalancers and RefusedRoutes are the objects the tenant's limits refuse
	// (quota.Admission), by name, each with the message saying why. They are held back.
	RefusedLoadBalancers map[string]string `json:"refusedLoadBalancers,omitempty"`
	RefusedRoutes        map[string]string `json:"refusedRoutes,omitempty"`
	// RefusedAddresses are the Addresses beyond spec.limits.addresses (oldest first): left
	// out, so that a LoadBalancer referencing one reports it missing.
	RefusedAddresses []string `json:"refusedAddresses,omitempty"`
}

// Held is what Hold held back.
type Held struct {
	// Problems of the objects held back: LoadBalancers and Routes the tenant's limits
	// refuse (ReasonQuotaExceeded), and every LoadBalancer of a tenant with load balancing
	// disabled (ReasonLoadBalancingDisabled). Each is an Error: the object is not served.
	// Sorted.
	Problems ir.Problems
	// Generations are those objects with their generations (see Generations).
	Generations map[ir.ObjectRef]int64
	// Routes are the statuses of the tenant objects of the held Gateway and Ingress Routes
	// (heldStatus) by Route name: a Gateway says Programmed=False (NoResources), an Ingress
	// has no address. Nil when there are none.
	Routes map[string]RouteStatus
}

// Hold returns in less the objects being deleted and less what h holds back (with the
// certificates of the hostnames of LoadBalancers left out), and what it held back. It
// modifies nothing of in: the result's LoadBalancers (when it leaves some out), Routes, and
// Addresses and HostnameSecrets (when it leaves some out) are new; a list it leaves whole
// is in's own, so a tenant of thousands of LoadBalancers is not copied at every rebuild.
func Hold(in Input, h Holds) (Input, Held) {
	held := Held{Generations: map[ir.ObjectRef]int64{}}
	hold := func(kind, name string, generation int64, reason, msg string) {
		ref := ir.ObjectRef{Kind: kind, Namespace: in.Tenant, Name: name}
		held.Generations[ref] = generation
		held.Problems = append(held.Problems, ir.Problem{Object: ref, Severity: ir.SeverityError, Reason: reason, Message: msg})
	}
	var lbs []v1alpha1.LoadBalancer // nil while nothing is left out
	for i, lb := range in.LoadBalancers {
		kept := false
		switch msg, refused := h.RefusedLoadBalancers[lb.Name]; {
		case !lb.DeletionTimestamp.IsZero():
		case h.LoadBalancingDisabled:
			hold(KindLoadBalancer, lb.Name, lb.Generation, ReasonLoadBalancingDisabled,
				"load balancing is disabled for this tenant (spec.loadBalancer.disable of the Tenant or Config); the LoadBalancer is not served")
		case refused:
			hold(KindLoadBalancer, lb.Name, lb.Generation, ReasonQuotaExceeded, msg)
		default:
			kept = true
		}
		switch {
		case !kept && lbs == nil:
			lbs = append(make([]v1alpha1.LoadBalancer, 0, len(in.LoadBalancers)), in.LoadBalancers[:i]...)
		case kept && lbs != nil:
			lbs = append(lbs, lb)
		}
	}
	if lbs == nil {
		lbs = in.LoadBalancers
	}
	var routes []v1alpha1.Route
	for _, rt := range in.Routes {
		if !rt.DeletionTimestamp.IsZero() || (h.IngressDisabled && carried(&rt) == routekind.Ingress) {
			continue
		}
		if msg, refused := h.RefusedRoutes[rt.Name]; refused {
			hold(KindRoute, rt.Name, rt.Generation, ReasonQuotaExceeded, msg)
			if st, ok := heldStatus(&rt, msg); ok {
				if held.Routes == nil {
					held.Routes = map[string]RouteStatus{}
				}
				held.Routes[rt.Name] = st
			}
			continue
		}
		routes = append(routes, rt)
	}
	if len(in.HostnameSecrets) > 0 && len(lbs) < len(in.LoadBalancers) {
		kept := make(map[string]corev1.Secret, len(in.HostnameSecrets))
		for i := range lbs {
			if s, ok := in.HostnameSecrets[lbs[i].Name]; ok {
				kept[lbs[i].Name] = s
			}
		}
		in.HostnameSecrets = kept
	}
	in.LoadBalancers, in.Routes = lbs, routes
	if len(h.RefusedAddresses) > 0 {
		in.Addresses = maps.Clone(in.Addresses)
		for _, name := range h.RefusedAddresses {
			delete(in.Addresses, name)
		}
	}
	held.Problems.Sort()
	return in, held
}

// With returns r with what h held back: its problems among r's (sorted) and the statuses of
// its Routes among r's. r is not modified (Incremental keeps it).
func (h Held) With(r Result) Result {
	if len(h.Problems) > 0 {
		r.Problems = append(slices.Clone(r.Problems), h.Problems...)
		r.Problems.Sort()
	}
	if len(h.Routes) > 0 {
		routes := make(map[string]RouteStatus, len(r.Routes)+len(h.Routes))
		maps.Copy(routes, r.Routes)
		maps.Copy(routes, h.Routes)
		r.Routes = routes
	}
	return r
}

// Generations returns the generation of every object whose status a translation of in
// decides: its LoadBalancers and Routes, and those h held back.
func Generations(in *Input, h Held) map[ir.ObjectRef]int64 {
	out := make(map[ir.ObjectRef]int64, len(in.LoadBalancers)+len(in.Routes)+len(h.Generations))
	for i := range in.LoadBalancers {
		lb := &in.LoadBalancers[i]
		out[ir.ObjectRef{Kind: KindLoadBalancer, Namespace: in.Tenant, Name: lb.Name}] = lb.Generation
	}
	for i := range in.Routes {
		rt := &in.Routes[i]
		out[ir.ObjectRef{Kind: KindRoute, Namespace: in.Tenant, Name: rt.Name}] = rt.Generation
	}
	maps.Copy(out, h.Generations)
	return out
}

// heldStatus is the status of the tenant object of a Route that is not served because the
// tenant's limits refuse it (msg says why), for the ccm to copy back: a Gateway is Accepted
// (nothing is wrong with it) but Programmed=False with Gateway API's reason NoResources, and
// has no addresses or listeners; an Ingress has no address. Other kinds get none (false):
// their parents' status says nothing of a Gateway that is not served.
func heldStatus(rt *v1alpha1.Route, msg string) (RouteStatus, bool) {
	src := rt.Spec.Source.Kubernetes
	if src == nil {
		return RouteStatus{}, false
	}
	gen := src.Route.GetGeneration()
	if gen <= 0 {
		gen = rt.Generation
	}
	var status any
	switch carried(rt) {
	case routekind.Ingress:
		status = map[string]any{"loadBalancer": map[string]any{}}
	case routekind.Gateway:
		at := metav1.NewTime(rt.CreationTimestamp.UTC())
		if rt.CreationTimestamp.IsZero() {
			at = metav1.NewTime(time.Unix(0, 0).UTC())
		}
		status = map[string]any{"conditions": []metav1.Condition{
			{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", Message: "The Gateway is valid; it is not programmed: see Programmed.",
				ObservedGeneration: gen, LastTransitionTime: at},
			{Type: "Programmed", Status: metav1.ConditionFalse, Reason: "NoResources", Message: "Not served: " + msg + ".",
				ObservedGeneration: gen, LastTransitionTime: at},
		}}
	default:
		return RouteStatus{}, false
	}
	raw, err := json.Marshal(status)
	if err != nil { // plain maps and API types; this cannot happen
		return RouteStatus{}, false
	}
	return RouteStatus{Kind: src.Route.GetKind(), Generation: gen, Status: raw}, true
}

// carried is what a Route carries (routekind.Of, without the reason).
func carried(rt *v1alpha1.Route) routekind.Kind {
	k, _ := routekind.Of(rt)
	return k
}
