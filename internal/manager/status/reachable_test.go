package status_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	healthv3 "github.com/envoyproxy/go-control-plane/envoy/service/health/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcstatus "google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/reach"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/xds"
	"kubelb.dev/kubelb/internal/xds/xdstest"
)

// fastChecks make the proxies check every second and report every second.
var fastChecks = xds.HealthChecking{Interval: time.Second, Timeout: 500 * time.Millisecond, UnhealthyThreshold: 1, HealthyThreshold: 1,
	ReportInterval: time.Second}

// waitReachable waits until the LoadBalancer's BackendsReachable condition has status and
// reason, with a message containing msg and none of not, and returns it.
func waitReachable(t *testing.T, c client.Client, ns, name string, st metav1.ConditionStatus, reason, msg string, not ...string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	testsupport.Eventually(t, timeout, fmt.Sprintf("%s/%s BackendsReachable=%s/%s", ns, name, st, reason), func() error {
		o := &v1alpha1.LoadBalancer{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, o); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(o.Status.Conditions, status.ConditionBackendsReachable)
		if cond == nil {
			return fmt.Errorf("no BackendsReachable condition")
		}
		got = *cond
		ok := cond.Status == st && cond.Reason == reason && strings.Contains(cond.Message, msg)
		for _, n := range not {
			ok = ok && !strings.Contains(cond.Message, n)
		}
		if !ok {
			return fmt.Errorf("%s/%s %q", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
	return got
}

// backends reads the metric of a LoadBalancer's endpoints in one state.
func backends(ns, name, state string) float64 {
	return testutil.ToFloat64(metrics.ManagerLoadBalancerBackends.GaugeVec.WithLabelValues(ns, name, state))
}

// TestBackendsReachable proves, with a real Envoy fed by the xDS server (ADS and health
// discovery) of the real manager code on a real API server, that a LoadBalancer with two
// endpoints, one of which answers and one a tenant NodePort where nothing listens, gets
// BackendsReachable=False SomeBackendsUnreachable naming the dead one (metric 1/1, a Warning
// Event), and True Reachable once something listens there. A hostile proxy of tenant b
// (its own certificate) can neither open tenant a's health stream nor move a's condition or
// b's TenantState with a report on a's endpoints and a flood of made-up ones.
func TestBackendsReachable(t *testing.T) {
	const victim, attacker = "tenant-a", "tenant-b"
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	live, dead := "127.0.0.41", "127.0.0.42"
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}},
		&v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"},
			Spec: v1alpha1.TenantSpec{EndpointPolicy: &v1alpha1.EndpointPolicy{Allow: []string{"127.0.0.40/29"}}}},
		&v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "b"},
			Spec: v1alpha1.TenantSpec{EndpointPolicy: &v1alpha1.EndpointPolicy{Allow: []string{"127.0.0.48/29"}}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	tenantNamespaces(t, c, victim, attacker)
	r := startReplicaChecking(t, hub, "replica", fastChecks)
	select {
	case <-r.elected:
	case <-time.After(timeout):
		t.Fatal("the replica was not elected")
	}
	envoysOf(t, r, victim)

	nodePort := testsupport.FreePort(t, live, dead)
	testsupport.StartTCPBackend(t, fmt.Sprintf("%s:%d", live, nodePort), testsupport.Identity{Node: "live", Pod: "web"})
	createLBWithPort(t, c, victim, "web", testsupport.FreePort(t), nodePort, nil, live, dead)
	deadAddr, liveAddr := fmt.Sprintf("%s:%d", dead, nodePort), fmt.Sprintf("%s:%d", live, nodePort)

	cond := waitReachable(t, c, victim, "web", metav1.ConditionFalse, reach.ReasonSomeUnreachable, deadAddr, liveAddr)
	t.Logf("a tenant NodePort that does not answer: BackendsReachable=%s %s: %s", cond.Status, cond.Reason, cond.Message)
	if got, want := [2]float64{backends(victim, "web", "reachable"), backends(victim, "web", "unreachable")}, [2]float64{1, 1}; got != want {
		t.Errorf("metric reachable/unreachable = %v, want %v", got, want)
	}
	waitEventIn(t, c, victim, "web", corev1.EventTypeWarning, reach.ReasonSomeUnreachable, deadAddr)

	// The hostile proxy of tenant b.
	conn, err := grpc.NewClient(r.xdsAddr, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS(t, attacker))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hds := healthv3.NewHealthDiscoveryServiceClient(conn)
	open := func(cluster string) (healthv3.HealthDiscoveryService_StreamHealthCheckClient, error) {
		st, err := hds.StreamHealthCheck(ctx)
		if err != nil {
			return nil, err
		}
		if err := st.Send(&healthv3.HealthCheckRequestOrEndpointHealthResponse{RequestType: &healthv3.HealthCheckRequestOrEndpointHealthResponse_HealthCheckRequest{
			HealthCheckRequest: &healthv3.HealthCheckRequest{Node: &corev3.Node{Id: "hostile", Cluster: cluster}}}}); err != nil {
			return nil, err
		}
		spec, err := st.Recv()
		if err != nil {
			return nil, err
		}
		for _, ch := range spec.GetClusterHealthChecks() {
			for _, l := range ch.GetLocalityEndpoints() {
				for _, e := range l.GetEndpoints() {
					if a := e.GetAddress().GetSocketAddress().GetAddress(); a == live || a == dead {
						t.Errorf("tenant b was asked to check tenant a's endpoint %v", e)
					}
				}
			}
		}
		return st, nil
	}
	if _, err := open(victim); grpcstatus.Code(err) != codes.PermissionDenied {
		t.Errorf("tenant b's health stream as tenant a: %v, want PermissionDenied", err)
	}
	st, err := open(attacker)
	if err != nil {
		t.Fatalf("tenant b's own health stream: %v", err)
	}
	// A report that a's dead endpoint is healthy and its live one unhealthy, in a's cluster
	// name, and 20 000 made-up endpoints.
	report := &healthv3.EndpointHealthResponse{}
	for _, cluster := range []string{"hds.web-tcp-80", "web-tcp-80"} {
		ch := &healthv3.ClusterEndpointsHealth{ClusterName: cluster, LocalityEndpointsHealth: []*healthv3.LocalityEndpointsHealth{{
			EndpointsHealth: []*healthv3.EndpointHealth{
				endpointHealth(dead, nodePort, corev3.HealthStatus_HEALTHY), endpointHealth(live, nodePort, corev3.HealthStatus_UNHEALTHY)}}}}
		report.ClusterEndpointsHealth = append(report.ClusterEndpointsHealth, ch)
	}
	flood := &healthv3.LocalityEndpointsHealth{}
	for i := range 20000 {
		flood.EndpointsHealth = append(flood.EndpointsHealth, endpointHealth(fmt.Sprintf("127.0.%d.%d", 48+i/250, i%250), 30000+i%1000, corev3.HealthStatus_UNHEALTHY))
	}
	report.ClusterEndpointsHealth = append(report.ClusterEndpointsHealth, &healthv3.ClusterEndpointsHealth{ClusterName: "hds.made-up", LocalityEndpointsHealth: []*healthv3.LocalityEndpointsHealth{flood}})
	for range 3 {
		if err := st.Send(&healthv3.HealthCheckRequestOrEndpointHealthResponse{RequestType: &healthv3.HealthCheckRequestOrEndpointHealthResponse_EndpointHealthResponse{EndpointHealthResponse: report}}); err != nil {
			t.Fatalf("sending the hostile report: %v", err)
		}
	}
	time.Sleep(3 * time.Second)
	waitReachable(t, c, victim, "web", metav1.ConditionFalse, reach.ReasonSomeUnreachable, deadAddr, liveAddr)
	ts := &v1alpha1.TenantState{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: attacker, Name: hubnames.TenantStateName}, ts); err != nil {
		t.Fatal(err)
	}
	if len(ts.Status.BackendHealth) != 0 {
		t.Errorf("tenant b's TenantState holds what its hostile proxy reported: %+v", ts.Status.BackendHealth)
	}

	// Something listens on the dead NodePort now.
	testsupport.StartTCPBackend(t, deadAddr, testsupport.Identity{Node: "dead", Pod: "web"})
	cond = waitReachable(t, c, victim, "web", metav1.ConditionTrue, reach.ReasonReachable, "all 2 endpoints")
	t.Logf("after a listener started on it: BackendsReachable=%s %s: %s", cond.Status, cond.Reason, cond.Message)
	if got, want := [2]float64{backends(victim, "web", "reachable"), backends(victim, "web", "unreachable")}, [2]float64{2, 0}; got != want {
		t.Errorf("metric reachable/unreachable = %v, want %v", got, want)
	}
	waitEventIn(t, c, victim, "web", corev1.EventTypeNormal, reach.ReasonReachable, "all 2 endpoints")
}

