package ccm

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"kubelb.dev/kubelb/internal/metrics"
)

// managedSet tracks the Services that have a mirror on the hub and keeps the gauge
// CCMManagedServices{namespace} equal to their number per namespace.
type managedSet struct {
	mu   sync.Mutex
	byNS map[string]map[string]struct{}
}

func newManagedSet() *managedSet { return &managedSet{byNS: map[string]map[string]struct{}{}} }

// set records whether Service key is mirrored.
func (m *managedSet) set(key types.NamespacedName, mirrored bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := m.byNS[key.Namespace]
	_, was := names[key.Name]
	if was == mirrored {
		return
	}
	if mirrored {
		if names == nil {
			names = map[string]struct{}{}
			m.byNS[key.Namespace] = names
		}
		names[key.Name] = struct{}{}
	} else {
		delete(names, key.Name)
	}
	metrics.CCMManagedServices.WithLabelValues(key.Namespace).Set(float64(len(names)))
	if len(names) == 0 {
		delete(m.byNS, key.Namespace)
	}
}
