package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// BenchmarkBurstLoadBalancerServices creates a burst of LoadBalancer Services in one tenant
// (1000, or KUBELB_BURST) against the real binaries and reports the time until every Service
// shows an address, the hub writes per Service made by kubelb (the played hub LoadBalancer
// implementation's writes are subtracted), and the manager's CPU seconds and peak RSS.
// It runs once whatever b.N is: `go test ./e2e -run '^$' -bench Burst -benchtime 1x`.
func BenchmarkBurstLoadBalancerServices(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("KUBELB_BURST")); err == nil && v > 0 {
		n = v
	}
	// Every tenant Service takes a NodePort in the tenant cluster: widen the range beyond the
	// default 2768 ports.
	pair := testenv.StartPairWith(b, testenv.PairOptions{TenantServiceNodePortRange: "20000-32767"})
	// KUBELB_PPROF_DIR=<dir> profiles the manager and the ccm during the burst
	// (--pprof-bind-address) and writes their CPU profiles (manager-cpu-<i>.pprof,
	// ccm-cpu-<i>.pprof, one per 20 s) and a heap profile at the end into <dir>; `go tool
	// pprof -top <dir>/manager-cpu-*.pprof` merges them. Add `-cpuprofile` for the test
	// process (the load generator and the played hub LoadBalancer).
	pprofDir := os.Getenv("KUBELB_PPROF_DIR")
	// The default listener port range (10000-19999) holds exactly 10 000 ports.
	managerArgs := []string{"--envoy-port-range", "10000-39999"}
	var ccmArgs []string
	managerPprof, ccmPprof := testsupport.Loopback(testsupport.FreePort(b)), testsupport.Loopback(testsupport.FreePort(b))
	if pprofDir != "" {
		managerArgs = append(managerArgs, "--pprof-bind-address", managerPprof)
		ccmArgs = []string{"--pprof-bind-address", ccmPprof}
	}
	sys := framework.StartSystem(b, pair.Hub, framework.Options{ExtraManagerArgs: managerArgs})
	tenant := sys.AddTenant("burst", pair.Tenant, 3, ccmArgs...)
	ctx := context.Background()
	// The tenant may hold all of them (the default limits are 1000 LoadBalancers, 500
	// listener ports), and its hub Services take no hub NodePorts (as with MetalLB), which
	// would cap the hub at 2768 LoadBalancer ports. The tenant cluster's own NodePort range
	// (one NodePort per tenant Service, which the hub sends traffic to) is widened above to
	// 12 768 ports, which caps KUBELB_BURST.
	limits := fmt.Sprintf(`{"spec":{"limits":{"loadBalancers":%d,"listenerPorts":%d},"loadBalancer":{"allocateNodePorts":false}}}`, max(n, 1000), max(n, 1000))
	if err := pair.Hub.Client.Patch(ctx, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "burst"}},
		client.RawPatch(types.MergePatchType, []byte(limits))); err != nil {
		b.Fatal(err)
	}
	// Let the tenant settle (its ccm has published the nodes) before measuring.
	testsupport.Eventually(b, time.Minute, "Addresses/default of the tenant", func() error {
		return pair.Hub.Client.Get(ctx, client.ObjectKey{Namespace: tenant.Namespace, Name: kubelbv1alpha1.DefaultAddressesName}, &kubelbv1alpha1.Addresses{})
	})

	// The tenant's Services are watched, not listed every poll: a list of 10 000 Services
	// every 100 ms would cost the tenant API server (and this process) more than the burst.
	addressed := watchAddressed(b, pair.Tenant.Config, "default")

	writesBefore, err := framework.APIWrites(ctx, pair.Hub.Config)
	if err != nil {
		b.Fatal(err)
	}
	playerBefore := sys.HubLBWrites.Load()
	cpuBefore, _ := framework.ProcessCPU(sys.Manager.Cmd.Process.Pid)
	b.ResetTimer()
	start := time.Now()
	if pprofDir != "" {
		stopProfiles := framework.CollectProfiles(b, pprofDir, map[string]string{"manager": managerPprof, "ccm": ccmPprof}, 20*time.Second)
		defer stopProfiles()
	}
	// The burst: 16 clients creating Services at once, as a GitOps sync would.
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				svc := &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%04d", i), Namespace: "default"},
					Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "x"},
						Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
				}
				if err := pair.Tenant.Client.Create(ctx, svc); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	created := time.Since(start)
	testsupport.Eventually(b, 30*time.Minute, fmt.Sprintf("all %d Services addressed", n), func() error {
		if got := addressed.count(); got < n {
			return fmt.Errorf("%d of %d addressed", got, n)
		}
		return nil
	})
	elapsed := time.Since(start)
	b.StopTimer()
	writesAfter, err := framework.APIWrites(ctx, pair.Hub.Config)
	if err != nil {
		b.Fatal(err)
	}
	byKind, total := framework.WritesSince(writesBefore, writesAfter)
	// The API server's own IPAddress objects (one per ClusterIP) and the played hub
	// LoadBalancer implementation's status writes are not kubelb's.
	kubelbWrites := total - byKind["POST ipaddresses"] - (sys.HubLBWrites.Load() - playerBefore)
	b.Logf("hub writes by verb and resource (the played hub LoadBalancer made %d of the services/status ones): %v",
		sys.HubLBWrites.Load()-playerBefore, byKind)
	// What the Events on the hub say (kubelb writes them for conditions a user must act on).
	var evs eventsv1.EventList
	if err := pair.Hub.Client.List(ctx, &evs, client.InNamespace(tenant.Namespace)); err == nil {
		reasons := map[string]int{}
		for _, e := range evs.Items {
			reasons[e.Regarding.Kind+" "+e.Reason]++
		}
		b.Logf("hub Events in %s by kind and reason: %v", tenant.Namespace, reasons)
	}
	cpu, _ := framework.ProcessCPU(sys.Manager.Cmd.Process.Pid)
	rss, _ := framework.ProcessPeakRSS(sys.Manager.Cmd.Process.Pid)
	b.ReportMetric(elapsed.Seconds(), "s-to-all-addressed")
	b.ReportMetric(float64(kubelbWrites)/float64(n), "hub-writes/svc")
	b.ReportMetric(cpu-cpuBefore, "manager-cpu-s")
	b.ReportMetric(float64(rss)/(1<<20), "manager-peak-rss-MiB")
	b.Logf("%d Services created in %s, all addressed after %s; %d hub writes by kubelb (%.2f per Service); manager %.1f CPU s, peak RSS %.0f MiB",
		n, created.Round(time.Millisecond), elapsed.Round(time.Millisecond), kubelbWrites, float64(kubelbWrites)/float64(n), cpu-cpuBefore, float64(rss)/(1<<20))
}

// addressedServices counts the Services of a namespace that show an address, from a watch.
type addressedServices struct {
	mu  sync.Mutex
	set map[types.UID]bool
}

func (a *addressedServices) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.set)
}

func (a *addressedServices) observe(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if svc.DeletionTimestamp == nil && len(svc.Status.LoadBalancer.Ingress) > 0 {
		a.set[svc.UID] = true
	} else {
		delete(a.set, svc.UID)
	}
}

// watchAddressed starts an informer on the Services of namespace (stopped when the
// benchmark ends) and returns the live count of those with an address.
func watchAddressed(b *testing.B, cfg *rest.Config, namespace string) *addressedServices {
	a := &addressedServices{set: map[types.UID]bool{}}
	factory := informers.NewSharedInformerFactoryWithOptions(kubernetes.NewForConfigOrDie(cfg), 0, informers.WithNamespace(namespace))
	inf := factory.Core().V1().Services().Informer()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    a.observe,
		UpdateFunc: func(_, obj any) { a.observe(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if svc, ok := obj.(*corev1.Service); ok {
				a.mu.Lock()
				delete(a.set, svc.UID)
				a.mu.Unlock()
			}
		},
	}); err != nil {
		b.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	b.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.WaitForCacheSync(stop)
	return a
}
