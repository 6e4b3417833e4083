// Package bench is the `make bench` harness (issue 14): real hub and tenant API servers, the
// real kubelb and ccm binaries and optionally a real Envoy, driven through a burst of N
// Services across T tenants, a quiet window, one change in the largest tenant, steady churn
// and the delete of everything, measuring each workload from the processes' and API servers'
// own counters. Run writes one Result; cmd/plot draws the results.
//
// 100 tenant control planes do not fit on one machine: the first RealTenants tenants have a
// tenant API server and a real ccm each, and the harness writes the hub objects of the others
// (Addresses/default and one LoadBalancer per Service) as their ccm would, with the ccm's own
// functions (ccm.DesiredLoadBalancer, ccm.DesiredAddresses), field owner and server-side
// apply.
package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/ccm"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ssa"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// Config is the shape of one run.
type Config struct {
	// Services is N, spread round robin over the tenants.
	Services int
	// Tenants is T.
	Tenants int
	// RealTenants have their own tenant API server and ccm (default: min(Tenants, 2); at
	// least 1, since the change and churn workloads run in tenant 0, a real one).
	RealTenants int
	// Envoy starts a real Envoy for tenant 0 after the burst (change-to-Envoy latency and
	// bytes received over xDS).
	Envoy bool
	// Clients is the load generator's concurrency (default 16).
	Clients int
	// Quiet is the quiet window (0: skipped).
	Quiet time.Duration
	// ChurnPerSecond and ChurnDuration: Services created (and, once ChurnPool exist, the
	// oldest deleted) per second in tenant 0 (0: skipped).
	ChurnPerSecond float64
	ChurnDuration  time.Duration
	// Timeout bounds every wait for convergence (default 30 minutes).
	Timeout time.Duration
	// ManagerMemoryLimit is the manager's GOMEMLIMIT ("" none), e.g. "460MiB": what a
	// container memory limit of 512Mi gives it (process.SetMemoryLimit: 90%).
	ManagerMemoryLimit string
	// PprofDir profiles the manager and the ccm of tenant 0 during the burst
	// (framework.CollectProfiles) into that folder, and during the delete into its
	// subfolder delete.
	PprofDir string
	// Command is recorded in the result (how to re-run it).
	Command string
	// CCMArgs and ManagerArgs are appended to the real tenants' ccm's and the manager's
	// flags (e.g. --max-concurrent-reconciles, --kube-api-qps), to find what bounds a
	// workload.
	CCMArgs, ManagerArgs []string
	// Workloads are the workloads to run after the burst, which always runs first (nil: all
	// of quiet, change, churn and delete, in that order).
	Workloads []string
}

// runs tells whether a workload after the burst is to run.
func (c *Config) runs(name string) bool {
	return c.Workloads == nil || slices.Contains(c.Workloads, name)
}

// churnPool is how many churned Services live at once before the oldest is deleted.
const churnPool = 5

func (c *Config) defaults() {
	if c.Tenants < 1 {
		c.Tenants = 1
	}
	if c.RealTenants == 0 {
		c.RealTenants = min(c.Tenants, 2)
	}
	c.RealTenants = max(1, min(c.RealTenants, c.Tenants))
	if c.Clients < 1 {
		c.Clients = 16
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Minute
	}
}

// tenant is one tenant of the run, real (with cluster and ccm) or played.
type tenant struct {
	index     int
	name      string
	namespace string
	real      *framework.Tenant // nil: played
	cluster   *testenv.Cluster
}

// harness holds a running system.
type harness struct {
	t       testenv.TB
	cfg     Config
	sys     *framework.System
	tenants []*tenant
	byNS    map[string]*tenant
	tl      *timeline
	obs     *observer
	envoy   *framework.Envoy
	// envoyWorkers is the Envoy's --concurrency (0: one worker per core).
	envoyWorkers int
	played       atomic.Int64 // hub writes by the played ccms
	loadGen      atomic.Int64 // tenant writes by the load generator
	managerP     string       // pprof address of the manager
	ccmP         string       // pprof address of tenant 0's ccm
}

