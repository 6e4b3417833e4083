package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// SoakDurationEnv lengthens the soak (`make soak SOAK_DURATION=30m`); without it the soak
// churns for soakDefault, its short form in `make test`.
const SoakDurationEnv = "SOAK_DURATION"

// SoakSeedEnv replays the churn of an earlier run (its seed is logged).
const SoakSeedEnv = "SOAK_SEED"

// soakDefault is the churn of the short soak: with set-up and the final checks the test
// stays within issue 13's budget of 3 minutes.
const soakDefault = 75 * time.Second

// soakChurnEvery is the pause between two changes of one tenant's Services; soakRouteEvery
// between two changes of the Gateways and HTTPRoutes.
const (
	soakChurnEvery = 250 * time.Millisecond
	soakRouteEvery = 2 * time.Second
	// soakMaxServices and soakMaxGateways bound what the churn keeps alive at once.
	soakMaxServices = 10
	soakMaxGateways = 2
)

// soakRequestEvery paces the stable Service's traffic (at most 20 requests a second).
const soakRequestEvery = 50 * time.Millisecond

// soakSampleEvery is how often the runtime of the binaries is sampled.
const soakSampleEvery = 5 * time.Second

// Only a gross leak fails the soak: a noisy machine must not turn it red.
const (
	leakGoroutineFactor = 2
	leakGoroutineMin    = 200
	leakHeapFactor      = 3
)

func soakDuration(t *testing.T) time.Duration {
	v := os.Getenv(SoakDurationEnv)
	if v == "" {
		return soakDefault
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 10m", SoakDurationEnv, v)
	}
	return d
}

