// Package quota decides which of a tenant's objects the manager serves under the tenant's
// limits (settings.Limits: Config and Tenant spec.limits). Admit is the one decision: the
// LoadBalancer controller, the Route controller and the envoycp controller all call it with
// the same input (Objects), so that they agree on which objects get hub Services, listener
// ports and Envoy configuration, and which show Ready=False with reason QuotaExceeded.
//
// The rule: objects are ranked oldest first (creationTimestamp, then name, then kind).
// Walking in rank order, the n-th LoadBalancer is refused when n exceeds
// limits.loadBalancers, the n-th Route when n exceeds limits.routes; an object that is not
// refused for its count is refused when its listener ports, added to those of the older
// admitted objects, exceed limits.listenerPorts, when its bytes (Object.Bytes), added to
// those of the older admitted objects, exceed limits.objectBytes, and when the hub NodePorts
// its hub Service takes, added to those of the older admitted objects, exceed
// limits.nodePorts. A new object therefore never displaces an older one, and raising a limit
// or deleting an object admits the next ones.
package quota

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"kubelb.dev/kubelb/internal/settings"
)

// ReasonQuotaExceeded is the reason of the conditions and problems of an object refused by
// a limit, and of the problem of a cluster whose endpoints were cut.
const ReasonQuotaExceeded = "QuotaExceeded"

// Kind is the kind of an object that limits count.
type Kind string

// Kinds that limits count.
const (
	KindLoadBalancer Kind = "LoadBalancer"
	KindRoute        Kind = "Route"
)

// Object is what Admit needs to know of one object of the tenant.
type Object struct {
	Kind    Kind
	Name    string
	Created time.Time
	// Ports is the number of listener ports the object needs for itself.
	Ports int
	// Shared names a set of listener ports the object needs together with others (the
	// tenant's Ingress Service); "" for none. The first admitted object of a set pays its
	// SharedPorts; the later ones need no more for it.
	Shared      string
	SharedPorts int
	// NodePorts is the number of hub NodePorts the object's hub Service takes (0 when its
	// hub Service takes none: LoadBalancerTakesNodePorts); SharedNodePorts those of the
	// shared set's Service, paid like SharedPorts.
	NodePorts       int
	SharedNodePorts int
	// Bytes is what the object counts against limits.objectBytes (ObjectBytes).
	Bytes int64
}

// Ref names an object of the tenant.
type Ref struct {
	Kind Kind
	Name string
}

// Verdict is the outcome of Admit: the refused objects, each with a message a user can act
// on. Every object not refused is admitted.
type Verdict struct {
	namespace string
	limits    settings.Limits
	refused   map[Ref]refusal
	// UsedPorts is the number of listener ports the admitted objects hold.
	UsedPorts int
	// UsedNodePorts is the number of hub NodePorts the admitted objects take.
	UsedNodePorts int
	// UsedBytes is the number of bytes the admitted objects take (limits.objectBytes).
	UsedBytes int64
	// Asked is what all the objects ask for, admitted or refused: above a limit, the newest
	// are refused.
	Asked Usage
}

// Usage is what a tenant's objects take of each limit Admit applies (a shared set of ports
// counted once).
type Usage struct {
	LoadBalancers, Routes, ListenerPorts, NodePorts int
	ObjectBytes                                     int64
}

// RefusedCount is the number of refused objects.
func (v Verdict) RefusedCount() int { return len(v.refused) }

// refusal is why an object is refused; its message is written only when asked for.
type refusal struct {
	rank      int   // > 0: refused as the rank-th oldest of its kind; 0: for listener ports, bytes or NodePorts
	nodePorts bool  // refused for hub NodePorts (used, needs count NodePorts)
	bytes     bool  // refused for limits.objectBytes (used, needs count bytes)
	used      int64 // listener ports (bytes, NodePorts) the older admitted objects hold
	needs     int64 // listener ports (bytes, NodePorts) the object needs
}

// Refused returns the message of a refused object and true, or "" and false when the
// object is admitted (or unknown).
func (v Verdict) Refused(kind Kind, name string) (string, bool) {
	r, ok := v.refused[Ref{kind, name}]
	if !ok {
		return "", false
	}
	if r.rank > 0 {
		limit, field := countLimit(kind, v.limits)
		return fmt.Sprintf("tenant %s may hold %d %s (spec.limits.%s); this is the %s oldest — delete another or ask the platform team to raise the limit",
			v.namespace, limit, plural(kind, limit), field, ordinal(r.rank)), true
	}
	if r.nodePorts {
		return fmt.Sprintf("tenant %s may hold %d hub NodePorts (spec.limits.nodePorts); older objects hold %d and this %s needs %d more — delete or shrink another, use spec.type ClusterIP, or ask the platform team to raise the limit",
			v.namespace, v.limits.NodePorts, r.used, kind, r.needs), true
	}
	if r.bytes {
		return fmt.Sprintf("tenant %s's LoadBalancers and Routes may take %d bytes (spec.limits.objectBytes); older objects take %d and this %s takes %d — delete or shrink another or ask the platform team to raise the limit",
			v.namespace, v.limits.ObjectBytes, r.used, kind, r.needs), true
	}
	return fmt.Sprintf("tenant %s may hold %d listener ports (spec.limits.listenerPorts); older objects hold %d and this %s needs %d more — delete or shrink another or ask the platform team to raise the limit",
		v.namespace, v.limits.ListenerPorts, r.used, kind, r.needs), true
}

