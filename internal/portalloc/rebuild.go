package portalloc

import (
	"cmp"
	"slices"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

// Conflict is an allocation recorded in a LoadBalancer's status that Rebuild did not
// restore; the LoadBalancer gets a new port on its next reconcile.
type Conflict struct {
	// Key is the LoadBalancer port whose recorded allocation was dropped.
	Key Key
	// Port is the listener port its status recorded.
	Port int32
	// Err says why: ErrConflict (another, older LoadBalancer holds the port) or
	// ErrOutOfRange (the range no longer contains the port).
	Err error
}

// Rebuild returns an allocator over r holding every allocation recorded in the LoadBalancers'
// status.service.ports (key from the port's namespace, LoadBalancer, protocol and name or
// number; port from upstreamTargetPort). The result depends only on the LoadBalancers, not on
// their order in lbs: they are visited oldest first (creation time, then namespace, then
// name), so when two claim the same port the older one keeps it and the other is reported as
// a Conflict. LoadBalancers being deleted whose cleanup finalizer is already gone are skipped.
func Rebuild(r Range, lbs []kubelbv1alpha1.LoadBalancer) (*Allocator, []Conflict, error) {
	a, err := New(r)
	if err != nil {
		return nil, nil, err
	}
	order := make([]*kubelbv1alpha1.LoadBalancer, 0, len(lbs))
	for i := range lbs {
		lb := &lbs[i]
		if lb.DeletionTimestamp != nil && !slices.Contains(lb.Finalizers, kubelbv1alpha1.CleanupFinalizer) {
			continue
		}
		order = append(order, lb)
	}
	slices.SortFunc(order, func(x, y *kubelbv1alpha1.LoadBalancer) int {
		if c := x.CreationTimestamp.Compare(y.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	var conflicts []Conflict
	a.mu.Lock()
	defer a.mu.Unlock()
	namespaces := map[string]struct{}{}
	for _, lb := range order {
		for _, sp := range lb.Status.Service.Ports {
			if sp.UpstreamTargetPort == 0 {
				continue
			}
			k := KeyFor(lb.Namespace, lb.Name, sp.Protocol, sp.Name, sp.Port)
			if err := a.claimLocked(k, sp.UpstreamTargetPort); err != nil {
				conflicts = append(conflicts, Conflict{Key: k, Port: sp.UpstreamTargetPort, Err: err})
				continue
			}
			namespaces[lb.Namespace] = struct{}{}
		}
	}
	for ns := range namespaces {
		a.reportLocked(ns)
	}
	return a, conflicts, nil
}
