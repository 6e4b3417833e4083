package hubcache_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ccm"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/hubcache"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/ssa"
	"kubelb.dev/kubelb/internal/testenv"
)

// heapLoadBalancers is the number of LoadBalancers BenchmarkCachedLoadBalancerHeap caches.
const heapLoadBalancers = 1000

// BenchmarkCachedLoadBalancerHeap measures the live heap an informer cache of the manager
// holds per LoadBalancer, on a real API server: 1000 LoadBalancers as the ccm writes them
// (its code, a two-port Service, server-side apply as kubelb-ccm) with a status as the status
// writer applies it (as kubelb-status: an address, two ports, three conditions). It caches
// them with the manager's transform (TransformTenantObject: managedFields dropped when only
// kubelb's current owners applied them) and with one that keeps the managedFields (what the
// cache held before), and reports the heap left after a garbage collection per LoadBalancer.
// It runs once whatever b.N is (docs/benchmarks.md, "Memory per cached object").
func BenchmarkCachedLoadBalancerHeap(b *testing.B) {
	hub := testenv.Start(b, "hub", testenv.Options{})
	ctx := context.Background()
	const ns = "tenant-heap"
	if err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	for i := range heapLoadBalancers {
		writeLoadBalancer(b, hub.Client, ns, i)
	}
	keepManagedFields := func(obj any) (any, error) { // the transform before: last-applied only
		o, ok := obj.(client.Object)
		if ok {
			mf := o.GetManagedFields()
			o.SetManagedFields(nil)
			if _, err := hubcache.TransformTenantObject(o); err != nil {
				return nil, err
			}
			o.SetManagedFields(mf)
		}
		return obj, nil
	}
	for _, v := range []struct {
		name      string
		transform toolscache.TransformFunc
	}{
		{"managedFields=dropped", hubcache.TransformTenantObject},
		{"managedFields=kept", keepManagedFields},
	} {
		b.Run(v.name, func(b *testing.B) {
			before := liveHeap()
			c, stop := startCache(b, hub, v.transform)
			var list kubelbv1alpha1.LoadBalancerList
			if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
				b.Fatal(err)
			}
			if len(list.Items) != heapLoadBalancers {
				b.Fatalf("the cache holds %d LoadBalancers, want %d", len(list.Items), heapLoadBalancers)
			}
			mf := len(list.Items[0].ManagedFields)
			list = kubelbv1alpha1.LoadBalancerList{}
			after := liveHeap()
			runtime.KeepAlive(c)
			stop()
			per := float64(int64(after)-int64(before)) / heapLoadBalancers
			b.ReportMetric(per, "heap-B/LoadBalancer")
			b.Logf("%s: %.0f bytes of live heap per cached LoadBalancer (%d managedFields entries cached)", v.name, per, mf)
		})
	}
}

// writeLoadBalancer writes LoadBalancer i as the ccm and the status writer do.
func writeLoadBalancer(b *testing.B, c client.Client, ns string, i int) {
	b.Helper()
	ctx := context.Background()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: "apps", UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)),
			Annotations: map[string]string{"meta.helm.sh/release-name": "web", "meta.helm.sh/release-namespace": "apps"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, NodePort: int32(30000 + 2*(i%1000))},
				{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, NodePort: int32(30001 + 2*(i%1000))},
			}},
	}
	lb, _ := ccm.DesiredLoadBalancer(svc, ns)
	if err := ssa.Apply(ctx, c, lb, nil, hubnames.FieldOwnerCCM, ""); err != nil {
		b.Fatal(err)
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	st := kubelbv1alpha1.LoadBalancerStatus{
		LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: fmt.Sprintf("10.245.%d.%d", i/250, i%250+1)}}},
		Service: kubelbv1alpha1.ServiceStatus{Ports: []kubelbv1alpha1.ServicePort{
			{ServicePort: corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}, UpstreamTargetPort: int32(10000 + 2*i)},
			{ServicePort: corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}, UpstreamTargetPort: int32(10001 + 2*i)},
		}, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}},
		Conditions: []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionTrue, Reason: "AddressAssigned", Message: "The hub Service has an address.", LastTransitionTime: now, ObservedGeneration: 1},
			{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed", Message: "The tenant's Envoy proxies hold the configuration.", LastTransitionTime: now, ObservedGeneration: 1},
			{Type: "BackendsReachable", Status: metav1.ConditionTrue, Reason: "Reachable", Message: "Every endpoint answers.", LastTransitionTime: now, ObservedGeneration: 1},
		},
	}
	if err := ssa.ApplyStatus(ctx, c, lb, status.FieldOwner, &st); err != nil {
		b.Fatal(err)
	}
}

// startCache starts an informer cache of LoadBalancers with transform and waits for its sync.
func startCache(b *testing.B, hub *testenv.Cluster, transform toolscache.TransformFunc) (cache.Cache, func()) {
	b.Helper()
	c, err := cache.New(hub.Config, cache.Options{Scheme: testenv.Scheme(),
		ByObject: map[client.Object]cache.ByObject{&kubelbv1alpha1.LoadBalancer{}: {Transform: transform}}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Start(ctx) }()
	if _, err := c.GetInformer(ctx, &kubelbv1alpha1.LoadBalancer{}); err != nil {
		b.Fatal(err)
	}
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("the cache did not sync")
	}
	return c, func() { cancel(); <-done }
}

// liveHeap is the heap in use after two garbage collections.
func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
