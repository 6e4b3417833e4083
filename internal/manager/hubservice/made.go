package hubservice

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// MadeWait bounds how long a controller waits for its cache to show a hub Service it made.
const MadeWait = 5 * time.Second

// Made remembers, per object, when a controller made its hub Service, until the
// controller's cache shows that Service: a reconcile that comes before the Service's create
// event (a requeue from the tenant's plan) does not make it a second time. Its zero value is
// ready to use; it is safe for concurrent use.
type Made struct {
	mu sync.Mutex
	at map[types.NamespacedName]time.Time
}

// Record notes that the hub Service of key was just made.
func (m *Made) Record(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.at == nil {
		m.at = map[types.NamespacedName]time.Time{}
	}
	m.at[key] = time.Now()
}

// Wait is how long to wait before looking again at key, whose hub Service was made and the
// cache (svc, nil: none) does not show yet; 0 when it does, when none was made, or when it was
// made longer than MadeWait ago (then it is made again).
func (m *Made) Wait(key types.NamespacedName, svc *corev1.Service) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.at[key]
	if !ok {
		return 0
	}
	if svc != nil || time.Since(at) > MadeWait {
		delete(m.at, key)
		return 0
	}
	return time.Second
}

// Forget drops key (its object is gone).
func (m *Made) Forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.at, key)
}
