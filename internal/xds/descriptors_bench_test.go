package xds

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"
	"google.golang.org/protobuf/types/known/wrapperspb"
	corev1 "k8s.io/api/core/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdstest"
)

// descriptorsListenersEnv lists the listener counts of BenchmarkEnvoyDescriptors, comma
// separated (default "1000,2000,5000").
const descriptorsListenersEnv = "KUBELB_DESCRIPTORS_LISTENERS"

// The loopback addresses of the descriptor benchmarks, apart from every other test's: the
// listeners bind descListenIP; the tenant's "nodes" are descUpIP (a backend answers on each
// NodePort), descRefusedIP (nothing listens: a connect is refused at once) and descSilentIP
// (a listener whose accept queue is full: a connect is never answered and times out).
const (
	descListenIP  = "127.0.87.1"
	descUpIP      = "127.0.87.2"
	descRefusedIP = "127.0.87.3"
	descSilentIP  = "127.0.87.4"
	// descListenPort and descNodePort are the first listener port and NodePort.
	descListenPort = 20000
	descNodePort   = 30000
)

// BenchmarkEnvoyDescriptors counts the descriptors (/proc/<pid>/fd) a real Envoy holds once
// it has applied a tenant of single-port TCP LoadBalancers served by this package's xDS
// server:
//
//   - health=off: L listeners × workers (--concurrency 1, 2) × reuse_port (the listeners'
//     enable_reuse_port forced on, Envoy's default on Linux, or off), no health checks;
//     L=0 is the Envoy's own (admin, xDS, its static listeners, per-worker event loops);
//   - health=up|refused|silent: the smallest L, one worker, the LoadBalancers' own TCP health
//     checks (the cluster's, every 2 s) and the manager's (HDS, every 2 s) on, the one endpoint
//     of each LoadBalancer answering, refusing, or never answering (timeout 1 s); the
//     descriptors are sampled every 2 ms for 6 s.
//
// It reports the figures (fds, fds-per-listener above L=0; with health checks the most and
// least descriptors seen and the checks' share per LoadBalancer; RSS-MiB), never timings. Envoy and the backends are ended by the test's cleanup (Envoy by
// its PID). The figures are in docs/performance.md.
func BenchmarkEnvoyDescriptors(b *testing.B) {
	sizes := []int{1000, 2000, 5000}
	if v := os.Getenv(descriptorsListenersEnv); v != "" {
		sizes = nil
		for _, s := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 || n > 10000 {
				b.Fatalf("%s=%q: want counts from 1 to 10000", descriptorsListenersEnv, v)
			}
			sizes = append(sizes, n)
		}
	}
	base := map[int]int{} // workers → descriptors of an Envoy without listeners
	for _, n := range append([]int{0}, sizes...) {
		for _, workers := range []int{1, 2} {
			for _, reuse := range []bool{true, false} {
				if n == 0 && !reuse {
					continue
				}
				b.Run(fmt.Sprintf("health=off/listeners=%d/workers=%d/reuse_port=%t", n, workers, reuse), func(b *testing.B) {
					lbs := make([]v1alpha1.LoadBalancer, n)
					for i := range lbs {
						lbs[i] = descLB(i, false)
					}
					e := descEnvoy(b, lbs, descRefusedIP, workers, &reuse, descChecks)
					fds := fdCount(b, e.Process.Cmd.Process.Pid)
					if n == 0 {
						base[workers] = fds
					}
					for b.Loop() {
					}
					b.ReportMetric(float64(fds), "fds")
					if n > 0 {
						b.ReportMetric(float64(fds-base[workers])/float64(n), "fds-per-listener")
					}
					b.ReportMetric(rssMiB(b, e.Process.Cmd.Process.Pid), "RSS-MiB")
				})
			}
		}
	}
	n := sizes[0]
	for _, node := range []struct{ name, ip string }{{"up", descUpIP}, {"refused", descRefusedIP}, {"silent", descSilentIP}} {
		b.Run(fmt.Sprintf("health=%s/listeners=%d/workers=1", node.name, n), func(b *testing.B) {
			switch node.ip {
			case descUpIP:
				descBackends(b, n)
			case descSilentIP:
				descSilent(b, n)
			}
			lbs := make([]v1alpha1.LoadBalancer, n)
			for i := range lbs {
				lbs[i] = descLB(i, true)
			}
			e := descEnvoy(b, lbs, node.ip, 1, nil, descChecks)
			// Three rounds of checks (interval 2 s, timeout 1 s), sampled every 2 ms (a
			// round of connects that are refused or answered lasts a few milliseconds).
			pid, most, least := e.Process.Cmd.Process.Pid, 0, math.MaxInt
			for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
				fds := fdCount(b, pid)
				most, least = max(most, fds), min(least, fds)
			}
			for b.Loop() {
			}
			b.ReportMetric(float64(most), "fds-max")
			b.ReportMetric(float64(least), "fds-min")
			// The checks' share: what the checks in flight at once held, per LoadBalancer.
			b.ReportMetric(float64(most-least)/float64(n), "check-fds-max-per-LB")
			b.ReportMetric(rssMiB(b, pid), "RSS-MiB")
		})
	}
}

