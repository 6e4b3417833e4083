package portalloc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/metrics"
)

func key(lb string, port int32) Key { return KeyFor("tenant-a", lb, "", "", port) }

func mustNew(t testing.TB, r Range) *Allocator {
	t.Helper()
	a, err := New(r)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestRange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want Range
		ok   bool
	}{
		{"10000-19999", Range{10000, 19999}, true},
		{" 1 - 65535 ", Range{1, 65535}, true},
		{"5-5", Range{5, 5}, true},
		{"0-10", Range{}, false},
		{"10-5", Range{}, false},
		{"1-65536", Range{}, false},
		{"10000", Range{}, false},
		{"a-b", Range{}, false},
	} {
		got, err := ParseRange(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParseRange(%q) = %v, %v; want %v, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	if _, err := New(Range{Min: 9, Max: 1}); err == nil {
		t.Error("New accepted an empty range")
	}
	if DefaultRange.Size() != 10000 || DefaultRange.String() != "10000-19999" {
		t.Errorf("DefaultRange = %v (size %d)", DefaultRange, DefaultRange.Size())
	}
}

func TestKey(t *testing.T) {
	t.Parallel()
	if got := KeyFor("tenant-a", "lb1", "", "", 80).String(); got != "tenant-a/lb1/TCP/80" {
		t.Errorf("unnamed key = %q", got)
	}
	if got := KeyFor("tenant-a", "lb1", corev1.ProtocolUDP, "dns", 53).String(); got != "tenant-a/lb1/UDP/dns" {
		t.Errorf("named key = %q", got)
	}
	// A named port keeps its key (and so its listener port) when its number changes.
	if KeyFor("n", "l", "TCP", "web", 80) != KeyFor("n", "l", "TCP", "web", 8080) {
		t.Error("named port key depends on the number")
	}
}

func TestAllocateFreeReuse(t *testing.T) {
	t.Parallel()
	a := mustNew(t, Range{Min: 100, Max: 104})
	for i, want := range []int32{100, 101, 102} {
		got, err := a.Allocate(key("lb", int32(i)))
		if err != nil || got != want {
			t.Fatalf("Allocate #%d = %d, %v; want %d", i, got, err, want)
		}
	}
	// Asking again for an allocated key returns the same port.
	if got, _ := a.Allocate(key("lb", 1)); got != 101 {
		t.Errorf("re-Allocate = %d, want 101", got)
	}
	if !a.Release(key("lb", 1)) || a.Release(key("lb", 1)) {
		t.Error("Release did not report the first release only")
	}
	// Lowest free: the freed port is reused first.
	if got, _ := a.Allocate(key("other", 1)); got != 101 {
		t.Errorf("Allocate after release = %d, want the freed 101", got)
	}
	// A free hint wins over lowest-free; a used or out-of-range hint is skipped.
	if got, _ := a.Allocate(key("hinted", 1), 102, 999, 104); got != 104 {
		t.Errorf("Allocate with hints = %d, want 104", got)
	}
	if a.Free() != 1 || a.Allocated() != 4 {
		t.Errorf("free=%d allocated=%d, want 1 and 4", a.Free(), a.Allocated())
	}
	if k, ok := a.Holder(104); !ok || k != key("hinted", 1) {
		t.Errorf("Holder(104) = %v, %v", k, ok)
	}
}

func TestExhaustion(t *testing.T) {
	t.Parallel()
	a := mustNew(t, Range{Min: 100, Max: 101})
	for i := range 2 {
		if _, err := a.Allocate(key("lb", int32(i))); err != nil {
			t.Fatal(err)
		}
	}
	_, err := a.Allocate(key("lb", 2))
	if !errors.Is(err, ErrExhausted) {
		t.Fatalf("Allocate on a full range = %v, want ErrExhausted", err)
	}
	// Ensure is all or nothing for new keys and keeps what the owner has.
	owner := types.NamespacedName{Namespace: "tenant-a", Name: "lb"}
	got, _, err := a.Ensure(owner, []Request{{Key: key("lb", 0)}, {Key: key("lb", 1)}, {Key: key("lb", 2)}})
	if !errors.Is(err, ErrExhausted) {
		t.Fatalf("Ensure = %v, want ErrExhausted", err)
	}
	if want := map[Key]int32{key("lb", 0): 100, key("lb", 1): 101}; !cmp.Equal(got, want) {
		t.Errorf("Ensure kept %v, want %v", got, want)
	}
	// Dropping a port frees room for the new one in the same call.
	got, released, err := a.Ensure(owner, []Request{{Key: key("lb", 0)}, {Key: key("lb", 2)}})
	if err != nil || released != 1 {
		t.Fatalf("Ensure: released %d, %v", released, err)
	}
	if want := map[Key]int32{key("lb", 0): 100, key("lb", 2): 101}; !cmp.Equal(got, want) {
		t.Errorf("Ensure = %v, want %v", got, want)
	}
	// Another owner with two new ports and none free gets nothing at all.
	other := types.NamespacedName{Namespace: "tenant-a", Name: "other"}
	a.Release(key("lb", 2))
	got, _, err = a.Ensure(other, []Request{{Key: key("other", 1)}, {Key: key("other", 2)}})
	if !errors.Is(err, ErrExhausted) || len(got) != 0 || a.Free() != 1 {
		t.Errorf("Ensure = %v, %v, free %d; want nothing allocated and ErrExhausted", got, err, a.Free())
	}
}

func TestEnsureReleasesDroppedKeys(t *testing.T) {
	t.Parallel()
	a := mustNew(t, Range{Min: 100, Max: 199})
	owner := types.NamespacedName{Namespace: "tenant-a", Name: "lb"}
	if _, _, err := a.Ensure(owner, []Request{{Key: key("lb", 80)}, {Key: key("lb", 443)}, {Key: key("lb", 443)}}); err != nil {
		t.Fatal(err)
	}
	if a.Allocated() != 2 {
		t.Fatalf("duplicate key allocated twice: %v", a.Snapshot())
	}
	if _, _, err := a.Ensure(owner, []Request{{Key: key("lb", 443)}}); err != nil {
		t.Fatal(err)
	}
	if want := map[Key]int32{key("lb", 443): 101}; !cmp.Equal(a.Snapshot(), want) {
		t.Errorf("allocations = %v, want %v", a.Snapshot(), want)
	}
	if _, _, err := a.Ensure(owner, []Request{{Key: key("x", 1)}}); err == nil {
		t.Error("Ensure accepted a key of another LoadBalancer")
	}
	if n := a.ReleaseOwner(owner); n != 1 || a.Allocated() != 0 {
		t.Errorf("ReleaseOwner = %d, allocated %d", n, a.Allocated())
	}
}

// TestOwners: the owners holding ports in a namespace, and only there; none once freed.
func TestOwners(t *testing.T) {
	t.Parallel()
	a := mustNew(t, Range{Min: 100, Max: 199})
	lb := types.NamespacedName{Namespace: "tenant-a", Name: "lb"}
	other := types.NamespacedName{Namespace: "tenant-b", Name: "lb"}
	for _, o := range []types.NamespacedName{lb, other} {
		if _, _, err := a.Ensure(o, []Request{{Key: KeyFor(o.Namespace, o.Name, "", "", 80)}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.Owners("tenant-a"); !cmp.Equal(got, []types.NamespacedName{lb}) {
		t.Errorf("owners of tenant-a: %v", got)
	}
	a.ReleaseOwner(lb)
	if got := a.Owners("tenant-a"); len(got) != 0 {
		t.Errorf("owners of tenant-a after the release: %v", got)
	}
}

func TestClaim(t *testing.T) {
	t.Parallel()
	a := mustNew(t, Range{Min: 100, Max: 110})
	if err := a.Claim(key("a", 1), 105); err != nil {
		t.Fatal(err)
	}
	if err := a.Claim(key("a", 1), 105); err != nil {
		t.Errorf("re-claiming the same port: %v", err)
	}
	if err := a.Claim(key("b", 1), 105); !errors.Is(err, ErrConflict) {
		t.Errorf("claiming a held port = %v, want ErrConflict", err)
	}
	if err := a.Claim(key("a", 1), 106); !errors.Is(err, ErrConflict) {
		t.Errorf("claiming a second port for a key = %v, want ErrConflict", err)
	}
	if err := a.Claim(key("c", 1), 99); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("claiming outside the range = %v, want ErrOutOfRange", err)
	}
}

// lbService is the hub Service of LoadBalancer ns/name as the LoadBalancer controller makes
// it (labels, and a generated name for unnamed ports when there are several).
func lbService(ns, name string, created time.Time, ports ...corev1.ServicePort) corev1.Service {
	return corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: "envoy-" + name, CreationTimestamp: metav1.NewTime(created),
			Labels: map[string]string{
				kubelbv1alpha1.LabelManagedBy:        kubelbv1alpha1.LabelManagedByValue,
				kubelbv1alpha1.LabelLoadBalancerName: name,
				kubelbv1alpha1.LabelLoadBalancerNS:   ns,
			},
		},
		Spec: corev1.ServiceSpec{Ports: ports},
	}
}

func sp(name string, proto corev1.Protocol, port, target int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: proto, Port: port, TargetPort: intstr.FromInt32(target)}
}

