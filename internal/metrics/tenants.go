package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Series labelled by tenant exist only for tenants that exist. A label value can come from
// outside kubelb's control (an xDS client's node.cluster, an object in any namespace), and
// every new value is a new series that Prometheus keeps: unchecked, anyone who reaches the
// xDS port or writes a namespace could grow the manager's metrics without bound. So:
//
//   - the manager calls TrackTenants at start-up with a check of its Tenant cache; from then
//     on an observation whose tenant label (the tenant's name "x" or its namespace
//     "tenant-x") names no Tenant is dropped (the vectors below and the reconcile metrics of
//     the manager's per-tenant controllers);
//   - when a Tenant is removed, ForgetTenant deletes every series labelled with it, in one
//     place, for every vector listed here.
//
// Without TrackTenants (the ccm, unit tests of other packages) nothing is filtered.

// tenantFilter holds the check installed by TrackTenants.
var tenantFilter struct {
	sync.RWMutex
	exists func(value string) bool
}

// TrackTenants makes the tenant-labelled metrics accept only label values for which exists
// returns true: the name or the namespace of a Tenant present on the hub. It must be cheap
// (a cache lookup) and safe for concurrent use.
func TrackTenants(exists func(value string) bool) {
	tenantFilter.Lock()
	defer tenantFilter.Unlock()
	tenantFilter.exists = exists
}

// tenantAllowed says whether a series labelled with value may be created.
func tenantAllowed(value string) bool {
	tenantFilter.RLock()
	exists := tenantFilter.exists
	tenantFilter.RUnlock()
	return exists == nil || exists(value)
}

// ForgetTenant deletes every series of the tenant named name, whose namespace is namespace:
// those of the tenant-labelled vectors (labelled by either value) and those of the
// per-tenant controllers' reconcile metrics. The manager calls it when a Tenant is removed.
func ForgetTenant(name, namespace string) {
	for _, v := range tenantVecs() {
		for _, value := range []string{name, namespace} {
			v.DeletePartialMatch(prometheus.Labels{"tenant": value})
		}
	}
	for _, r := range tenantReconciles() {
		r.Total.DeletePartialMatch(prometheus.Labels{"namespace": namespace})
		r.Duration.DeletePartialMatch(prometheus.Labels{"namespace": namespace})
	}
}

// The metrics a dropped observation goes to: unnamed, never registered, never collected.
var (
	discardedGauge     = prometheus.NewGauge(prometheus.GaugeOpts{})
	discardedCounter   = prometheus.NewCounter(prometheus.CounterOpts{})
	discardedHistogram = prometheus.NewHistogram(prometheus.HistogramOpts{})
)

// partialDeleter is the part of a metric vector ForgetTenant uses.
type partialDeleter interface {
	DeletePartialMatch(labels prometheus.Labels) int
}

// TenantGaugeVec is a GaugeVec whose first label is "tenant": WithLabelValues returns a gauge
// that is not collected when the tenant does not exist (see TrackTenants).
type TenantGaugeVec struct{ *prometheus.GaugeVec }

// WithLabelValues is prometheus.GaugeVec's, for existing tenants only.
func (v *TenantGaugeVec) WithLabelValues(lvs ...string) prometheus.Gauge {
	if len(lvs) > 0 && !tenantAllowed(lvs[0]) {
		return discardedGauge
	}
	return v.GaugeVec.WithLabelValues(lvs...)
}

// TenantCounterVec is a CounterVec whose first label is "tenant" (see TenantGaugeVec).
type TenantCounterVec struct{ *prometheus.CounterVec }

// WithLabelValues is prometheus.CounterVec's, for existing tenants only.
func (v *TenantCounterVec) WithLabelValues(lvs ...string) prometheus.Counter {
	if len(lvs) > 0 && !tenantAllowed(lvs[0]) {
		return discardedCounter
	}
	return v.CounterVec.WithLabelValues(lvs...)
}

// TenantHistogramVec is a HistogramVec whose first label is "tenant" (see TenantGaugeVec).
type TenantHistogramVec struct{ *prometheus.HistogramVec }

// WithLabelValues is prometheus.HistogramVec's, for existing tenants only.
func (v *TenantHistogramVec) WithLabelValues(lvs ...string) prometheus.Observer {
	if len(lvs) > 0 && !tenantAllowed(lvs[0]) {
		return discardedHistogram
	}
	return v.HistogramVec.WithLabelValues(lvs...)
}

// TenantSeries lists the series among families labelled (tenant or namespace) with one of
// values, as "name{label=value}": what a tenant's label has left in a registry.
func TenantSeries(families []*dto.MetricFamily, values ...string) []string {
	var out []string
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "tenant" && l.GetName() != "namespace" {
					continue
				}
				for _, v := range values {
					if l.GetValue() == v {
						out = append(out, f.GetName()+"{"+l.GetName()+"="+v+"}")
					}
				}
			}
		}
	}
	return out
}
