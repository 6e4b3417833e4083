package faults

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// failoverRequestEvery is the pause between two requests to the stable Service (one
// connection and round trip at a time): at most 100 requests a second.
const failoverRequestEvery = 10 * time.Millisecond

// hubTargetPorts returns the Envoy listener port of every hub Service port in a tenant
// namespace, by "<hub Service>/<port name>": the durable record of the port allocation.
func hubTargetPorts(t *testing.T, c client.Client, namespace string) map[string]int {
	t.Helper()
	var svcs corev1.ServiceList
	if err := c.List(context.Background(), &svcs, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, s := range svcs.Items {
		for _, p := range s.Spec.Ports {
			out[s.Name+"/"+p.Name] = p.TargetPort.IntValue()
		}
	}
	return out
}

// TestLeaderKilled is issue 13's scenario 1: two manager replicas behind the played kubelb
// Service; the leader is SIGKILLed while the tenant keeps creating Services and a stable
// Service carries traffic through the real Envoy. The standby takes over the lease, Services
// created during the takeover get addresses, no allocated port moves, the stable Service
// sees no failed request — Envoy neither modifies nor re-warms its listener, cluster or
// endpoints across the failover —, and the Envoy that was connected to the killed replica
// reconnects through the Service and keeps receiving updates.
func TestLeaderKilled(t *testing.T) {
	ctx := context.Background()
	pair := testenv.StartPair(t)
	sys := framework.StartSystem(t, pair.Hub, framework.Options{Replicated: true})
	a := sys.AddTenant("a", pair.Tenant, 2)

	stable := a.CreateService(framework.LBService{Name: "stable", Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
	stablePods := map[string]bool{}
	for _, b := range a.StartBackends(stable)["http"] {
		stablePods[b.Pod] = true
	}
	// The Envoy starts while the first replica is the only endpoint of the kubelb Service, so
	// its xDS stream is on the replica that is about to be killed.
	envoy := a.StartEnvoy(framework.EnvoyBootstrap)
	a.WaitAddress("stable", 2*time.Minute)
	stablePort := a.ListenerPorts(stable)["http"]
	stableTarget := fmt.Sprintf("127.0.0.1:%d", stablePort)
	framework.WaitServes(t, stableTarget, "a-node-0", "a-node-1")
	for i := range 3 {
		a.CreateService(framework.LBService{Name: fmt.Sprintf("old-%d", i), Ports: []corev1.ServicePort{framework.TCPPort("http", 80), framework.TCPPort("https", 443)}})
		a.WaitAddress(fmt.Sprintf("old-%d", i), 2*time.Minute)
	}

	standby := sys.AddManagerReplica()
	leader := sys.Replicas()[0]
	testsupport.Eventually(t, time.Minute, "exactly the first replica to lead", func() error {
		l, err := leader.IsLeader()
		if err != nil {
			return err
		}
		s, err := standby.IsLeader()
		if err != nil {
			return err
		}
		if !l || s {
			return fmt.Errorf("first replica leads: %v, second: %v", l, s)
		}
		return nil
	})
	framework.WaitEnvoyConnected(t, envoy, 1)
	portsBefore := hubTargetPorts(t, pair.Hub.Client, a.Namespace)
	hubPortsBefore := a.HubServicePorts(stable)
	addressBefore := a.Ingress("stable")
	cxBefore := envoy.Stat(t, "cluster.xds_cluster.upstream_cx_total")

	traffic := framework.StartTraffic(t, stableTarget, failoverRequestEvery, 20000)

	// Write load: the tenant keeps creating Services, one every 250 ms, until told to stop
	// (at most 120).
	var createdMu sync.Mutex
	var created []string
	createdAt := map[string]time.Time{}
	stopWrites, writesDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(writesDone)
		for i := range 120 {
			select {
			case <-stopWrites:
				return
			case <-time.After(250 * time.Millisecond):
			}
			name := fmt.Sprintf("burst-%d", i)
			a.CreateService(framework.LBService{Name: name, Ports: []corev1.ServicePort{framework.TCPPort("http", 8080)}})
			createdMu.Lock()
			created = append(created, name)
			createdAt[name] = time.Now()
			createdMu.Unlock()
		}
	}()
	time.Sleep(time.Second) // let the write load run before the kill (not an assertion)

	// What serves the stable Service just before the kill.
	stableBefore := envoy.ServiceResources(t, stablePort)
	churnBefore := envoy.Counters(t, envoyConfigChurn...)
	statsBefore, err := envoy.Envoy.Stats("^cluster\\." + stableBefore.Cluster.Name + "\\.")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before the kill: versions sent %v, counters %v", envoy.SubscriptionVersions(t), churnBefore)

	killed := time.Now()
	traffic.Phase("takeover")
	leader.Process.Kill() // SIGKILL: no lease is released
	// The takeover (the standby's own leader metric turns 1) and Envoy's reconnection (a new
	// xDS connection, connected again) are watched together, each timed from the kill.
	var takeover, reconnect time.Duration
	testsupport.Eventually(t, time.Minute, "the standby to take over the lease and Envoy to reconnect through the kubelb Service", func() error {
		if takeover == 0 {
			if ok, err := standby.IsLeader(); err == nil && ok {
				takeover = time.Since(killed)
				traffic.Phase("after the takeover")
			}
		}
		if reconnect == 0 {
			cx, err1 := envoy.Envoy.Stat("cluster.xds_cluster.upstream_cx_total")
			state, err2 := envoy.Envoy.Stat("control_plane.connected_state")
			if err1 == nil && err2 == nil && cx > cxBefore && state == 1 {
				reconnect = time.Since(killed)
			}
		}
		if takeover == 0 || reconnect == 0 {
			return fmt.Errorf("standby leads after %s, Envoy reconnected after %s (0: not yet)", takeover, reconnect)
		}
		return nil
	})
	// A few more Services after the takeover, then the write load stops.
	testsupport.Eventually(t, time.Minute, "the write load to go on after the takeover", func() error {
		createdMu.Lock()
		defer createdMu.Unlock()
		after := 0
		for _, at := range createdAt {
			if at.After(killed.Add(takeover)) {
				after++
			}
		}
		if after < 4 {
			return fmt.Errorf("%d Services created after the takeover", after)
		}
		return nil
	})
	close(stopWrites)
	<-writesDone

	duringTakeover := 0
	for _, name := range created {
		if at := createdAt[name]; at.After(killed) && at.Before(killed.Add(takeover)) {
			duringTakeover++
		}
		a.WaitAddress(name, 2*time.Minute)
	}
	if duringTakeover == 0 {
		t.Errorf("no Service was created while the standby took over (%d created in all)", len(created))
	}

	// The new leader's changes reach the Envoy that was on the killed replica.
	late := a.CreateService(framework.LBService{Name: "late", Ports: []corev1.ServicePort{framework.TCPPort("http", 9090)}})
	a.StartBackends(late)
	a.WaitAddress("late", 2*time.Minute)
	framework.WaitServes(t, fmt.Sprintf("127.0.0.1:%d", a.ListenerPorts(late)["http"]), "a-node-0", "a-node-1")

	res := traffic.Stop()
	stableAfter := envoy.ServiceResources(t, stablePort)
	churnAfter := envoy.Counters(t, envoyConfigChurn...)
	statsAfter, err := envoy.Envoy.Stats("^cluster\\." + stableBefore.Cluster.Name + "\\.")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after: versions sent %v, counters %v", envoy.SubscriptionVersions(t), churnAfter)
	t.Logf("requests to the stable Service: %s", res)
	var moved []string
	for name, v := range statsAfter {
		if v != statsBefore[name] && !strings.Contains(name, "upstream_cx") && !strings.Contains(name, "upstream_rq") &&
			!strings.Contains(name, "bytes") && !strings.Contains(name, "upstream_flow") {
			moved = append(moved, fmt.Sprintf("%s %d→%d", name, statsBefore[name], v))
		}
	}
	sort.Strings(moved)
	t.Logf("the stable cluster's stats that moved: %v", moved)
	// Every new cluster got its endpoints when Envoy asked for them: none waited for its
	// initial fetch timeout (internal/xds TestEndpointsWhileClustersGrow), nor was an update
	// rejected.
	stalls, err := envoy.Envoy.Stats("init_fetch_timeout$|update_rejected$")
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range stalls {
		if v != 0 {
			t.Errorf("Envoy's %s is %d", name, v)
		}
	}

	if n := res.FailedTotal(); n > 0 {
		t.Errorf("%d of %d requests to the stable Service failed across the failover: %s", n, res.Requests(), strings.Join(res.Failures, "; "))
		t.Logf("Envoy's log:\n%s", envoy.Tail(200))
	}
	// Every answer came from the stable Service's own backends, through this test's Envoy:
	// nothing else may listen on its port (TestMain).
	for pod, n := range res.Pods {
		if !stablePods[pod] {
			t.Errorf("%d requests to the stable Service were answered by %q, not by its backends %v", n, pod, stablePods)
		}
	}
	if res.OK["takeover"] == 0 {
		t.Error("no request reached the stable Service during the takeover")
	}
	// Envoy took nothing new for the stable Service: neither its listener, nor its cluster,
	// nor its endpoints were modified (a modified listener drains, a modified cluster warms
	// again) — the standby's snapshot served them exactly as the killed leader had.
	for _, r := range []struct {
		what          string
		before, after framework.DumpedResource
	}{
		{"listener", stableBefore.Listener, stableAfter.Listener},
		{"cluster", stableBefore.Cluster, stableAfter.Cluster},
		{"endpoints", stableBefore.Endpoints, stableAfter.Endpoints},
	} {
		if r.before.Config != r.after.Config {
			t.Errorf("the stable Service's %s %s changed across the failover:\nbefore %s\nafter  %s", r.what, r.before.Name, r.before.Config, r.after.Config)
		} else if r.before.LastUpdated != r.after.LastUpdated {
			t.Errorf("Envoy took the stable Service's %s %s again across the failover (last updated %s → %s, version %s → %s)",
				r.what, r.before.Name, r.before.LastUpdated, r.after.LastUpdated, r.before.Version, r.after.Version)
		}
	}
	for _, name := range []string{"listener_manager.listener_modified", "listener_manager.listener_removed",
		"cluster_manager.cluster_modified", "cluster_manager.cluster_removed"} {
		if churnAfter[name] != churnBefore[name] {
			t.Errorf("Envoy's %s went %d → %d across the failover", name, churnBefore[name], churnAfter[name])
		}
	}

	portsAfter := hubTargetPorts(t, pair.Hub.Client, a.Namespace)
	for key, port := range portsBefore {
		if portsAfter[key] != port {
			t.Errorf("hub Service port %s moved across the failover: %d → %d", key, port, portsAfter[key])
		}
	}
	if after := a.ListenerPorts(stable)["http"]; after != stablePort {
		t.Errorf("the stable LoadBalancer's status port moved: %d → %d", stablePort, after)
	}
	if after := a.HubServicePorts(stable); after != hubPortsBefore {
		t.Errorf("the stable hub Service's ports changed: %s → %s", hubPortsBefore, after)
	}
	if after := a.Ingress("stable"); after != addressBefore {
		t.Errorf("the stable Service's address changed: %s → %s", addressBefore, after)
	}
	// Every Service of the tenant has exactly one LoadBalancer: none lost, none doubled.
	var lbs kubelbv1alpha1.LoadBalancerList
	if err := pair.Hub.Client.List(ctx, &lbs, client.InNamespace(a.Namespace)); err != nil {
		t.Fatal(err)
	}
	if want := 1 + 3 + len(created) + 1; len(lbs.Items) != want {
		t.Errorf("%d LoadBalancers in %s, want %d", len(lbs.Items), a.Namespace, want)
	}
	t.Logf("FIGURES leader killed: takeover %s (kill → standby holds the lease), Envoy reconnected %s after the kill, "+
		"%d Services created in all (%d during the takeover), %d of %d requests to the stable Service failed",
		takeover.Round(10*time.Millisecond), reconnect.Round(10*time.Millisecond), len(created), duringTakeover,
		res.FailedTotal(), res.Requests())
}
