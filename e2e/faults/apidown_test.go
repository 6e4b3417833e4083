package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// The hub API server cuts of scenario 3: the first as long as the issue says; the second
// past the HTTP/2 health check of every client (30 s idle, then a 15 s ping), so that the
// clients give up their frozen connections during the cut and dial into the black hole again.
// Both are longer than the manager's lease renew deadline (controller-runtime's 10 s; cmd/kubelb
// keeps the defaults: 15 s lease, 10 s renew deadline, 2 s retry period).
var hubCuts = []time.Duration{30 * time.Second, 50 * time.Second}

// restartDelay is the kubelet's first CrashLoopBackOff step: a container that exited is
// started again after it.
const restartDelay = 10 * time.Second

// cutRequestEvery bounds the request rate through Envoy during the cuts (at most 20 a second).
const cutRequestEvery = 50 * time.Millisecond

// envoyRemovals are Envoy's counters of listeners and clusters taken away: an empty or partial
// snapshot would move them for Services that still exist.
var envoyRemovals = []string{"listener_manager.listener_removed", "cluster_manager.cluster_removed"}

// ccmConnected is the ccm's gauge of its connection to the hub.
const ccmConnected = "kubelb_ccm_kubelb_cluster_connected"

// TestHubAPIServerUnreachable is issue 13's scenario 3. The hub API server becomes a black hole
// (framework.APIProxy) for the manager and the ccm, twice (hubCuts), while tenant Services are
// created, changed (a port added) and deleted. During each cut the ccm keeps the tenant status
// it had, retries with back-off (its log lines and the connections it opens stay few) and
// reports kubelb_ccm_kubelb_cluster_connected 0; the manager cannot renew its lease, exits
// cleanly (exit code 1, "leader election lost", no panic) and is restarted by the played
// kubelet; it serves xDS again only once its caches have synced, never an empty or partial
// snapshot: a stable Service's traffic through Envoy sees zero failed requests, and Envoy
// removes exactly the listeners and clusters of the deleted Services. After each cut the
// gauge is 1 again and the tenant Services, the hub LoadBalancers and the hub Services match
// as sets, every Service addressed.
func TestHubAPIServerUnreachable(t *testing.T) {
	pair := testenv.StartPair(t)
	hubPath := framework.StartAPIProxy(t, pair.Hub)
	sys := framework.StartSystem(t, pair.Hub, framework.Options{ManagerKubeconfig: hubPath.Kubeconfig(t, pair.Hub.Kubeconfig)})
	a := sys.AddTenantWith("a", pair.Tenant, framework.TenantOptions{Nodes: 2, HubServer: hubPath.URL()})
	manager := framework.Supervise(t, sys.Manager, restartDelay)
	defer manager.Stop()

	web := a.CreateService(framework.LBService{Name: "web", Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
	for i := range hubCuts {
		for _, name := range []string{"keep", "change", "gone"} {
			a.CreateService(framework.LBService{Name: fmt.Sprintf("%s-%d", name, i+1), Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
		}
	}
	a.StartBackends(web)
	envoy := a.StartEnvoy(framework.EnvoyBootstrap)
	target := fmt.Sprintf("127.0.0.1:%d", a.ListenerPorts(web)["http"])
	framework.WaitServes(t, target, "a-node-0", "a-node-1")
	framework.WaitEnvoyConnected(t, envoy, 1)
	waitConverged(t, sys, a)
	waitMetric(t, a.MetricsAddr, ccmConnected, 1, time.Minute)
	removedBefore := envoy.Counters(t, envoyRemovals...)
	before := a.Footprint(web)

	traffic := framework.StartTraffic(t, target, cutRequestEvery, 20*60*5) // 5 minutes' worth
	deleted, exitsInCuts := 0, 0
	for i, cut := range hubCuts {
		n := i + 1
		statusBefore := tenantStatuses(t, a)
		ccmLog := lineCount(a.CCM.Output())
		exits := len(manager.Exits())

		traffic.Phase(fmt.Sprintf("hub cut %d (%s)", n, cut))
		cutAt := time.Now()
		hubPath.Cut()
		// The tenant changes while the hub is away.
		a.CreateService(framework.LBService{Name: fmt.Sprintf("new-%d", n), Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
		changeService(t, a, fmt.Sprintf("change-%d", n), func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, framework.TCPPort("extra", 81))
		})
		deleteService(t, a, fmt.Sprintf("gone-%d", n))
		deleted++

		zeroAt := waitMetric(t, a.MetricsAddr, ccmConnected, 0, cut)
		t.Logf("cut %d: the ccm reported connected=0 %s into the cut", n, zeroAt.Sub(cutAt).Round(100*time.Millisecond))
		testsupport.Eventually(t, time.Until(cutAt.Add(cut)), "the manager to exit on its lost lease", func() error {
			if len(manager.Exits()) == exits {
				return fmt.Errorf("still running")
			}
			return nil
		})
		if exit := manager.Exits()[exits]; !strings.Contains(exit.Tail, "leader election lost") {
			t.Errorf("cut %d: the manager did not say it lost the leader election; its last lines:\n%s", n, exit.Tail)
		}

		time.Sleep(time.Until(cutAt.Add(cut))) // the cut's length, not an assertion
		// The ccm kept the status it had: nothing is written to the tenant while the hub is away.
		statusDuring := tenantStatuses(t, a)
		for name, st := range statusBefore {
			if strings.HasPrefix(name, "gone-") {
				continue
			}
			if statusDuring[name] != st {
				t.Errorf("cut %d: the status of Service %s changed during the cut: %s → %s", n, name, st, statusDuring[name])
			}
		}
		ccmLinesDuring := lineCount(a.CCM.Output()) - ccmLog
		stats := hubPath.Restore()
		restoredAt := time.Now()
		traffic.Phase(fmt.Sprintf("after cut %d", n))
		t.Logf("cut %d: %s; the ccm logged %d lines during it", n, stats, ccmLinesDuring)
		// Retries back off: a hot loop would log thousands of lines and open a connection
		// per attempt.
		if ccmLinesDuring > 100 {
			t.Errorf("cut %d: the ccm logged %d lines in %s, not a back-off", n, ccmLinesDuring, cut)
		}
		if stats.Connections > 60 {
			t.Errorf("cut %d: the hub path got %d new connections in %s, not a back-off", n, stats.Connections, cut)
		}

		// Every exit was clean: the leader on its lost lease, and a manager started while
		// the hub was still away when it could not read the API server's resources.
		exitsInCuts = len(manager.Exits())
		for _, e := range manager.Exits()[exits:exitsInCuts] {
			t.Logf("cut %d: %s exited %s into the cut, code %d: %s", n, e.Process, e.At.Sub(cutAt).Round(100*time.Millisecond), e.Code, lastLines(e.Tail, 1))
			checkCleanExit(t, e)
		}

		oneAt := waitMetric(t, a.MetricsAddr, ccmConnected, 1, 2*time.Minute)
		// Whichever run of the manager is up by now (one may still exit and be restarted).
		testsupport.Eventually(t, 2*time.Minute, "the restarted manager to be ready", func() error {
			_, err := testsupport.HTTPGetOK("http://"+sys.ProbeAddr+"/readyz", 2*time.Second)
			return err
		})
		readyAt := time.Now()
		framework.WaitEnvoyConnected(t, envoy, 1)
		envoyAt := time.Now()
		waitConverged(t, sys, a)
		t.Logf("after cut %d: ccm connected=1 after %s; the restarted manager ready after %s, Envoy reconnected after %s; converged after %s (restarts so far %d)",
			n, oneAt.Sub(restoredAt).Round(100*time.Millisecond), readyAt.Sub(restoredAt).Round(100*time.Millisecond),
			envoyAt.Sub(restoredAt).Round(100*time.Millisecond), time.Since(restoredAt).Round(100*time.Millisecond), manager.Restarts())
		// Envoy removed the deleted Service's listener and cluster, and nothing else.
		testsupport.Eventually(t, time.Minute, "Envoy to remove the deleted Services' listeners and clusters", func() error {
			now := envoy.Counters(t, envoyRemovals...)
			for _, name := range envoyRemovals {
				if d := now[name] - removedBefore[name]; d != int64(deleted) {
					return fmt.Errorf("%s moved by %d, want %d", name, d, deleted)
				}
			}
			return nil
		})
	}
	res := traffic.Stop()
	t.Logf("requests: %s", res)
	if all := manager.Exits(); len(all) > 0 {
		for _, e := range all[exitsInCuts:] {
			t.Logf("after the cuts: %s exited, code %d: %s", e.Process, e.Code, lastLines(e.Tail, 1))
			checkCleanExit(t, e)
		}
	}
	for i := range hubCuts {
		if res.OK[fmt.Sprintf("hub cut %d (%s)", i+1, hubCuts[i])] == 0 {
			t.Errorf("no request was answered during cut %d", i+1)
		}
	}
	if n := res.FailedTotal(); n > 0 {
		t.Errorf("%d requests failed: %s", n, strings.Join(res.Failures, "; "))
	}
	now := envoy.Counters(t, envoyRemovals...)
	for _, name := range envoyRemovals {
		if d := now[name] - removedBefore[name]; d != int64(deleted) {
			t.Errorf("Envoy's %s moved by %d; %d Services were deleted", name, d, deleted)
		}
	}
	// The stable Service kept its listener port, hub Service ports and address.
	a.ExpectFootprint(t, before)
	framework.WaitServes(t, target, "a-node-0", "a-node-1")
}

// checkCleanExit checks that a process ended as documented (docs/operations.md): exit code 1
// after one last line saying why ("kubelb: leader election lost", "ccm: ..."), no panic.
func checkCleanExit(t *testing.T, e framework.Exit) {
	t.Helper()
	if e.Code != 1 {
		t.Errorf("%s exited with code %d, want 1", e.Process, e.Code)
	}
	last := lastLines(e.Tail, 1)
	if prog, _, _ := strings.Cut(e.Process, "-"); !strings.HasPrefix(last, prog+": ") {
		t.Errorf("%s did not end with a line saying why; its last lines:\n%s", e.Process, e.Tail)
	}
	if strings.Contains(e.Tail, "panic") || strings.Contains(e.Tail, "goroutine ") {
		t.Errorf("%s panicked:\n%s", e.Process, e.Tail)
	}
}

// waitMetric waits until the gauge at addr is want and returns when it saw it.
func waitMetric(t *testing.T, addr, metric string, want float64, timeout time.Duration) time.Time {
	t.Helper()
	testsupport.Eventually(t, timeout, fmt.Sprintf("%s to be %v", metric, want), func() error {
		v, err := framework.MetricSum(addr, metric)
		if err != nil {
			return err
		}
		if v != want {
			return fmt.Errorf("%s %v", metric, v)
		}
		return nil
	})
	return time.Now()
}

// tenantStatuses returns the status.loadBalancer of every LoadBalancer Service of the tenant's
// default namespace, by name, as text.
func tenantStatuses(t *testing.T, tn *framework.Tenant) map[string]string {
	t.Helper()
	var list corev1.ServiceList
	if err := tn.Cluster.Client.List(context.Background(), &list, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range list.Items {
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
			b, err := json.Marshal(s.Status.LoadBalancer.Ingress)
			if err != nil {
				t.Fatal(err)
			}
			out[s.Name] = string(b)
		}
	}
	return out
}

// changeService updates a tenant Service (directly on its API server).
func changeService(t *testing.T, tn *framework.Tenant, name string, mutate func(*corev1.Service)) {
	t.Helper()
	ctx := context.Background()
	testsupport.Eventually(t, time.Minute, "changing Service "+name, func() error {
		svc := &corev1.Service{}
		if err := tn.Cluster.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, svc); err != nil {
			return err
		}
		mutate(svc)
		return tn.Cluster.Client.Update(ctx, svc)
	})
}

// deleteService deletes a tenant Service and waits until it is gone (the ccm's finalizer is
// removed only once its hub LoadBalancer is; the test waits for that separately).
func deleteService(t *testing.T, tn *framework.Tenant, name string) {
	t.Helper()
	svc := &corev1.Service{}
	if err := tn.Cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, svc); err != nil {
		t.Fatal(err)
	}
	if err := tn.Cluster.Client.Delete(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
}

// lbPorts renders ports as a sorted set of "port/protocol".
func lbPorts[P any](ports []P, render func(P) string) string {
	var out []string
	for _, p := range ports {
		out = append(out, render(p))
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// objectSets compares the tenant's LoadBalancer Services with the hub: one LoadBalancer and
// one hub Service per tenant Service (by UID), with the same ports, every tenant Service
// addressed and no Service being deleted; nothing on the hub for a Service that is gone.
func objectSets(t *testing.T, sys *framework.System, tn *framework.Tenant) error {
	ctx := context.Background()
	var svcs corev1.ServiceList
	if err := tn.Cluster.Client.List(ctx, &svcs, client.InNamespace("default")); err != nil {
		return err
	}
	want := map[string]string{} // UID → ports
	names := map[string]string{}
	for _, s := range svcs.Items {
		if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		if s.DeletionTimestamp != nil {
			return fmt.Errorf("tenant Service %s is still being deleted", s.Name)
		}
		if len(s.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("tenant Service %s has no address", s.Name)
		}
		want[string(s.UID)] = lbPorts(s.Spec.Ports, func(p corev1.ServicePort) string { return fmt.Sprintf("%d/%s", p.Port, p.Protocol) })
		names[string(s.UID)] = s.Name
	}
	var lbs kubelbv1alpha1.LoadBalancerList
	if err := sys.Hub.Client.List(ctx, &lbs, client.InNamespace(tn.Namespace)); err != nil {
		return err
	}
	gotLB := map[string]string{}
	for _, lb := range lbs.Items {
		gotLB[lb.Name] = lbPorts(lb.Spec.Ports, func(p kubelbv1alpha1.LoadBalancerPort) string { return fmt.Sprintf("%d/%s", p.Port, p.Protocol) })
	}
	var hubSvcs corev1.ServiceList
	if err := sys.Hub.Client.List(ctx, &hubSvcs, client.InNamespace(tn.Namespace), client.HasLabels{kubelbv1alpha1.LabelLoadBalancerName}); err != nil {
		return err
	}
	gotSvc := map[string]string{}
	for _, s := range hubSvcs.Items {
		uid := s.Labels[kubelbv1alpha1.LabelLoadBalancerName]
		if _, dup := gotSvc[uid]; dup {
			return fmt.Errorf("two hub Services for LoadBalancer %s", uid)
		}
		gotSvc[uid] = lbPorts(s.Spec.Ports, func(p corev1.ServicePort) string { return fmt.Sprintf("%d/%s", p.Port, p.Protocol) })
	}
	if !maps.Equal(want, gotLB) {
		return fmt.Errorf("tenant Services %v (%v) ≠ hub LoadBalancers %v", want, names, gotLB)
	}
	if !maps.Equal(want, gotSvc) {
		return fmt.Errorf("tenant Services %v (%v) ≠ hub Services %v", want, names, gotSvc)
	}
	return nil
}

// waitConverged waits until objectSets agree.
func waitConverged(t *testing.T, sys *framework.System, tn *framework.Tenant) {
	t.Helper()
	testsupport.Eventually(t, 2*time.Minute, "the tenant Services and the hub objects to match", func() error {
		return objectSets(t, sys, tn)
	})
}

func lineCount(s string) int { return strings.Count(s, "\n") }

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
