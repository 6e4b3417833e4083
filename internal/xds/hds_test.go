package xds

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/reach"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	healthv3 "github.com/envoyproxy/go-control-plane/envoy/service/health/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

func health(ip string, port uint32, h corev3.HealthStatus) *healthv3.EndpointHealth {
	return &healthv3.EndpointHealth{HealthStatus: h, Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
		SocketAddress: &corev3.SocketAddress{Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}}}
}

// TestReadReportKeepsOnlyWhatWasAsked: a report is read only for the specifier's clusters
// and the endpoints the proxy was asked about, without verdict for UNKNOWN, and at most
// maxReportEndpoints entries of it; what it says of an endpoint holds for every snapshot
// cluster that has it.
func TestReadReportKeepsOnlyWhatWasAsked(t *testing.T) {
	plan := planHealth(map[string]healthCluster{
		"web-tcp-80": {addrs: []string{"10.0.0.1:30080", "10.0.0.2:30080"}},
		"api-tcp-80": {addrs: []string{"10.0.0.1:30080"}},
	}, DefaultHealthChecking().Interval)
	cluster := func(name string, eps ...*healthv3.EndpointHealth) *healthv3.ClusterEndpointsHealth {
		return &healthv3.ClusterEndpointsHealth{ClusterName: name, LocalityEndpointsHealth: []*healthv3.LocalityEndpointsHealth{{EndpointsHealth: eps}}}
	}
	r := &healthv3.EndpointHealthResponse{ClusterEndpointsHealth: []*healthv3.ClusterEndpointsHealth{
		cluster(tcpGroup, health("10.0.0.1", 30080, corev3.HealthStatus_HEALTHY), health("10.0.0.2", 30080, corev3.HealthStatus_TIMEOUT),
			health("10.0.0.3", 30080, corev3.HealthStatus_UNHEALTHY), health("10.0.0.1", 30081, corev3.HealthStatus_UNHEALTHY)),
		cluster("web-tcp-80", health("10.0.0.1", 30080, corev3.HealthStatus_UNHEALTHY)),     // not a specifier cluster
		cluster("hds.web-tcp-80", health("10.0.0.1", 30080, corev3.HealthStatus_UNHEALTHY)), // not asked
	}}
	got := plan.health(readReport(r, plan))
	want := map[string]map[string]bool{
		"web-tcp-80": {"10.0.0.1:30080": true, "10.0.0.2:30080": false},
		"api-tcp-80": {"10.0.0.1:30080": true},
	}
	if !maps.EqualFunc(got, want, maps.Equal) {
		t.Errorf("read %v, want %v", got, want)
	}
	unknown := &healthv3.EndpointHealthResponse{ClusterEndpointsHealth: []*healthv3.ClusterEndpointsHealth{
		cluster(tcpGroup, health("10.0.0.1", 30080, corev3.HealthStatus_UNKNOWN))}}
	if got := readReport(unknown, plan); len(got) != 0 {
		t.Errorf("read %v of an UNKNOWN health, want nothing", got)
	}

	// A flood: the asked endpoints come after maxReportEndpoints made-up ones and are not read.
	var flood []*healthv3.EndpointHealth
	for i := range maxReportEndpoints {
		flood = append(flood, health(fmt.Sprintf("10.1.%d.%d", i/250, i%250), 1, corev3.HealthStatus_UNHEALTHY))
	}
	flood = append(flood, health("10.0.0.2", 30080, corev3.HealthStatus_UNHEALTHY))
	if got := readReport(&healthv3.EndpointHealthResponse{ClusterEndpointsHealth: []*healthv3.ClusterEndpointsHealth{cluster(tcpGroup, flood...)}}, plan); len(got) != 0 {
		t.Errorf("read %v past the bound", got)
	}
}