// Admitted reports whether the object is not refused.
func (v Verdict) Admitted(kind Kind, name string) bool {
	_, refused := v.refused[Ref{kind, name}]
	return !refused
}

// RefusedNames returns the names of the refused objects of one kind, sorted.
func (v Verdict) RefusedNames(kind Kind) []string {
	var out []string
	for r := range v.refused {
		if r.Kind == kind {
			out = append(out, r.Name)
		}
	}
	slices.Sort(out)
	return out
}

// Admit decides which objects of the tenant in namespace are admitted under limits. It is
// pure and deterministic (the order of objs does not matter), and its cost is linear in the
// number of objects plus the sort. Objects being deleted should not be passed: they hold
// nothing for long.
func Admit(namespace string, objs []Object, limits settings.Limits) Verdict {
	order := make([]int32, len(objs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(i, j int32) int {
		a, b := &objs[i], &objs[j]
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Kind, b.Kind))
	})
	v := Verdict{namespace: namespace, limits: limits, refused: map[Ref]refusal{}}
	var lbs, routes int
	paid := map[string]bool{}
	asked := map[string]bool{}
	for _, i := range order {
		o := &objs[i]
		v.Asked.add(o, !asked[o.Shared])
		if o.Shared != "" {
			asked[o.Shared] = true
		}
		n, limit := 0, 0
		if o.Kind == KindLoadBalancer {
			lbs++
			n, limit = lbs, limits.LoadBalancers
		} else {
			routes++
			n, limit = routes, limits.Routes
		}
		if n > limit {
			v.refused[Ref{o.Kind, o.Name}] = refusal{rank: n}
			continue
		}
		need := o.Ports
		if o.Shared != "" && !paid[o.Shared] {
			need += o.SharedPorts
		}
		if need > 0 && v.UsedPorts+need > limits.ListenerPorts {
			v.refused[Ref{o.Kind, o.Name}] = refusal{used: int64(v.UsedPorts), needs: int64(need)}
			continue
		}
		if v.UsedBytes+o.Bytes > limits.ObjectBytes {
			v.refused[Ref{o.Kind, o.Name}] = refusal{used: v.UsedBytes, needs: o.Bytes, bytes: true}
			continue
		}
		nodes := o.NodePorts
		if o.Shared != "" && !paid[o.Shared] {
			nodes += o.SharedNodePorts
		}
		if nodes > 0 && v.UsedNodePorts+nodes > limits.NodePorts {
			v.refused[Ref{o.Kind, o.Name}] = refusal{nodePorts: true, used: int64(v.UsedNodePorts), needs: int64(nodes)}
			continue
		}
		v.UsedPorts += need
		v.UsedNodePorts += nodes
		v.UsedBytes += o.Bytes
		if o.Shared != "" {
			paid[o.Shared] = true
		}
	}
	return v
}

// add counts o, with its shared set's ports when first is set.
func (u *Usage) add(o *Object, first bool) {
	if o.Kind == KindLoadBalancer {
		u.LoadBalancers++
	} else {
		u.Routes++
	}
	u.ListenerPorts += o.Ports
	u.NodePorts += o.NodePorts
	u.ObjectBytes += o.Bytes
	if o.Shared != "" && first {
		u.ListenerPorts += o.SharedPorts
		u.NodePorts += o.SharedNodePorts
	}
}

// countLimit is the count limit of a kind and its field in spec.limits.
func countLimit(k Kind, l settings.Limits) (int, string) {
	if k == KindLoadBalancer {
		return l.LoadBalancers, "loadBalancers"
	}
	return l.Routes, "routes"
}

func plural(k Kind, n int) string {
	if n == 1 || k == KindAddresses {
		return string(k)
	}
	return string(k) + "s"
}

// ordinal renders 1 as "1st", 2 as "2nd", 11 as "11th", 23 as "23rd".
func ordinal(n int) string {
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return fmt.Sprintf("%d%s", n, suffix)
}
