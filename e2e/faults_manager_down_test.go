package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
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

	web := a.CreateService(framework.LBService{Name: "web", Ports: []corev1.ServicePort{tcpPort("http", 80)}})
	a.WaitAddress("web", addressTimeout)
	a.StartBackends(web)
	envoy := a.StartEnvoy(framework.EnvoyBootstrap)
	portsBefore := a.ListenerPorts(web)
	target := fmt.Sprintf("127.0.0.1:%d", portsBefore["http"])
	waitServes(t, target, "a-node-0", "a-node-1")
	waitConnected(t, envoy, 1)

	oldLeader := sys.Hub.WaitLeaseHolder(t, framework.ManagerNamespace, managerLease, time.Minute)
	addressBefore := tenantIngress(t, pair.Tenant.Client, "web")
	hubPortsBefore := hubServicePorts(t, sys.Hub.Client, a.Namespace, web)
	versionsBefore := envoy.XDSVersions(t)
	sentBefore := envoy.SubscriptionVersions(t)
	churnBefore := envoy.Counters(t, envoyConfigChurn...)
	updatesBefore := envoy.Counters(t, "cluster_manager.cds.update_success", "listener_manager.lds.update_success")
	t.Logf("before: versions sent %v, held %v, counters %v", sentBefore, versionsBefore, churnBefore)

	var down atomic.Bool
	var failedDown, okDown, failedUp, okUp atomic.Int64
	var killed atomic.Value // time.Time of the SIGKILL
	killed.Store(time.Now())
	failures := make(chan string, 6000) // when and how each failed request failed
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		// Bounded: stops when told, or after 6000 requests (at least 5 minutes).
		for i := 0; i < 6000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			isDown := down.Load()
			_, err := testsupport.TCPRoundTrip(target, "manager-down")
			switch {
			case err != nil && isDown:
				failedDown.Add(1)
			case err != nil:
				failedUp.Add(1)
			case isDown:
				okDown.Add(1)
			default:
				okUp.Add(1)
			}
			if err != nil {
				failures <- fmt.Sprintf("%s after the kill: %v", time.Since(killed.Load().(time.Time)).Round(time.Millisecond), err)
			}
			time.Sleep(managerDownRequestEvery)
		}
	}()
	stopTraffic := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}
	defer stopTraffic()

	down.Store(true)
	killedAt := time.Now()
	killed.Store(killedAt)
	sys.Manager.Kill()
	// Envoy notices: its xDS stream is gone.
	waitConnected(t, envoy, 0)
	t.Logf("Envoy saw the xDS stream drop %s after the SIGKILL", time.Since(killedAt).Round(time.Millisecond))
	// The scenario's length, not an assertion: requests flow all along.
	time.Sleep(time.Until(killedAt.Add(managerDownFor)))
	down.Store(false)

	t.Logf("manager restarted %s after the kill", time.Since(killedAt).Round(time.Millisecond))
	restarted := time.Now()
	sys.StartManager()
	ready := time.Since(restarted)
	waitConnected(t, envoy, 1)
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
		n, err := loadBalancerReconciles(sys.MetricsAddr, a.Namespace)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("no LoadBalancer reconcile in %s yet", a.Namespace)
		}
		return nil
	})
	waitProgrammed(t, sys, a, web)
	stopTraffic()

	t.Logf("requests while the manager was down %s: %d ok, %d failed; after its return: %d ok, %d failed",
		managerDownFor, okDown.Load(), failedDown.Load(), okUp.Load(), failedUp.Load())
	if okDown.Load() == 0 {
		t.Errorf("no request was sent while the manager was down")
	}
	if n := failedDown.Load() + failedUp.Load(); n > 0 {
		close(failures)
		var how []string
		for f := range failures {
			how = append(how, f)
		}
		t.Errorf("%d requests failed (%d while the manager was down): %s", n, failedDown.Load(), strings.Join(how, "; "))
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
	if after := a.ListenerPorts(web); !maps.Equal(after, portsBefore) {
		t.Errorf("the LoadBalancer's listener ports changed: %v → %v", portsBefore, after)
	}
	if after := hubServicePorts(t, sys.Hub.Client, a.Namespace, web); after != hubPortsBefore {
		t.Errorf("the hub Service's ports changed: %s → %s", hubPortsBefore, after)
	}
	if after := tenantIngress(t, pair.Tenant.Client, "web"); after != addressBefore {
		t.Errorf("the tenant Service's address changed: %s → %s", addressBefore, after)
	}
	waitServes(t, target, "a-node-0", "a-node-1")
}

// waitConnected waits until Envoy's control_plane.connected_state is want (1: its xDS stream
// is up, 0: it is not).
func waitConnected(t *testing.T, envoy *framework.Envoy, want int64) {
	t.Helper()
	testsupport.Eventually(t, 2*time.Minute, fmt.Sprintf("Envoy's control_plane.connected_state to be %d", want), func() error {
		v, err := envoy.Envoy.Stat("control_plane.connected_state")
		if err != nil {
			return err
		}
		if v != want {
			return fmt.Errorf("connected_state %d", v)
		}
		return nil
	})
}

// waitProgrammed waits until the LoadBalancer of svc is Programmed (the leader writes it
// after reconciling; a reconcile that found something to fix would show it here).
func waitProgrammed(t *testing.T, sys *framework.System, tn *framework.Tenant, svc *corev1.Service) {
	t.Helper()
	testsupport.Eventually(t, time.Minute, "the LoadBalancer to be Programmed after the restart", func() error {
		lb := &kubelbv1alpha1.LoadBalancer{}
		if err := sys.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: tn.Namespace, Name: string(svc.UID)}, lb); err != nil {
			return err
		}
		for _, c := range lb.Status.Conditions {
			if c.Type == "Programmed" {
				if c.Status != "True" {
					return fmt.Errorf("Programmed %s: %s", c.Status, c.Message)
				}
				return nil
			}
		}
		return fmt.Errorf("no Programmed condition")
	})
}

// tenantIngress returns the tenant Service's status.loadBalancer.ingress, as text.
func tenantIngress(t *testing.T, c client.Client, name string) string {
	t.Helper()
	svc := &corev1.Service{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, svc); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(svc.Status.LoadBalancer.Ingress)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hubServicePorts returns the ports of the tenant Service's hub Service (port, targetPort =
// Envoy listener port, nodePort), as text.
func hubServicePorts(t *testing.T, c client.Client, namespace string, svc *corev1.Service) string {
	t.Helper()
	var list corev1.ServiceList
	if err := c.List(context.Background(), &list, client.InNamespace(namespace),
		client.MatchingLabels{kubelbv1alpha1.LabelLoadBalancerName: string(svc.UID)}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d hub Services for %s", len(list.Items), svc.Name)
	}
	var out []string
	for _, p := range list.Items[0].Spec.Ports {
		out = append(out, fmt.Sprintf("%s %d→%s node %d", p.Name, p.Port, p.TargetPort.String(), p.NodePort))
	}
	return strings.Join(out, ", ")
}

// loadBalancerReconciles sums the manager's kubelb_manager_loadbalancer_reconcile_total of a
// tenant namespace.
func loadBalancerReconciles(metricsAddr, namespace string) (float64, error) {
	body, err := testsupport.HTTPGetOK("http://"+metricsAddr+"/metrics", 5*time.Second)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(name, "kubelb_manager_loadbalancer_reconcile_total{") ||
			!strings.Contains(name, `namespace="`+namespace+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}
