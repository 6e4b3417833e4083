package hubservice

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestMade: a hub Service just made and not yet in the cache makes the object wait; once the
// cache shows it, or the object is forgotten, nothing waits.
func TestMade(t *testing.T) {
	t.Parallel()
	var m Made
	key := types.NamespacedName{Namespace: "tenant-a", Name: "lb"}
	if w := m.Wait(key, nil); w != 0 {
		t.Fatalf("nothing made, wait %s", w)
	}
	m.Record(key)
	if w := m.Wait(key, nil); w == 0 {
		t.Fatal("made and not in the cache: no wait")
	}
	if w := m.Wait(key, &corev1.Service{}); w != 0 {
		t.Fatalf("in the cache: wait %s", w)
	}
	if w := m.Wait(key, nil); w != 0 {
		t.Fatalf("seen once, then gone: wait %s (it is made again)", w)
	}
	m.Record(key)
	m.Forget(key)
	if w := m.Wait(key, nil); w != 0 {
		t.Fatalf("forgotten: wait %s", w)
	}
}