// TestPlanHealthGroupsByChecks: the clusters checked the same way are one cluster of the
// specifier with their distinct endpoints; own checks are asked no more often than the
// interval, and clusters with the same own checks share one (those with other own checks
// have theirs); the plan's hash moves with what the specifier carries and only with it.
func TestPlanHealthGroupsByChecks(t *testing.T) {
	const interval = 10 * time.Second
	http := func(every time.Duration) []*corev3.HealthCheck {
		return []*corev3.HealthCheck{{Interval: durationpb.New(every), Timeout: durationpb.New(time.Second),
			HealthChecker: &corev3.HealthCheck_HttpHealthCheck_{HttpHealthCheck: &corev3.HealthCheck_HttpHealthCheck{Path: "/healthz"}}}}
	}
	clusters := map[string]healthCluster{
		"a-tcp-80":  {addrs: []string{"10.0.0.1:30001", "10.0.0.2:30001"}},
		"b-tcp-80":  {addrs: []string{"10.0.0.1:30002"}},
		"c-tcp-80":  {addrs: []string{"10.0.0.1:30001"}}, // a's endpoint again
		"l1-tcp-80": {addrs: []string{"10.0.0.1:30003"}, checks: http(time.Second)},
		"l2-tcp-80": {addrs: []string{"10.0.0.2:30004"}, checks: http(time.Second)},
		"l3-tcp-80": {addrs: []string{"10.0.0.2:30005"}, checks: http(5 * time.Second)},
	}
	plan := planHealth(clusters, interval)
	spec := plan.specifier(DefaultHealthChecking())
	if n := len(spec.GetClusterHealthChecks()); n != 3 {
		t.Fatalf("%d clusters in the specifier, want 3 (TCP and two HTTP): %v", n, spec)
	}
	byName := map[string]*healthv3.ClusterHealthCheck{}
	for _, c := range spec.GetClusterHealthChecks() {
		byName[c.GetClusterName()] = c
	}
	addrs := func(c *healthv3.ClusterHealthCheck) []string {
		var out []string
		for _, l := range c.GetLocalityEndpoints() {
			for _, e := range l.GetEndpoints() {
				out = append(out, endpointAddress(e))
			}
		}
		return out
	}
	if got, want := addrs(byName[tcpGroup]), []string{"10.0.0.1:30001", "10.0.0.1:30002", "10.0.0.2:30001"}; !slices.Equal(got, want) {
		t.Errorf("TCP-checked endpoints %v, want %v", got, want)
	}
	own := byName[plan.group["l1-tcp-80"]]
	if own == nil || plan.group["l2-tcp-80"] != own.GetClusterName() || !strings.HasPrefix(own.GetClusterName(), checkGroupPrefix) {
		t.Fatalf("clusters of the specifier %v; l1 and l2 in %q and %q", slices.Sorted(maps.Keys(byName)), plan.group["l1-tcp-80"], plan.group["l2-tcp-80"])
	}
	if got, want := addrs(own), []string{"10.0.0.1:30003", "10.0.0.2:30004"}; !slices.Equal(got, want) {
		t.Errorf("HTTP-checked endpoints %v, want %v", got, want)
	}
	for _, c := range []*healthv3.ClusterHealthCheck{own, byName[plan.group["l3-tcp-80"]]} {
		if hc := c.GetHealthChecks(); len(hc) != 1 || hc[0].GetInterval().AsDuration() != interval || hc[0].GetNoTrafficInterval().AsDuration() != interval ||
			hc[0].GetHttpHealthCheck().GetPath() != "/healthz" {
			t.Errorf("own checks of %s: %v, want the HTTP check every %s", c.GetClusterName(), hc, interval)
		}
	}
	if !maps.EqualFunc(plan.asked, endpointsOf(clusters), slices.Equal) {
		t.Errorf("asked %v, want every cluster's endpoints", plan.asked)
	}

	// A cluster with endpoints already checked the same way: asked about, the same specifier.
	more := maps.Clone(clusters)
	more["d-tcp-80"] = healthCluster{addrs: []string{"10.0.0.1:30002"}}
	if p := planHealth(more, interval); p.hash != plan.hash || len(p.asked) != len(plan.asked)+1 {
		t.Errorf("a cluster with endpoints already checked: hash %x (was %x), %d clusters asked", p.hash, plan.hash, len(p.asked))
	}
	// A changed endpoint, a changed own check: another specifier.
	moved := maps.Clone(clusters)
	moved["b-tcp-80"] = healthCluster{addrs: []string{"10.0.0.1:30005"}}
	checked := maps.Clone(clusters)
	checked["l2-tcp-80"] = healthCluster{addrs: clusters["l2-tcp-80"].addrs, checks: http(time.Minute)}
	for what, c := range map[string]map[string]healthCluster{"an endpoint moved": moved, "an own check changed": checked} {
		if p := planHealth(c, interval); p.hash == plan.hash {
			t.Errorf("%s: the plan's hash did not change", what)
		}
	}
}

