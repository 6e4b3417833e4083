package loadbalancer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// TestScale is run by hand, not by `make test`:
//
//	KUBELB_SCALE=1000 go test ./internal/manager/loadbalancer -run TestScale -v -count=1
//
// Optional: KUBELB_SCALE_WORKERS (MaxConcurrentReconciles), KUBELB_SCALE_QPS (client QPS,
// burst twice that), KUBELB_SCALE_FINALIZER=1 (see below), KUBELB_SCALE_NODEPORTS=1 (hub
// NodePorts allocated, see below).
//
// It creates KUBELB_SCALE single-port LoadBalancers at once in one tenant against a real API
// server, with the controller running in-process at kubelb's default client limits (200 QPS,
// burst 400) and the test playing MetalLB (it writes an address into every hub Service's
// status as soon as it appears). It reports the time until every LoadBalancer has its
// listener port in status.service.ports and until every one shows an address, and the hub
// writes per LoadBalancer, counted both by the controller's own client and by the API
// server (apiserver_request_total). It asserts nothing about time.
//
// envtest's API server allows only 10.0.0.0/24 (~250) Service ClusterIPs by default; this
// test starts its own with a /16 so that tens of thousands of hub Services fit. The Config
// turns hub NodePorts off (spec.loadBalancer.allocateNodePorts: false), as a hub with MetalLB
// would: with them, the default NodePort range (2768 ports) caps the hub at 2768
// LoadBalancer ports, and hub Services beyond are refused ("range is full").
// KUBELB_SCALE_NODEPORTS=1 keeps them.
func TestScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("KUBELB_SCALE"))
	if n <= 0 {
		t.Skip("set KUBELB_SCALE=<number of LoadBalancers> to run")
	}
	ctrllog.SetLogger(logr.Discard())
	workers, _ := strconv.Atoi(os.Getenv("KUBELB_SCALE_WORKERS"))
	qps, _ := strconv.Atoi(os.Getenv("KUBELB_SCALE_QPS"))
	if qps <= 0 {
		qps = 200 // kubelb's --kube-api-qps default
	}
	// KUBELB_SCALE_FINALIZER=1 creates the LoadBalancers with the cleanup finalizer already
	// set, as a ccm could, which saves the controller one write per LoadBalancer.
	withFinalizer := os.Getenv("KUBELB_SCALE_FINALIZER") != ""
	env := &envtest.Environment{
		BinaryAssetsDirectory: testenv.AssetsDir(t),
		CRDDirectoryPaths:     []string{filepath.Join(testsupport.RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.96.0.0/16")
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	cfg.QPS, cfg.Burst = 2000, 4000
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	hub := &testenv.Cluster{Name: "hub", Config: cfg, Client: c}
	ctx := t.Context()
	const ns = "tenant-scale"
	objects.Create(t, c, objects.Namespace(managerNS, nil))
	objects.Create(t, c, objects.ManagedNamespace(ns))
	// The tenant may hold all of them (the default limits are 1000 LoadBalancers, 500 ports).
	limit := ptr.To(int32(max(n, 1000)))
	nodePorts := os.Getenv("KUBELB_SCALE_NODEPORTS") != ""
	objects.Create(t, c, objects.Config(managerNS, kubelbv1alpha1.ConfigSpec{Limits: kubelbv1alpha1.Limits{LoadBalancers: limit, ListenerPorts: limit, NodePorts: limit},
		LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{AllocateNodePorts: ptr.To(nodePorts)}}))

	serverBefore := serverWrites(t, cfg)
	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)

	m := startController(t, hub, Options{Namespace: managerNS, PortRange: portalloc.Range{Min: 10000, Max: 10000 + int32(n) + 100},
		MaxConcurrentReconciles: workers}, float32(qps), 2*qps)
	stopLB := playMetalLB(t, cfg, ns)
	defer stopLB()

	start := time.Now()
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				lb := newLB(ns, fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i), tcp(80))
				lb.Labels = map[string]string{kubelbv1alpha1.LabelOriginName: fmt.Sprintf("svc-%d", i), kubelbv1alpha1.LabelOriginNamespace: "default"}
				if withFinalizer {
					lb.Finalizers = []string{kubelbv1alpha1.CleanupFinalizer}
				}
				if err := c.Create(ctx, lb); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	created := time.Since(start)

	var allPorts, allAddressed time.Duration
	testsupport.Eventually(t, time.Duration(max(n/1000, 2))*5*time.Minute, "every LoadBalancer with ports and address", func() error {
		list := &kubelbv1alpha1.LoadBalancerList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		withPorts, withAddr := 0, 0
		for _, lb := range list.Items {
			if len(lb.Status.Service.Ports) == 1 && lb.Status.Service.Ports[0].UpstreamTargetPort != 0 {
				withPorts++
			}
			if len(lb.Status.LoadBalancer.Ingress) > 0 {
				withAddr++
			}
		}
		if withPorts == n && allPorts == 0 {
			allPorts = time.Since(start)
		}
		if withAddr == n && allAddressed == 0 {
			allAddressed = time.Since(start)
		}
		if allPorts == 0 || allAddressed == 0 {
			return fmt.Errorf("%d/%d with ports, %d/%d with an address", withPorts, n, withAddr, n)
		}
		return nil
	})
	writesAtAddress := m.writes.String()
	// Let stragglers (reconciles queued behind the burst) finish: wait until the write count
	// stays put for two seconds, then take the totals.
	last, stableSince := m.writes.Total(), time.Now()
	testsupport.Eventually(t, time.Minute, "the controller to stop writing", func() error {
		if cur := m.writes.Total(); cur != last {
			last, stableSince = cur, time.Now()
		}
		if time.Since(stableSince) < 2*time.Second {
			return fmt.Errorf("still writing")
		}
		return nil
	})
	var ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	serverAfter := serverWrites(t, cfg)

	t.Logf("%d LoadBalancers created by the test in %s; controller with %d workers, client QPS %d burst %d, hub NodePorts allocated: %v",
		n, created.Round(time.Millisecond), m.r.opts.MaxConcurrentReconciles, qps, 2*qps, nodePorts)
	t.Logf("all with status.service.ports after %s; all with an address after %s", allPorts.Round(time.Millisecond), allAddressed.Round(time.Millisecond))
	t.Logf("controller writes when all were addressed: %s", writesAtAddress)
	t.Logf("controller writes in total: %s → %.2f per LoadBalancer", m.writes, float64(m.writes.Total())/float64(n))
	t.Logf("API server write requests by resource (all clients: test creates, controller, MetalLB player):")
	keys := make([]string, 0, len(serverAfter))
	for k := range serverAfter {
		if serverAfter[k]-serverBefore[k] > 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("  %-45s %6.0f (%.2f per LoadBalancer)", k, serverAfter[k]-serverBefore[k], (serverAfter[k]-serverBefore[k])/float64(n))
	}
	t.Logf("reconcile errors: %v", m.Errors())
	m.mu.Lock()
	recs := 0
	for _, r := range m.reconciles {
		recs += r
	}
	latency, byKey := m.writes.Latency()
	t.Logf("%d reconciles, %.1f s reconciling in total (%.1f ms each); write requests took %.1f s in total (%.1f ms each)",
		recs, m.busy.Seconds(), m.busy.Seconds()*1000/float64(recs), latency.Seconds(), latency.Seconds()*1000/float64(m.writes.Total()))
	m.mu.Unlock()
	for k, d := range byKey {
		t.Logf("  %-30s %.1f ms each", k, d.Seconds()*1000/float64(m.writes.Count(k)))
	}
	t.Logf("test process (controller + load generator + MetalLB player): %.1f CPU seconds, peak RSS %d MiB",
		cpu.Seconds(), ru1.Maxrss/1024)
}

