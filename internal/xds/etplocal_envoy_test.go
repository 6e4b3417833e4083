package xds

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"kubelb.dev/kubelb/api/v1alpha1"

	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
)

// TestEnvoyExternalTrafficPolicyLocal: a LoadBalancer with externalTrafficPolicy Local and a
// healthCheckNodePort, backends on three nodes, and kube-proxy's health endpoint played on
// each. Only the node whose /healthz answers 200 (it has a local endpoint) gets connections,
// TCP and UDP alike, with no failed request once Envoy has converged; when the endpoint moves
// to the other node (the first answers 503, the second 200), all traffic follows it.
func TestEnvoyExternalTrafficPolicyLocal(t *testing.T) {
	const tenant = "tenant-etp-local"
	srv, xdsAddr := startXDS(t)

	// Three nodes, one with the local endpoint: a third of the hosts healthy, which puts a
	// cluster in Envoy's default panic mode (traffic to every host) — so panic mode is off.
	nodes := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	names := []string{"node-a", "node-b", "node-c"}
	tcpNodePort := testsupport.FreePort(t, nodes...)
	udpNodePort := testsupport.FreePort(t, nodes...)
	healthPort := testsupport.FreePort(t, nodes...)
	health := map[string]*testsupport.NodeHealth{}
	for i, ip := range nodes {
		id := testsupport.Identity{Node: names[i], Pod: "echo-" + names[i]}
		testsupport.StartTCPBackend(t, net.JoinHostPort(ip, fmt.Sprint(tcpNodePort)), id)
		testsupport.StartUDPBackend(t, net.JoinHostPort(ip, fmt.Sprint(udpNodePort)), id)
		health[names[i]] = testsupport.StartNodeHealth(t, net.JoinHostPort(ip, fmt.Sprint(healthPort)), "shop/local", 0)
	}
	// Node A has the local endpoint, node B has none.
	health["node-a"].SetLocalEndpoints(1)

	tcpPort, udpPort := testsupport.FreePort(t), testsupport.FreePort(t)
	lb := newLB("local").port(corev1.ProtocolTCP, 80, tcpNodePort, tcpPort).port(corev1.ProtocolUDP, 53, udpNodePort, udpPort).LoadBalancer
	lb.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	lb.Spec.HealthCheckNodePort = int32(healthPort)
	// Short intervals keep the test quick; the no-traffic interval too, since the clusters are
	// idle until the test sends traffic.
	opts := translate.Options{ListenerAddress: "127.0.0.1", HealthCheck: translate.HealthCheck{
		Interval: 200 * time.Millisecond, NoTrafficInterval: 200 * time.Millisecond, Timeout: time.Second,
		UnhealthyThreshold: 2, HealthyThreshold: 1,
	}}
	out := mustTranslate(t, translate.Input{Tenant: tenant, LoadBalancers: []v1alpha1.LoadBalancer{lb}, Addresses: addresses(nodes...), Options: opts, Policy: loopbackAllowed})
	if _, err := srv.SetTenant(context.Background(), tenant, out); err != nil {
		t.Fatal(err)
	}
	e := startEnvoy(t, srv, tenant, xdsAddr, "etp-local-proxy")
	at := func(port int) string { return net.JoinHostPort("127.0.0.1", fmt.Sprint(port)) }

	// converged waits until Envoy sees exactly node ip healthy in both clusters.
	converged := func(healthyIP string) {
		t.Helper()
		for _, c := range []struct {
			name string
			port int
		}{{"local-tcp-80", tcpNodePort}, {"local-udp-53", udpNodePort}} {
			testsupport.Eventually(t, waitTimeout, fmt.Sprintf("cluster %s healthy on %s only", c.name, healthyIP), func() error {
				hosts, err := clusterHosts(e, c.name)
				if err != nil {
					return err
				}
				if len(hosts) != len(nodes) {
					return fmt.Errorf("hosts %v", hosts)
				}
				for _, ip := range nodes {
					if want := ip == healthyIP; hosts[net.JoinHostPort(ip, fmt.Sprint(c.port))] != want {
						return fmt.Errorf("hosts %v", hosts)
					}
				}
				return nil
			})
		}
	}
	// reaches is one TCP connection and one UDP session, both answered by node.
	reaches := func(node string, i int) error {
		r, err := testsupport.TCPRoundTrip(at(tcpPort), fmt.Sprintf("tcp-%d", i))
		if err != nil {
			return fmt.Errorf("TCP connection %d: %w", i, err)
		}
		if r.Node != node {
			return fmt.Errorf("TCP connection %d went to %s; only %s has a local endpoint", i, r.Node, node)
		}
		u, err := testsupport.UDPRoundTrip(at(udpPort), fmt.Sprintf("udp-%d", i))
		if err != nil {
			return fmt.Errorf("UDP session %d: %w", i, err)
		}
		if u.Node != node {
			return fmt.Errorf("UDP session %d went to %s; only %s has a local endpoint", i, u.Node, node)
		}
		return nil
	}
	// convergedTraffic waits until the data path agrees with the admin view: Envoy's workers
	// learn of health changes a moment after its main thread, and during a flip both nodes
	// may be unhealthy for an instant (Envoy then spreads over all of them, "panic" mode).
	// Four TCP connections and UDP sessions in a row reaching node end the wait (round robin
	// over all nodes could not do that).
	convergedTraffic := func(node string) {
		t.Helper()
		testsupport.Eventually(t, waitTimeout, "traffic to reach "+node+" only", func() error {
			for i := range 4 {
				if err := reaches(node, i); err != nil {
					return err
				}
			}
			return nil
		})
	}
	// allTo sends n TCP connections and n UDP sessions; every one must be answered, by node.
	allTo := func(node string, n int) {
		t.Helper()
		for i := range n {
			if err := reaches(node, i); err != nil {
				t.Fatalf("after convergence: %v", err)
			}
		}
	}

	converged("127.0.0.1")
	convergedTraffic("node-a")
	allTo("node-a", 40)

	for _, n := range []string{"node-b", "node-c"} {
		if health[n].Checks() == 0 {
			t.Errorf("%s's health endpoint was never asked", n)
		}
	}

	// The endpoint moves: node A loses it, node B gets it.
	health["node-a"].SetLocalEndpoints(0)
	health["node-b"].SetLocalEndpoints(1)
	converged("127.0.0.2")
	convergedTraffic("node-b")
	allTo("node-b", 40)
}
