package admission

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/manager/hubcache"
	"kubelb.dev/kubelb/internal/quota"
)

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		used, old, next, limit int64
		want                   bool
	}{
		{"a new object within the limit", 50, -1, 50, 100, true},
		{"a new object exactly at the limit", 50, -1, 50, 100, true},
		{"a new object past the limit", 51, -1, 50, 100, false},
		{"growing past the limit", 60, 10, 50, 100, false},
		{"growing within the limit", 40, 10, 50, 100, true},
		{"an update that does not grow, over a lowered limit", 500, 50, 50, 100, true},
		{"shrinking over a lowered limit", 500, 50, 10, 100, true},
		{"no limit", 1 << 40, -1, 1 << 30, -1, true},
		{"a zero limit refuses any new object with bytes", 0, -1, 1, 0, false},
	} {
		if got := Decide(tc.used, tc.old, tc.next, tc.limit); got != tc.want {
			t.Errorf("%s: Decide(used %d, old %d, next %d, limit %d) = %v, want %v", tc.name, tc.used, tc.old, tc.next, tc.limit, got, tc.want)
		}
	}
}

// The ledger counts each object once at its latest size, per namespace and family, objects
// being deleted included, and forgets deleted ones (also as a tombstone).
func TestLedger(t *testing.T) {
	l := &Ledger{byUID: map[types.UID]entry{}, totals: map[ledgerKey]int64{}}
	lb := func(ns, uid, pad string) *kubelbv1alpha1.LoadBalancer {
		return &kubelbv1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: uid, UID: types.UID(uid), Annotations: map[string]string{"p": pad}}}
	}
	a1, a2, b1 := lb("tenant-a", "a1", "xx"), lb("tenant-a", "a2", "xxxx"), lb("tenant-b", "b1", "x")
	for _, o := range []any{a1, a2, b1} {
		l.observe(o)
	}
	bytesA := quota.LoadBalancerBytes(a1) + quota.LoadBalancerBytes(a2)
	if got := l.Used("tenant-a", objects, ""); got != bytesA {
		t.Fatalf("tenant-a uses %d, want %d", got, bytesA)
	}
	if got := l.Used("tenant-a", objects, a1.UID); got != quota.LoadBalancerBytes(a2) {
		t.Errorf("tenant-a except a1 uses %d, want %d", got, quota.LoadBalancerBytes(a2))
	}
	if got := l.Used("tenant-a", objects, b1.UID); got != bytesA {
		t.Errorf("another namespace's UID changed tenant-a's total: %d", got)
	}
	// An update replaces the old size; a deletion timestamp keeps the bytes.
	grown := lb("tenant-a", "a1", "xxxxxxxxxx")
	now := metav1.Now()
	grown.DeletionTimestamp = &now
	l.observe(grown)
	if got, want := l.Used("tenant-a", objects, ""), quota.LoadBalancerBytes(grown)+quota.LoadBalancerBytes(a2); got != want {
		t.Errorf("after a1 grew (and is being deleted): %d, want %d", got, want)
	}
	l.forget(toolscache.DeletedFinalStateUnknown{Obj: grown})
	l.forget(a2)
	if got := l.Used("tenant-a", objects, ""); got != 0 || len(l.totals) != 1 {
		t.Errorf("after both are gone: %d, totals %v", got, l.totals)
	}
	// SyncSecrets count their data, in their own family; the manager's cache keeps only the size.
	ss := &kubelbv1alpha1.SyncSecret{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "s", UID: "s"}, Data: map[string][]byte{"k": make([]byte, 1000)}}
	cached, _ := hubcache.TransformSyncSecret(ss.DeepCopy())
	l.observe(cached)
	if got := l.Used("tenant-a", syncSecrets, ""); got != 1001 {
		t.Errorf("SyncSecret bytes from the cache: %d, want 1001", got)
	}
	if got := l.Used("tenant-a", objects, ""); got != 0 {
		t.Errorf("a SyncSecret counted against objectBytes: %d", got)
	}
}
