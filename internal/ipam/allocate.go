package ipam

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/lbaddress"
	"kubelb.dev/kubelb/internal/textcut"
)

// Reasons of a pending Service (the condition lbaddress.ConditionAddressAssigned and the
// Warning Event).
const (
	// ReasonNoAddressPool: the Service names no pool and no pool is the default.
	ReasonNoAddressPool = "NoAddressPool"
	// ReasonAddressPoolNotFound: the pool the Service names does not exist.
	ReasonAddressPoolNotFound = "AddressPoolNotFound"
	// ReasonInvalidAddressPool: the pool's name (annotation) is not a valid name.
	ReasonInvalidAddressPool = "InvalidAddressPool"
	// ReasonAddressPoolNotAllowed: the pool's spec.allowedNamespaces leave out the Service's
	// namespace.
	ReasonAddressPoolNotAllowed = "AddressPoolNotAllowed"
	// ReasonAddressPoolExhausted: the pool has no free address of a family the Service needs.
	ReasonAddressPoolExhausted = "AddressPoolExhausted"
	// ReasonIPFamilyNotInPool: the pool has no address of a family the Service needs.
	ReasonIPFamilyNotInPool = "IPFamilyNotInPool"
	// ReasonInvalidAddressRequest: the requested addresses cannot be read.
	ReasonInvalidAddressRequest = "InvalidAddressRequest"
	// ReasonAddressNotInPool: a requested address is not in the Service's pool.
	ReasonAddressNotInPool = "AddressNotInPool"
	// ReasonAddressInUse: a requested address is held by another Service.
	ReasonAddressInUse = "AddressInUse"
	// ReasonPortConflict: a requested shared address is held, under the same sharing key, by
	// a Service using one of the same (protocol, port) pairs.
	ReasonPortConflict = "PortConflict"
)

// maxSharingKey bounds the sharing key annotation's value.
const maxSharingKey = 253

// Request is one served Service and the pool it asks for.
type Request struct {
	Service *corev1.Service
	// Pool is the name of the pool the Service takes from; "" is the default pool.
	Pool string
	// PoolError, when not empty, says why the pool the Service asks for cannot be read (an
	// invalid annotation): the Service is pending with ReasonInvalidAddressPool.
	PoolError string
}

// Input is what one decision reads.
type Input struct {
	// Services are the served Services (type LoadBalancer, ours, not being deleted).
	Services []Request
	// Pools are every AddressPool.
	Pools []kubelbv1alpha1.AddressPool
	// Hub is true in the manager: the Services are hub Services made by kubelb from tenant
	// objects. Requested addresses and sharing keys are not read (the tenant's settings
	// decide, never what a tenant wrote), and a message never names a Service of another
	// namespace (another tenant).
	Hub bool
}

// Result is what one decision gives.
type Result struct {
	// Verdicts per served Service.
	Verdicts map[types.NamespacedName]lbaddress.Verdict
	// Pools are the pools as read, by name.
	Pools map[string]*Pool
	// Allocated counts the addresses held per pool and family.
	Allocated map[string]*[2]int64
	// Default is the default pool's name ("" when none).
	Default string
}

// slot is a (protocol, port) pair.
type slot struct {
	protocol corev1.Protocol
	port     int32
}

// holding is an address held by one Service, or shared by several under one key.
type holding struct {
	pool    string
	share   string
	members []*claimant
}

// ports tells whether any member uses one of the pairs, and which member.
func (h *holding) overlap(ports []slot) *claimant {
	for _, m := range h.members {
		for _, p := range ports {
			if slices.Contains(m.ports, p) {
				return m
			}
		}
	}
	return nil
}

// claimant is one served Service during the decision.
type claimant struct {
	key       types.NamespacedName
	pool      *Pool
	families  []int
	requested [2]netip.Addr
	share     string
	ports     []slot
	status    [2]netip.Addr
	got       [2]netip.Addr
	verdict   *lbaddress.Verdict // set when pending
}

// cursor is where the search for a pool family's lowest free address resumes.
type cursor struct {
	i  int
	at netip.Addr
}