// TestHealthCheckCapFollowsPlanChecks: a tenant whose clusters have more endpoints than
// reach.MaxCheckedEndpoints has its proxies asked about exactly the clusters reach.PlanChecks
// takes of ClusterEndpoints (what the leader judges with), within the cap, and no others.
func TestHealthCheckCapFollowsPlanChecks(t *testing.T) {
	const tenant = "tenant-hds-cap"
	nodes := reach.MaxCheckedEndpoints * 3 / 8 // three LoadBalancers: 9/8 of the cap
	ips := make([]string, nodes)
	for i := range ips {
		ips[i] = fmt.Sprintf("10.2.%d.%d", i/250, i%250+1)
	}
	in := translate.Input{Tenant: tenant, Addresses: addresses(ips...)}
	for i, name := range []string{"a", "b", "c"} {
		in.LoadBalancers = append(in.LoadBalancers, newLB(name).port(corev1.ProtocolTCP, 80, 31080+i, 20001+i).LoadBalancer)
	}
	srv := NewServer(logr.Discard(), nil)
	if _, err := srv.SetTenant(context.Background(), tenant, mustTranslate(t, in)); err != nil {
		t.Fatal(err)
	}
	endpoints := srv.ClusterEndpoints(tenant).All()
	checks := reach.PlanChecks(endpoints)
	names := slices.Sorted(maps.Keys(endpoints))
	total := 0
	for _, addrs := range endpoints {
		total += len(addrs)
	}
	if len(names) != 3 || total != 3*nodes || !maps.Equal(checks.Skipped, map[string]bool{names[2]: true}) {
		t.Fatalf("clusters %v, checks %+v: want the last of 3 clusters skipped of %d endpoints", names, checks, 3*nodes)
	}

	plan := planHealth(srv.healthClusters(tenant), DefaultHealthChecking().Interval)
	spec := plan.specifier(DefaultHealthChecking())
	n := 0
	for _, c := range spec.GetClusterHealthChecks() {
		for _, l := range c.GetLocalityEndpoints() {
			n += len(l.GetEndpoints())
		}
	}
	if len(spec.GetClusterHealthChecks()) != 1 || n != 2*nodes || n > reach.MaxCheckedEndpoints {
		t.Errorf("asked to check %d clusters, %d endpoints; want 1 cluster (TCP), %d endpoints", len(spec.GetClusterHealthChecks()), n, 2*nodes)
	}
	want := maps.Clone(endpoints)
	maps.DeleteFunc(want, func(c string, _ []string) bool { return checks.Skipped[c] })
	if !maps.EqualFunc(plan.asked, want, slices.Equal) {
		t.Errorf("asked about %v, want %v", slices.Sorted(maps.Keys(plan.asked)), slices.Sorted(maps.Keys(want)))
	}
}

// BenchmarkHealthPlan1000 measures what a proxy's health discovery stream does when the
// clusters or endpoints of a tenant of 1000 single-port LoadBalancers (on 1 and on 3 nodes)
// changed: reading the snapshot's clusters and planning the checks ("plan", all it costs when
// the checks stay the same; a change of listeners or routes alone costs two version reads),
// and building the specifier when they changed ("plan+specifier"). specifier-bytes is what
// the proxy is then sent (HDS has no delta: the whole of it), as for the one new port of
// the bench harness's "change" workload.
func BenchmarkHealthPlan1000(b *testing.B) {
	for _, nodes := range [][]string{{"10.0.0.1"}, {"10.0.0.1", "10.0.0.2", "10.0.0.3"}} {
		in := translatetest.LoadBalancerTenant(1000)
		in.Addresses = addresses(nodes...)
		_, _, out, err := translatetest.Pipeline(in)
		if err != nil {
			b.Fatal(err)
		}
		srv := NewServer(logr.Discard(), nil)
		if _, err := srv.SetTenant(context.Background(), in.Tenant, out); err != nil {
			b.Fatal(err)
		}
		snap, err := srv.ordered.GetSnapshot(in.Tenant)
		if err != nil {
			b.Fatal(err)
		}
		checks := DefaultHealthChecking()
		b.Run(fmt.Sprintf("nodes=%d/plan", len(nodes)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				planHealth(clustersOf(snap), checks.Interval)
			}
		})
		b.Run(fmt.Sprintf("nodes=%d/plan+specifier", len(nodes)), func(b *testing.B) {
			b.ReportAllocs()
			var spec *healthv3.HealthCheckSpecifier
			for b.Loop() {
				spec = planHealth(clustersOf(snap), checks.Interval).specifier(checks)
			}
			b.ReportMetric(float64(proto.Size(spec)), "specifier-bytes")
		})
	}
}

