package ccm

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// loadBalancingDisabled tells whether the hub disables layer-4 load balancing for the tenant:
// some TenantState in the tenant's namespace (normally "default") says status.loadBalancer.
// disable. No TenantState means allowed.
func loadBalancingDisabled(ctx context.Context, hub client.Reader, namespace string) (bool, error) {
	states := &v1alpha1.TenantStateList{}
	if err := hub.List(ctx, states, client.InNamespace(namespace)); err != nil {
		return false, fmt.Errorf("reading TenantState in %s: %w", namespace, err)
	}
	for i := range states.Items {
		if states.Items[i].Status.LoadBalancer.Disable {
			return true, nil
		}
	}
	return false, nil
}

// warnOnce remembers, per Service, in which "disabled" period it was warned, so that each
// Service gets one Warning Event per change of the hub's verdict, not one per reconcile.
type warnOnce struct {
	mu       sync.Mutex
	disabled bool
	period   uint64
	warned   map[types.UID]uint64
}

func newWarnOnce() *warnOnce { return &warnOnce{warned: map[types.UID]uint64{}} }

// observe records the current verdict; a change starts a new period.
func (w *warnOnce) observe(disabled bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if disabled != w.disabled {
		w.disabled = disabled
		w.period++
	}
}

// first tells whether uid has not been warned in the current period, and marks it warned.
func (w *warnOnce) first(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if p, ok := w.warned[uid]; ok && p == w.period {
		return false
	}
	w.warned[uid] = w.period
	return true
}

// forget drops a Service that is gone or no longer mirrored.
func (w *warnOnce) forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.warned, uid)
}