// Run starts the system for cfg, runs every workload in order (burst, quiet, change, churn,
// delete) and returns what it measured. Nothing is asserted: figures are reported.
func Run(t testenv.TB, cfg Config) *Result {
	t.Helper()
	cfg.defaults()
	began := time.Now()
	load := sampleLoad(t)
	h := &harness{t: t, cfg: cfg, byNS: map[string]*tenant{}, tl: newTimeline()}
	h.start()

	res := &Result{Schema: SchemaVersion, Date: began.UTC().Format(time.RFC3339), Commit: gitCommit(),
		Command: cfg.Command, Workloads: map[string]*Workload{},
		NotMeasured: map[string]string{},
		Setup: Setup{Services: cfg.Services, Tenants: cfg.Tenants, RealTenants: cfg.RealTenants,
			PlayedTenants: cfg.Tenants - cfg.RealTenants, CCMProcesses: cfg.RealTenants, Envoy: cfg.Envoy,
			Clients: cfg.Clients, ChurnPerSecond: cfg.ChurnPerSecond, ChurnSeconds: cfg.ChurnDuration.Seconds(),
			QuietSeconds: cfg.Quiet.Seconds(), ManagerMemoryLimit: cfg.ManagerMemoryLimit}}
	if !cfg.Envoy && cfg.runs("change") {
		res.NotMeasured["change_to_envoy"] = "run without a real Envoy (BENCH_ENVOY=1 starts one for tenant 0)"
	}

	res.Workloads["burst"] = h.burst()
	if cfg.Quiet > 0 && cfg.runs("quiet") {
		res.Workloads["quiet"] = h.quiet()
	}
	if cfg.runs("change") {
		res.Workloads["change"] = h.change()
	}
	if cfg.ChurnPerSecond > 0 && cfg.ChurnDuration > 0 && cfg.runs("churn") {
		res.Workloads["churn"] = h.churn()
	}
	if cfg.runs("delete") {
		res.Workloads["delete"] = h.deleteAll()
	}

	res.Setup.EnvoyWorkers = h.envoyWorkers
	res.Machine = load.stop()
	res.WallSeconds = time.Since(began).Seconds()
	return res
}

// start brings up the hub, the manager, the tenants and the observers.
func (h *harness) start() {
	t, cfg := h.t, h.cfg
	ctx := context.Background()
	// Every tenant Service takes a NodePort in its cluster: 12 768 of them.
	const nodePorts = "20000-32767"
	pair := testenv.StartPairWith(t, testenv.PairOptions{TenantServiceNodePortRange: nodePorts})
	clusters := []*testenv.Cluster{pair.Tenant}
	for k := 1; k < cfg.RealTenants; k++ {
		clusters = append(clusters, testenv.Start(t, fmt.Sprintf("tenant-%d", k), testenv.Options{
			GatewayAPIChannel: "standard", WithoutKubelbCRDs: true, ServiceNodePortRange: nodePorts}))
	}
	// The default listener port range (10000-19999) holds exactly 10 000 ports.
	managerArgs := append([]string{"--envoy-port-range", "10000-39999"}, cfg.ManagerArgs...)
	ccmArgs := slices.Clone(cfg.CCMArgs)
	if cfg.PprofDir != "" {
		h.managerP, h.ccmP = testsupport.Loopback(testsupport.FreePort(t)), testsupport.Loopback(testsupport.FreePort(t))
		managerArgs = append(managerArgs, "--pprof-bind-address", h.managerP)
		ccmArgs = append(ccmArgs, "--pprof-bind-address", h.ccmP)
	}
	var managerEnv []string
	if h.cfg.ManagerMemoryLimit != "" {
		managerEnv = []string{"GOMEMLIMIT=" + h.cfg.ManagerMemoryLimit}
	}
	h.sys = framework.StartSystem(t, pair.Hub, framework.Options{ExtraManagerArgs: managerArgs, ManagerEnv: managerEnv})
	hub := pair.Hub.Client

	perTenant := (cfg.Services + cfg.Tenants - 1) / cfg.Tenants
	for i := 0; i < cfg.Tenants; i++ {
		tn := &tenant{index: i, name: fmt.Sprintf("t%03d", i)}
		tn.namespace = hubnames.TenantNamespace(tn.name)
		if i < cfg.RealTenants {
			args := ccmArgs
			if i > 0 {
				args = nil
			}
			tn.cluster = clusters[i]
			tn.real = h.sys.AddTenant(tn.name, tn.cluster, 3, args...)
		} else if err := hub.Create(ctx, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: tn.name},
			Spec: kubelbv1alpha1.TenantSpec{EndpointPolicy: &kubelbv1alpha1.EndpointPolicy{
				Allow: []string{framework.LoopbackCIDR, framework.LoopbackIPv6CIDR}}}}); err != nil {
			t.Fatal(err)
		}
		h.tenants = append(h.tenants, tn)
		h.byNS[tn.namespace] = tn
	}
	// Room for the tenant's share and the churn pool (the default loadBalancers limit is
	// 10 000; until issue 31 the defaults were 1000 LoadBalancers and 500 listener ports, so the
	// limits stay explicit for runs comparable with earlier ones), and no hub NodePorts (as
	// with MetalLB), which would cap the hub at 2768 LoadBalancer ports.
	room := max(perTenant+churnPool+1, 1000)
	limits := fmt.Sprintf(`{"spec":{"limits":{"loadBalancers":%d,"listenerPorts":%d},"loadBalancer":{"allocateNodePorts":false}}}`, room, 2*room)
	for _, tn := range h.tenants {
		if err := hub.Patch(ctx, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: tn.name}},
			client.RawPatch(types.MergePatchType, []byte(limits))); err != nil {
			t.Fatal(err)
		}
	}
	// Played tenants: once the manager made the namespace (the ccm's kubeconfig is there),
	// publish the nodes as the ccm would.
	for _, tn := range h.tenants {
		if tn.real != nil {
			continue
		}
		testsupport.Eventually(t, 2*time.Minute, "the namespace of tenant "+tn.name, func() error {
			return hub.Get(ctx, client.ObjectKey{Namespace: tn.namespace, Name: kubelbv1alpha1.CCMKubeconfigSecretName}, &corev1.Secret{})
		})
		var addrs []kubelbv1alpha1.EndpointAddress
		for n := 0; n < 3; n++ {
			addrs = append(addrs, kubelbv1alpha1.EndpointAddress{IP: fmt.Sprintf("127.0.2.%d", 10+n)})
		}
		if err := ssa.Apply(ctx, hub, ccm.DesiredAddresses(tn.namespace, addrs), nil, hubnames.FieldOwnerCCM, ""); err != nil {
			t.Fatal(err)
		}
	}
	// Let every tenant settle (real ccms have published their nodes) before measuring.
	for _, tn := range h.tenants {
		testsupport.Eventually(t, 2*time.Minute, "Addresses/default of tenant "+tn.name, func() error {
			return hub.Get(ctx, client.ObjectKey{Namespace: tn.namespace, Name: kubelbv1alpha1.DefaultAddressesName}, &kubelbv1alpha1.Addresses{})
		})
	}
	h.obs = observe(t, h)
}

