package xds

import (
	"cmp"
	"errors"
	"hash/fnv"
	"io"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	healthv3 "github.com/envoyproxy/go-control-plane/envoy/service/health/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/reach"
	"kubelb.dev/kubelb/internal/textcut"
)

// Health discovery (HDS, envoy.service.health.v3.HealthDiscoveryService): every proxy that
// opens the stream (the bootstrap's hds_config) is asked to health-check the endpoints of
// its tenant's clusters, as they are in the tenant's current snapshot, and reports what it
// found; the reports go to the OnHealth hook. The stream is authenticated as ADS is: the
// client certificate's tenant must be the proxy's node.cluster, and the tenant must have a
// snapshot; a proxy is only ever asked about, and heard on, its own tenant's endpoints.
// What it reports is checked against what it was asked (other clusters and endpoints are
// ignored) and bounded; its streams count against the tenant's stream limits, and its
// reports against the stream's and the tenant's request rates.

// HealthChecking is how the proxies check the endpoints.
type HealthChecking struct {
	// Interval and Timeout of each check (a TCP connect, or the cluster's own health check
	// when it has one).
	Interval, Timeout time.Duration
	// UnhealthyThreshold and HealthyThreshold are the failed (passed) checks in a row that
	// make an endpoint unhealthy (healthy).
	UnhealthyThreshold, HealthyThreshold uint32
	// ReportInterval is how often a proxy reports.
	ReportInterval time.Duration
}

// DefaultHealthChecking is what the manager asks of the proxies.
func DefaultHealthChecking() HealthChecking {
	return HealthChecking{Interval: 10 * time.Second, Timeout: 2 * time.Second, UnhealthyThreshold: 2, HealthyThreshold: 1,
		ReportInterval: 10 * time.Second}
}

// Bounds of health discovery: a proxy is asked to check at most reach.MaxCheckedEndpoints
// endpoints (the clusters reach.PlanChecks takes; the leader tells the objects of the
// others from the same choice), and at most maxReportEndpoints are read of one report.
const (
	maxReportEndpoints = 2 * reach.MaxCheckedEndpoints
	healthStreamType   = "hds"
	// healthClusterPrefix starts the names of the clusters of a specifier (tcpGroup,
	// checkGroupPrefix): the proxy's statistics keep them apart from the snapshot's.
	healthClusterPrefix = "hds."
)

// HealthReport is what a proxy reported on its health discovery stream.
type HealthReport struct {
	// Tenant is the proxy's node.cluster (its certificate's tenant), Proxy its node.id.
	Tenant, Proxy string
	// Asked are the endpoints (host:port) the proxy was asked to check, by cluster (shared
	// with the tenant's other proxies: read only).
	Asked map[string][]string
	// Health of the endpoints it reported on (true: healthy), by cluster and endpoint; only
	// endpoints it was asked about.
	Health map[string]map[string]bool
	// Gone is set when the stream ended: what the proxy reported no longer holds.
	Gone bool
}

// hds is the health discovery part of a Server.
type hds struct {
	healthv3.UnimplementedHealthDiscoveryServiceServer
	srv *Server

	mu      sync.Mutex
	checks  HealthChecking
	hook    func(HealthReport)
	changed map[string]chan struct{} // tenant → closed on the next change of its snapshot
	plans   map[string]tenantPlan    // tenant → the plan of its current snapshot
	ids     atomic.Int64
}

// OnHealth sets the hook that hears every report of a proxy connected to this server (and
// its stream's end). Set it before Run; the hook must not block.
func (s *Server) OnHealth(hook func(HealthReport)) {
	s.hds.mu.Lock()
	defer s.hds.mu.Unlock()
	s.hds.hook = hook
}

// SetHealthChecking sets how the proxies check the endpoints (DefaultHealthChecking when
// never set). Set it before Run.
func (s *Server) SetHealthChecking(h HealthChecking) {
	s.hds.mu.Lock()
	defer s.hds.mu.Unlock()
	s.hds.checks = h
}

