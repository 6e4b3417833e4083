// Package metrics defines every Prometheus metric kubelb exports, in one place. The metrics
// are registered with controller-runtime's registry, so they are served on the metrics
// address of both binaries next to controller-runtime's own.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Results of a reconcile, the values of the "result" label.
const (
	ResultSuccess = "success"
	ResultError   = "error"
	ResultSkipped = "skipped"
)

// Result maps a reconcile error to the value of the "result" label.
func Result(err error) string {
	if err != nil {
		return ResultError
	}
	return ResultSuccess
}

// durationBuckets suit reconciles: from half a millisecond to about half a minute.
var durationBuckets = prometheus.ExponentialBuckets(0.0005, 2, 16)

// Reconcile is the pair of metrics every controller keeps: a counter by result and a
// duration histogram.
type Reconcile struct {
	Total    *prometheus.CounterVec
	Duration *prometheus.HistogramVec
	labels   []string
	// tenantScoped: the "namespace" label is a tenant namespace of the hub; observations for
	// a namespace without a Tenant are dropped (TrackTenants).
	tenantScoped bool
}

// perTenant marks a manager reconcile metric whose namespace label is a tenant namespace.
func (r *Reconcile) perTenant() *Reconcile {
	r.tenantScoped = true
	return r
}

// newReconcile declares <prefix>_reconcile_total and <prefix>_reconcile_duration_seconds.
// Namespaced controllers get a "namespace" label on both.
func newReconcile(prefix, what string, namespaced bool) *Reconcile {
	var labels []string
	if namespaced {
		labels = []string{"namespace"}
	}
	return &Reconcile{
		Total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_reconcile_total",
			Help: "Reconciles of " + what + ", by result.",
		}, append(append([]string{}, labels...), "result")),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    prefix + "_reconcile_duration_seconds",
			Help:    "Time taken by reconciles of " + what + ".",
			Buckets: durationBuckets,
		}, labels),
		labels: labels,
	}
}

// Observe records one reconcile that started at start. namespace is ignored for
// cluster-scoped controllers; for the manager's per-tenant controllers, a reconcile in a
// namespace without a Tenant is not recorded (see TrackTenants).
func (r *Reconcile) Observe(namespace, result string, start time.Time) {
	var lv []string
	if len(r.labels) > 0 {
		if r.tenantScoped && !tenantAllowed(namespace) {
			return
		}
		lv = []string{namespace}
	}
	r.Total.WithLabelValues(append(append([]string{}, lv...), result)...).Inc()
	r.Duration.WithLabelValues(lv...).Observe(time.Since(start).Seconds())
}

// ObserveDeferred is Observe for a deferred call at the top of a reconcile: the result is
// *result when the reconcile set it (e.g. ResultSkipped), else Result(*err).
//
//	result := ""
//	defer metrics.ManagerLoadBalancerReconcile.ObserveDeferred(req.Namespace, time.Now(), &result, &err)
func (r *Reconcile) ObserveDeferred(namespace string, start time.Time, result *string, err *error) {
	res := *result
	if res == "" {
		res = Result(*err)
	}
	r.Observe(namespace, res, start)
}

func (r *Reconcile) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.Total, r.Duration}
}

func register(cs ...prometheus.Collector) {
	ctrlmetrics.Registry.MustRegister(cs...)
}
