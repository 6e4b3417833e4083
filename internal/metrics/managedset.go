package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// ManagedSet tracks the objects of one kind a controller mirrors and keeps a gauge labelled by
// namespace (kubelb_ccm_managed_*_total) equal to their number per namespace.
type ManagedSet struct {
	mu    sync.Mutex
	gauge *prometheus.GaugeVec
	byNS  map[string]sets.Set[string]
}

// NewManagedSet returns an empty set feeding gauge.
func NewManagedSet(gauge *prometheus.GaugeVec) *ManagedSet {
	return &ManagedSet{gauge: gauge, byNS: map[string]sets.Set[string]{}}
}

// Set records whether object key is mirrored.
func (m *ManagedSet) Set(key types.NamespacedName, mirrored bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := m.byNS[key.Namespace]
	if names.Has(key.Name) == mirrored {
		return
	}
	if mirrored {
		if names == nil {
			names = sets.New[string]()
			m.byNS[key.Namespace] = names
		}
		names.Insert(key.Name)
	} else {
		names.Delete(key.Name)
	}
	m.gauge.WithLabelValues(key.Namespace).Set(float64(names.Len()))
	if names.Len() == 0 {
		delete(m.byNS, key.Namespace)
	}
}
