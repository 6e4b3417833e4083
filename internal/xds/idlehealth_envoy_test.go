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

// TestEnvoyRechecksAnIdleClustersUnhealthyNodeAtItsInterval: a new LoadBalancer whose
// NodePort answers only a moment after Envoy's first check (the tenant's Service and its
// Deployment created together, the pods not ready yet) becomes healthy at one of the next
// checks, on the cluster's interval (1 s here), though no traffic has gone through it. Envoy
// checks a cluster that has seen no traffic every no_traffic_interval (60 s by default), so
// the node stayed unhealthy for up to a minute and `kubectl kubelb envoy clusters` reported
// it so (the quick start's CI run found it); an idle cluster's healthy nodes are still checked
// only every minute.
func TestEnvoyRechecksAnIdleClustersUnhealthyNodeAtItsInterval(t *testing.T) {
	const tenant = "tenant-idle-health"
	srv, xdsAddr := startXDS(t)
	node := "127.0.0.1"
	nodePort := testsupport.FreePort(t, node) // nothing listens there yet
	listener := testsupport.FreePort(t)
	lb := newLB("late").port(corev1.ProtocolTCP, 80, nodePort, listener).LoadBalancer
	opts := translate.Options{ListenerAddress: "127.0.0.1", HealthCheck: translate.HealthCheck{
		Interval: time.Second, Timeout: time.Second, UnhealthyThreshold: 2, HealthyThreshold: 1,
	}}
	out := mustTranslate(t, translate.Input{Tenant: tenant, LoadBalancers: []v1alpha1.LoadBalancer{lb}, Addresses: addresses(node), Options: opts, Policy: loopbackAllowed})
	if _, err := srv.SetTenant(context.Background(), tenant, out); err != nil {
		t.Fatal(err)
	}
	e := startEnvoy(t, srv, tenant, xdsAddr, "idle-health-proxy")
	const cluster, stats = "late-tcp-80", "cluster.late/tcp-80." // its stat name is the LoadBalancer's
	host := net.JoinHostPort(node, fmt.Sprint(nodePort))

	// The first check fails: nothing listens on the NodePort.
	testsupport.Eventually(t, waitTimeout, "a failed first check of "+host, func() error {
		failures, err := e.Stat(stats + "health_check.failure")
		if err != nil || failures == 0 {
			return fmt.Errorf("health_check.failure %d (%v)", failures, err)
		}
		hosts, err := clusterHosts(e, cluster)
		if err != nil {
			return err
		}
		if healthy, ok := hosts[host]; !ok || healthy {
			return fmt.Errorf("hosts %v", hosts)
		}
		return nil
	})

	// The pods are ready: the NodePort answers. Without traffic, the node is healthy again
	// well within the minute Envoy's default idle interval would take (a few 1 s intervals).
	testsupport.StartTCPBackend(t, host, testsupport.Identity{Node: "node-a", Pod: "late-0"})
	testsupport.Eventually(t, 20*time.Second, host+" healthy without traffic", func() error {
		hosts, err := clusterHosts(e, cluster)
		if err != nil {
			return err
		}
		if !hosts[host] {
			return fmt.Errorf("hosts %v", hosts)
		}
		return nil
	})
	if cx, err := e.Stat(stats + "upstream_cx_total"); err != nil || cx != 0 {
		t.Errorf("upstream_cx_total %d (%v): the cluster was to stay idle", cx, err)
	}
}