func endpointHealth(ip string, port int, h corev3.HealthStatus) *healthv3.EndpointHealth {
	return &healthv3.EndpointHealth{HealthStatus: h, Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
		SocketAddress: &corev3.SocketAddress{Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)}}}}}}
}

func clientTLS(t *testing.T, tenant string) *tls.Config {
	cfg := xdstest.New(t).ClientTLS(t, tenant)
	cfg.ServerName = xdstest.ServerName
	return cfg
}

// TestReachableRouteAndStaleEntries: the Writer judges a Route's clusters as a
// LoadBalancer's, and writes BackendsReachable into status.resources.route.conditions beside
// Programmed (each under its own field owner, neither removing the other). An entry naming
// unreachable endpoints that its replica stopped confirming (a replica that is gone) no
// longer counts, and is removed from the TenantState.
func TestReachableRouteAndStaleEntries(t *testing.T) {
	ctx := context.Background()
	a, b := "10.0.0.1:30080", "10.0.0.2:30080"
	endpoints := map[string][]string{"gw-backend": {a, b}}
	c, gw := startRouteWriter(t, endpoints)
	routeReachable := func(st metav1.ConditionStatus, reason, msg string) {
		t.Helper()
		waitRouteStatus(t, c, gw.Name, metav1.ConditionTrue, status.ReasonProgrammed, func(r *v1alpha1.Route) error {
			cond := meta.FindStatusCondition(r.Status.Resources.Route.Conditions, status.ConditionBackendsReachable)
			if cond == nil || cond.Status != st || cond.Reason != reason || !strings.Contains(cond.Message, msg) {
				return fmt.Errorf("BackendsReachable %+v", cond)
			}
			return nil
		})
	}
	// Nothing reported yet: no condition is written (Unknown is what its absence says).
	waitRouteStatus(t, c, gw.Name, metav1.ConditionTrue, status.ReasonProgrammed, func(r *v1alpha1.Route) error {
		if cond := meta.FindStatusCondition(r.Status.Resources.Route.Conditions, status.ConditionBackendsReachable); cond != nil {
			return fmt.Errorf("BackendsReachable written before any report: %+v", cond)
		}
		return nil
	})

	// A replica's proxies found b unreachable; another replica's entry says the same but was
	// not confirmed for longer than StaleHealthTTL.
	hash := reach.EndpointsHash(endpoints["gw-backend"])
	ts := &v1alpha1.TenantState{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: tenant, Name: hubnames.TenantStateName}, ts); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now().Rfc3339Copy()
	ts.Status.BackendHealth = []v1alpha1.BackendHealth{
		{Replica: "live", Cluster: "gw-backend", Endpoints: hash, Reachable: 1, UnreachableCount: 1, Unreachable: []string{b}, Time: now},
		{Replica: "gone", Cluster: "gw-backend", Endpoints: hash, UnreachableCount: 2, Unreachable: []string{a, b},
			Time: metav1.NewTime(now.Add(-status.StaleHealthTTL - time.Minute))},
	}
	if err := c.Status().Update(ctx, ts); err != nil {
		t.Fatal(err)
	}
	routeReachable(metav1.ConditionFalse, reach.ReasonSomeUnreachable, "1 of 2 endpoints do not answer the hub's Envoy proxies: "+b)
	testsupport.Eventually(t, timeout, "the stale entry removed", func() error {
		if err := c.Get(ctx, types.NamespacedName{Namespace: tenant, Name: hubnames.TenantStateName}, ts); err != nil {
			return err
		}
		if len(ts.Status.BackendHealth) != 1 || ts.Status.BackendHealth[0].Replica != "live" {
			return fmt.Errorf("entries %+v", ts.Status.BackendHealth)
		}
		return nil
	})
	waitEventIn(t, c, tenant, gw.Name, corev1.EventTypeWarning, reach.ReasonSomeUnreachable, b)
}
