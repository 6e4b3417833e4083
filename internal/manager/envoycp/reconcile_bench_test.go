package envoycp

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/quota"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds"
)

// BenchmarkReconcileOneChange measures the envoycp reconcile of a tenant after one of its
// LoadBalancers changed, on a real API server, reading from an informer cache as the manager
// does: a tenant of KUBELB_ENVOYCP_BENCH (default 1000) single-port LoadBalancers with their
// hub Services on 3 nodes (translatetest.LoadBalancerTenant). Each iteration updates one
// LoadBalancer's endpoint port, waits until the cache has it (not timed), and reconciles.
// ns/lb is the time per LoadBalancer of the tenant.
func BenchmarkReconcileOneChange(b *testing.B) {
	n := 1000
	if v := os.Getenv("KUBELB_ENVOYCP_BENCH"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("KUBELB_ENVOYCP_BENCH=%q", v)
		}
	}
	hub := testenv.Start(b, "hub", testenv.Options{})
	c := hub.Client
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := translatetest.LoadBalancerTenant(n)
	addrs := in.Addresses["default"]
	addrs.Namespace, addrs.UID, addrs.ResourceVersion = in.Tenant, "", ""
	// Limits that hold the whole tenant (the defaults hold 1000 LoadBalancers, 500 ports).
	limits := v1alpha1.Limits{LoadBalancers: ptr.To(int32(n)), ListenerPorts: ptr.To(int32(min(n, 65535)))}
	tenant := &v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: hubnames.TenantName(in.Tenant)}, Spec: v1alpha1.TenantSpec{Limits: limits}}
	for _, o := range []client.Object{namespace(in.Tenant, true), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubelb"}}, tenant, &addrs} {
		if err := c.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	// The LoadBalancers and their hub Services, created by 8 clients.
	start := time.Now()
	work := make(chan int)
	var wg sync.WaitGroup
	var failed sync.Once
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				lb := in.LoadBalancers[i].DeepCopy()
				svc := in.HubServices[lb.Name].DeepCopy()
				lb.UID, lb.ResourceVersion, svc.UID, svc.ResourceVersion = "", "", "", ""
				svc.Spec.ClusterIP = corev1.ClusterIPNone
				for _, o := range []client.Object{lb, svc} {
					if err := c.Create(ctx, o); err != nil {
						failed.Do(func() { b.Error(err) })
					}
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	b.Logf("created %d LoadBalancers and hub Services in %v", n, time.Since(start).Round(time.Millisecond))

	informers, err := cache.New(hub.Config, cache.Options{Scheme: testenv.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = informers.Start(ctx) }()
	if !informers.WaitForCacheSync(ctx) {
		b.Fatal("cache not synced")
	}
	r := NewReconciler(informers, xds.NewServer(logr.Discard(), nil), status.NewStore(), "kubelb", translate.Options{})
	r.verdicts = quota.NewStore(informers, informers) // as the manager has it (SetupWithManager)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: in.Tenant}}
	reconcileOnce := func() {
		if _, err := r.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	// The first reconcile starts the informers (the cache starts one per type on first use)
	// and translates the whole tenant.
	first := time.Now()
	reconcileOnce()
	b.Logf("first reconcile (informers started, whole tenant translated) took %v", time.Since(first).Round(time.Millisecond))
	full := time.Now()
	r.forget(in.Tenant)
	reconcileOnce()
	b.Logf("a reconcile translating the whole tenant took %v", time.Since(full).Round(time.Millisecond))

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		name := in.LoadBalancers[(i*7919)%n].Name
		lb := &v1alpha1.LoadBalancer{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: in.Tenant, Name: name}, lb); err != nil {
			b.Fatal(err)
		}
		lb.Spec.Endpoints[0].Ports[0].Port = 30000 + (lb.Spec.Endpoints[0].Ports[0].Port-29999)%2000
		if err := c.Update(ctx, lb); err != nil {
			b.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; {
			seen := &v1alpha1.LoadBalancer{}
			if err := informers.Get(ctx, client.ObjectKeyFromObject(lb), seen); err == nil && seen.ResourceVersion == lb.ResourceVersion {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("the cache did not see the update")
			}
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
		reconcileOnce()
		b.StopTimer()
		if st := r.cachesOf(in.Tenant).front.Stats; st.Translated != 1 {
			b.Fatalf("the reconcile translated %d LoadBalancers, want 1 (%+v)", st.Translated, st)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/lb")
}
