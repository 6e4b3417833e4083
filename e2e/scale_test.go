package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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
// implementation's writes are subtracted), and the manager's CPU seconds and peak RSS; then
// deletes them all and reports the time until the hub is empty and the hub writes per
// Service of the delete; and the error lines the manager and the ccm logged.
// It runs once whatever b.N is: `go test ./e2e -run '^$' -bench Burst -benchtime 1x`.
func BenchmarkBurstLoadBalancerServices(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("KUBELB_BURST")); err == nil && v > 0 {
		n = v
	}
	b.ResetTimer()
	r := runBurst(b, n)
	b.StopTimer()
	b.ReportMetric(r.addressed.Seconds(), "s-to-all-addressed")
	b.ReportMetric(r.perService(r.createWrites), "hub-writes/svc")
	b.ReportMetric(r.deleted.Seconds(), "s-to-hub-empty")
	b.ReportMetric(r.perService(r.deleteWrites), "hub-delete-writes/svc")
	b.ReportMetric(r.cpu, "manager-cpu-s")
	b.ReportMetric(r.rssMiB, "manager-peak-rss-MiB")
	b.ReportMetric(float64(r.managerErrors+r.ccmErrors), "error-log-lines")
}

// TestBurstWrites runs a small burst (50 Services, KUBELB_BURST_TEST to change it) through
// the real binaries and checks, from the hub API server's own apiserver_request_total, the
// hub writes kubelb makes per Service: on create, one LoadBalancer create (ccm), one hub
// Service apply and the LoadBalancer's status (manager); on delete, one LoadBalancer delete
// (ccm) and one hub Service delete (manager), and no finalizer patch; and that neither the
// manager nor the ccm logged an error line.
func TestBurstWrites(t *testing.T) {
	n := 50
	if v, err := strconv.Atoi(os.Getenv("KUBELB_BURST_TEST")); err == nil && v > 0 {
		n = v
	}
	r := runBurst(t, n)
	c, d := r.createByKind, r.deleteByKind
	if got := c["POST loadbalancers"] + c["APPLY loadbalancers"]; got != int64(n) {
		t.Errorf("LoadBalancer creates: %d, want %d", got, n)
	}
	if got := c["APPLY services"] + c["PATCH services"] + c["POST services"]; got != int64(n) {
		t.Errorf("hub Service writes on create: %d, want %d (one apply each)", got, n)
	}
	// One status write by the LoadBalancer controller: ports, address, Ready and Programmed
	// (the translation reads the listener ports from the hub Service, so its verdict is
	// usually known when the address comes). A LoadBalancer whose address came before its
	// translation gets Programmed in a second write by the status writer: a few per burst.
	if got := c["APPLY loadbalancers/status"] + c["PATCH loadbalancers/status"]; got > int64(n+n/5) {
		t.Errorf("LoadBalancer status writes: %d, want at most %d (one each, and a few Programmed)", got, n+n/5)
	}
	// Per Service: the writes to the kinds made per Service (the tenant's Envoy fleet,
	// made with its first LoadBalancer and removed with its last, is not).
	if got := r.perService(perServiceWrites(c)); got > 3.2 {
		t.Errorf("hub writes per Service on create: %.2f, want 3 (at most 3.2) (%v)", got, c)
	}
	if got := d["DELETE loadbalancers"]; got != int64(n) {
		t.Errorf("LoadBalancer deletes: %d, want %d", got, n)
	}
	if got := d["DELETE services"]; got != int64(n) {
		t.Errorf("hub Service deletes: %d, want %d", got, n)
	}
	if got := d["PATCH loadbalancers"] + d["APPLY loadbalancers"] + d["PUT loadbalancers"]; got != 0 {
		t.Errorf("LoadBalancer patches on delete (finalizer): %d, want none", got)
	}
	if got := r.perService(perServiceWrites(d)); got > 2 {
		t.Errorf("hub writes per Service on delete: %.2f, want at most 2 (%v)", got, d)
	}
	if r.managerErrors+r.ccmErrors > 0 {
		t.Errorf("error log lines: manager %d, ccm %d:\n%s", r.managerErrors, r.ccmErrors, strings.Join(r.errorLines, "\n"))
	}
}

// perServiceWrites sums the writes to the kinds kubelb writes per Service: LoadBalancers,
// hub Services and Events.
func perServiceWrites(byKind map[string]int64) int64 {
	var total int64
	for k, v := range byKind {
		_, resource, _ := strings.Cut(k, " ")
		switch strings.Split(resource, "/")[0] {
		case "loadbalancers", "services", "events":
			total += v
		}
	}
	return total
}

// burstResult is what runBurst measured.
type burstResult struct {
	n                          int
	created, addressed         time.Duration // from the first create: all created, all addressed
	deleted                    time.Duration // from the first delete until the hub is empty
	createByKind, deleteByKind map[string]int64
	createWrites, deleteWrites int64 // kubelb's hub writes, leases excluded
	cpu, rssMiB                float64
	managerErrors, ccmErrors   int
	errorLines                 []string
}

