package status

import (
	"context"
	"fmt"
	"hash/fnv"
	"reflect"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ssa"
)

// FormerFieldOwners are the field owners that wrote parts of LoadBalancer and Route status
// before the Sink was their one writer. The Sink releases their fields (an empty apply under
// each) the first time it writes an object that still lists them, after taking the values
// over: what they owned alone and the Sink no longer writes goes.
var FormerFieldOwners = []string{"kubelb-loadbalancer", "kubelb-route", "kubelb-reach"}

// Sink is the one writer of the status of LoadBalancers and Routes (field owner
// FieldOwner, leader only). Its producers — the LoadBalancer controller (ports, address,
// Ready, Hostname), the Route controller (hub Services, ResourceAppliedSuccessfully), the
// Writer (Programmed, the tenant object's status) and the reachability pass
// (BackendsReachable) — each hand it a change of the status; it applies the change to the
// status as kubelb last knew it and writes the whole status kubelb owns in one server-side
// apply when the result differs. So the parts never remove each other's fields, and a
// change that alters nothing costs no request.
//
// "As kubelb last knew it" is the status of the Sink's last write while the cached object
// is older than that write (a burst writes faster than the informers see it), the cached
// object's otherwise. Writes to one object are serialized; different objects are written in
// parallel.
type Sink struct {
	client client.Client
	locks  [64]sync.Mutex // one writer per object at a time (by key hash)

	mu      sync.Mutex
	written map[sinkKey]sunk
	// writes counts the applies (tests and benchmarks).
	writes int
}

type sinkKey struct {
	kind string
	name types.NamespacedName
}

// sunk is the Sink's last write of an object: its UID, the resourceVersion the API server
// answered and the owned status written (a LoadBalancerStatus or RouteStatus).
type sunk struct {
	uid    types.UID
	rv     int64
	status any
}

// NewSink returns the Sink writing through c.
func NewSink(c client.Client) *Sink {
	return &Sink{client: c, written: map[sinkKey]sunk{}}
}

// LoadBalancer applies change to lb's status as kubelb last knew it (only the fields kubelb
// owns: LoadBalancerOwned) and writes the result when it differs. It returns that status
// before the change (for Events on transitions) and whether it wrote. A LoadBalancer that
// is gone is not an error.
func (s *Sink) LoadBalancer(ctx context.Context, lb *v1alpha1.LoadBalancer, change func(*v1alpha1.LoadBalancerStatus)) (v1alpha1.LoadBalancerStatus, bool, error) {
	return sinkWrite(ctx, s, "LoadBalancer", lb, lb.Status, LoadBalancerOwned, change)
}

// Route is LoadBalancer for a Route (RouteOwned).
func (s *Sink) Route(ctx context.Context, route *v1alpha1.Route, change func(*v1alpha1.RouteStatus)) (v1alpha1.RouteStatus, bool, error) {
	return sinkWrite(ctx, s, "Route", route, route.Status, RouteOwned, change)
}

// KnownLoadBalancer is lb's owned status as kubelb last knew it (see Sink).
func (s *Sink) KnownLoadBalancer(lb *v1alpha1.LoadBalancer) v1alpha1.LoadBalancerStatus {
	return known(s, "LoadBalancer", lb, lb.Status, LoadBalancerOwned)
}

// Forget drops what the Sink keeps of an object that is gone (kind "LoadBalancer" or
// "Route").
func (s *Sink) Forget(kind string, name types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.written, sinkKey{kind, name})
}

// Writes is the number of status writes the Sink made.
func (s *Sink) Writes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

// LoadBalancerOwned is a copy of the fields of st kubelb writes: all but the conditions of
// types it does not own (a tenant's).
func LoadBalancerOwned(st v1alpha1.LoadBalancerStatus) v1alpha1.LoadBalancerStatus {
	out := *st.DeepCopy()
	out.Conditions = ssa.OwnConditions(st.Conditions, ConditionReady, ConditionHostname, ConditionProgrammed, ConditionBackendsReachable)
	return out
}

// RouteOwned is a copy of the fields of st kubelb writes: all but the conditions of types
// it does not own on status.resources.route.
func RouteOwned(st v1alpha1.RouteStatus) v1alpha1.RouteStatus {
	out := *st.DeepCopy()
	out.Resources.Route.Conditions = ssa.OwnConditions(st.Resources.Route.Conditions, ConditionApplied, ConditionProgrammed, ConditionBackendsReachable)
	return out
}

// Condition types of LoadBalancer and Route status written by the LoadBalancer and Route
// controllers (loadbalancer.ConditionReady, loadbalancer.ConditionHostname,
// route.ConditionApplied).
const (
	ConditionReady    = "Ready"
	ConditionHostname = "Hostname"
	ConditionApplied  = "ResourceAppliedSuccessfully"
)

