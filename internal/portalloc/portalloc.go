// Package portalloc allocates the Envoy listener ports of LoadBalancer ports and of the hub
// Services of Routes (a Gateway's listeners, a tenant's shared Ingress Service), hub-wide.
//
// One Allocator serves the whole hub over one Range, so listener ports are unique across
// tenants and tenant fleets never collide, even when several share a node. The allocator is
// only a cache: the durable state is the targetPort of every port of the manager's own hub
// Services (only the manager writes them; LoadBalancer and Route status, which tenants can
// write, are never read), and Rebuild turns a list of hub Services back into exactly the
// same allocations, so a restarted or second manager agrees with the first. Shared is the
// manager's one allocator, rebuilt on first use.
//
// Allocation policy: a key keeps its port for as long as it is allocated; a new key gets the
// first hint that is free (e.g. the port its status already records) or else the lowest free
// port of the range. Lowest-free is deterministic and reuses freed ports at once. Allocate,
// Release and Lookup cost O(1) in the number of allocated ports (a two-level bitmap and
// maps); finding the lowest free port scans at most Range.Size()/4096 words.
package portalloc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"kubelb.dev/kubelb/internal/metrics"
)

// Errors returned by the allocator; test them with errors.Is.
var (
	// ErrExhausted means the range has fewer free ports than were asked for.
	ErrExhausted = errors.New("listener port range exhausted")
	// ErrConflict means the port is already allocated to another key.
	ErrConflict = errors.New("listener port already allocated")
	// ErrOutOfRange means the port lies outside the allocator's range.
	ErrOutOfRange = errors.New("listener port outside the allocation range")
)

// Range is an inclusive range of listener ports.
type Range struct {
	Min int32
	Max int32
}

// DefaultRange is the listener port range used when none is configured.
var DefaultRange = Range{Min: 10000, Max: 19999}

// ParseRange parses "min-max", e.g. "10000-19999".
func ParseRange(s string) (Range, error) {
	lo, hi, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return Range{}, fmt.Errorf("invalid port range %q: want min-max", s)
	}
	minPort, err1 := strconv.ParseInt(strings.TrimSpace(lo), 10, 32)
	maxPort, err2 := strconv.ParseInt(strings.TrimSpace(hi), 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return Range{}, fmt.Errorf("parsing port range %q: %w", s, err)
	}
	r := Range{Min: int32(minPort), Max: int32(maxPort)}
	return r, r.Validate()
}

// String formats the range as "min-max".
func (r Range) String() string { return fmt.Sprintf("%d-%d", r.Min, r.Max) }

// Validate checks that the range is a non-empty part of 1-65535.
func (r Range) Validate() error {
	if r.Min < 1 || r.Max > 65535 || r.Min > r.Max {
		return fmt.Errorf("invalid port range %s: want 1 <= min <= max <= 65535", r)
	}
	return nil
}

// Size is the number of ports in the range.
func (r Range) Size() int { return int(r.Max-r.Min) + 1 }

// Contains reports whether port lies in the range.
func (r Range) Contains(port int32) bool { return port >= r.Min && port <= r.Max }

// Key names one port of one LoadBalancer: "<namespace>/<lb>/<protocol>/<port name or number>".
// A named port is keyed by its name, so changing its number keeps its listener port. Ports
// of Route hub Services have keys of the same shape whose owner part cannot be an object
// name (RouteKey, IngressKey).
type Key struct {
	Namespace string
	// LoadBalancer is the owner: a LoadBalancer's name, "route:<route>" or
	// "ingress:kubelb-ingress".
	LoadBalancer string
	Protocol     corev1.Protocol
	// Port is the port's name, or its number when it has no name.
	Port string
}

// KeyFor returns the key of a LoadBalancer port; an empty protocol means TCP.
func KeyFor(namespace, lb string, protocol corev1.Protocol, name string, port int32) Key {
	if protocol == "" {
		protocol = corev1.ProtocolTCP
	}
	if name == "" {
		name = strconv.Itoa(int(port))
	}
	return Key{Namespace: namespace, LoadBalancer: lb, Protocol: protocol, Port: name}
}