// TestSoak is issue 13's scenario 7: two tenants, each its own cluster and ccm, churn
// LoadBalancer Services (create; update ports and annotations; delete) for SOAK_DURATION,
// and tenant a also churns Gateways and HTTPRoutes, while a stable Service of tenant a carries
// traffic through the tenant's Envoy. No request may fail. At the end, after the churned
// objects are deleted, nothing is left behind: tenant a's Services and hub LoadBalancers
// agree one to one with no orphaned hub Service, no Route or Gateway hub Service is left, the
// allocated and free listener ports and tenant a's snapshot (listeners, clusters) are as
// before the churn; then tenant b is deleted and every manager metric series of it is gone.
// The goroutines and heap of the manager and both ccms in the first and the last window of
// the churn are logged; only a gross leak fails.
func TestSoak(t *testing.T) {
	ctx := context.Background()
	duration := soakDuration(t)
	window := 30 * time.Second
	if duration >= 5*time.Minute {
		window = time.Minute
	}
	began := time.Now()
	pair := testenv.StartPair(t)
	tenantB := testenv.Start(t, "tenant-b", testenv.Options{GatewayAPIChannel: "standard", WithoutKubelbCRDs: true})
	sys := framework.StartSystem(t, pair.Hub, framework.Options{})
	framework.PlayNamespaceController(t, pair.Hub.Config, pair.Hub.Client)
	a := sys.AddTenant("a", pair.Tenant, 2, "--enable-gateway-api")
	b := sys.AddTenant("b", tenantB, 1)
	// A binary that loses its lease on this loaded machine exits; its pod would be restarted.
	manager := framework.Supervise(t, sys.Manager, restartDelay)
	ccmA := framework.Supervise(t, a.CCM, restartDelay)
	ccmB := framework.Supervise(t, b.CCM, restartDelay)

	web := a.CreateService(framework.LBService{Name: "web", Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
	a.WaitAddress("web", 2*time.Minute)
	a.StartBackends(web)
	envoy := a.StartEnvoy(framework.EnvoyBootstrap)
	target := fmt.Sprintf("127.0.0.1:%d", a.ListenerPorts(web)["http"])
	framework.WaitServes(t, target, "a-node-0", "a-node-1")
	framework.WaitEnvoyConnected(t, envoy, 1)
	// The routes' backend, a ClusterIP Service (the ccm mirrors it as a NodePort twin).
	a.CreateBackendService("default", "api", framework.TCPPort("http", 80))
	a.WaitProgrammed(web, time.Minute)

	before := soakFigures(t, sys, a)
	t.Logf("before the churn (set-up %s): %+v", time.Since(began).Round(time.Second), before)

	traffic := framework.StartTraffic(t, target, soakRequestEvery, int(duration/soakRequestEvery)*2+10000)
	sampler := framework.StartRuntimeSampler(t, map[string]string{
		"manager": sys.MetricsAddr, "ccm a": a.MetricsAddr, "ccm b": b.MetricsAddr,
	}, soakSampleEvery)

	watch := watchStable(t, ctx, sys, a, envoy, web, target)
	defer watch()

	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(SoakSeedEnv); v != "" {
		if _, err := fmt.Sscan(v, &seed); err != nil {
			t.Fatalf("%s=%q: want a number", SoakSeedEnv, v)
		}
	}
	t.Logf("churn for %s (seed %d)", duration, seed)
	churnStart := time.Now()
	deadline := churnStart.Add(duration)
	results := make(chan churnCounts, 3)
	go func() { results <- churnServices(ctx, a.Cluster.Client, "a", rand.New(rand.NewPCG(seed, 1)), deadline) }()
	go func() { results <- churnServices(ctx, b.Cluster.Client, "b", rand.New(rand.NewPCG(seed, 2)), deadline) }()
	go func() { results <- churnRoutes(ctx, a.Cluster.Client, rand.New(rand.NewPCG(seed, 3)), deadline) }()
	for range 3 {
		c := <-results
		t.Logf("churn %s", c)
		if c.errors > c.ops/10 {
			t.Errorf("churn %s: more than one write in ten failed", c)
		}
	}
	churnEnd := time.Now()
	sampler.Stop()

	// Delete what the churn left and check nothing else is left behind.
	traffic.Phase("cleanup")
	cleanupStart := time.Now()
	deleteChurned(t, ctx, a.Cluster.Client, true)
	deleteChurned(t, ctx, b.Cluster.Client, false)
	testsupport.Eventually(t, 3*time.Minute, "the hub to be as before the churn", func() error {
		if err := a.CheckMirrors(ctx); err != nil {
			return fmt.Errorf("tenant a: %w", err)
		}
		if err := b.CheckMirrors(ctx); err != nil {
			return fmt.Errorf("tenant b: %w", err)
		}
		var lbs kubelbv1alpha1.LoadBalancerList
		if err := pair.Hub.Client.List(ctx, &lbs); err != nil {
			return err
		}
		if len(lbs.Items) != 1 {
			return fmt.Errorf("%d LoadBalancers on the hub, want web's only", len(lbs.Items))
		}
		var routes kubelbv1alpha1.RouteList
		if err := pair.Hub.Client.List(ctx, &routes); err != nil {
			return err
		}
		if len(routes.Items) != 0 {
			return fmt.Errorf("%d Routes left on the hub (%s, ...)", len(routes.Items), routes.Items[0].Name)
		}
		var hubSvcs corev1.ServiceList
		if err := pair.Hub.Client.List(ctx, &hubSvcs, client.HasLabels{kubelbv1alpha1.LabelRouteName}); err != nil {
			return err
		}
		if len(hubSvcs.Items) != 0 {
			return fmt.Errorf("%d Gateway hub Services left (%s, ...)", len(hubSvcs.Items), hubSvcs.Items[0].Name)
		}
		if now := soakFigures(t, sys, a); now != before {
			return fmt.Errorf("figures %+v, before the churn %+v", now, before)
		}
		return nil
	})
	t.Logf("clean %s after the churn ended", time.Since(cleanupStart).Round(time.Millisecond))

	// Tenant b goes: every series of it goes with it.
	ccmB.Stop()
	if code, err := ccmB.Current().Stop(30 * time.Second); err != nil || code != 0 {
		t.Errorf("ccm b: exit %d, %v", code, err)
	}
	if err := pair.Hub.Client.Delete(ctx, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "b"}}); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 2*time.Minute, "Tenant b, its namespace and its metric series to be gone", func() error {
		if err := pair.Hub.Client.Get(ctx, client.ObjectKey{Name: "b"}, &kubelbv1alpha1.Tenant{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Tenant still there: %v", err)
		}
		if err := pair.Hub.Client.Get(ctx, client.ObjectKey{Name: b.Namespace}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace still there: %v", err)
		}
		var left []string
		for _, l := range []string{`tenant="b"`, `"` + b.Namespace + `"`} {
			s, err := framework.MetricSeries(sys.MetricsAddr, l)
			if err != nil {
				return err
			}
			left = append(left, s...)
		}
		if len(left) > 0 {
			return fmt.Errorf("%d series of tenant b left: %s", len(left), strings.Join(left[:min(len(left), 5)], ", "))
		}
		return nil
	})
	framework.WaitServes(t, target, "a-node-0", "a-node-1")
	res := traffic.Stop()
	watch()

	t.Logf("stable Service's requests: %s", res)
	var restarts []string
	for _, sup := range []*framework.Supervisor{manager, ccmA, ccmB} {
		for _, e := range sup.Exits() {
			restarts = append(restarts, e.String())
		}
	}
	t.Logf("binaries restarted (they exit when they lose their lease): %d %v", len(restarts), restarts)
	if n := res.FailedTotal(); n > 0 {
		t.Errorf("%d of %d requests to the stable Service failed: %s", n, res.Requests(), strings.Join(res.Failures, "; "))
		if st, err := envoy.Stats(""); err == nil {
			for name, v := range st {
				if v != 0 && (strings.HasPrefix(name, "cluster.") && !strings.HasPrefix(name, "cluster.xds") || strings.HasPrefix(name, "tcp.") ||
					strings.Contains(name, "update_rejected") || strings.HasPrefix(name, "listener_manager.") || strings.HasPrefix(name, "listener.127")) {
					t.Logf("Envoy %s: %d", name, v)
				}
			}
		}
	}
	if res.OK["start"] == 0 {
		t.Errorf("no request was sent during the churn")
	}

	for _, name := range []string{"manager", "ccm a", "ccm b"} {
		first := sampler.Window(name, churnStart, churnStart.Add(window))
		last := sampler.Window(name, churnEnd.Add(-window), churnEnd.Add(time.Second))
		t.Logf("%s: first %s of the churn: %s; last %s: %s (%d scrapes failed)", name, window, first, window, last, sampler.Errors(name))
		if first.Samples == 0 || last.Samples == 0 {
			t.Errorf("%s: no runtime samples in the first or the last window", name)
			continue
		}
		if g0, g1 := first.Mean.Goroutines, last.Mean.Goroutines; g1 > leakGoroutineFactor*g0 && g1-g0 > leakGoroutineMin {
			t.Errorf("%s leaks goroutines: %.0f in the first %s of the churn, %.0f in the last", name, g0, window, g1)
		}
		if h0, h1 := first.Mean.HeapInuse, last.Mean.HeapInuse; h1 > leakHeapFactor*h0 {
			t.Errorf("%s leaks heap: %.1f MiB in use in the first %s of the churn, %.1f MiB in the last", name, h0/(1<<20), window, h1/(1<<20))
		}
	}
	t.Logf("whole test %s", time.Since(began).Round(time.Second))
}