func (s *Sink) lock(k sinkKey) *sync.Mutex {
	h := fnv.New32a()
	_, _ = h.Write([]byte(k.kind + "/" + k.name.String()))
	return &s.locks[h.Sum32()%uint32(len(s.locks))]
}

// known is the owned status of obj as kubelb last knew it. The caller holds the object's
// lock or accepts a racy answer.
func known[S any](s *Sink, kind string, obj client.Object, current S, owned func(S) S) S {
	st, _ := knownFrom(s, kind, obj, current, owned)
	return st
}

// knownFrom is known, and whether that is the Sink's last write (the object is older).
func knownFrom[S any](s *Sink, kind string, obj client.Object, current S, owned func(S) S) (S, bool) {
	k := sinkKey{kind, client.ObjectKeyFromObject(obj)}
	s.mu.Lock()
	w, ok := s.written[k]
	if ok && w.uid != obj.GetUID() {
		delete(s.written, k) // an earlier object of that name
		ok = false
	}
	s.mu.Unlock()
	if ok && olderThan(obj.GetResourceVersion(), w.rv) {
		return owned(w.status.(S)), true
	}
	return owned(current), false
}

func sinkWrite[S any](ctx context.Context, s *Sink, kind string, obj client.Object, current S, owned func(S) S, change func(*S)) (S, bool, error) {
	k := sinkKey{kind, client.ObjectKeyFromObject(obj)}
	l := s.lock(k)
	l.Lock()
	defer l.Unlock()
	base, fromWrite := knownFrom(s, kind, obj, current, owned)
	next := owned(base)
	change(&next)
	// Most changes change nothing: the Go values tell without encoding either (nil and
	// empty lists are equal to both comparisons).
	if equality.Semantic.DeepEqual(base, next) && (fromWrite || !listsFormerOwners(obj)) {
		return base, false, nil
	}
	was, err := payload(base)
	if err != nil {
		return base, false, err
	}
	now, err := payload(next)
	if err != nil {
		return base, false, err
	}
	// An object that still lists a former owner is written once to release it (not from a
	// copy older than the Sink's last write, which released them already).
	if reflect.DeepEqual(was, now) && (fromWrite || !listsFormerOwners(obj)) {
		return base, false, nil
	}
	target, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return base, false, fmt.Errorf("copying %s %s", kind, k.name)
	}
	if err := ssa.ApplyStatusFields(ctx, s.client, target, FieldOwner, now); err != nil {
		if apierrors.IsNotFound(err) {
			return base, false, nil
		}
		return base, false, err
	}
	if err := s.releaseFormer(ctx, kind, target); err != nil {
		return base, false, err
	}
	rv, _ := strconv.ParseInt(target.GetResourceVersion(), 10, 64)
	s.mu.Lock()
	s.written[k] = sunk{uid: target.GetUID(), rv: rv, status: next}
	s.writes++
	s.mu.Unlock()
	return base, true, nil
}

// payload is the apply configuration of a status: its JSON without nulls, empty lists and
// empty objects, so that two statuses that would write the same fields compare equal
// whatever their Go form (nil or empty lists, raw JSON spacing). A tenant object's status
// (a field named "status", kept raw) is kept as it is, unless null.
func payload(st any) (map[string]any, error) {
	m, err := ssa.StatusFields(st, ssa.Pruning{Nulls: true, EmptyLists: true, Raw: "status"})
	if err != nil {
		return nil, fmt.Errorf("a status: %w", err)
	}
	return m, nil
}

// listsFormerOwners tells whether obj's status still lists a former field owner.
func listsFormerOwners(obj client.Object) bool {
	for _, e := range obj.GetManagedFields() {
		if isFormerOwner(e) {
			return true
		}
	}
	return false
}

func isFormerOwner(e metav1.ManagedFieldsEntry) bool {
	if e.Subresource != "status" || e.Operation != metav1.ManagedFieldsOperationApply {
		return false
	}
	for _, o := range FormerFieldOwners {
		if e.Manager == o {
			return true
		}
	}
	return false
}

// releaseFormer applies an empty status under each former field owner obj lists (after the
// Sink's own apply took their values over), so that the Sink alone owns kubelb's status.
func (s *Sink) releaseFormer(ctx context.Context, kind string, obj client.Object) error {
	for _, e := range obj.GetManagedFields() {
		if !isFormerOwner(e) {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(v1alpha1.GroupVersion.String())
		u.SetKind(kind)
		u.SetName(obj.GetName())
		u.SetNamespace(obj.GetNamespace())
		if err := s.client.Status().Patch(ctx, u, client.Apply, client.FieldOwner(e.Manager), client.ForceOwnership); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("releasing the status fields of former owner %s of %s %s: %w", e.Manager, kind, client.ObjectKeyFromObject(obj), err)
		}
		obj.SetResourceVersion(u.GetResourceVersion())
	}
	return nil
}