// decision is the state of one Allocate.
type decision struct {
	in      Input
	taken   map[netip.Addr]*holding
	shared  map[string][]netip.Addr // "pool/family/key" → shared addresses, in claim order
	cursors map[string]*cursor      // "pool/family" → resume point
}

// Allocate is the one ordered decision of the address pools. The Services are taken in
// creation order (then namespace/name):
//
//  1. each keeps the addresses already in its status that lie in its pool, are of a family it
//     needs, match what it requests, and are not held by an earlier Service (allocations live
//     in the API, so a restart rebuilds the same result);
//  2. then each takes what it still needs: a requested address when it is in the pool and
//     free (or shared by its key with other ports), else the address it shares by key with
//     Services of other ports, else the pool's lowest free address.
//
// A Service that cannot have every family it needs is pending and holds nothing. No address
// is given to two Services unless they share it by key. The cost follows the number of
// Services, not the size of the pools.
func Allocate(in Input) Result {
	res := Result{Verdicts: make(map[types.NamespacedName]lbaddress.Verdict, len(in.Services)),
		Pools: map[string]*Pool{}, Allocated: map[string]*[2]int64{}}
	var defaults []*Pool
	for i := range in.Pools {
		p := ParsePool(&in.Pools[i])
		res.Pools[p.Name] = &p
		res.Allocated[p.Name] = &[2]int64{}
		if p.Default {
			defaults = append(defaults, &p)
		}
	}
	if len(defaults) > 0 {
		res.Default = slices.MinFunc(defaults, func(a, b *Pool) int {
			return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Name, b.Name))
		}).Name
	}
	reqs := slices.Clone(in.Services)
	slices.SortFunc(reqs, func(a, b Request) int {
		return cmp.Or(a.Service.CreationTimestamp.Compare(b.Service.CreationTimestamp.Time),
			cmp.Compare(a.Service.Namespace, b.Service.Namespace), cmp.Compare(a.Service.Name, b.Service.Name))
	})
	d := &decision{in: in, taken: make(map[netip.Addr]*holding, len(reqs)), shared: map[string][]netip.Addr{}, cursors: map[string]*cursor{}}
	claimants := make([]*claimant, 0, len(reqs))
	for _, r := range reqs {
		claimants = append(claimants, d.prepare(r, &res))
	}
	// 1. Keep what the status holds.
	for _, c := range claimants {
		if c.verdict != nil {
			continue
		}
		for _, f := range c.families {
			a := c.status[f]
			if a.IsValid() && c.pool.Contains(a) && (!c.requested[f].IsValid() || c.requested[f] == a) && d.joinable(a, c) {
				d.claim(a, c, f)
			}
		}
	}
	// 2. Take what is still needed.
	for _, c := range claimants {
		if c.verdict != nil {
			continue
		}
		for _, f := range c.families {
			if c.got[f].IsValid() {
				continue
			}
			if v := d.take(c, f); v != nil {
				d.release(c)
				c.verdict = v
				break
			}
		}
	}
	for _, c := range claimants {
		if c.verdict != nil {
			res.Verdicts[c.key] = *c.verdict
			continue
		}
		var v lbaddress.Verdict
		for f := range c.got {
			if c.got[f].IsValid() {
				v.Addresses = append(v.Addresses, c.got[f])
			}
		}
		res.Verdicts[c.key] = v
	}
	for a, h := range d.taken {
		if len(h.members) > 0 {
			res.Allocated[h.pool][family(a)]++
		}
	}
	return res
}

