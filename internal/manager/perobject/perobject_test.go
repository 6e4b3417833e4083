package perobject

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	"kubelb.dev/kubelb/internal/metrics"
)

// The gauge counts each object once per tenant, and a tenant's series goes with its last
// object.
func TestCount(t *testing.T) {
	gauge := &metrics.TenantGaugeVec{GaugeVec: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "test_objects"}, []string{"tenant"})}
	c := NewCount(gauge)
	a1 := types.NamespacedName{Namespace: "tenant-a", Name: "one"}
	a2 := types.NamespacedName{Namespace: "tenant-a", Name: "two"}
	b1 := types.NamespacedName{Namespace: "tenant-b", Name: "one"}
	for _, k := range []types.NamespacedName{a1, a2, a1, b1} {
		c.Remember(k)
	}
	if got := testutil.ToFloat64(gauge.GaugeVec.WithLabelValues("tenant-a")); got != 2 {
		t.Errorf("tenant-a counts %v, want 2 (an object reconciled twice counts once)", got)
	}
	c.Forget(b1)
	c.Forget(b1)
	if n := testutil.CollectAndCount(gauge.GaugeVec); n != 1 {
		t.Errorf("%d series after tenant-b's last object went, want 1", n)
	}
	c.Forget(a1)
	if got := testutil.ToFloat64(gauge.GaugeVec.WithLabelValues("tenant-a")); got != 1 {
		t.Errorf("tenant-a counts %v after one went, want 1", got)
	}
}