// String formats the key as "<namespace>/<lb>/<protocol>/<port>".
func (k Key) String() string {
	return k.Namespace + "/" + k.LoadBalancer + "/" + string(k.Protocol) + "/" + k.Port
}

// Owner is the LoadBalancer the key belongs to.
func (k Key) Owner() types.NamespacedName {
	return types.NamespacedName{Namespace: k.Namespace, Name: k.LoadBalancer}
}

// Request asks for a port for Key, preferring the first free port among Hints.
type Request struct {
	Key   Key
	Hints []int32
}

// Allocator hands out listener ports of one Range. It is safe for concurrent use.
type Allocator struct {
	mu     sync.Mutex
	r      Range
	used   *bitmap
	byKey  map[Key]int32
	byPort map[int32]Key
	owners map[types.NamespacedName]map[Key]struct{}
	perNS  map[string]int
}

// New returns an empty allocator over r.
func New(r Range) (*Allocator, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	a := &Allocator{
		r:      r,
		used:   newBitmap(r.Size()),
		byKey:  map[Key]int32{},
		byPort: map[int32]Key{},
		owners: map[types.NamespacedName]map[Key]struct{}{},
		perNS:  map[string]int{},
	}
	metrics.ManagerPortsFree.Set(float64(a.used.free()))
	return a, nil
}

// Range is the allocator's range.
func (a *Allocator) Range() Range { return a.r }

// Free is the number of free ports.
func (a *Allocator) Free() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.used.free()
}

// Allocated is the number of allocated ports.
func (a *Allocator) Allocated() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.byKey)
}

// Owners returns the owners that hold ports in namespace, in no particular order.
func (a *Allocator) Owners(namespace string) []types.NamespacedName {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.perNS[namespace] == 0 {
		return nil
	}
	var out []types.NamespacedName
	for o := range a.owners {
		if o.Namespace == namespace {
			out = append(out, o)
		}
	}
	return out
}

// Lookup returns the port allocated to k.
func (a *Allocator) Lookup(k Key) (int32, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.byKey[k]
	return p, ok
}

// Holder returns the key a port is allocated to.
func (a *Allocator) Holder(port int32) (Key, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k, ok := a.byPort[port]
	return k, ok
}

// Snapshot returns a copy of all allocations.
func (a *Allocator) Snapshot() map[Key]int32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[Key]int32, len(a.byKey))
	for k, p := range a.byKey {
		out[k] = p
	}
	return out
}

// Claim allocates exactly port to k. Claiming the port k already holds is a no-op; a key
// that holds another port keeps it and gets ErrConflict.
func (a *Allocator) Claim(k Key, port int32) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.claimLocked(k, port); err != nil {
		return err
	}
	a.reportLocked(k.Namespace)
	return nil
}

func (a *Allocator) claimLocked(k Key, port int32) error {
	if !a.r.Contains(port) {
		return fmt.Errorf("claiming port %d for %s: %w (%s)", port, k, ErrOutOfRange, a.r)
	}
	if have, ok := a.byKey[k]; ok {
		if have == port {
			return nil
		}
		return fmt.Errorf("claiming port %d for %s, which holds port %d: %w", port, k, have, ErrConflict)
	}
	if holder, ok := a.byPort[port]; ok {
		return fmt.Errorf("claiming port %d for %s: %w to %s", port, k, ErrConflict, holder)
	}
	a.assignLocked(k, port)
	return nil
}

func (a *Allocator) assignLocked(k Key, port int32) {
	a.used.set(int(port - a.r.Min))
	a.byKey[k] = port
	a.byPort[port] = k
	o := k.Owner()
	if a.owners[o] == nil {
		a.owners[o] = map[Key]struct{}{}
	}
	a.owners[o][k] = struct{}{}
	a.perNS[k.Namespace]++
}

// Allocate returns the port of k, allocating one when k has none: the first free hint, else
// the lowest free port. It returns ErrExhausted when the range is full.
func (a *Allocator) Allocate(k Key, hints ...int32) (int32, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.byKey[k]; ok {
		return p, nil
	}
	p, err := a.allocateLocked(k, hints)
	if err != nil {
		return 0, err
	}
	a.reportLocked(k.Namespace)
	return p, nil
}

