package metrics

import "github.com/prometheus/client_golang/prometheus"

// Binaries that export kubelb's metrics: the values of Declared.Binary.
const (
	BinaryManager = "kubelb"
	BinaryCCM     = "ccm"
)

// Declared is one metric of this package and the binary that registers it.
type Declared struct {
	Binary    string
	Collector prometheus.Collector
}

// All lists every metric this package declares, manager first, in declaration order. The
// metrics reference (docs/metrics.md) is generated from it; a test in internal/metricsdoc
// fails when a declared metric is missing here or is registered by another binary.
func All() []Declared {
	var out []Declared
	add := func(binary string, cs ...prometheus.Collector) {
		for _, c := range cs {
			out = append(out, Declared{Binary: binary, Collector: c})
		}
	}
	for _, r := range managerReconciles() {
		add(BinaryManager, r.collectors()...)
	}
	add(BinaryManager, managerGauges()...)
	for _, r := range ccmReconciles() {
		add(BinaryCCM, r.collectors()...)
	}
	add(BinaryCCM, ccmGauges()...)
	return out
}