// healthChanged wakes the health discovery streams of a tenant: its snapshot changed.
func (h *hds) healthChanged(tenant string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch, ok := h.changed[tenant]; ok {
		close(ch)
		delete(h.changed, tenant)
	}
}

// watch returns a channel closed on the tenant's next change.
func (h *hds) watch(tenant string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.changed == nil {
		h.changed = map[string]chan struct{}{}
	}
	ch, ok := h.changed[tenant]
	if !ok {
		ch = make(chan struct{})
		h.changed[tenant] = ch
	}
	return ch
}

func (h *hds) settings() (HealthChecking, func(HealthReport)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	checks := h.checks
	if checks == (HealthChecking{}) {
		checks = DefaultHealthChecking()
	}
	hook := h.hook
	if hook == nil {
		hook = func(HealthReport) {}
	}
	return checks, hook
}

// ClusterEndpoints returns the clusters of the tenant's current snapshot as health discovery
// reads them (healthClusters), for the leader to judge with: the version of each cluster's
// endpoints is the digests of its Cluster and ClusterLoadAssignment resources (kept with the
// snapshot: nothing is read to compare them), and the endpoints of a cluster (host:port, IP
// addresses only, sorted, distinct) are read from the snapshot when asked for.
func (s *Server) ClusterEndpoints(tenant string) reach.Clusters {
	snap, err := s.ordered.GetSnapshot(tenant)
	if err != nil {
		return reach.Clusters{}
	}
	clusters, assignments := snap.GetResourcesAndTTL(resource.ClusterType), snap.GetResourcesAndTTL(resource.EndpointType)
	clusterDigests, assignmentDigests := snap.GetVersionMap(resource.ClusterType), snap.GetVersionMap(resource.EndpointType)
	// assignment is the name of a cluster's ClusterLoadAssignment, "" when it has its own.
	assignment := func(c *clusterv3.Cluster) string {
		if c.GetType() != clusterv3.Cluster_EDS {
			return ""
		}
		return cmp.Or(c.GetEdsClusterConfig().GetServiceName(), c.GetName())
	}
	return reach.Clusters{
		Versions: func(yield func(string, reach.Version) bool) {
			for name, r := range clusters {
				c, ok := r.Resource.(*clusterv3.Cluster)
				if !ok {
					continue
				}
				v := reach.Version{Cluster: clusterDigests[name]}
				if a := assignment(c); a != "" {
					v.Assignment = assignmentDigests[a]
				}
				if !yield(name, v) {
					return
				}
			}
		},
		Endpoints: func(name string) []string {
			c, ok := clusters[name].Resource.(*clusterv3.Cluster)
			if !ok {
				return nil
			}
			cla := c.GetLoadAssignment()
			if a := assignment(c); a != "" {
				cla, _ = assignments[a].Resource.(*endpointv3.ClusterLoadAssignment)
			}
			return assignmentAddrs(cla)
		},
	}
}

// endpointsOf is the endpoints of each cluster.
func endpointsOf(clusters map[string]healthCluster) map[string][]string {
	out := make(map[string][]string, len(clusters))
	for name, c := range clusters {
		out[name] = c.addrs
	}
	return out
}

// healthCluster is a cluster as health discovery asks it to be checked.
type healthCluster struct {
	addrs  []string
	checks []*corev3.HealthCheck // the cluster's own, if it has any
}

// healthClusters reads the clusters of the tenant's current snapshot.
func (s *Server) healthClusters(tenant string) map[string]healthCluster {
	snap, err := s.ordered.GetSnapshot(tenant)
	if err != nil {
		return nil
	}
	return clustersOf(snap)
}