// prepare reads what a Service asks for; a Service whose request cannot be met whatever the
// others hold gets its pending verdict here.
func (d *decision) prepare(r Request, res *Result) *claimant {
	svc := r.Service
	c := &claimant{key: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}}
	pending := func(reason, format string, args ...any) *claimant {
		c.verdict = &lbaddress.Verdict{Reason: reason, Message: fmt.Sprintf(format, args...)}
		return c
	}
	// The pool.
	switch {
	case r.PoolError != "":
		return pending(ReasonInvalidAddressPool, "%s; the Service stays pending.", r.PoolError)
	case r.Pool == "" && res.Default == "":
		return pending(ReasonNoAddressPool, "No AddressPool has spec.default: true, and the Service names no pool (%s); the Service stays pending.", d.howToName())
	case r.Pool == "":
		c.pool = res.Pools[res.Default]
	default:
		if c.pool = res.Pools[r.Pool]; c.pool == nil {
			return pending(ReasonAddressPoolNotFound, "AddressPool %q does not exist; the Service stays pending until it is created.", textcut.Cut(r.Pool, 253, textcut.Dots))
		}
	}
	if !c.pool.Allows(svc.Namespace) {
		return pending(ReasonAddressPoolNotAllowed, "AddressPool %q does not serve namespace %s (spec.allowedNamespaces); the Service stays pending.",
			c.pool.Name, svc.Namespace)
	}
	// The families: those of the Service the pool has.
	var asked []int
	for _, f := range svc.Spec.IPFamilies {
		i := slices.Index(familyNames[:], f)
		if i >= 0 && !slices.Contains(asked, i) {
			asked = append(asked, i)
		}
	}
	if len(asked) == 0 { // not defaulted by an API server: the pool's first family
		asked = []int{v4}
		if !c.pool.Has(v4) {
			asked = []int{v6}
		}
	}
	policy := ptr.Deref(svc.Spec.IPFamilyPolicy, corev1.IPFamilyPolicySingleStack)
	if policy == corev1.IPFamilyPolicySingleStack {
		asked = asked[:1]
	}
	for _, f := range asked {
		if c.pool.Has(f) {
			c.families = append(c.families, f)
		} else if policy != corev1.IPFamilyPolicyPreferDualStack {
			return pending(ReasonIPFamilyNotInPool, "The Service needs an %s address (ipFamilyPolicy %s, ipFamilies %v) and AddressPool %q has none; the Service stays pending.",
				familyNames[f], policy, svc.Spec.IPFamilies, c.pool.Name)
		}
	}
	if len(c.families) == 0 {
		return pending(ReasonIPFamilyNotInPool, "AddressPool %q has no address of the Service's IP families %v; the Service stays pending.", c.pool.Name, svc.Spec.IPFamilies)
	}
	slices.Sort(c.families)
	// In the hub: only spec.loadBalancerIP, which the manager alone sets on a Gateway's hub
	// Service for a static address the platform team granted the tenant (tenants write no hub
	// Service); never an annotation (those come from tenant objects) nor a sharing key.
	if d.in.Hub {
		if s := strings.TrimSpace(svc.Spec.LoadBalancerIP); s != "" {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return pending(ReasonInvalidAddressRequest, "spec.loadBalancerIP %q is not an IP address; the Service stays pending.", textcut.Cut(s, 64, textcut.Dots))
			}
			a = a.Unmap()
			if !slices.Contains(c.families, family(a)) || !c.pool.Contains(a) {
				return pending(ReasonAddressNotInPool, "The requested address %s is not in AddressPool %q (a static Gateway address must be in the tenant's pool); the Service stays pending.", a, c.pool.Name)
			}
			c.requested[family(a)] = a
		}
	}
	// What it requests, and its sharing key: standalone only.
	if !d.in.Hub {
		req, err := requested(svc)
		if err != "" {
			return pending(ReasonInvalidAddressRequest, "%s; the Service stays pending.", err)
		}
		for _, a := range req {
			f := family(a)
			if !slices.Contains(asked, f) {
				return pending(ReasonInvalidAddressRequest, "The requested address %s is not of the Service's IP families %v; the Service stays pending.", a, svc.Spec.IPFamilies)
			}
			if !slices.Contains(c.families, f) || !c.pool.Contains(a) {
				return pending(ReasonAddressNotInPool, "The requested address %s is not in AddressPool %q; the Service stays pending.", a, c.pool.Name)
			}
			c.requested[f] = a
		}
		c.share = strings.TrimSpace(svc.Annotations[kubelbv1alpha1.AnnotationAllowSharedIP])
		if len(c.share) > maxSharingKey {
			return pending(ReasonInvalidAddressRequest, "The annotation %s is longer than %d characters; the Service stays pending.", kubelbv1alpha1.AnnotationAllowSharedIP, maxSharingKey)
		}
	}
	for _, p := range svc.Spec.Ports {
		c.ports = append(c.ports, slot{cmp.Or(p.Protocol, corev1.ProtocolTCP), p.Port})
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil && a.Zone() == "" {
			a = a.Unmap()
			if f := family(a); !c.status[f].IsValid() {
				c.status[f] = a
			}
		}
	}
	return c
}