// figures are what the churn must leave as it found them.
type figures struct {
	PortsAllocatedA, PortsFree      float64
	ListenersA, ClustersA, ProxiesA float64
	LoadBalancersA, ManagedServices float64
}

func soakFigures(t *testing.T, sys *framework.System, a *framework.Tenant) figures {
	t.Helper()
	get := func(addr, metric string, labels ...string) float64 {
		v, err := framework.MetricSum(addr, metric, labels...)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// A tenant label holds the Tenant's name or its namespace (internal/metrics/tenants.go).
	tenantSum := func(metric string) float64 {
		return get(sys.MetricsAddr, metric, `tenant="`+a.Name+`"`) + get(sys.MetricsAddr, metric, `tenant="`+a.Namespace+`"`)
	}
	return figures{
		PortsAllocatedA: tenantSum("kubelb_manager_ports_allocated"),
		PortsFree:       get(sys.MetricsAddr, "kubelb_manager_ports_free"),
		ListenersA:      tenantSum("kubelb_manager_envoycp_listeners"),
		ClustersA:       tenantSum("kubelb_manager_envoycp_clusters"),
		ProxiesA:        tenantSum("kubelb_manager_envoycp_connected_proxies"),
		LoadBalancersA:  tenantSum("kubelb_manager_loadbalancers_total"),
		ManagedServices: get(a.MetricsAddr, "kubelb_ccm_managed_services_total"),
	}
}

// churnLabel marks what the churn creates, so that it can delete all of it at the end.
const churnLabel = "soak.kubelb.dev/churn"

// churnCounts are the writes of one churn loop.
type churnCounts struct {
	what                                   string
	ops, creates, updates, deletes, errors int
	lastErr                                error
}

func (c churnCounts) String() string {
	s := fmt.Sprintf("%s: %d writes (%d creates, %d updates, %d deletes), %d failed", c.what, c.ops, c.creates, c.updates, c.deletes, c.errors)
	if c.lastErr != nil {
		s += fmt.Sprintf(" (last: %v)", c.lastErr)
	}
	return s
}

func (c *churnCounts) count(kind *int, err error) {
	c.ops++
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) {
		c.errors++
		c.lastErr = err
		return
	}
	*kind++
}

