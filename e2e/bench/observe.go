package bench

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testenv"
)

// timeline holds when each Service (key tenant/name) was created and first addressed.
type timeline struct {
	mu        sync.Mutex
	createdAt map[string]time.Time
	addressAt map[string]time.Time
}

func newTimeline() *timeline {
	return &timeline{createdAt: map[string]time.Time{}, addressAt: map[string]time.Time{}}
}

func (tl *timeline) created(k string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.createdAt[k] = time.Now()
	delete(tl.addressAt, k)
}

func (tl *timeline) addressed(k string, at time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if _, ok := tl.addressAt[k]; !ok {
		tl.addressAt[k] = at
	}
}

func (tl *timeline) countAddressed(keys []string) int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	n := 0
	for _, k := range keys {
		if _, ok := tl.addressAt[k]; ok {
			n++
		}
	}
	return n
}

// latencies returns each key's time from create to address, and the last address.
func (tl *timeline) latencies(keys []string) ([]time.Duration, time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var out []time.Duration
	var last time.Time
	for _, k := range keys {
		a, ok := tl.addressAt[k]
		if !ok {
			continue
		}
		out = append(out, a.Sub(tl.createdAt[k]))
		if a.After(last) {
			last = a
		}
	}
	return out, last
}

// observer watches what the workloads wait for: the tenant Services of the real tenants,
// the hub LoadBalancers (the address of a played tenant's Service, spec changes) and the hub
// Services kubelb made.
type observer struct {
	mu        sync.Mutex
	lbChanged map[string]time.Time // namespace/name → when its generation last moved
	// What exists, by namespace/name (tenant Services: tenant/name).
	lbs, hubSvcs, tenantSvcs map[string]bool
}

// track keeps set in line with an informer's objects that keep says are of interest.
func (o *observer) track(set map[string]bool, prefix string, keep func(client.Object) bool) toolscache.ResourceEventHandler {
	put := func(obj any) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		c, ok := obj.(client.Object)
		if !ok {
			return
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		if k := prefix + c.GetNamespace() + "/" + c.GetName(); keep(c) {
			set[k] = true
		} else {
			delete(set, k)
		}
	}
	gone := func(obj any) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if c, ok := obj.(client.Object); ok {
			o.mu.Lock()
			defer o.mu.Unlock()
			delete(set, prefix+c.GetNamespace()+"/"+c.GetName())
		}
	}
	return toolscache.ResourceEventHandlerFuncs{AddFunc: put, UpdateFunc: func(_, n any) { put(n) }, DeleteFunc: gone}
}

func observe(t testenv.TB, h *harness) *observer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	o := &observer{lbChanged: map[string]time.Time{}, lbs: map[string]bool{}, hubSvcs: map[string]bool{}, tenantSvcs: map[string]bool{}}
	ofRun := func(c client.Object) bool { return h.byNS[c.GetNamespace()] != nil }
	for _, tn := range h.tenants {
		if tn.real == nil {
			continue
		}
		c := newCache(t, ctx, tn.cluster, cache.Options{DefaultNamespaces: map[string]cache.Config{"default": {}}})
		inf := informerOf(t, ctx, c, &corev1.Service{})
		record := func(obj any) {
			if svc, ok := obj.(*corev1.Service); ok && svc.DeletionTimestamp == nil && len(svc.Status.LoadBalancer.Ingress) > 0 {
				h.tl.addressed(key(tn, svc.Name), time.Now())
			}
		}
		handle(t, inf, toolscache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, n any) { record(n) }})
		handle(t, inf, o.track(o.tenantSvcs, tn.name+":", func(c client.Object) bool {
			s, ok := c.(*corev1.Service)
			return ok && s.Spec.Type == corev1.ServiceTypeLoadBalancer
		}))
	}
	hasLB, err := labels.NewRequirement(kubelbv1alpha1.LabelLoadBalancerName, selection.Exists, nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := newCache(t, ctx, h.sys.Hub, cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Service{}: {Label: labels.NewSelector().Add(*hasLB)}}})
	hubLBs := informerOf(t, ctx, hc, &kubelbv1alpha1.LoadBalancer{})
	recordLB := func(old, obj any) {
		lb, ok := obj.(*kubelbv1alpha1.LoadBalancer)
		if !ok {
			return
		}
		if prev, ok := old.(*kubelbv1alpha1.LoadBalancer); ok && prev.Generation != lb.Generation {
			o.mu.Lock()
			o.lbChanged[lb.Namespace+"/"+lb.Name] = time.Now()
			o.mu.Unlock()
		}
		tn := h.byNS[lb.Namespace]
		if tn != nil && tn.real == nil && lb.DeletionTimestamp == nil && len(lb.Status.LoadBalancer.Ingress) > 0 {
			h.tl.addressed(key(tn, lb.Labels[kubelbv1alpha1.LabelOriginName]), time.Now())
		}
	}
	handle(t, hubLBs, toolscache.ResourceEventHandlerFuncs{AddFunc: func(n any) { recordLB(nil, n) }, UpdateFunc: recordLB})
	handle(t, hubLBs, o.track(o.lbs, "", ofRun))
	handle(t, informerOf(t, ctx, hc, &corev1.Service{}), o.track(o.hubSvcs, "", ofRun))
	t.Cleanup(cancel)
	return o
}

func newCache(t testenv.TB, ctx context.Context, c *testenv.Cluster, opts cache.Options) cache.Cache {
	t.Helper()
	opts.Scheme = testenv.Scheme()
	ca, err := cache.New(c.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = ca.Start(ctx) }()
	return ca
}

func informerOf(t testenv.TB, ctx context.Context, c cache.Cache, obj client.Object) cache.Informer {
	t.Helper()
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		t.Fatal(err)
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatalf("informer of %T did not sync", obj)
	}
	return inf
}

func handle(t testenv.TB, inf cache.Informer, h toolscache.ResourceEventHandler) {
	t.Helper()
	if _, err := inf.AddEventHandler(h); err != nil {
		t.Fatal(err)
	}
}

// changedSince returns when the LoadBalancer's generation moved after since (false: not yet).
func (o *observer) changedSince(namespace, name string, since time.Time) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	at, ok := o.lbChanged[namespace+"/"+name]
	return at, ok && at.After(since)
}

// remaining counts what is left of the run's objects: LoadBalancers and kubelb's hub
// Services in the tenants' namespaces, and LoadBalancer Services in the real tenants.
func (o *observer) remaining() (lbs, hubSvcs, tenantSvcs int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.lbs), len(o.hubSvcs), len(o.tenantSvcs)
}
