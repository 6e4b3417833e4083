package faults

import (
	"context"
	"fmt"
	"maps"
	"net"
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

// nackWindow is how long the NACKs and Envoy's log lines are counted after the first NACK
// (issue 13, scenario 5).
const nackWindow = time.Minute

// Bounds of "no NACK storm" over nackWindow for one proxy: NACKs of the manager's metric and
// lines of Envoy's log (at its "warning" level). A storm is one per response, hundreds a
// second; these leave room for the NACK of every update the test makes and the manager's
// retries of the rejected listener.
const (
	maxNACKsPerWindow      = 10
	maxEnvoyLinesPerWindow = 40
)

const nackRequestEvery = 50 * time.Millisecond

// TestPartialNACK is issue 13's scenario 5: a tenant's Envoy rejects one listener of its
// configuration (its port is taken on the Envoy host, so Envoy cannot bind it) and applies
// the rest. The tenant's other Service keeps serving without a failed request, the tenant's
// later updates are applied (a new Service is served), the offending LoadBalancer shows
// Programmed=False/Rejected naming the rejection, with a Warning Event on the tenant Service,
// and another tenant sees nothing (its traffic, its versions, its counters). Over a minute
// the NACKs and Envoy's log lines stay a handful. When the port is free again, the listener
// is applied without any change of the tenant's configuration and the condition clears.
func TestPartialNACK(t *testing.T) {
	pair := testenv.StartPair(t)
	clusterB := testenv.Start(t, "tenant-b", testenv.Options{GatewayAPIChannel: "standard", WithoutKubelbCRDs: true})
	// The package runs in its own network namespace (TestMain): the port this test takes is
	// free, and no other test's Envoy binds it.
	sys := framework.StartSystem(t, pair.Hub, framework.Options{})
	a := sys.AddTenant("a", pair.Tenant, 2)
	b := sys.AddTenant("b", clusterB, 2)

	// Tenant b: a stable Service, its own Envoy.
	webB := b.CreateService(framework.LBService{Name: "web", Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
	// Tenant a: a stable Service and one whose listener port will be taken on the Envoy host.
	webA := a.CreateService(framework.LBService{Name: "web", Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
	blocked := a.CreateService(framework.LBService{Name: "blocked", Ports: []corev1.ServicePort{framework.TCPPort("http", 8080)}})
	a.WaitAddress("web", 2*time.Minute)
	a.WaitAddress("blocked", 2*time.Minute)
	b.WaitAddress("web", 2*time.Minute)
	a.StartBackends(webA)
	a.StartBackends(blocked)
	b.StartBackends(webB)

	// Deterministic: the port is allocated (the hub Service's targetPort) and taken on the
	// Envoy host before tenant a's Envoy exists, so the first configuration it receives
	// already has a listener it cannot bind. (Envoy binds with SO_REUSEPORT; this socket
	// does not set it, so the bind fails with EADDRINUSE.)
	blockedPort := a.ListenerPorts(blocked)["http"]
	hold, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", blockedPort))
	if err != nil {
		t.Fatalf("taking the blocked listener's port %d: %v", blockedPort, err)
	}
	defer hold.Close()
	t.Logf("took 127.0.0.1:%d, the listener port of LoadBalancer %s (Service blocked)", blockedPort, blocked.UID)

	envoyB := b.StartEnvoy(framework.EnvoyBootstrap)
	targetB := fmt.Sprintf("127.0.0.1:%d", b.ListenerPorts(webB)["http"])
	framework.WaitServes(t, targetB, "b-node-0", "b-node-1")
	trafficB := framework.StartTraffic(t, targetB, nackRequestEvery, 6000)
	versionsB := envoyB.XDSVersions(t)
	sentB := envoyB.SubscriptionVersions(t)
	churnB := envoyB.Counters(t, envoyConfigChurn...)

	envoyStarted := time.Now()
	envoyA := a.StartEnvoy(framework.EnvoyBootstrap)
	targetA := fmt.Sprintf("127.0.0.1:%d", a.ListenerPorts(webA)["http"])
	framework.WaitServes(t, targetA, "a-node-0", "a-node-1")
	trafficA := framework.StartTraffic(t, targetA, nackRequestEvery, 6000)
	stableListener := "ListenersConfigDump dynamic_listeners " + string(webA.UID) + "-tcp-80"
	stableBefore := envoyA.XDSVersions(t)[stableListener]
	if stableBefore == "" {
		t.Fatalf("tenant a's Envoy has no listener %s: %v", stableListener, envoyA.XDSVersions(t))
	}
	stableChurn := []string{"listener_manager.listener_modified", "listener_manager.listener_removed"}
	stableChurnBefore := envoyA.Counters(t, stableChurn...)

	// The first NACK.
	nacks := func(tenant *framework.Tenant) float64 {
		n, err := framework.MetricSum(sys.MetricsAddr, "kubelb_manager_envoycp_nacks_total", `tenant="`+tenant.Namespace+`"`)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	testsupport.Eventually(t, time.Minute, "tenant a's Envoy to reject a listener", func() error {
		if n := nacks(a); n == 0 {
			return fmt.Errorf("no NACK yet")
		}
		return nil
	})
	firstNACK := time.Now()
	t.Logf("first NACK seen %s after tenant a's Envoy started", firstNACK.Sub(envoyStarted).Round(time.Millisecond))

	// The offending LoadBalancer shows it, and the ccm carries it to the tenant Service.
	lb := waitRejected(t, sys, a, blocked)
	t.Logf("LoadBalancer of blocked Programmed=False %s after the first NACK: %s: %s", time.Since(firstNACK).Round(time.Millisecond), lb.Reason, lb.Message)
	if lb.Reason != "Rejected" || !strings.Contains(lb.Message, "cannot bind") || !strings.Contains(lb.Message, fmt.Sprint(blockedPort)) {
		t.Errorf("the condition does not say Envoy rejected the listener it could not bind on port %d: %s: %s", blockedPort, lb.Reason, lb.Message)
	}
	a.WaitServiceEvent(t, "blocked", corev1.EventTypeWarning, "Rejected")
	// The stable LoadBalancer of the same tenant is still Programmed.
	a.WaitProgrammed(webA, time.Minute)

	// Envoy applied the rest: the stable listener is active, the blocked one is not.
	listenersA := activeListeners(t, envoyA)
	t.Logf("tenant a's Envoy listeners: %v", listenersA)
	if !listenersA[fmt.Sprintf("127.0.0.1:%d", a.ListenerPorts(webA)["http"])] {
		t.Errorf("the stable listener is not active in tenant a's Envoy: %v", listenersA)
	}
	if listenersA[fmt.Sprintf("127.0.0.1:%d", blockedPort)] {
		t.Errorf("the blocked listener is active in tenant a's Envoy: %v", listenersA)
	}
	lmA := envoyA.Counters(t, "listener_manager.lds.update_rejected", "listener_manager.listener_create_failure",
		"listener_manager.total_listeners_active", "listener_manager.listener_added")
	t.Logf("tenant a's Envoy: %v", lmA)
	if lmA["listener_manager.lds.update_rejected"] == 0 {
		t.Errorf("tenant a's Envoy counts no rejected LDS update")
	}

	// Updates keep flowing: a new Service of tenant a, after the NACK, is served.
	trafficA.Phase("after a new Service")
	late := a.CreateService(framework.LBService{Name: "late", Ports: []corev1.ServicePort{framework.TCPPort("http", 81)}})
	a.WaitAddress("late", 2*time.Minute)
	a.StartBackends(late)
	framework.WaitServes(t, fmt.Sprintf("127.0.0.1:%d", a.ListenerPorts(late)["http"]), "a-node-0", "a-node-1")
	a.WaitProgrammed(late, time.Minute)
	// The stable listener was left as it was: same version, never modified nor removed.
	if v := envoyA.XDSVersions(t)[stableListener]; v != stableBefore {
		t.Errorf("tenant a's stable listener went from version %s to %q", stableBefore, v)
	}

	// No NACK storm: the rejection stands for a minute.
	time.Sleep(time.Until(firstNACK.Add(nackWindow))) // the window's length, not an assertion
	// Both from the start of tenant a's Envoy, a fraction of a second before the first NACK.
	nacksInWindow, linesInWindow := nacks(a), envoyLines(envoyA)
	t.Logf("over %s after the first NACK: %.0f NACKs of tenant a; %d lines in tenant a's Envoy's log since its start", nackWindow, nacksInWindow, linesInWindow)
	if nacksInWindow > maxNACKsPerWindow {
		t.Errorf("NACK storm: %.0f NACKs in %s (at most %d)", nacksInWindow, nackWindow, maxNACKsPerWindow)
	}
	if linesInWindow > maxEnvoyLinesPerWindow {
		t.Errorf("Envoy logged %d lines in %s (at most %d):\n%s", linesInWindow, nackWindow, maxEnvoyLinesPerWindow, envoyA.Tail(20))
	}
	if lb := waitRejected(t, sys, a, blocked); lb.Reason != "Rejected" {
		t.Errorf("the rejection no longer shows: %s", lb.Reason)
	}

	// Recovery: the port is free again; the listener is applied and the condition clears.
	trafficA.Phase("port freed")
	freed := time.Now()
	hold.Close()
	framework.WaitServes(t, fmt.Sprintf("127.0.0.1:%d", blockedPort), "a-node-0", "a-node-1")
	a.WaitProgrammed(blocked, 2*time.Minute)
	t.Logf("recovered %s after the port was freed (the listener served, the LoadBalancer Programmed)", time.Since(freed).Round(time.Millisecond))
	if after := envoyA.Counters(t, stableChurn...); !maps.Equal(after, stableChurnBefore) {
		t.Errorf("tenant a's Envoy modified or removed listeners: %v → %v", stableChurnBefore, after)
	}
	t.Logf("tenant a: %.0f NACKs in all; tenant a's Envoy: %v", nacks(a), envoyA.Counters(t, "listener_manager.lds.update_rejected",
		"listener_manager.lds.update_success", "listener_manager.listener_added", "listener_manager.total_listeners_active"))

	resA, resB := trafficA.Stop(), trafficB.Stop()
	t.Logf("tenant a's stable Service: %s", resA)
	t.Logf("tenant b's stable Service: %s", resB)
	for name, res := range map[string]framework.TrafficResult{"a": resA, "b": resB} {
		if n := res.FailedTotal(); n > 0 {
			t.Errorf("tenant %s: %d requests failed: %s", name, n, strings.Join(res.Failures, "; "))
		}
	}

	// Tenant b saw nothing of it.
	if n := nacks(b); n != 0 {
		t.Errorf("tenant b's Envoy rejected configuration %.0f times", n)
	}
	if after := envoyB.SubscriptionVersions(t); !maps.Equal(after, sentB) {
		t.Errorf("tenant b's xDS versions changed:\nbefore %v\nafter  %v", sentB, after)
	}
	if after := envoyB.XDSVersions(t); !maps.Equal(after, versionsB) {
		t.Errorf("tenant b's Envoy configuration changed:\nbefore %v\nafter  %v", versionsB, after)
	}
	if after := envoyB.Counters(t, envoyConfigChurn...); !maps.Equal(after, churnB) {
		t.Errorf("tenant b's Envoy listener/cluster counters changed: %v → %v", churnB, after)
	}
	b.WaitProgrammed(webB, time.Minute)
}

// waitRejected waits until the LoadBalancer of svc is Programmed=False and returns the
// condition.
func waitRejected(t *testing.T, sys *framework.System, tn *framework.Tenant, svc *corev1.Service) (out struct{ Reason, Message string }) {
	t.Helper()
	testsupport.Eventually(t, time.Minute, "the LoadBalancer of "+svc.Name+" to be Programmed=False", func() error {
		lb := &kubelbv1alpha1.LoadBalancer{}
		if err := sys.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: tn.Namespace, Name: string(svc.UID)}, lb); err != nil {
			return err
		}
		for _, c := range lb.Status.Conditions {
			if c.Type == "Programmed" {
				if c.Status != "False" {
					return fmt.Errorf("Programmed %s: %s", c.Status, c.Message)
				}
				out.Reason, out.Message = c.Reason, c.Message
				return nil
			}
		}
		return fmt.Errorf("no Programmed condition")
	})
	return out
}

// activeListeners returns the addresses (ip:port) of Envoy's active dynamic listeners.
func activeListeners(t *testing.T, e *framework.Envoy) map[string]bool {
	t.Helper()
	ls, err := e.Envoy.Listeners()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, l := range ls {
		out[l.Address] = true
	}
	return out
}

// envoyLines counts the (non-empty) lines Envoy has logged so far.
func envoyLines(e *framework.Envoy) int {
	n := 0
	for _, l := range strings.Split(e.Output(), "\n") {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n
}
