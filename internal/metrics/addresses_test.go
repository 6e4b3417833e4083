package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestAddressProviderForgetsWhatIsGone: a reason no Service has any more and a deleted pool
// lose their series instead of keeping their last value.
func TestAddressProviderForgetsWhatIsGone(t *testing.T) {
	p := &AddressProvider{
		Services:      prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "s"}, []string{"reason"}),
		PoolAddresses: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "a"}, []string{"pool", "family"}),
		PoolAllocated: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "b"}, []string{"pool", "family"}),
	}
	p.SetServices(map[string]int{"Assigned": 3, "AddressPoolExhausted": 1})
	p.SetPools([]PoolUsage{{Pool: "blue", Family: "IPv4", Size: 4, Allocated: 4}, {Pool: "red", Family: "IPv6", Size: 1 << 20, Allocated: 1}})
	if got := testutil.ToFloat64(p.Services.WithLabelValues("AddressPoolExhausted")); got != 1 {
		t.Errorf("AddressPoolExhausted %v, want 1", got)
	}
	if got := testutil.ToFloat64(p.PoolAllocated.WithLabelValues("blue", "IPv4")); got != 4 {
		t.Errorf("blue allocated %v, want 4", got)
	}

	p.SetServices(map[string]int{"Assigned": 4})
	p.SetPools([]PoolUsage{{Pool: "blue", Family: "IPv4", Size: 8, Allocated: 4}})
	if n := testutil.CollectAndCount(p.Services); n != 1 {
		t.Errorf("%d Services series, want 1 (Assigned)", n)
	}
	if n := testutil.CollectAndCount(p.PoolAddresses) + testutil.CollectAndCount(p.PoolAllocated); n != 2 {
		t.Errorf("%d pool series, want 2 (blue IPv4 only)", n)
	}
	if got := testutil.ToFloat64(p.PoolAddresses.WithLabelValues("blue", "IPv4")); got != 8 {
		t.Errorf("blue size %v, want 8", got)
	}

	// The node-IP mode has no pools: SetPools does nothing.
	(&AddressProvider{Services: p.Services}).SetPools([]PoolUsage{{Pool: "x"}})
}