// clustersOf reads the clusters of a snapshot that have endpoints.
func clustersOf(snap cache.ResourceSnapshot) map[string]healthCluster {
	assignments := map[string]*endpointv3.ClusterLoadAssignment{}
	for _, r := range snap.GetResources(resource.EndpointType) {
		if cla, ok := r.(*endpointv3.ClusterLoadAssignment); ok {
			assignments[cla.GetClusterName()] = cla
		}
	}
	out := map[string]healthCluster{}
	for _, r := range snap.GetResources(resource.ClusterType) {
		c, ok := r.(*clusterv3.Cluster)
		if !ok {
			continue
		}
		cla := c.GetLoadAssignment()
		if c.GetType() == clusterv3.Cluster_EDS {
			cla = assignments[cmp.Or(c.GetEdsClusterConfig().GetServiceName(), c.GetName())]
		}
		if addrs := assignmentAddrs(cla); len(addrs) > 0 {
			out[c.GetName()] = healthCluster{addrs: addrs, checks: c.GetHealthChecks()}
		}
	}
	return out
}

// assignmentAddrs is the endpoints (host:port, IP addresses only) of an assignment, sorted,
// distinct.
func assignmentAddrs(cla *endpointv3.ClusterLoadAssignment) []string {
	var addrs []string
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			if a := endpointAddress(e.GetEndpoint()); a != "" {
				addrs = append(addrs, a)
			}
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(addrs)))
}

// endpointAddress is host:port of an endpoint with an IP socket address, "" otherwise.
func endpointAddress(e *endpointv3.Endpoint) string {
	sa := e.GetAddress().GetSocketAddress()
	ip, err := netip.ParseAddr(sa.GetAddress())
	if err != nil || sa.GetPortValue() == 0 {
		return ""
	}
	return net.JoinHostPort(ip.String(), strconv.FormatUint(uint64(sa.GetPortValue()), 10))
}

// What a proxy is asked to check is planned first (planHealth), and the specifier built from
// the plan only when the plan's hash differs from that of the last one the proxy got: HDS has
// no delta, a specifier replaces the previous one whole, so an unchanged plan sends nothing.
// The plan groups the snapshot's clusters by their checks: every cluster checked the same way
// (the default TCP connect, or the same own checks) is one cluster of the specifier, with the
// distinct endpoints of them all. The same endpoints are checked the same way as one cluster
// each would be, each endpoint once per check rather than once per snapshot cluster, and the
// specifier carries each check and each endpoint once: about 22 bytes an endpoint, where a
// cluster each repeated its name, its checks and its locality (99 bytes for a one-endpoint
// LoadBalancer). Envoy updates a cluster of the specifier in place (it keeps the hosts that
// stay, with their health), and reports per cluster and endpoint; a report is read back onto
// the snapshot's clusters through the plan.

// tcpGroup is the specifier's cluster of the endpoints checked by a TCP connect (the
// clusters without checks of their own); checkGroupPrefix starts that of the clusters with
// the same own checks, followed by their hash.
const (
	tcpGroup         = healthClusterPrefix + "tcp"
	checkGroupPrefix = healthClusterPrefix + "check-"
)

// healthGroup is one cluster of the specifier: the endpoints checked the same way.
type healthGroup struct {
	name   string
	checks []*corev3.HealthCheck // nil: the TCP connect of HealthChecking
	addrs  []string              // distinct, sorted
}

// healthPlan is what a proxy of a tenant is asked to check.
type healthPlan struct {
	// asked are the endpoints asked, by snapshot cluster; group is the name of the
	// specifier's cluster each of those is checked in.
	asked  map[string][]string
	group  map[string]string
	groups []healthGroup // by name
	// hash identifies the specifier the plan makes (groups' names, which carry their
	// checks, and endpoints): the same hash, the same specifier.
	hash uint64
}

