package xds

import (
	"cmp"
	"errors"
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
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

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
	// healthClusterPrefix starts the name of the cluster a proxy checks for one of the
	// snapshot's: the proxy's statistics keep the two apart.
	healthClusterPrefix = "hds."
)

// HealthReport is what a proxy reported on its health discovery stream.
type HealthReport struct {
	// Tenant is the proxy's node.cluster (its certificate's tenant), Proxy its node.id.
	Tenant, Proxy string
	// Asked are the endpoints (host:port) the proxy was asked to check, by cluster.
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

// specifier is what a proxy of the tenant is asked to check, and the endpoints asked by
// cluster.
func (s *Server) specifier(tenant string, checks HealthChecking) (*healthv3.HealthCheckSpecifier, map[string][]string) {
	clusters := s.healthClusters(tenant)
	skipped := reach.PlanChecks(endpointsOf(clusters)).Skipped
	spec := &healthv3.HealthCheckSpecifier{Interval: durationpb.New(checks.ReportInterval)}
	asked := map[string][]string{}
	tcp := &corev3.HealthCheck{
		// The proxy sends no traffic to the endpoints it checks for the manager: without a
		// no-traffic interval of its own, Envoy would check them every minute.
		Timeout: durationpb.New(checks.Timeout), Interval: durationpb.New(checks.Interval), NoTrafficInterval: durationpb.New(checks.Interval),
		UnhealthyThreshold: wrapperspb.UInt32(checks.UnhealthyThreshold), HealthyThreshold: wrapperspb.UInt32(checks.HealthyThreshold),
		HealthChecker: &corev3.HealthCheck_TcpHealthCheck_{TcpHealthCheck: &corev3.HealthCheck_TcpHealthCheck{}},
	}
	for _, name := range slices.Sorted(maps.Keys(clusters)) {
		c := clusters[name]
		if skipped[name] {
			continue
		}
		eps := make([]*endpointv3.Endpoint, 0, len(c.addrs))
		for _, a := range c.addrs {
			host, port, _ := net.SplitHostPort(a)
			p, _ := strconv.ParseUint(port, 10, 32)
			eps = append(eps, &endpointv3.Endpoint{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
				SocketAddress: &corev3.SocketAddress{Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(p)}},
			}}})
		}
		hc := []*corev3.HealthCheck{tcp}
		if len(c.checks) > 0 {
			// The cluster's own checks, no more often than the default: these probes come on
			// top of the cluster's (whose rate the tenant's health-check budget bounds).
			hc = make([]*corev3.HealthCheck, 0, len(c.checks))
			for _, check := range c.checks {
				check = proto.Clone(check).(*corev3.HealthCheck)
				if check.GetInterval().AsDuration() < checks.Interval {
					check.Interval = durationpb.New(checks.Interval)
				}
				check.NoTrafficInterval, check.NoTrafficHealthyInterval = check.Interval, nil
				hc = append(hc, check)
			}
		}
		spec.ClusterHealthChecks = append(spec.ClusterHealthChecks, &healthv3.ClusterHealthCheck{
			ClusterName: healthClusterPrefix + name, HealthChecks: hc,
			LocalityEndpoints: []*healthv3.LocalityEndpoints{{Locality: &corev3.Locality{}, Endpoints: eps}},
		})
		asked[name] = c.addrs
	}
	return spec, asked
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

	var asked map[string][]string
	health := map[string]map[string]bool{}
	for {
		changed := h.watch(tenant)
		spec, next := s.specifier(tenant, checks)
		if asked == nil || !maps.EqualFunc(asked, next, slices.Equal) {
			if err := st.Send(spec); err != nil {
				return nil
			}
			asked = next
			maps.DeleteFunc(health, func(c string, _ map[string]bool) bool { return asked[c] == nil })
			hook(HealthReport{Tenant: tenant, Proxy: proxy, Asked: asked, Health: cloneHealth(health)})
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
				health = readReport(r, asked)
				hook(HealthReport{Tenant: tenant, Proxy: proxy, Asked: asked, Health: cloneHealth(health)})
			}
		}
	}
}

// readReport reads the health a proxy reported of the endpoints it was asked about; any
// other cluster or endpoint is ignored, and at most maxReportEndpoints entries are read.
func readReport(r *healthv3.EndpointHealthResponse, asked map[string][]string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	read := 0
	for _, c := range r.GetClusterEndpointsHealth() {
		name, prefixed := strings.CutPrefix(c.GetClusterName(), healthClusterPrefix)
		addrs, ok := asked[name]
		ok = ok && prefixed
		for _, l := range c.GetLocalityEndpointsHealth() {
			for _, e := range l.GetEndpointsHealth() {
				if read++; read > maxReportEndpoints {
					return out
				}
				a := endpointAddress(e.GetEndpoint())
				if !ok || a == "" {
					continue
				}
				if _, found := slices.BinarySearch(addrs, a); !found {
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

func cloneHealth(h map[string]map[string]bool) map[string]map[string]bool {
	out := make(map[string]map[string]bool, len(h))
	for c, m := range h {
		out[c] = maps.Clone(m)
	}
	return out
}