func (r burstResult) perService(writes int64) float64 { return float64(writes) / float64(r.n) }

// runBurst creates n LoadBalancer Services in one tenant from 16 clients, waits until all
// are addressed, deletes them and waits until the hub has no LoadBalancer and no hub Service
// left, counting the hub writes of each phase by verb and resource.
func runBurst(tb testing.TB, n int) burstResult {
	// Every tenant Service takes a NodePort in the tenant cluster: widen the range beyond the
	// default 2768 ports.
	pair := testenv.StartPairWith(tb, testenv.PairOptions{TenantServiceNodePortRange: "20000-32767"})
	// KUBELB_PPROF_DIR=<dir> profiles the manager and the ccm during the burst
	// (--pprof-bind-address) and writes their CPU profiles (manager-cpu-<i>.pprof,
	// ccm-cpu-<i>.pprof, one per 20 s) and a heap profile at the end into <dir>; `go tool
	// pprof -top <dir>/manager-cpu-*.pprof` merges them. Add `-cpuprofile` for the test
	// process (the load generator and the played hub LoadBalancer).
	pprofDir := os.Getenv("KUBELB_PPROF_DIR")
	// The default listener port range (10000-19999) holds exactly 10 000 ports.
	managerArgs := []string{"--envoy-port-range", "10000-39999"}
	var ccmArgs []string
	managerPprof, ccmPprof := testsupport.Loopback(testsupport.FreePort(tb)), testsupport.Loopback(testsupport.FreePort(tb))
	if pprofDir != "" {
		managerArgs = append(managerArgs, "--pprof-bind-address", managerPprof)
		ccmArgs = []string{"--pprof-bind-address", ccmPprof}
	}
	sys := framework.StartSystem(tb, pair.Hub, framework.Options{ExtraManagerArgs: managerArgs})
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
		tb.Fatal(err)
	}
	// Let the tenant settle (its ccm has published the nodes) before measuring.
	testsupport.Eventually(tb, time.Minute, "Addresses/default of the tenant", func() error {
		return pair.Hub.Client.Get(ctx, client.ObjectKey{Namespace: tenant.Namespace, Name: kubelbv1alpha1.DefaultAddressesName}, &kubelbv1alpha1.Addresses{})
	})

	// The tenant's Services are watched, not listed every poll: a list of 10 000 Services
	// every 100 ms would cost the tenant API server (and this process) more than the burst.
	addressed := watchAddressed(tb, pair.Tenant.Config, "default")
	managerLog, ccmLog := len(sys.Manager.Output()), len(tenant.CCM.Output())

	writesBefore, err := framework.APIWrites(ctx, pair.Hub.Config)
	if err != nil {
		tb.Fatal(err)
	}
	playerBefore := sys.HubLBWrites.Load()
	cpuBefore, _ := framework.ProcessCPU(sys.Manager.Cmd.Process.Pid)
	start := time.Now()
	if pprofDir != "" {
		stopProfiles := framework.CollectProfiles(tb, pprofDir, map[string]string{"manager": managerPprof, "ccm": ccmPprof}, 20*time.Second)
		defer stopProfiles()
	}
	// The burst: 16 clients creating Services at once, as a GitOps sync would.
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("svc-%04d", i)
	}
	forAll16(tb, names, func(name string) error {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "x"},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
		}
		return pair.Tenant.Client.Create(ctx, svc)
	})
	r := burstResult{n: n, created: time.Since(start)}
	testsupport.Eventually(tb, 30*time.Minute, fmt.Sprintf("all %d Services addressed", n), func() error {
		if got := addressed.count(); got < n {
			return fmt.Errorf("%d of %d addressed", got, n)
		}
		return nil
	})
	r.addressed = time.Since(start)
	// Every LoadBalancer ends up Programmed (by the LoadBalancer controller's one status
	// write, or the status writer's after it); then late writes get a moment to be counted.
	testsupport.Eventually(tb, 30*time.Minute, fmt.Sprintf("all %d LoadBalancers Programmed", n), func() error {
		var lbs kubelbv1alpha1.LoadBalancerList
		if err := pair.Hub.Client.List(ctx, &lbs, client.InNamespace(tenant.Namespace)); err != nil {
			return err
		}
		programmed := 0
		for i := range lbs.Items {
			if meta.IsStatusConditionTrue(lbs.Items[i].Status.Conditions, "Programmed") {
				programmed++
			}
		}
		if programmed < n {
			return fmt.Errorf("%d of %d Programmed", programmed, n)
		}
		return nil
	})
	time.Sleep(5 * time.Second)
	writesAfter, err := framework.APIWrites(ctx, pair.Hub.Config)
	if err != nil {
		tb.Fatal(err)
	}
	r.createByKind, r.createWrites = kubelbWrites(writesBefore, writesAfter, sys.HubLBWrites.Load()-playerBefore)
	tb.Logf("hub writes of the burst by verb and resource (the played hub LoadBalancer made %d of the services/status ones): %v",
		sys.HubLBWrites.Load()-playerBefore, r.createByKind)
	// What the Events on the hub say (kubelb writes them for conditions a user must act on).
	var evs eventsv1.EventList
	if err := pair.Hub.Client.List(ctx, &evs, client.InNamespace(tenant.Namespace)); err == nil {
		reasons := map[string]int{}
		for _, e := range evs.Items {
			reasons[e.Regarding.Kind+" "+e.Reason]++
		}
		tb.Logf("hub Events in %s by kind and reason: %v", tenant.Namespace, reasons)
	}
	cpu, _ := framework.ProcessCPU(sys.Manager.Cmd.Process.Pid)
	rss, _ := framework.ProcessPeakRSS(sys.Manager.Cmd.Process.Pid)
	r.cpu, r.rssMiB = cpu-cpuBefore, float64(rss)/(1<<20)
	tb.Logf("%d Services created in %s, all addressed after %s; %d hub writes by kubelb (%.2f per Service); manager %.1f CPU s, peak RSS %.0f MiB",
		n, r.created.Round(time.Millisecond), r.addressed.Round(time.Millisecond), r.createWrites, r.perService(r.createWrites), r.cpu, r.rssMiB)

	// The delete: every Service at once, until the hub has neither LoadBalancers nor hub
	// Services of the tenant left.
	writesBefore = writesAfter
	playerBefore = sys.HubLBWrites.Load()
	start = time.Now()
	forAll16(tb, names, func(name string) error {
		return client.IgnoreNotFound(pair.Tenant.Client.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}))
	})
	testsupport.Eventually(tb, 30*time.Minute, "the hub empty of the tenant's LoadBalancers and hub Services", func() error {
		var lbs metav1.PartialObjectMetadataList
		lbs.SetGroupVersionKind(kubelbv1alpha1.GroupVersion.WithKind("LoadBalancerList"))
		if err := pair.Hub.Client.List(ctx, &lbs, client.InNamespace(tenant.Namespace)); err != nil {
			return err
		}
		var svcs corev1.ServiceList
		if err := pair.Hub.Client.List(ctx, &svcs, client.InNamespace(tenant.Namespace), client.HasLabels{kubelbv1alpha1.LabelLoadBalancerName}); err != nil {
			return err
		}
		if len(lbs.Items)+len(svcs.Items) > 0 {
			return fmt.Errorf("%d LoadBalancers and %d hub Services left", len(lbs.Items), len(svcs.Items))
		}
		return nil
	})
	r.deleted = time.Since(start)
	time.Sleep(5 * time.Second) // late writes are counted too
	writesAfter, err = framework.APIWrites(ctx, pair.Hub.Config)
	if err != nil {
		tb.Fatal(err)
	}
	r.deleteByKind, r.deleteWrites = kubelbWrites(writesBefore, writesAfter, sys.HubLBWrites.Load()-playerBefore)
	tb.Logf("hub writes of the delete by verb and resource: %v; %d by kubelb (%.2f per Service), the hub empty after %s",
		r.deleteByKind, r.deleteWrites, r.perService(r.deleteWrites), r.deleted.Round(time.Millisecond))

	r.errorLines = append(errorLines(sys.Manager.Output()[managerLog:]), errorLines(tenant.CCM.Output()[ccmLog:])...)
	r.managerErrors = len(errorLines(sys.Manager.Output()[managerLog:]))
	r.ccmErrors = len(r.errorLines) - r.managerErrors
	tb.Logf("error log lines during the burst and the delete: manager %d, ccm %d", r.managerErrors, r.ccmErrors)
	return r
}