// tenThousandEnv sets the LoadBalancers of BenchmarkEnvoyTenThousandListeners (default
// 10 000), e.g. 1000 for a quick run.
const tenThousandEnv = "KUBELB_ENVOY_LISTENERS"

// BenchmarkEnvoyTenThousandListeners serves a tenant of 10 000 single-port TCP LoadBalancers
// to one real Envoy with one worker, as the fleet runs it with a CPU request or limit of at
// most one core (envoyfleet.Workers): each LoadBalancer's own health check and the manager's
// (HDS) on at their defaults, its one endpoint answering (a backend per NodePort, in this
// process). Once Envoy has applied every listener, it sends a round trip through 20 of them
// (spread over the tenant, each tried for at most 30 s) and reports the answered ones, the
// descriptors Envoy holds (the most seen over 10 s, sampled every 10 ms, and at the end)
// and its RSS. With one worker per core (2 here) the tenant would need more than the 20 000
// descriptors a process may have on this machine. The figures are in docs/performance.md.
func BenchmarkEnvoyTenThousandListeners(b *testing.B) {
	n := benchSize(b, tenThousandEnv, 10000, 20, 10000)
	descBackends(b, n)
	lbs := make([]v1alpha1.LoadBalancer, n)
	for i := range lbs {
		lbs[i] = newLB(fmt.Sprintf("lb-%05d", i)).port(corev1.ProtocolTCP, 80, descNodePort+i, descListenPort+i).LoadBalancer
	}
	start := time.Now()
	e := descEnvoy(b, lbs, descUpIP, 1, nil, DefaultHealthChecking())
	applied := time.Since(start)
	pid := e.Process.Cmd.Process.Pid
	answered := 0
	for k := range 20 {
		addr := net.JoinHostPort(descListenIP, strconv.Itoa(descListenPort+k*n/20))
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			r, err := testsupport.TCPRoundTrip(addr, "hello")
			if err == nil && r.Node == "up" && r.Pod == strconv.Itoa(k*n/20) {
				answered++
				break
			}
			if time.Now().After(end) {
				b.Errorf("listener %s: no answer within 30 s: %v %+v", addr, err, r)
				break
			}
		}
	}
	most := 0
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		most = max(most, fdCount(b, pid))
	}
	for b.Loop() {
	}
	b.ReportMetric(float64(answered), "answered-of-20")
	b.ReportMetric(float64(most), "fds-max")
	b.ReportMetric(float64(fdCount(b, pid)), "fds")
	b.ReportMetric(rssMiB(b, pid), "RSS-MiB")
	b.ReportMetric(applied.Seconds(), "applied-s")
}

// descLB is LoadBalancer i: one TCP port, listener port descListenPort+i, NodePort
// descNodePort+i; its own health check every 2 s (timeout 1 s) when health is set, off
// otherwise.
func descLB(i int, health bool) v1alpha1.LoadBalancer {
	lb := newLB(fmt.Sprintf("lb-%05d", i)).port(corev1.ProtocolTCP, 80, descNodePort+i, descListenPort+i)
	if !health {
		return lb.annotate(v1alpha1.AnnotationHealthCheckDisable, "true").LoadBalancer
	}
	return lb.annotate(v1alpha1.AnnotationHealthCheckInterval, "2s").annotate(v1alpha1.AnnotationHealthCheckTimeout, "1s").LoadBalancer
}

// descChecks are the manager's health checks (HDS) of BenchmarkEnvoyDescriptors: every 2 s.
var descChecks = HealthChecking{Interval: 2 * time.Second, Timeout: time.Second, UnhealthyThreshold: 2, HealthyThreshold: 1,
	ReportInterval: 2 * time.Second}