func TestRebuild(t *testing.T) {
	t.Parallel()
	r := Range{Min: 100, Max: 199}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	deleting := lbService("tenant-b", "gone", t0, sp("", "TCP", 22, 150))
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	byOwnerRef := lbService("tenant-b", "owned", t0, sp("", "TCP", 22, 151))
	delete(byOwnerRef.Labels, kubelbv1alpha1.LabelLoadBalancerName)
	byOwnerRef.OwnerReferences = []metav1.OwnerReference{{Kind: "LoadBalancer", Name: "owned", Controller: ptr.To(true)}}
	// A KubeLB CE manager's Service: no managed-by label, read all the same.
	ce := lbService("tenant-b", "ce", t0, sp("", "TCP", 22, 152))
	delete(ce.Labels, kubelbv1alpha1.LabelManagedBy)
	// A route-name label without managed-by is not kubelb's: ignored.
	foreign := corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-b", Name: "gateway-x", CreationTimestamp: metav1.NewTime(t0), Labels: map[string]string{
			kubelbv1alpha1.LabelRouteName: "x",
		}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{sp("tcp-80", "TCP", 80, 153)}},
	}
	gateway := corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-b", Name: "gateway-r1", CreationTimestamp: metav1.NewTime(t0), Labels: map[string]string{
			kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue, kubelbv1alpha1.LabelRouteName: "r1",
		}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{sp("tcp-80", "TCP", 80, 160), sp("udp-53", "UDP", 53, 161)}},
	}
	ingress := corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-b", Name: kubelbv1alpha1.IngressServiceName, CreationTimestamp: metav1.NewTime(t0), Labels: map[string]string{
			kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue, kubelbv1alpha1.LabelIngressService: "true",
		}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{sp("http", "TCP", 80, 170), sp("https", "TCP", 443, 171)}},
	}
	svcs := []corev1.Service{
		// Newer, and records 100 too: loses the conflict.
		lbService("tenant-a", "newer", t0.Add(time.Minute), sp("tcp-80", "TCP", 80, 100), sp("udp-80", "UDP", 80, 120)),
		lbService("tenant-a", "older", t0, sp("web", "TCP", 80, 100), sp("", "", 443, 101)),
		// Same creation time as "older": the name decides ("envoy-older" < "envoy-same-time").
		lbService("tenant-a", "same-time", t0, sp("tcp-1", "TCP", 1, 101), sp("tcp-2", "TCP", 2, 0)),
		lbService("tenant-b", "out-of-range", t0, sp("", "TCP", 80, 5000)),
		deleting, byOwnerRef, ce, foreign, gateway, ingress,
	}
	a, conflicts, err := Rebuild(r, svcs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[Key]int32{
		KeyFor("tenant-a", "older", "TCP", "web", 80): 100,
		KeyFor("tenant-a", "older", "TCP", "", 443):   101,
		KeyFor("tenant-a", "newer", "UDP", "", 80):    120,
		KeyFor("tenant-b", "owned", "TCP", "", 22):    151,
		KeyFor("tenant-b", "ce", "TCP", "", 22):       152,
		RouteKey("tenant-b", "r1", "TCP", 80):         160,
		RouteKey("tenant-b", "r1", "UDP", 53):         161,
		IngressKey("tenant-b", 80):                    170,
		IngressKey("tenant-b", 443):                   171,
	}
	if diff := cmp.Diff(want, a.Snapshot()); diff != "" {
		t.Errorf("rebuilt allocations (-want +got):\n%s", diff)
	}
	if got := RouteKey("tenant-b", "r1", "TCP", 80).String(); got != "tenant-b/route:r1/TCP/80" {
		t.Errorf("route key %s", got)
	}
	if got := IngressKey("tenant-b", 443).String(); got != "tenant-b/ingress:kubelb-ingress/TCP/443" {
		t.Errorf("ingress key %s", got)
	}
	gotConflicts := map[string]error{}
	for _, c := range conflicts {
		gotConflicts[fmt.Sprintf("%s=%d", c.Key, c.Port)] = c.Err
	}
	for k, want := range map[string]error{
		"tenant-a/newer/TCP/80=100":         ErrConflict,
		"tenant-a/same-time/TCP/1=101":      ErrConflict,
		"tenant-b/out-of-range/TCP/80=5000": ErrOutOfRange,
	} {
		if !errors.Is(gotConflicts[k], want) {
			t.Errorf("conflict %s = %v, want %v", k, gotConflicts[k], want)
		}
	}
	if len(conflicts) != 3 {
		t.Errorf("conflicts = %v, want 3", conflicts)
	}

	// The order of the list does not matter: any replica rebuilds the same map.
	for range 20 {
		shuffled := append([]corev1.Service(nil), svcs...)
		rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		b, _, err := Rebuild(r, shuffled)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(a.Snapshot(), b.Snapshot()); diff != "" {
			t.Fatalf("rebuild depends on list order (-first +shuffled):\n%s", diff)
		}
	}
}

