package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// AddressProvider holds the metrics of one address provider's controller (the node-IP mode of
// internal/nodeip, the pools of internal/ipam) in one binary: its reconciles, the Services it
// serves by the reason of their condition kubelb.k8c.io/AddressAssigned, and for the pools
// their size and allocated addresses per IP family.
type AddressProvider struct {
	// Reconcile counts the provider's decisions (one key: no namespace label).
	Reconcile *Reconcile
	// Services is the number of served Services by reason ("Assigned", or why they wait).
	Services *prometheus.GaugeVec
	// PoolAddresses and PoolAllocated are labelled pool and family ("IPv4", "IPv6"); nil for
	// the node-IP mode.
	PoolAddresses, PoolAllocated *prometheus.GaugeVec

	mu sync.Mutex
	// last are the label values set by the previous decision, so that what is gone (a reason
	// no Service has any more, a deleted pool) is deleted, not left at its old value.
	lastServices, lastPools map[[2]string]bool
}

// PoolUsage is the size of one IP family of a pool and how many of its addresses are
// allocated.
type PoolUsage struct {
	Pool, Family    string
	Size, Allocated float64
}

// SetServices sets the Services gauge to count, the number of served Services by reason.
func (p *AddressProvider) SetServices(count map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := make(map[[2]string]bool, len(count))
	for reason, n := range count {
		p.Services.WithLabelValues(reason).Set(float64(n))
		now[[2]string{reason}] = true
	}
	for k := range p.lastServices {
		if !now[k] {
			p.Services.DeleteLabelValues(k[0])
		}
	}
	p.lastServices = now
}

// SetPools sets the pool gauges to usage, one entry per pool and family.
func (p *AddressProvider) SetPools(usage []PoolUsage) {
	if p.PoolAddresses == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := make(map[[2]string]bool, len(usage))
	for _, u := range usage {
		p.PoolAddresses.WithLabelValues(u.Pool, u.Family).Set(u.Size)
		p.PoolAllocated.WithLabelValues(u.Pool, u.Family).Set(u.Allocated)
		now[[2]string{u.Pool, u.Family}] = true
	}
	for k := range p.lastPools {
		if !now[k] {
			p.PoolAddresses.DeleteLabelValues(k[0], k[1])
			p.PoolAllocated.DeleteLabelValues(k[0], k[1])
		}
	}
	p.lastPools = now
}

// gauges are the provider's gauges (not its Reconcile), in declaration order.
func (p *AddressProvider) gauges() []prometheus.Collector {
	out := []prometheus.Collector{p.Services}
	if p.PoolAddresses != nil {
		out = append(out, p.PoolAddresses, p.PoolAllocated)
	}
	return out
}

// The address providers of the manager (--address-provider, for the hub's Envoy Services)
// and of the standalone ccm (--mode=standalone). The standalone node-IP mode counts its
// reconciles in kubelb_ccm_node_reconcile_* and its serving nodes in kubelb_ccm_nodes_total.
var (
	ManagerNodeIP = newAddressProvider("kubelb_manager_nodeip", newReconcile("kubelb_manager_nodeip", "the hub node-IP mode's decision", false),
		"Hub Services the node-IP mode serves", false)
	ManagerIPAM = newAddressProvider("kubelb_manager_ipam", newReconcile("kubelb_manager_ipam", "the hub address pools' decision", false),
		"Hub Services the address pools serve", true)
	CCMNodeIP = newAddressProvider("kubelb_ccm_nodeip", CCMNodeReconcile,
		"Services the standalone node-IP mode serves", false)
	CCMIPAM = newAddressProvider("kubelb_ccm_ipam", newReconcile("kubelb_ccm_ipam", "the standalone address pools' decision", false),
		"Services the standalone address pools serve", true)
)

// newAddressProvider declares the gauges of a provider named prefix_*: served says in their
// help which Services it counts, and pools adds the gauges of the address pools.
func newAddressProvider(prefix string, reconcile *Reconcile, served string, pools bool) *AddressProvider {
	p := &AddressProvider{Reconcile: reconcile, Services: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: prefix + "_services",
		Help: served + ", by the reason of their condition kubelb.k8c.io/AddressAssigned (Assigned, or why they wait).",
	}, []string{"reason"})}
	if pools {
		p.PoolAddresses = prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: prefix + "_pool_addresses",
			Help: "Addresses of an AddressPool, per IP family.",
		}, []string{"pool", "family"})
		p.PoolAllocated = prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: prefix + "_pool_allocated",
			Help: "Addresses of an AddressPool held by Services, per IP family.",
		}, []string{"pool", "family"})
	}
	return p
}
