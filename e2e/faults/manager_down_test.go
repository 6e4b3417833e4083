package faults

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// managerDownFor is how long the manager stays down (issue 13, scenario 2).
const managerDownFor = 60 * time.Second

// managerDownRequestEvery bounds the request rate through Envoy while the manager is down
// (one connection and round trip at a time, then this pause: at most 20 requests a second).
const managerDownRequestEvery = 50 * time.Millisecond

// managerLease is the manager's leader election lease in framework.ManagerNamespace
// (cmd/kubelb leaderElectionID).
const managerLease = "kubelb-manager.kubelb.k8c.io"

// envoyConfigChurn are Envoy's counters of real listener and cluster changes: a re-sent,
// unchanged configuration must move none of them.
var envoyConfigChurn = []string{
	"listener_manager.listener_added", "listener_manager.listener_modified", "listener_manager.listener_removed",
	"cluster_manager.cluster_added", "cluster_manager.cluster_modified", "cluster_manager.cluster_removed",
}

// TestManagerDownFor60s is issue 13's scenario 2: the manager is killed (SIGKILL: no graceful
// close of the xDS stream, no lease released, nothing flushed, the harder case) and stays
// down for 60 s while requests flow through the tenant's Envoy, which keeps serving its last
// configuration without a single failed request. The manager comes back, Envoy reconnects,
// the new manager re-sends every type at the same content-hashed versions (Envoy's
// *.version_text, the versions of the updates it accepted, are unchanged) and Envoy takes it
// as a no-op: the version_info of its config dump and its listener/cluster change counters
// are unchanged, and so are the LoadBalancer's ports and the tenant Service's address.
func TestManagerDownFor60s(t *testing.T) {
	pair := testenv.StartPair(t)
	sys := framework.StartSystem(t, pair.Hub, framework.Options{})
	a := sys.AddTenant("a", pair.Tenant, 2)

	web := a.CreateService(framework.LBService{Name: "web", Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
	a.WaitAddress("web", 2*time.Minute)
	a.StartBackends(web)
	envoy := a.StartEnvoy(framework.EnvoyBootstrap)
	before := a.Footprint(web)
	target := fmt.Sprintf("127.0.0.1:%d", before.Listener("http"))
	framework.WaitServes(t, target, "a-node-0", "a-node-1")
	framework.WaitEnvoyConnected(t, envoy, 1)

	oldLeader := sys.Hub.WaitLeaseHolder(t, framework.ManagerNamespace, managerLease, time.Minute)
	versionsBefore := envoy.XDSVersions(t)
	sentBefore := envoy.SubscriptionVersions(t)
	churnBefore := envoy.Counters(t, envoyConfigChurn...)
	updatesBefore := envoy.Counters(t, "cluster_manager.cds.update_success", "listener_manager.lds.update_success")
	t.Logf("before: versions sent %v, held %v, counters %v", sentBefore, versionsBefore, churnBefore)

	traffic := framework.StartTraffic(t, target, managerDownRequestEvery, 6000) // at least 5 minutes' worth

	killedAt := time.Now()
	traffic.Phase("manager down")
	sys.Manager.Kill()
	// Envoy notices: its xDS stream is gone.
	framework.WaitEnvoyConnected(t, envoy, 0)
	t.Logf("Envoy saw the xDS stream drop %s after the SIGKILL", time.Since(killedAt).Round(time.Millisecond))
	// The scenario's length, not an assertion: requests flow all along.
	time.Sleep(time.Until(killedAt.Add(managerDownFor)))
	traffic.Phase("manager back")

	t.Logf("manager restarted %s after the kill", time.Since(killedAt).Round(time.Millisecond))
	restarted := time.Now()
	sys.StartManager()
	ready := time.Since(restarted)
	framework.WaitEnvoyConnected(t, envoy, 1)
	reconnected := time.Since(restarted)
	t.Logf("manager ready %s after its restart; Envoy reconnected %s after it", ready.Round(time.Millisecond), reconnected.Round(time.Millisecond))

	// Settle: the new manager re-sent clusters and listeners on the new stream and Envoy
	// accepted them, and the new manager has taken the lease (after the killed one's expired)
	// and reconciled the tenant's LoadBalancer as leader.
	testsupport.Eventually(t, time.Minute, "Envoy to accept the re-sent clusters and listeners", func() error {
		now := envoy.Counters(t, "cluster_manager.cds.update_success", "listener_manager.lds.update_success")
		for name, v := range now {
			if v <= updatesBefore[name] {
				return fmt.Errorf("%s still %d", name, v)
			}
		}
		return nil
	})
	testsupport.Eventually(t, time.Minute, "the restarted manager to lead", func() error {
		if h := sys.Hub.LeaseHolder(t, framework.ManagerNamespace, managerLease); h == oldLeader || h == "" {
			return fmt.Errorf("lease held by %q", h)
		}
		return nil
	})
	testsupport.Eventually(t, time.Minute, "the restarted manager to reconcile the LoadBalancer", func() error {
		n, err := framework.MetricSum(sys.MetricsAddr, "kubelb_manager_loadbalancer_reconcile_total", `namespace="`+a.Namespace+`"`)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("no LoadBalancer reconcile in %s yet", a.Namespace)
		}
		return nil
	})
	a.WaitProgrammed(web, time.Minute)
	res := traffic.Stop()

	t.Logf("requests (the manager down for %s, then back): %s", managerDownFor, res)
	if res.OK["manager down"] == 0 {
		t.Errorf("no request was sent while the manager was down")
	}
	if n := res.FailedTotal(); n > 0 {
		t.Errorf("%d requests failed: %s", n, strings.Join(res.Failures, "; "))
		if st, err := envoy.Stats(""); err == nil {
			for name, v := range st {
				if v != 0 && (strings.HasPrefix(name, "cluster.") && !strings.HasPrefix(name, "cluster.xds") || strings.HasPrefix(name, "tcp.")) {
					t.Logf("Envoy %s: %d", name, v)
				}
			}
		}
	}

	versionsAfter := envoy.XDSVersions(t)
	sentAfter := envoy.SubscriptionVersions(t)
	churnAfter := envoy.Counters(t, envoyConfigChurn...)
	t.Logf("after: versions sent %v, held %v, counters %v", sentAfter, versionsAfter, churnAfter)
	// The restarted manager re-sent every type at the versions the killed one had sent.
	if !maps.Equal(sentBefore, sentAfter) {
		t.Errorf("the versions the manager sent changed across the restart:\nbefore %v\nafter  %v", sentBefore, sentAfter)
	}
	if !maps.Equal(versionsBefore, versionsAfter) {
		t.Errorf("the xDS versions of Envoy's configuration changed across the restart:\nbefore %v\nafter  %v", versionsBefore, versionsAfter)
	}
	for _, name := range envoyConfigChurn {
		if churnAfter[name] != churnBefore[name] {
			t.Errorf("Envoy's %s went %d → %d across the restart", name, churnBefore[name], churnAfter[name])
		}
	}
	a.ExpectFootprint(t, before)
	framework.WaitServes(t, target, "a-node-0", "a-node-1")
}