// descEnvoy serves lbs (their one node at nodeIP) to a new Envoy with workers workers and
// returns it once it has applied every listener. reusePort, when set, forces the listeners'
// enable_reuse_port; nil leaves what the translator sets. checks are the manager's health
// checks (HDS).
func descEnvoy(b *testing.B, lbs []v1alpha1.LoadBalancer, nodeIP string, workers int, reusePort *bool, checks HealthChecking) *testsupport.Envoy {
	b.Helper()
	const tenant = "tenant-descriptors"
	in := translate.Input{Tenant: tenant, LoadBalancers: lbs, Addresses: addresses(nodeIP), Policy: loopbackAllowed,
		Options: translate.Options{ListenerAddress: descListenIP}}
	in.HubServices = translatetest.HubServicesFromStatus(in.LoadBalancers)
	_, problems, out, err := translatetest.Pipeline(in)
	if err != nil || len(problems) > 0 {
		b.Fatalf("translating: %v %v", err, problems)
	}
	if reusePort != nil {
		for _, r := range out[resource.ListenerType] {
			r.(*listenerv3.Listener).EnableReusePort = wrapperspb.Bool(*reusePort)
		}
	}
	certs := xdstest.New(b)
	srv := NewServer(logr.Discard(), certs.ServerTLS())
	srv.SetHealthChecking(checks)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	b.Cleanup(func() { cancel(); <-done })
	if _, err := srv.SetTenant(ctx, tenant, out); err != nil {
		b.Fatal(err)
	}
	boot := certs.Bootstrap(b, bootstrap.Options{Tenant: tenant, XDSAddress: lis.Addr().String(), AdminAddress: "127.0.0.1:0"})
	e := testsupport.StartEnvoy(b, "descriptors", boot, testsupport.EnvoyOptions{Node: "descriptors", Concurrency: workers, LogLevel: "warning"})
	waitListeners(b, e, len(lbs), 5*time.Minute)
	time.Sleep(time.Second) // the workers' sockets follow the main thread's
	return e
}

// waitListeners waits until Envoy has n listeners of the tenant active (its static ones
// apart) and none warming.
func waitListeners(b *testing.B, e *testsupport.Envoy, n int, timeout time.Duration) {
	b.Helper()
	static := -1
	for end := time.Now().Add(timeout); ; time.Sleep(200 * time.Millisecond) {
		if e.Exited() {
			b.Fatalf("Envoy exited:\n%s", e.Tail(20))
		}
		if time.Now().After(end) {
			b.Fatalf("Envoy did not apply %d listeners within %s", n, timeout)
		}
		s, err := e.Stats("listener_manager.total_listeners_")
		if err != nil {
			continue
		}
		if static < 0 {
			if static, err = staticListeners(e); err != nil {
				continue // Envoy's main thread is busy applying: ask again
			}
		}
		if s["listener_manager.total_listeners_active"] == int64(n+static) && s["listener_manager.total_listeners_warming"] == 0 {
			return
		}
	}
}

// staticListeners counts the bootstrap's listeners of e.
func staticListeners(e *testsupport.Envoy) (int, error) {
	var dump struct {
		Configs []struct {
			StaticListeners []any `json:"static_listeners"`
		} `json:"configs"`
	}
	if err := e.ConfigDump("?resource=static_listeners", &dump); err != nil {
		return -1, err
	}
	n := 0
	for _, c := range dump.Configs {
		n += len(c.StaticListeners)
	}
	return n, nil
}

// descBackends answers on descUpIP at the NodePorts of LoadBalancers 0 to n-1.
func descBackends(b *testing.B, n int) {
	b.Helper()
	for i := range n {
		testsupport.StartTCPBackend(b, net.JoinHostPort(descUpIP, strconv.Itoa(descNodePort+i)), testsupport.Identity{Node: "up", Pod: strconv.Itoa(i)})
	}
}

// descSilent listens on descSilentIP at the NodePorts of LoadBalancers 0 to n-1 with a
// backlog of 0, never accepts, and fills each accept queue with a connection of its own:
// the kernel then drops every SYN, and Envoy's connects time out.
func descSilent(b *testing.B, n int) {
	b.Helper()
	for i := range n {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { syscall.Close(fd) })
		addr := &syscall.SockaddrInet4{Port: descNodePort + i, Addr: [4]byte{127, 0, 87, 4}}
		if err := syscall.Bind(fd, addr); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Listen(fd, 0); err != nil {
			b.Fatal(err)
		}
		c, err := net.DialTimeout("tcp", net.JoinHostPort(descSilentIP, strconv.Itoa(descNodePort+i)), time.Second)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
	}
}

// fdCount is the number of descriptors process pid holds.
func fdCount(t testing.TB, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// rssMiB is the resident memory of process pid (VmRSS), in MiB.
func rssMiB(t testing.TB, pid int) float64 {
	t.Helper()
	return statusMiB(t, fmt.Sprintf("/proc/%d/status", pid), "VmRSS:")
}