// planHealth plans the checks of the clusters reach.PlanChecks takes; own checks are asked
// no more often than every interval.
func planHealth(clusters map[string]healthCluster, interval time.Duration) healthPlan {
	skipped := reach.PlanChecks(endpointsOf(clusters)).Skipped
	p := healthPlan{asked: map[string][]string{}, group: map[string]string{}}
	byName := map[string]*healthGroup{}
	for name, c := range clusters {
		if skipped[name] {
			continue
		}
		group := tcpGroup
		if len(c.checks) > 0 {
			group = checkGroupPrefix + checksHash(c.checks)
		}
		g := byName[group]
		if g == nil {
			g = &healthGroup{name: group}
			if len(c.checks) > 0 {
				g.checks = ownChecks(c.checks, interval)
			}
			byName[group] = g
		}
		g.addrs = append(g.addrs, c.addrs...)
		p.asked[name], p.group[name] = c.addrs, group
	}
	h := fnv.New64a()
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		g := byName[name]
		g.addrs = slices.Compact(slices.Sorted(slices.Values(g.addrs)))
		p.groups = append(p.groups, *g)
		h.Write([]byte(g.name))
		for _, a := range g.addrs {
			h.Write([]byte{'\n'})
			h.Write([]byte(a))
		}
		h.Write([]byte{0})
	}
	p.hash = h.Sum64()
	return p
}

// checksHash identifies a cluster's own checks (as the cluster has them: the checks of
// clusters whose intervals differ below the floor of ownChecks are asked the same, but in
// two clusters of the specifier).
func checksHash(checks []*corev3.HealthCheck) string {
	h := fnv.New64a()
	for _, check := range checks {
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(check)
		h.Write(b)
		h.Write([]byte{0})
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

// ownChecks are a cluster's own checks as the proxy is asked to run them: no more often
// than every interval (these probes come on top of the cluster's, whose rate the tenant's
// health-check budget bounds).
func ownChecks(checks []*corev3.HealthCheck, interval time.Duration) []*corev3.HealthCheck {
	out := make([]*corev3.HealthCheck, 0, len(checks))
	for _, check := range checks {
		check = proto.Clone(check).(*corev3.HealthCheck)
		if check.GetInterval().AsDuration() < interval {
			check.Interval = durationpb.New(interval)
		}
		// The first check at a random time within the manager's own interval, not the
		// cluster's: a stretched cluster interval (up to an hour) would leave a new
		// LoadBalancer's reachability unknown that long.
		check.InitialJitter = durationpb.New(min(check.GetInterval().AsDuration(), interval))
		check.NoTrafficInterval, check.NoTrafficHealthyInterval = check.Interval, nil
		out = append(out, check)
	}
	return out
}

// specifier is the specifier of a plan.
func (p healthPlan) specifier(checks HealthChecking) *healthv3.HealthCheckSpecifier {
	spec := &healthv3.HealthCheckSpecifier{Interval: durationpb.New(checks.ReportInterval)}
	tcp := []*corev3.HealthCheck{{
		// The proxy sends no traffic to the endpoints it checks for the manager: without a
		// no-traffic interval of its own, Envoy would check them every minute.
		// Each endpoint's first check at a random time within the interval (these clusters
		// carry no traffic, so nothing waits for it), and up to a fifth more on each
		// interval: thousands of checks spread over it rather than a socket each at the
		// same moment (descriptors: docs/performance.md).
		Timeout: durationpb.New(checks.Timeout), Interval: durationpb.New(checks.Interval), NoTrafficInterval: durationpb.New(checks.Interval),
		InitialJitter: durationpb.New(checks.Interval), IntervalJitterPercent: 20,
		UnhealthyThreshold: wrapperspb.UInt32(checks.UnhealthyThreshold), HealthyThreshold: wrapperspb.UInt32(checks.HealthyThreshold),
		HealthChecker: &corev3.HealthCheck_TcpHealthCheck_{TcpHealthCheck: &corev3.HealthCheck_TcpHealthCheck{}},
	}}
	for _, g := range p.groups {
		eps := make([]*endpointv3.Endpoint, 0, len(g.addrs))
		for _, a := range g.addrs {
			host, port, _ := net.SplitHostPort(a)
			n, _ := strconv.ParseUint(port, 10, 32)
			eps = append(eps, &endpointv3.Endpoint{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
				SocketAddress: &corev3.SocketAddress{Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(n)}},
			}}})
		}
		hc := tcp
		if g.checks != nil {
			hc = g.checks
		}
		spec.ClusterHealthChecks = append(spec.ClusterHealthChecks, &healthv3.ClusterHealthCheck{
			ClusterName: g.name, HealthChecks: hc, LocalityEndpoints: []*healthv3.LocalityEndpoints{{Endpoints: eps}},
		})
	}
	return spec
}