// howToName says how a Service names its pool, for messages.
func (d *decision) howToName() string {
	if d.in.Hub {
		return "the tenant's spec.loadBalancer.addressPool, or the Config's"
	}
	return "annotation " + kubelbv1alpha1.AnnotationAddressPool
}

// requested reads the addresses a Service asks for: the annotation, or spec.loadBalancerIP.
// At most one per family; when both are given, spec.loadBalancerIP must be one of the
// annotation's. The error is a sentence fragment ("" when none).
func requested(svc *corev1.Service) ([]netip.Addr, string) {
	var out []netip.Addr
	ann, hasAnn := svc.Annotations[kubelbv1alpha1.AnnotationLoadBalancerIPs]
	if hasAnn && strings.TrimSpace(ann) != "" {
		for _, s := range strings.Split(ann, ",") {
			a, err := netip.ParseAddr(strings.TrimSpace(s))
			if err != nil || a.Zone() != "" || a.Is4In6() {
				return nil, fmt.Sprintf("The annotation %s must list IP addresses, comma-separated; %q is not one", kubelbv1alpha1.AnnotationLoadBalancerIPs, textcut.Cut(strings.TrimSpace(s), 64, textcut.Dots))
			}
			if slices.ContainsFunc(out, func(b netip.Addr) bool { return family(a) == family(b) }) {
				return nil, fmt.Sprintf("The annotation %s lists two %s addresses; at most one per IP family", kubelbv1alpha1.AnnotationLoadBalancerIPs, familyNames[family(a)])
			}
			out = append(out, a)
		}
	}
	if s := strings.TrimSpace(svc.Spec.LoadBalancerIP); s != "" {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" || a.Is4In6() {
			return nil, fmt.Sprintf("spec.loadBalancerIP %q is not an IP address", textcut.Cut(s, 64, textcut.Dots))
		}
		switch {
		case len(out) == 0:
			out = append(out, a)
		case !slices.Contains(out, a):
			return nil, fmt.Sprintf("spec.loadBalancerIP %s is not one of the addresses of the annotation %s", a, kubelbv1alpha1.AnnotationLoadBalancerIPs)
		}
	}
	return out, ""
}

// joinable tells whether c may hold a: it is free, or shared by c's key in c's pool by
// Services of other ports.
func (d *decision) joinable(a netip.Addr, c *claimant) bool {
	h := d.taken[a]
	return h == nil || len(h.members) == 0 ||
		(c.share != "" && h.share == c.share && h.pool == c.pool.Name && h.overlap(c.ports) == nil)
}

// claim gives a to c (family f).
func (d *decision) claim(a netip.Addr, c *claimant, f int) {
	h := d.taken[a]
	if h == nil || len(h.members) == 0 {
		h = &holding{pool: c.pool.Name, share: c.share}
		d.taken[a] = h
		if c.share != "" {
			k := sharedKey(c.pool.Name, f, c.share)
			d.shared[k] = append(d.shared[k], a)
		}
	}
	h.members = append(h.members, c)
	c.got[f] = a
}