// churnPorts are the Service ports the churn picks from.
var churnPorts = []corev1.ServicePort{
	framework.TCPPort("http", 80), framework.TCPPort("https", 443), framework.TCPPort("alt", 8080),
	framework.TCPPort("metrics", 9090), {Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
}

func randomPorts(r *rand.Rand) []corev1.ServicePort {
	n := 1 + r.IntN(3)
	var out []corev1.ServicePort
	for _, i := range r.Perm(len(churnPorts))[:n] {
		p := churnPorts[i]
		p.TargetPort.IntVal = p.Port
		out = append(out, p)
	}
	return out
}

// churnServices creates, updates (ports, annotations) and deletes LoadBalancer Services in
// the tenant's default namespace until deadline, keeping at most soakMaxServices of them.
func churnServices(ctx context.Context, c client.Client, tenant string, r *rand.Rand, deadline time.Time) churnCounts {
	counts := churnCounts{what: "Services of tenant " + tenant}
	next := 0
	for time.Now().Before(deadline) {
		var list corev1.ServiceList
		if err := c.List(ctx, &list, client.InNamespace("default"), client.HasLabels{churnLabel}); err != nil {
			counts.count(&counts.updates, err)
			time.Sleep(soakChurnEvery)
			continue
		}
		var live []corev1.Service
		for _, s := range list.Items {
			if s.DeletionTimestamp == nil {
				live = append(live, s)
			}
		}
		switch op := r.IntN(10); {
		case len(live) < soakMaxServices/2 || (op < 4 && len(live) < soakMaxServices):
			name := fmt.Sprintf("churn-%d", next)
			next++
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{churnLabel: "true"},
					Annotations: map[string]string{"soak.kubelb.dev/revision": "0"}},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name}, Ports: randomPorts(r)},
			}
			counts.count(&counts.creates, c.Create(ctx, svc))
		case op < 8 && len(live) > 0:
			svc := live[r.IntN(len(live))]
			if r.IntN(2) == 0 {
				svc.Spec.Ports = randomPorts(r)
			}
			svc.Annotations["soak.kubelb.dev/revision"] = fmt.Sprint(r.IntN(1000))
			counts.count(&counts.updates, c.Update(ctx, &svc))
		case len(live) > 0:
			svc := live[r.IntN(len(live))]
			counts.count(&counts.deletes, c.Delete(ctx, &svc))
		}
		time.Sleep(soakChurnEvery)
	}
	return counts
}

// churnRoutes creates a Gateway (one HTTP listener) with an HTTPRoute to the Service api,
// changes the route's hostnames, and deletes both, until deadline, keeping at most
// soakMaxGateways Gateways.
func churnRoutes(ctx context.Context, c client.Client, r *rand.Rand, deadline time.Time) churnCounts {
	counts := churnCounts{what: "Gateways and HTTPRoutes of tenant a"}
	next := 0
	for time.Now().Before(deadline) {
		var gws gwv1.GatewayList
		if err := c.List(ctx, &gws, client.InNamespace("default"), client.HasLabels{churnLabel}); err != nil {
			counts.count(&counts.updates, err)
			time.Sleep(soakRouteEvery)
			continue
		}
		switch op := r.IntN(3); {
		case len(gws.Items) == 0 || (op == 0 && len(gws.Items) < soakMaxGateways):
			name := fmt.Sprintf("gw-%d", next)
			next++
			labels := map[string]string{churnLabel: "true"}
			gw := &gwv1.Gateway{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
				Spec: gwv1.GatewaySpec{GatewayClassName: kubelbv1alpha1.DefaultClass, Listeners: []gwv1.Listener{
					{Name: "http", Protocol: gwv1.HTTPProtocolType, Port: 80},
				}},
			}
			counts.count(&counts.creates, c.Create(ctx, gw))
			route := &gwv1.HTTPRoute{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
				Spec: gwv1.HTTPRouteSpec{
					CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: gwv1.ObjectName(name)}}},
					Hostnames:       []gwv1.Hostname{gwv1.Hostname(name + ".example.com")},
					Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
						BackendObjectReference: gwv1.BackendObjectReference{Name: "api", Port: ptr.To(gwv1.PortNumber(80))}}}}}},
				},
			}
			counts.count(&counts.creates, c.Create(ctx, route))
		case op == 1:
			gw := gws.Items[r.IntN(len(gws.Items))]
			route := &gwv1.HTTPRoute{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: gw.Name}, route); err != nil {
				counts.count(&counts.updates, err)
				break
			}
			route.Spec.Hostnames = []gwv1.Hostname{gwv1.Hostname(fmt.Sprintf("%s-%d.example.com", gw.Name, r.IntN(1000)))}
			counts.count(&counts.updates, c.Update(ctx, route))
		default:
			gw := gws.Items[r.IntN(len(gws.Items))]
			counts.count(&counts.deletes, c.Delete(ctx, &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: gw.Name, Namespace: "default"}}))
			counts.count(&counts.deletes, c.Delete(ctx, &gw))
		}
		time.Sleep(soakRouteEvery)
	}
	return counts
}