// svcName is the name of tenant-local Service j.
func svcName(j int) string { return fmt.Sprintf("svc-%05d", j) }

// key names a Service of a tenant in the timeline.
func key(tn *tenant, name string) string { return tn.name + "/" + name }

// tenantService is the Service the load generator creates: one TCP port.
func tenantService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
}

// playedLoadBalancer is the LoadBalancer a ccm would write for tenant-local Service j of a
// played tenant: the Service as a tenant API server would have it (a UID, a NodePort, the
// defaulted families) through the ccm's own mapping.
func playedLoadBalancer(tn *tenant, name string, j int) *kubelbv1alpha1.LoadBalancer {
	svc := tenantService(name)
	svc.UID = types.UID(fmt.Sprintf("00000000-%04x-4000-8000-%012x", tn.index, j))
	svc.Spec.Ports[0].NodePort = int32(20000 + j%12768)
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	policy := corev1.IPFamilyPolicySingleStack
	svc.Spec.IPFamilyPolicy, svc.Spec.IPFamilies = &policy, []corev1.IPFamily{corev1.IPv4Protocol}
	lb, _ := ccm.DesiredLoadBalancer(svc, tn.namespace)
	return lb
}

// create creates tenant-local Service j of a tenant: in its cluster (real), or its
// LoadBalancer on the hub (played). The timeline notes the moment the request is issued.
func (h *harness) create(ctx context.Context, tn *tenant, name string, j int) error {
	h.tl.created(key(tn, name))
	if tn.real != nil {
		h.loadGen.Add(1)
		return tn.cluster.Client.Create(ctx, tenantService(name))
	}
	h.played.Add(1)
	return ssa.Apply(ctx, h.sys.Hub.Client, playedLoadBalancer(tn, name, j), nil, hubnames.FieldOwnerCCM, "")
}

// parallel runs do(i) for i in [0, n) on the configured number of clients and returns the
// first error.
func (h *harness) parallel(n int, do func(i int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, h.cfg.Clients)
	for w := 0; w < h.cfg.Clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += h.cfg.Clients {
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// waitAddressed waits until every key shows an address.
func (h *harness) waitAddressed(keys []string, what string) {
	h.t.Helper()
	testsupport.Eventually(h.t, h.cfg.Timeout, what, func() error {
		if n := h.tl.countAddressed(keys); n < len(keys) {
			return fmt.Errorf("%d of %d addressed", n, len(keys))
		}
		return nil
	})
}

// gitCommit is the commit the run measured ("-dirty" when the tree has changes).
func gitCommit() string {
	out, err := exec.Command("git", "-C", testsupport.RepoRoot(), "describe", "--always", "--dirty", "--abbrev=12").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// loadSampler samples the 1-minute load average every 5 s.
type loadSampler struct {
	mu      sync.Mutex
	samples []float64
	done    chan struct{}
	stopped chan struct{}
}

func sampleLoad(t testenv.TB) *loadSampler {
	s := &loadSampler{done: make(chan struct{}), stopped: make(chan struct{})}
	read := func() {
		b, err := os.ReadFile("/proc/loadavg")
		if err != nil {
			return
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			if v, err := strconv.ParseFloat(f[0], 64); err == nil {
				s.mu.Lock()
				s.samples = append(s.samples, v)
				s.mu.Unlock()
			}
		}
	}
	read()
	go func() {
		defer close(s.stopped)
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-tick.C:
				read()
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			close(s.done)
		}
		<-s.stopped
	})
	return s
}

// stop ends the sampling and describes the machine.
func (s *loadSampler) stop() Machine {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	<-s.stopped
	m := Machine{CPUs: runtime.NumCPU(), MemoryMiB: memTotalMiB()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.samples); n > 0 {
		v := append([]float64(nil), s.samples...)
		sort.Float64s(v)
		m.LoadMin, m.LoadMedian, m.LoadMax, m.LoadSamples = v[0], v[n/2], v[n-1], n
	}
	return m
}

func memTotalMiB() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb / 1024
		}
	}
	return 0
}