// TestRebuildRoundTrip allocates, writes allocations into hub Services the way the
// controller does, and rebuilds: the new allocator must hold the same map and continue
// identically.
func TestRebuildRoundTrip(t *testing.T) {
	t.Parallel()
	r := Range{Min: 1000, Max: 1999}
	a := mustNew(t, r)
	var svcs []corev1.Service
	for i := range 50 {
		name := fmt.Sprintf("lb-%02d", i)
		owner := types.NamespacedName{Namespace: "tenant-a", Name: name}
		reqs := []Request{
			{Key: KeyFor("tenant-a", name, "TCP", "", 80)},
			{Key: KeyFor("tenant-a", name, "UDP", "dns", 53)},
		}
		got, _, err := a.Ensure(owner, reqs)
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, lbService("tenant-a", name, time.Unix(int64(i), 0),
			sp(GeneratedPortName("TCP", 80), "TCP", 80, got[reqs[0].Key]), sp("dns", "UDP", 53, got[reqs[1].Key])))
	}
	// A Gateway's ports.
	gw := RouteOwner("tenant-a", "gw")
	got, _, err := a.Ensure(gw, []Request{{Key: RouteKey("tenant-a", "gw", "TCP", 443)}})
	if err != nil {
		t.Fatal(err)
	}
	svcs = append(svcs, corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "gateway-gw", Labels: map[string]string{
			kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue, kubelbv1alpha1.LabelRouteName: "gw",
		}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{sp("tcp-443", "TCP", 443, got[RouteKey("tenant-a", "gw", "TCP", 443)])}},
	})
	// Free some in the middle.
	for i := 10; i < 20; i++ {
		a.ReleaseOwner(types.NamespacedName{Namespace: "tenant-a", Name: "lb-" + fmt.Sprintf("%02d", i)})
	}
	svcs = append(svcs[:10], svcs[20:]...)
	b, conflicts, err := Rebuild(r, svcs)
	if err != nil || len(conflicts) != 0 {
		t.Fatalf("Rebuild: %v, conflicts %v", err, conflicts)
	}
	if diff := cmp.Diff(a.Snapshot(), b.Snapshot()); diff != "" {
		t.Fatalf("rebuilt map differs (-live +rebuilt):\n%s", diff)
	}
	pa, _ := a.Allocate(key("next", 1))
	pb, _ := b.Allocate(key("next", 1))
	if pa != pb || pa != 1020 {
		t.Errorf("next allocation: live %d, rebuilt %d; want both 1020 (lowest freed)", pa, pb)
	}
}

