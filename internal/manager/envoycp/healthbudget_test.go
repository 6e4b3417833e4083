package envoycp

import (
	"context"
	"fmt"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/internal/settings"
)

// TestHealthCheckBudgetShare: a tenant's health-check budget is its own limit, at most an
// equal share of the hub-wide total between the tenant namespaces, and at least 1.
func TestHealthCheckBudgetShare(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tenants, limit, total, want int
	}{
		{tenants: 1, limit: 2000, total: 20000, want: 2000},
		{tenants: 20, limit: 2000, total: 20000, want: 1000},
		{tenants: 20, limit: 500, total: 20000, want: 500},
		{tenants: 30, limit: 2000, total: 10, want: 1},
	} {
		t.Run(fmt.Sprintf("%d tenants", tc.tenants), func(t *testing.T) {
			t.Parallel()
			objs := []client.Object{namespace("not-a-tenant", false)}
			for i := range tc.tenants {
				objs = append(objs, namespace(fmt.Sprintf("tenant-%d", i), true))
			}
			got, err := HealthCheckBudget(context.Background(), newClient(t, objs...),
				settings.Limits{HealthCheckProbesPerSecond: tc.limit, TotalHealthCheckProbesPerSecond: tc.total})
			if err != nil || got != tc.want {
				t.Errorf("budget %d (err %v), want %d", got, err, tc.want)
			}
		})
	}
}
