package planner

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// deletions remembers the hub Services the planner deleted until its cache no longer lists
// them. The cache sees a delete a moment after the API server answers it; a plan run in
// between (the next LoadBalancer of a tenant's burst of deletes) would otherwise find the
// Service still there and delete it a second time: a write the API server answers with
// NotFound, for nothing.
type deletions struct {
	mu   sync.Mutex
	uids map[string]map[types.UID]struct{} // tenant namespace → the UIDs deleted and still cached
}

// done reports whether svc is a Service the planner has already deleted.
func (d *deletions) done(svc *corev1.Service) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.uids[svc.Namespace][svc.UID]
	return ok
}

// record remembers that svc was deleted.
func (d *deletions) record(svc *corev1.Service) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.uids == nil {
		d.uids = map[string]map[types.UID]struct{}{}
	}
	m := d.uids[svc.Namespace]
	if m == nil {
		m = map[types.UID]struct{}{}
		d.uids[svc.Namespace] = m
	}
	m[svc.UID] = struct{}{}
}

// prune forgets the deleted Services of namespace that its cache (listed, every Service of
// the namespace) no longer holds.
func (d *deletions) prune(namespace string, listed []corev1.Service) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.uids[namespace]
	if len(m) == 0 {
		return
	}
	still := make(map[types.UID]bool, len(m))
	for i := range listed {
		if _, ok := m[listed[i].UID]; ok {
			still[listed[i].UID] = true
		}
	}
	for uid := range m {
		if !still[uid] {
			delete(m, uid)
		}
	}
	if len(m) == 0 {
		delete(d.uids, namespace)
	}
}

// forget drops what is remembered of namespace.
func (d *deletions) forget(namespace string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.uids, namespace)
}