// deleteChurned deletes every Service, Gateway and HTTPRoute the churn made in a tenant.
func deleteChurned(t *testing.T, ctx context.Context, c client.Client, withRoutes bool) {
	t.Helper()
	lists := []client.ObjectList{&corev1.ServiceList{}}
	if withRoutes {
		lists = append(lists, &gwv1.HTTPRouteList{}, &gwv1.GatewayList{})
	}
	for _, list := range lists {
		if err := c.List(ctx, list, client.InNamespace("default"), client.HasLabels{churnLabel}); err != nil {
			t.Fatalf("listing the churned %T: %v", list, err)
		}
		if err := meta.EachListItem(list, func(o k8sruntime.Object) error {
			return client.IgnoreNotFound(c.Delete(ctx, o.(client.Object)))
		}); err != nil {
			t.Fatalf("deleting the churned %T: %v", list, err)
		}
	}
}

// watchStable probes the stable Service alongside the traffic and, when a probe fails, logs
// what a person would look at to explain it (at most three times, 5 s apart): Envoy's
// listeners on the stable port, the hosts of the stable cluster, and the hub Services that
// claim that listener port. It returns a function that stops it (idempotent).
func watchStable(t *testing.T, ctx context.Context, sys *framework.System, a *framework.Tenant, envoy *framework.Envoy, web *corev1.Service, target string) func() {
	stop, done := make(chan struct{}), make(chan struct{})
	_, port, _ := strings.Cut(target, ":")
	go func() {
		defer close(done)
		var last time.Time
		captures := 0
		for captures < 3 {
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			_, err := testsupport.TCPRoundTrip(target, "watch")
			if err == nil || time.Since(last) < 5*time.Second {
				continue
			}
			last = time.Now()
			captures++
			var b strings.Builder
			fmt.Fprintf(&b, "probe of the stable Service failed: %v\n", err)
			if ls, err := envoy.Listeners(); err == nil {
				for _, l := range ls {
					if strings.HasSuffix(l.Address, ":"+port) {
						fmt.Fprintf(&b, "  Envoy listener %s on %s\n", l.Name, l.Address)
					}
				}
			}
			if hosts, err := envoy.ClusterHosts(func(c string) bool { return strings.HasPrefix(c, string(web.UID)) }); err == nil {
				fmt.Fprintf(&b, "  stable cluster hosts: %+v\n", hosts)
			} else {
				fmt.Fprintf(&b, "  stable cluster: %v\n", err)
			}
			if st, err := envoy.Stats(""); err == nil {
				for name, v := range st {
					if v != 0 && (strings.Contains(name, "update_rejected") || strings.Contains(name, "no_healthy") ||
						strings.Contains(name, "connect_fail") || strings.Contains(name, "listener_manager.total_listeners")) {
						fmt.Fprintf(&b, "  Envoy %s: %d\n", name, v)
					}
				}
			}
			var hubSvcs corev1.ServiceList
			if err := sys.Hub.Client.List(ctx, &hubSvcs); err == nil {
				for _, s := range hubSvcs.Items {
					for _, p := range s.Spec.Ports {
						if p.TargetPort.String() == port {
							fmt.Fprintf(&b, "  hub Service %s/%s port %d/%s → %s (labels %v)\n", s.Namespace, s.Name, p.Port, p.Protocol, p.TargetPort.String(), s.Labels)
						}
					}
				}
			}
			lb := &kubelbv1alpha1.LoadBalancer{}
			if err := sys.Hub.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: string(web.UID)}, lb); err == nil {
				fmt.Fprintf(&b, "  stable LoadBalancer status: ports %+v, conditions %+v\n", lb.Status.Service.Ports, lb.Status.Conditions)
			}
			t.Log(b.String())
		}
	}()
	var once bool
	return func() {
		if !once {
			once = true
			close(stop)
		}
		<-done
	}
}
