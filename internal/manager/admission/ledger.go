package admission

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/manager/hubcache"
	"kubelb.dev/kubelb/internal/quota"
)

// family is a set of kinds that share one byte limit.
type family int

const (
	// objects: LoadBalancers and Routes (spec.limits.objectBytes).
	objects family = iota
	// syncSecrets: SyncSecrets' data (spec.limits.syncSecretBytes).
	syncSecrets
)

// Ledger keeps, from the manager's informers, the bytes every LoadBalancer, Route and
// SyncSecret of each namespace takes, by UID — objects being deleted included, since they
// stay in etcd until their finalizers are gone. A look-up costs a map read, whatever the
// size of the tenant.
type Ledger struct {
	mu     sync.Mutex
	byUID  map[types.UID]entry
	totals map[ledgerKey]int64
	synced []toolscache.ResourceEventHandlerRegistration
}

type ledgerKey struct {
	namespace string
	family    family
}

type entry struct {
	key   ledgerKey
	bytes int64
}

// NewLedger registers the ledger's handlers on the informers of the three kinds (starting
// them if they are not yet).
func NewLedger(ctx context.Context, informers cache.Informers) (*Ledger, error) {
	l := &Ledger{byUID: map[types.UID]entry{}, totals: map[ledgerKey]int64{}}
	for _, obj := range []client.Object{&kubelbv1alpha1.LoadBalancer{}, &kubelbv1alpha1.Route{}, &kubelbv1alpha1.SyncSecret{}} {
		inf, err := informers.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return nil, fmt.Errorf("watching %T for the tenant object byte limits: %w", obj, err)
		}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    l.observe,
			UpdateFunc: func(_, obj any) { l.observe(obj) },
			DeleteFunc: l.forget,
		})
		if err != nil {
			return nil, err
		}
		l.synced = append(l.synced, reg)
	}
	return l, nil
}

// Synced reports whether the ledger has seen every object the informers listed.
func (l *Ledger) Synced() bool {
	for _, r := range l.synced {
		if !r.HasSynced() {
			return false
		}
	}
	return true
}

// Used returns the bytes the namespace's objects of family f take, except the object with
// uid (the object a request changes: its new size replaces its old one).
func (l *Ledger) Used(namespace string, f family, except types.UID) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := ledgerKey{namespace, f}
	n := l.totals[k]
	if e, ok := l.byUID[except]; ok && e.key == k {
		n -= e.bytes
	}
	return n
}

// bytesOf is what obj counts against its family's limit.
func bytesOf(obj any) (types.UID, entry, bool) {
	switch o := obj.(type) {
	case *kubelbv1alpha1.LoadBalancer:
		return o.UID, entry{ledgerKey{o.Namespace, objects}, quota.LoadBalancerBytes(o)}, true
	case *kubelbv1alpha1.Route:
		return o.UID, entry{ledgerKey{o.Namespace, objects}, quota.RouteBytes(o)}, true
	case *kubelbv1alpha1.SyncSecret:
		return o.UID, entry{ledgerKey{o.Namespace, syncSecrets}, hubcache.SyncSecretDataBytes(o)}, true
	}
	return "", entry{}, false
}

func (l *Ledger) observe(obj any) {
	uid, e, ok := bytesOf(obj)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.remove(uid)
	l.byUID[uid] = e
	l.totals[e.key] += e.bytes
}

func (l *Ledger) forget(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.remove(o.GetUID())
}

// remove takes uid's bytes out of its total (l.mu held).
func (l *Ledger) remove(uid types.UID) {
	old, ok := l.byUID[uid]
	if !ok {
		return
	}
	delete(l.byUID, uid)
	if l.totals[old.key] -= old.bytes; l.totals[old.key] == 0 {
		delete(l.totals, old.key)
	}
}