// serverWrites reads apiserver_request_total from the API server and sums write requests by
// "VERB resource[/subresource]".
func serverWrites(t testing.TB, cfg *rest.Config) map[string]float64 {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		switch l["verb"] {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE", "CREATE", "UPDATE":
		default:
			continue
		}
		key := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		out[key] += m.GetCounter().GetValue()
	}
	return out
}

// playMetalLB writes a 127.0.0.x address into the status of every hub Service in ns that
// has none, as MetalLB would, with 4 workers fed by a watch.
func playMetalLB(t testing.TB, cfg *rest.Config, ns string) (stop func()) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := cs.CoreV1().Services(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	work := make(chan *corev1.Service, 4096)
	var wg sync.WaitGroup
	var ipCount atomic.Int64
	for range 4 {
		wg.Go(func() {
			for svc := range work {
				i := ipCount.Add(1)
				svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: fmt.Sprintf("127.0.%d.%d", i/250, 1+i%250)}}
				if _, err := cs.CoreV1().Services(ns).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
					t.Logf("MetalLB player: %v", err)
				}
			}
		})
	}
	wg.Go(func() {
		defer close(work)
		for ev := range w.ResultChan() {
			svc, ok := ev.Object.(*corev1.Service)
			if ok && ev.Type == watch.Added && svc.Spec.Type == corev1.ServiceTypeLoadBalancer && len(svc.Status.LoadBalancer.Ingress) == 0 {
				work <- svc
			}
		}
	})
	return func() {
		cancel()
		w.Stop()
		wg.Wait()
	}
}