// kubelbWrites are the hub writes between two readings of apiserver_request_total by verb
// and resource, without the API server's own IPAddress objects, the leader-election leases
// and the played hub LoadBalancer's status writes (player, subtracted from services/status),
// and their total.
func kubelbWrites(before, after map[string]int64, player int64) (map[string]int64, int64) {
	byKind, _ := framework.WritesSince(before, after)
	for k := range byKind {
		if strings.HasSuffix(k, " ipaddresses") || strings.HasSuffix(k, " leases") {
			delete(byKind, k)
		}
	}
	for _, k := range []string{"PUT services/status", "PATCH services/status"} {
		if d := min(byKind[k], player); d > 0 {
			byKind[k] -= d
			player -= d
			if byKind[k] == 0 {
				delete(byKind, k)
			}
		}
	}
	var total int64
	for _, v := range byKind {
		total += v
	}
	return byKind, total
}

// errorLines are the lines of a binary's log (console format) at level error.
func errorLines(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "\tERROR\t") || strings.Contains(l, `"level":"error"`) {
			out = append(out, l)
		}
	}
	return out
}

// forAll16 runs do for every name from 16 concurrent clients, failing tb on the first error.
func forAll16(tb testing.TB, names []string, do func(name string) error) {
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(names); i += 16 {
				if err := do(names[i]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
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
func watchAddressed(b testing.TB, cfg *rest.Config, namespace string) *addressedServices {
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