func TestConcurrent(t *testing.T) {
	t.Parallel()
	a := mustNew(t, Range{Min: 1, Max: 4000})
	var wg sync.WaitGroup
	ports := make([][]int32, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := range 500 {
				p, err := a.Allocate(KeyFor("ns", fmt.Sprint(w), "TCP", "", int32(i+1)))
				if err != nil {
					t.Error(err)
					return
				}
				ports[w] = append(ports[w], p)
				if i%3 == 0 {
					a.Release(KeyFor("ns", fmt.Sprint(w), "TCP", "", int32(i+1)))
				}
			}
		})
	}
	wg.Wait()
	if a.Allocated()+a.Free() != 4000 {
		t.Errorf("allocated %d + free %d != 4000", a.Allocated(), a.Free())
	}
	seen := map[int32]Key{}
	for k, p := range a.Snapshot() {
		if other, dup := seen[p]; dup {
			t.Fatalf("port %d held by %s and %s", p, k, other)
		}
		seen[p] = k
	}
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

func TestMetrics(t *testing.T) {
	// Not parallel: the gauges are global.
	a := mustNew(t, Range{Min: 1, Max: 10})
	owner := types.NamespacedName{Namespace: "tenant-metrics", Name: "lb"}
	if _, _, err := a.Ensure(owner, []Request{{Key: KeyFor(owner.Namespace, owner.Name, "TCP", "", 1)}, {Key: KeyFor(owner.Namespace, owner.Name, "TCP", "", 2)}}); err != nil {
		t.Fatal(err)
	}
	if got := gaugeValue(t, metrics.ManagerPortsAllocated.WithLabelValues("tenant-metrics")); got != 2 {
		t.Errorf("ports allocated = %v, want 2", got)
	}
	if got := gaugeValue(t, metrics.ManagerPortsFree); got != 8 {
		t.Errorf("ports free = %v, want 8", got)
	}
	a.ReleaseOwner(owner)
	if got := gaugeValue(t, metrics.ManagerPortsFree); got != 10 {
		t.Errorf("ports free after release = %v, want 10", got)
	}
}

