package envoycp

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/settings"
)

// HealthCheckBudget is a tenant's health-check budget (translate.Options.
// HealthCheckProbesPerSecond): its own limit, at most an equal share of the hub-wide total
// between the tenant namespaces (read from the cache), and at least one probe per second.
func HealthCheckBudget(ctx context.Context, c client.Reader, limits settings.Limits) (int, error) {
	nss := &corev1.NamespaceList{}
	if err := c.List(ctx, nss, client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}, client.UnsafeDisableDeepCopy); err != nil {
		return 0, fmt.Errorf("counting the tenants for the health-check budget: %w", err)
	}
	tenants := 0
	for _, ns := range nss.Items {
		if hubnames.IsManaged(&ns) {
			tenants++
		}
	}
	share := limits.TotalHealthCheckProbesPerSecond / max(tenants, 1)
	return max(min(limits.HealthCheckProbesPerSecond, share), 1), nil
}
