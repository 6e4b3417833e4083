package xds

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
)

// TestHealthDiscoverySendsWhatChanged: a real Envoy gets one health check specifier when it
// connects; a snapshot change that leaves what it checks alone (a listener moved; a new
// LoadBalancer on endpoints already checked) sends it none, and the new LoadBalancer's
// cluster is reported on at once from what the proxy already found; a moved endpoint sends
// exactly one. Envoy counts the specifiers it receives (hds_delegate.requests), the manager
// those it sends (kubelb_manager_envoycp_health_specifiers_sent_total).
func TestHealthDiscoverySendsWhatChanged(t *testing.T) {
	const tenant = "tenant-hds-changes"
	srv, xdsAddr := startXDS(t)
	srv.SetHealthChecking(HealthChecking{Interval: 300 * time.Millisecond, Timeout: time.Second, UnhealthyThreshold: 1, HealthyThreshold: 1,
		ReportInterval: 200 * time.Millisecond})
	var mu sync.Mutex
	var last HealthReport
	srv.OnHealth(func(r HealthReport) {
		if r.Tenant == tenant && !r.Gone {
			mu.Lock()
			last = r
			mu.Unlock()
		}
	})
	backend := func() int {
		port := testsupport.FreePort(t)
		testsupport.StartTCPBackend(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), testsupport.Identity{Node: "node", Pod: fmt.Sprint(port)})
		return port
	}
	portA, portB := backend(), backend()
	lb := func(name string, nodePort int) v1alpha1.LoadBalancer {
		return newLB(name).port(corev1.ProtocolTCP, 80, nodePort, testsupport.FreePort(t)).LoadBalancer
	}
	in := translate.Input{Tenant: tenant, Addresses: addresses("127.0.0.1"), Options: translate.Options{ListenerAddress: "127.0.0.1"}, Policy: loopbackAllowed}
	in.LoadBalancers = []v1alpha1.LoadBalancer{lb("a", portA), lb("b", portB)}
	set := func(in translate.Input) {
		t.Helper()
		if changed, err := srv.SetTenant(context.Background(), tenant, mustTranslate(t, in)); err != nil || !changed {
			t.Fatalf("SetTenant = %v, %v", changed, err)
		}
	}
	set(in)
	sentBefore := testutil.ToFloat64(metrics.ManagerHealthSpecifiers.WithLabelValues(tenant))
	e := startEnvoy(t, srv, tenant, xdsAddr, "hds-changes")

	received := func() int64 {
		n, err := e.Stat("hds_delegate.requests")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// reported waits for a report that asks about exactly the clusters want (cluster → its
	// one endpoint) and finds each of them healthy.
	reported := func(what string, want map[string]string) {
		t.Helper()
		testsupport.Eventually(t, waitTimeout, what, func() error {
			mu.Lock()
			r := last
			mu.Unlock()
			if got := slices.Sorted(maps.Keys(r.Asked)); !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
				return fmt.Errorf("asked about %v", got)
			}
			for c, a := range want {
				if !slices.Equal(r.Asked[c], []string{a}) || !r.Health[c][a] {
					return fmt.Errorf("%s: asked %v, health %v", c, r.Asked[c], r.Health[c])
				}
			}
			return nil
		})
	}
	listening := func(port int) {
		t.Helper()
		testsupport.Eventually(t, waitTimeout, fmt.Sprintf("Envoy to listen on port %d", port), func() error {
			ls, err := e.Listeners()
			if err != nil {
				return err
			}
			for _, l := range ls {
				if _, p, _ := net.SplitHostPort(l.Address); p == strconv.Itoa(port) {
					return nil
				}
			}
			return fmt.Errorf("listeners %v", ls)
		})
	}
	// specifiers checks that, a second after the change Envoy applied, it has received no
	// more specifiers than want and the server sent no more.
	specifiers := func(what string, want int64) {
		t.Helper()
		time.Sleep(time.Second)
		if got := received(); got != want {
			t.Errorf("%s: Envoy received %d health check specifiers, want %d", what, got, want)
		}
		if got := testutil.ToFloat64(metrics.ManagerHealthSpecifiers.WithLabelValues(tenant)) - sentBefore; got != float64(want) {
			t.Errorf("%s: the server counted %v specifiers sent, want %d", what, got, want)
		}
	}

	at := func(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
	names := slices.Sorted(maps.Keys(srv.ClusterEndpoints(tenant).All()))
	if len(names) != 2 {
		t.Fatalf("clusters %v, want 2", names)
	}
	clusterA, clusterB := names[0], names[1]
	reported("both endpoints found healthy", map[string]string{clusterA: at(portA), clusterB: at(portB)})
	specifiers("connected", 1)

	// A listener moved: no specifier.
	moved := in
	moved.LoadBalancers = slices.Clone(in.LoadBalancers)
	moved.LoadBalancers[0] = lb("a", portA)
	set(moved)
	listening(int(moved.LoadBalancers[0].Status.Service.Ports[0].UpstreamTargetPort))
	specifiers("a listener moved", 1)

	// A new LoadBalancer on a's endpoint: asked about and healthy at once, no specifier.
	added := moved
	added.LoadBalancers = append(slices.Clone(moved.LoadBalancers), lb("c", portA))
	set(added)
	listening(int(added.LoadBalancers[2].Status.Service.Ports[0].UpstreamTargetPort))
	clusterC := ""
	for name := range srv.ClusterEndpoints(tenant).All() {
		if name != clusterA && name != clusterB {
			clusterC = name
		}
	}
	reported("the new LoadBalancer's endpoint known healthy", map[string]string{clusterA: at(portA), clusterB: at(portB), clusterC: at(portA)})
	specifiers("a LoadBalancer added on checked endpoints", 1)

	// b's endpoint moved to another backend: exactly one specifier.
	portB2 := backend()
	changed := added
	changed.LoadBalancers = slices.Clone(added.LoadBalancers)
	changed.LoadBalancers[1] = newLB("b").port(corev1.ProtocolTCP, 80, portB2, int(added.LoadBalancers[1].Status.Service.Ports[0].UpstreamTargetPort)).LoadBalancer
	set(changed)
	reported("b's new endpoint found healthy", map[string]string{clusterA: at(portA), clusterB: at(portB2), clusterC: at(portA)})
	specifiers("an endpoint moved", 2)
}
