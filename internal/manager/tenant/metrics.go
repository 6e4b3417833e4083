package tenant

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/metrics"
)

// trackTenantMetrics limits the manager's tenant-labelled metrics to the Tenants of the hub
// (metrics.TrackTenants: a lookup in the Tenant cache) and deletes every series of a Tenant
// when it is removed (metrics.ForgetTenant). It runs on every replica, not only the leader:
// the xDS server and the Envoy control plane, which label series by tenant, run everywhere.
// The Tenant informer is registered here, before the cache starts, so the cache is synced
// with it before any controller or the xDS server records anything.
func trackTenantMetrics(mgr ctrl.Manager) error {
	c := mgr.GetCache()
	inf, err := c.GetInformer(context.Background(), &kubelbv1alpha1.Tenant{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("tenant controller: getting the Tenant informer: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if t, ok := obj.(*kubelbv1alpha1.Tenant); ok {
			metrics.ForgetTenant(t.Name, hubnames.TenantNamespace(t.Name))
		}
	}}); err != nil {
		return fmt.Errorf("tenant controller: watching Tenant deletions for the metrics: %w", err)
	}
	metrics.TrackTenants(func(value string) bool {
		names := []string{value}
		if hubnames.IsTenantNamespace(value) {
			names = append(names, hubnames.TenantName(value))
		}
		for _, name := range names {
			// Read-only: no copy of the cached Tenant (this runs for every series set).
			if name != "" && c.Get(context.Background(), types.NamespacedName{Name: name}, &kubelbv1alpha1.Tenant{}, client.UnsafeDisableDeepCopy) == nil {
				return true
			}
		}
		return false
	})
	return nil
}