// health is what a proxy's last report says of the endpoints of the snapshot's clusters
// (true: healthy), from what it says of the specifier's clusters (by group and endpoint).
func (p healthPlan) health(byGroup map[string]map[string]bool) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for name, addrs := range p.asked {
		reported := byGroup[p.group[name]]
		if len(reported) == 0 {
			continue
		}
		for _, a := range addrs {
			if healthy, ok := reported[a]; ok {
				if out[name] == nil {
					out[name] = map[string]bool{}
				}
				out[name][a] = healthy
			}
		}
	}
	return out
}

// tenantPlan is the plan of a snapshot's clusters and endpoints, by their versions.
type tenantPlan struct {
	versions [2]string
	plan     healthPlan
}

// snapshotVersions are the versions of a snapshot's clusters and endpoints: what a plan
// depends on.
func snapshotVersions(snap cache.ResourceSnapshot) [2]string {
	if snap == nil {
		return [2]string{}
	}
	return [2]string{snap.GetVersion(resource.ClusterType), snap.GetVersion(resource.EndpointType)}
}

// plan returns the plan of the tenant's snapshot snap, made once for all the tenant's
// streams on this server (the checks are the server's, the same for all). An empty plan is
// not kept: it costs nothing to make, and a removed tenant leaves nothing behind.
func (h *hds) plan(tenant string, snap cache.ResourceSnapshot, interval time.Duration) healthPlan {
	versions := snapshotVersions(snap)
	h.mu.Lock()
	tp, ok := h.plans[tenant]
	h.mu.Unlock()
	if ok && tp.versions == versions {
		return tp.plan
	}
	var clusters map[string]healthCluster
	if snap != nil {
		clusters = clustersOf(snap)
	}
	p := planHealth(clusters, interval)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.plans == nil {
		h.plans = map[string]tenantPlan{}
	}
	if len(p.groups) == 0 {
		delete(h.plans, tenant)
	} else {
		h.plans[tenant] = tenantPlan{versions: versions, plan: p}
	}
	return p
}