func (a *Allocator) allocateLocked(k Key, hints []int32) (int32, error) {
	for _, h := range hints {
		if a.r.Contains(h) && !a.used.isSet(int(h-a.r.Min)) {
			a.assignLocked(k, h)
			return h, nil
		}
	}
	i := a.used.lowestFree()
	if i < 0 {
		return 0, fmt.Errorf("allocating a port for %s: %w (%s, all %d ports in use)", k, ErrExhausted, a.r, a.r.Size())
	}
	p := a.r.Min + int32(i)
	a.assignLocked(k, p)
	return p, nil
}

// Ensure makes owner's allocations exactly reqs: keys owner holds but does not ask for are
// released, keys already allocated keep their port, and new keys are allocated (hints
// first). New keys are allocated all or nothing: when the range has fewer free ports than
// new keys, none is allocated and the error wraps ErrExhausted; the returned map then holds
// the keys that already had a port. released is the number of ports freed. Every key of
// reqs must belong to owner.
func (a *Allocator) Ensure(owner types.NamespacedName, reqs []Request) (alloc map[Key]int32, released int, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	want := make(map[Key]struct{}, len(reqs))
	for _, rq := range reqs {
		if rq.Key.Owner() != owner {
			return nil, 0, fmt.Errorf("ensuring ports of %s: key %s belongs to another LoadBalancer", owner, rq.Key)
		}
		want[rq.Key] = struct{}{}
	}
	for k := range a.owners[owner] {
		if _, ok := want[k]; !ok && a.releaseLocked(k) {
			released++
		}
	}
	out := make(map[Key]int32, len(reqs))
	var missing []Request
	seen := make(map[Key]struct{}, len(reqs))
	for _, rq := range reqs {
		if _, dup := seen[rq.Key]; dup {
			continue
		}
		seen[rq.Key] = struct{}{}
		if p, ok := a.byKey[rq.Key]; ok {
			out[rq.Key] = p
		} else {
			missing = append(missing, rq)
		}
	}
	if len(missing) > a.used.free() {
		err = fmt.Errorf("allocating %d ports for %s: %w (%s, %d free)", len(missing), owner, ErrExhausted, a.r, a.used.free())
	} else {
		for _, rq := range missing {
			p, aerr := a.allocateLocked(rq.Key, rq.Hints)
			if aerr != nil { // cannot happen: enough ports were free
				err = aerr
				break
			}
			out[rq.Key] = p
		}
	}
	a.reportLocked(owner.Namespace)
	return out, released, err
}

// Release frees the port of k; it reports whether k held one.
func (a *Allocator) Release(k Key) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	ok := a.releaseLocked(k)
	if ok {
		a.reportLocked(k.Namespace)
	}
	return ok
}

func (a *Allocator) releaseLocked(k Key) bool {
	p, ok := a.byKey[k]
	if !ok {
		return false
	}
	a.used.clear(int(p - a.r.Min))
	delete(a.byKey, k)
	delete(a.byPort, p)
	o := k.Owner()
	delete(a.owners[o], k)
	if len(a.owners[o]) == 0 {
		delete(a.owners, o)
	}
	if a.perNS[k.Namespace]--; a.perNS[k.Namespace] == 0 {
		delete(a.perNS, k.Namespace)
	}
	return true
}

// ReleaseOwner frees every port of one LoadBalancer and returns how many it held.
func (a *Allocator) ReleaseOwner(owner types.NamespacedName) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for k := range a.owners[owner] {
		if a.releaseLocked(k) {
			n++
		}
	}
	if n > 0 {
		a.reportLocked(owner.Namespace)
	}
	return n
}

// reportLocked updates the port metrics of one tenant namespace and the free count.
func (a *Allocator) reportLocked(namespace string) {
	metrics.ManagerPortsFree.Set(float64(a.used.free()))
	if n := a.perNS[namespace]; n > 0 {
		metrics.ManagerPortsAllocated.WithLabelValues(namespace).Set(float64(n))
	} else {
		metrics.ManagerPortsAllocated.DeleteLabelValues(namespace)
	}
}