func TestBitmapEdges(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 63, 64, 65, 4095, 4096, 4097, 65535} {
		b := newBitmap(n)
		for i := range n {
			if got := b.lowestFree(); got != i {
				t.Fatalf("n=%d: lowestFree = %d, want %d", n, got, i)
			}
			b.set(i)
		}
		if b.lowestFree() != -1 || b.free() != 0 {
			t.Fatalf("n=%d: full bitmap still has free slots", n)
		}
		b.clear(n / 2)
		if got := b.lowestFree(); got != n/2 {
			t.Fatalf("n=%d: lowestFree after clear = %d, want %d", n, got, n/2)
		}
	}
}

// BenchmarkAllocate measures one allocate + release with 0 to 50k ports already allocated
// in the range; the per-op cost stays flat.
func BenchmarkAllocate(b *testing.B) {
	for _, filled := range []int{0, 1000, 10000, 50000} {
		b.Run(fmt.Sprintf("allocated=%d", filled), func(b *testing.B) {
			a := mustNew(b, Range{Min: 1, Max: 65535})
			for i := range filled {
				if _, err := a.Allocate(KeyFor("tenant-a", fmt.Sprintf("lb-%d", i), "TCP", "", 80)); err != nil {
					b.Fatal(err)
				}
			}
			// Free the highest filled port so each allocation has to search past the
			// filled part (the worst case for lowest-free).
			if filled > 0 {
				a.Release(KeyFor("tenant-a", fmt.Sprintf("lb-%d", filled-1), "TCP", "", 80))
			}
			k := KeyFor("tenant-b", "bench", "TCP", "", 80)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := a.Allocate(k); err != nil {
					b.Fatal(err)
				}
				a.Release(k)
			}
		})
	}
}