// TestHealthPlanOncePerChange: the tenant's streams share the plan of its snapshot's
// clusters and endpoints; a listener change keeps it, an endpoint change makes another, and
// a removed tenant leaves none behind.
func TestHealthPlanOncePerChange(t *testing.T) {
	const tenant = "tenant-hds-plan"
	in := translate.Input{Tenant: tenant, Addresses: addresses("10.0.0.1")}
	in.LoadBalancers = []v1alpha1.LoadBalancer{newLB("a").port(corev1.ProtocolTCP, 80, 30080, 20080).LoadBalancer}
	srv := NewServer(logr.Discard(), nil)
	interval := DefaultHealthChecking().Interval
	plan := func(in translate.Input) healthPlan {
		t.Helper()
		if _, err := srv.SetTenant(context.Background(), tenant, mustTranslate(t, in)); err != nil {
			t.Fatal(err)
		}
		snap, err := srv.ordered.GetSnapshot(tenant)
		if err != nil {
			t.Fatal(err)
		}
		return srv.hds.plan(tenant, snap, interval)
	}
	same := func(a, b healthPlan) bool {
		return reflect.ValueOf(a.asked).UnsafePointer() == reflect.ValueOf(b.asked).UnsafePointer()
	}

	first := plan(in)
	listener := in
	listener.LoadBalancers = []v1alpha1.LoadBalancer{newLB("a").port(corev1.ProtocolTCP, 80, 30080, 20081).LoadBalancer}
	if again := plan(listener); !same(first, again) {
		t.Error("a listener change made another plan")
	}
	endpoint := in
	endpoint.LoadBalancers = []v1alpha1.LoadBalancer{newLB("a").port(corev1.ProtocolTCP, 80, 30081, 20081).LoadBalancer}
	if moved := plan(endpoint); same(first, moved) || moved.hash == first.hash {
		t.Error("an endpoint change kept the plan")
	}
	srv.RemoveTenant(tenant)
	snap, _ := srv.ordered.GetSnapshot(tenant)
	if p := srv.hds.plan(tenant, snap, interval); len(p.groups) != 0 || len(srv.hds.plans) != 0 {
		t.Errorf("after the tenant's removal: plan %+v, %d plans kept", p, len(srv.hds.plans))
	}
}

// A cluster's own checks, stretched by the tenant's health-check budget up to an hour, are
// run for the manager with their first check within the manager's interval: a new
// LoadBalancer's reachability is not left unknown for the stretched interval.
func TestOwnChecksFirstCheckWithinTheManagersInterval(t *testing.T) {
	stretched := &corev3.HealthCheck{Interval: durationpb.New(time.Hour), Timeout: durationpb.New(2 * time.Second)}
	short := &corev3.HealthCheck{Interval: durationpb.New(3 * time.Second), Timeout: durationpb.New(time.Second)}
	got := ownChecks([]*corev3.HealthCheck{stretched, short}, 10*time.Second)
	if j := got[0].GetInitialJitter().AsDuration(); j != 10*time.Second {
		t.Errorf("stretched check: initial jitter %v, want the manager's interval 10s", j)
	}
	if i := got[0].GetInterval().AsDuration(); i != time.Hour {
		t.Errorf("stretched check: interval %v, want its own hour", i)
	}
	if j, i := got[1].GetInitialJitter().AsDuration(), got[1].GetInterval().AsDuration(); i != 10*time.Second || j != 10*time.Second {
		t.Errorf("short check: interval %v jitter %v, want both raised to 10s", i, j)
	}
	if stretched.GetInitialJitter() != nil {
		t.Error("ownChecks modified the cluster's check")
	}
}