// release takes back what c got (c turned out pending).
func (d *decision) release(c *claimant) {
	for f, a := range c.got {
		if !a.IsValid() {
			continue
		}
		h := d.taken[a]
		h.members = slices.DeleteFunc(h.members, func(m *claimant) bool { return m == c })
		if len(h.members) == 0 {
			delete(d.taken, a)
			if h.share != "" {
				k := sharedKey(h.pool, f, h.share)
				d.shared[k] = slices.DeleteFunc(d.shared[k], func(b netip.Addr) bool { return b == a })
			}
			// The address is free again: searches start over (rare: a Service that kept an
			// address and then could not get its other family or its request).
			clear(d.cursors)
		}
		c.got[f] = netip.Addr{}
	}
}

// take finds c an address of family f, or returns the pending verdict.
func (d *decision) take(c *claimant, f int) *lbaddress.Verdict {
	if a := c.requested[f]; a.IsValid() {
		if d.joinable(a, c) {
			d.claim(a, c, f)
			return nil
		}
		h := d.taken[a]
		if c.share != "" && h.share == c.share && h.pool == c.pool.Name {
			m := h.overlap(c.ports)
			return &lbaddress.Verdict{Reason: ReasonPortConflict, Holder: d.named(c, m.key), Message: fmt.Sprintf(
				"The requested address %s is shared under key %q by %s, which uses one of the Service's ports too; the Service stays pending until the ports differ.",
				a, textcut.Cut(c.share, 64, textcut.Dots), d.holderText(c, m.key))}
		}
		return &lbaddress.Verdict{Reason: ReasonAddressInUse, Holder: d.named(c, h.members[0].key), Message: fmt.Sprintf(
			"The requested address %s is held by %s; the Service stays pending until it is free.", a, d.holderText(c, h.members[0].key))}
	}
	if c.share != "" {
		var best netip.Addr
		for _, a := range d.shared[sharedKey(c.pool.Name, f, c.share)] {
			if d.joinable(a, c) && (!best.IsValid() || a.Less(best)) {
				best = a
			}
		}
		if best.IsValid() {
			d.claim(best, c, f)
			return nil
		}
	}
	a, ok := d.lowestFree(c.pool, f)
	if !ok {
		size := c.pool.Size(f)
		return &lbaddress.Verdict{Reason: ReasonAddressPoolExhausted, Message: fmt.Sprintf(
			"AddressPool %q has no free %s address: all %s are held; the Service stays pending until one is freed or the pool grows.",
			c.pool.Name, familyNames[f], size)}
	}
	d.claim(a, c, f)
	return nil
}

// lowestFree is the lowest address of the pool's family f that no Service holds. It resumes
// where the last search of the pool stopped: within a decision addresses are only taken (a
// release starts the searches over), so each step passes a held address or a range, and the
// cost follows the Services, not the size of the pool.
func (d *decision) lowestFree(p *Pool, f int) (netip.Addr, bool) {
	rs := p.ranges[f]
	k := p.Name + "/" + string(familyNames[f])
	cur := d.cursors[k]
	if cur == nil {
		if len(rs) == 0 {
			return netip.Addr{}, false
		}
		cur = &cursor{at: rs[0].first}
		d.cursors[k] = cur
	}
	for cur.i < len(rs) {
		if h := d.taken[cur.at]; h == nil || len(h.members) == 0 {
			return cur.at, true
		}
		next := cur.at.Next()
		if !next.IsValid() || rs[cur.i].last.Less(next) {
			cur.i++
			if cur.i < len(rs) {
				next = rs[cur.i].first
			}
		}
		cur.at = next
	}
	return netip.Addr{}, false
}

// named is the holder a verdict names: none when it is of another namespace in the hub.
func (d *decision) named(c *claimant, holder types.NamespacedName) types.NamespacedName {
	if d.in.Hub && holder.Namespace != c.key.Namespace {
		return types.NamespacedName{}
	}
	return holder
}

// holderText names the holder in a message; in the hub, a Service of another namespace is
// "a Service of another tenant".
func (d *decision) holderText(c *claimant, holder types.NamespacedName) string {
	if d.in.Hub && holder.Namespace != c.key.Namespace {
		return "a Service of another tenant"
	}
	return "Service " + holder.String()
}

func sharedKey(pool string, f int, key string) string {
	return pool + "/" + string(familyNames[f]) + "/" + key
}