// StreamHealthCheck serves one proxy's health discovery stream.
func (h *hds) StreamHealthCheck(st healthv3.HealthDiscoveryService_StreamHealthCheckServer) error {
	s, ctx := h.srv, st.Context()
	tenant, err := peerTenant(ctx)
	if err != nil {
		s.log.Info("refusing health discovery stream", "error", err)
		return err
	}
	key := stream{id: -h.ids.Add(1)} // apart from go-control-plane's stream ids (positive)
	s.cb.mu.Lock()
	err = s.cb.admit(ctx, key, tenant, healthStreamType)
	s.cb.mu.Unlock()
	if err != nil {
		return err
	}
	defer func() {
		s.cb.mu.Lock()
		s.cb.release(key)
		s.cb.mu.Unlock()
	}()
	first, err := st.Recv()
	if err != nil {
		return nil
	}
	req := first.GetHealthCheckRequest()
	if req == nil || req.GetNode() == nil {
		return status.Error(codes.InvalidArgument, "the first message of a health discovery stream is a HealthCheckRequest with the node")
	}
	if err := s.cb.authorize(tenant, req.GetNode(), true); err != nil {
		return err
	}
	proxy := textcut.Cut(req.GetNode().GetId(), 253, "")
	checks, hook := h.settings()
	defer hook(HealthReport{Tenant: tenant, Proxy: proxy, Gone: true})

	reports := make(chan *healthv3.EndpointHealthResponse)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := st.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			r := m.GetEndpointHealthResponse()
			if r == nil {
				continue
			}
			s.cb.throttle(key)
			select {
			case reports <- r:
			case <-ctx.Done():
				return
			}
		}
	}()

	// The plan depends on the snapshot's clusters and endpoints only: a change of listeners,
	// routes or secrets is not even planned.
	var (
		plan     healthPlan
		sent     bool
		versions [2]string
		health   = map[string]map[string]bool{} // the last report, by specifier cluster
	)
	for {
		changed := h.watch(tenant)
		snap, _ := s.ordered.GetSnapshot(tenant)
		if now := snapshotVersions(snap); !sent || now != versions {
			versions = now
			next := h.plan(tenant, snap, checks.Interval)
			resend := !sent || next.hash != plan.hash
			if resend {
				spec := next.specifier(checks)
				if err := st.Send(spec); err != nil {
					return nil
				}
				sent = true
				metrics.ManagerHealthSpecifiers.WithLabelValues(tenant).Inc()
				metrics.ManagerXDSSentBytes.WithLabelValues(tenant).Add(float64(proto.Size(spec)))
				// Envoy keeps the health of the endpoints that stay in a cluster.
				health = keepAsked(health, next)
			}
			if resend || !maps.EqualFunc(plan.asked, next.asked, slices.Equal) {
				plan = next
				hook(HealthReport{Tenant: tenant, Proxy: proxy, Asked: plan.asked, Health: plan.health(health)})
			}
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil
			case err := <-recvErr:
				if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
					return nil
				}
				return err
			case <-changed:
				break wait
			case r := <-reports:
				health = readReport(r, plan)
				hook(HealthReport{Tenant: tenant, Proxy: proxy, Asked: plan.asked, Health: plan.health(health)})
			}
		}
	}
}

// readReport reads the health a proxy reported of the endpoints of the specifier's clusters
// of the plan, by specifier cluster; any other cluster or endpoint is ignored, and at most
// maxReportEndpoints entries are read.
func readReport(r *healthv3.EndpointHealthResponse, plan healthPlan) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	read := 0
	for _, c := range r.GetClusterEndpointsHealth() {
		name := c.GetClusterName()
		i, ok := slices.BinarySearchFunc(plan.groups, name, func(g healthGroup, name string) int { return strings.Compare(g.name, name) })
		for _, l := range c.GetLocalityEndpointsHealth() {
			for _, e := range l.GetEndpointsHealth() {
				if read++; read > maxReportEndpoints {
					return out
				}
				a := endpointAddress(e.GetEndpoint())
				if !ok || a == "" {
					continue
				}
				if _, found := slices.BinarySearch(plan.groups[i].addrs, a); !found {
					continue
				}
				var healthy bool
				switch e.GetHealthStatus() {
				case corev3.HealthStatus_HEALTHY, corev3.HealthStatus_DEGRADED:
					healthy = true
				case corev3.HealthStatus_UNHEALTHY, corev3.HealthStatus_TIMEOUT:
				default:
					continue // UNKNOWN, DRAINING: no verdict
				}
				if out[name] == nil {
					out[name] = map[string]bool{}
				}
				out[name][a] = healthy
			}
		}
	}
	return out
}

// keepAsked keeps of a report (by specifier cluster) what the plan still asks.
func keepAsked(health map[string]map[string]bool, plan healthPlan) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, g := range plan.groups {
		for a, healthy := range health[g.name] {
			if _, found := slices.BinarySearch(g.addrs, a); found {
				if out[g.name] == nil {
					out[g.name] = map[string]bool{}
				}
				out[g.name][a] = healthy
			}
		}
	}
	return out
}
