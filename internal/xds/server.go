// Package xds is the transport of kubelb's Envoy configuration: it serves per-tenant
// resources over gRPC (ADS, state of the world and delta). Each tenant's Envoy fleet
// identifies itself with node.cluster = the tenant namespace (node.id names the individual
// proxy); all proxies of a tenant share one snapshot.
//
// The server speaks only mutual TLS: a client must present a certificate of the manager's CA
// (internal/pki) naming a tenant, and every stream (state of the world and delta, ADS and the
// per-type services, and the unary fetches) is refused with PermissionDenied unless
// node.cluster is that tenant and the tenant has a snapshot. The check runs before the
// snapshot cache sees the request, so a refused request leaves no cache entry and no metric
// series behind.
//
// What one client, and one tenant's clients together, may cost the server is bounded
// (Limits): connections and streams per tenant, streams per connection, a request rate per
// stream and per tenant, request size; a request for a type the server does not serve is
// refused before the cache sees it.
//
// It takes resources by xDS type URL (listeners, routes, clusters, endpoints, secrets,
// runtime) and knows neither the API types nor the translation. A snapshot is only ever set
// when it is consistent and every resource validates, so Envoy never receives configuration
// it would reject; each type is versioned by a hash of its content, so an unchanged tenant is
// never re-pushed and a change of one type re-sends only that type (and endpoints with
// clusters, see newSnapshot). Envoy's answers (NACKs, and ACKs after a NACK) are handed to
// the OnRejection hook. A rejected response is not re-sent at once (a NACK storm), but again
// after a delay that doubles with every NACK (RetryRejectedAfter up to RetryRejectedAtMost),
// so a rejection that goes away by itself (a listener port held by another process) heals
// without a change of the snapshot. Delta streams have the same guard: there the resources of
// a NACKed response are re-sent alone, after the same delays (see callbacks).
package xds

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	healthv3 "github.com/envoyproxy/go-control-plane/envoy/service/health/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	runtimeservice "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	secretservice "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/log"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/xds/routeconf"
)

// Keepalive settings of the gRPC server. Envoy's bootstrap (internal/xds/bootstrap) pings
// with the same settings, which the enforcement policy must allow.
const (
	KeepaliveTime        = 30 * time.Second
	KeepaliveTimeout     = 10 * time.Second
	keepaliveMinPingTime = 10 * time.Second
	gracefulStopTimeout  = 5 * time.Second
	// maxHeaderListBytes bounds the request headers of a stream (Envoy sends a few hundred
	// bytes).
	maxHeaderListBytes = 16 << 10
	// streamWindowBytes is the receive window of a stream: requests a client may send
	// ahead of what the server has read.
	streamWindowBytes = 64 << 10
)

// tenantHash keys snapshots by node.cluster, the tenant namespace.
type tenantHash struct{}

// ID implements cache.NodeHash.
func (tenantHash) ID(node *corev3.Node) string { return node.GetCluster() }

// Server is the xDS server of the manager: a snapshot cache keyed by tenant and the gRPC
// services that serve it. It is safe for concurrent use.
type Server struct {
	log logr.Logger
	// cache serves the proxies: endpoints from endpoints, every other type from ordered.
	cache cache.Cache
	// ordered holds the whole snapshot and answers in ADS order (clusters before listeners).
	ordered cache.SnapshotCache
	// endpoints holds the endpoints alone and answers any request for a subset of them (see
	// NewServer).
	endpoints cache.SnapshotCache
	cb        *callbacks
	tls       *tls.Config
	// grpcOptions are added to the gRPC server's (tests: a stats handler counting bytes).
	grpcOptions []grpc.ServerOption

	mu       sync.Mutex
	versions map[string]string // tenant → version of its current snapshot
	// digests are, per tenant, the digests of the resources of its last snapshot (see
	// newSnapshot): a resource set again unchanged (the same message) is neither validated
	// nor marshalled and hashed again.
	digests map[string]digests
	// hds serves health discovery (hds.go).
	hds hds
}

// NewServer returns a Server with an empty cache; SetTenant may be called before Run. creds
// is the server's TLS configuration (pki.Authority.ServerTLS in the manager): the server
// always requires and verifies client certificates, whatever creds says; Serve refuses to
// run without it.
func NewServer(logger logr.Logger, creds *tls.Config) *Server {
	s := &Server{
		log:       logger,
		ordered:   cache.NewSnapshotCache(true, tenantHash{}, cacheLogger(logger.WithName("cache"))),
		endpoints: cache.NewSnapshotCache(false, tenantHash{}, cacheLogger(logger.WithName("cache"))),
		tls:       creds,
		versions:  map[string]string{},
		digests:   map[string]digests{},
	}
	// Endpoints are served from a cache without go-control-plane's ADS rule that answers a
	// request only when it names every endpoint resource of the snapshot. Under that rule a
	// proxy could wait for endpoints for its initial fetch timeout (15 s): a new snapshot
	// adds cluster B while the proxy is still taking the one that added cluster A; the proxy
	// asks for the endpoints of A, the snapshot has those of A and B, and the request is
	// dropped without a watch. The proxy holds its cluster update until A's endpoints arrive,
	// so it never learns of B and never asks again. Served from this cache, the request is
	// answered with the endpoints it names (TestEndpointsWhileClustersGrow).
	s.cache = &cache.MuxCache{
		Classify:      func(r *cache.Request) string { return cacheFor(r.GetTypeUrl()) },
		ClassifyDelta: func(r *cache.DeltaRequest) string { return cacheFor(r.GetTypeUrl()) },
		Caches:        map[string]cache.Cache{orderedCache: s.ordered, endpointsCache: s.endpoints},
	}
	s.cb = newCallbacks(logger, s.hasTenant)
	s.hds.srv = s
	return s
}

// hasTenant reports whether the tenant has a snapshot set (and not removed).
func (s *Server) hasTenant(tenant string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.versions[tenant]
	return ok
}

// The caches of a Server, by what MuxCache.Classify answers.
const (
	orderedCache   = "ordered"
	endpointsCache = "endpoints"
)

// cacheFor names the cache that serves a type.
func cacheFor(typeURL string) string {
	if typeURL == resource.EndpointType {
		return endpointsCache
	}
	return orderedCache
}

// snapshotCache is the cache that serves a type.
func (s *Server) snapshotCache(typeURL string) cache.SnapshotCache {
	if cacheFor(typeURL) == endpointsCache {
		return s.endpoints
	}
	return s.ordered
}

// setSnapshot sets snap in both caches: first the ordered one (clusters, listeners, ...),
// then the endpoints, so that a proxy receives a changed cluster before the endpoints that
// complete it.
func (s *Server) setSnapshot(ctx context.Context, tenant string, snap *cache.Snapshot) error {
	if err := s.ordered.SetSnapshot(ctx, tenant, snap); err != nil {
		return err
	}
	eds := &cache.Snapshot{}
	eds.Resources[types.Endpoint] = snap.Resources[types.Endpoint]
	if s.cb.hasDeltaStreams() {
		// The cache answers the delta watches with the new snapshot right away: its versions
		// must be there. Without delta streams they wait for one (deltaEndpoints).
		if err := setDeltaEndpointVersions(eds, snap); err != nil {
			return err
		}
	}
	return s.endpoints.SetSnapshot(ctx, tenant, eds)
}

// deltaEndpoints gives the tenant's endpoints snapshot its delta versions, when it has none
// yet, before a delta watch of endpoints reaches the cache (which would otherwise hash the
// endpoints alone). Building them hashes every resource of the snapshot, so a server without
// delta streams (only state of the world, or no proxies at all) does not.
func (s *Server) deltaEndpoints(tenant string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	got, err := s.endpoints.GetSnapshot(tenant)
	if err != nil {
		return nil // no snapshot yet: SetTenant builds the versions (a delta stream is open)
	}
	eds, ok := got.(*cache.Snapshot)
	if !ok || eds.VersionMap != nil {
		return nil
	}
	ordered, err := s.ordered.GetSnapshot(tenant)
	if err != nil {
		return err
	}
	snap, ok := ordered.(*cache.Snapshot)
	if !ok {
		return fmt.Errorf("snapshot of tenant %s is a %T", tenant, ordered)
	}
	return setDeltaEndpointVersions(eds, snap)
}

// setDeltaEndpointVersions sets the version map of eds, the endpoints of snap.
func setDeltaEndpointVersions(eds, snap *cache.Snapshot) error {
	versions, err := deltaEndpointVersions(snap)
	if err != nil {
		return err
	}
	eds.VersionMap = map[string]map[string]string{resource.EndpointType: versions}
	return nil
}

// deltaEndpointVersions returns the versions delta streams see of the endpoints of snap: the
// hash of each ClusterLoadAssignment with that of the cluster it belongs to. Envoy re-creates
// a changed EDS cluster and keeps it warming until it receives its endpoints again (for
// initial_fetch_timeout, 15 s), even when they did not change; so a changed cluster changes
// the version of its endpoints, and a delta stream is sent them again (newSnapshot does the
// same for state of the world). It builds snap's version map, which the cache would build on
// its first delta watch anyway.
func deltaEndpointVersions(snap *cache.Snapshot) (map[string]string, error) {
	if err := snap.ConstructVersionMap(); err != nil {
		return nil, err
	}
	clusterOf := map[string]string{}
	for _, r := range snap.Resources[types.Cluster].Items {
		if c, ok := r.Resource.(*clusterv3.Cluster); ok && c.GetType() == clusterv3.Cluster_EDS {
			clusterOf[cmp.Or(c.GetEdsClusterConfig().GetServiceName(), c.GetName())] = c.GetName()
		}
	}
	clusters := snap.GetVersionMap(resource.ClusterType)
	versions := maps.Clone(snap.GetVersionMap(resource.EndpointType))
	if versions == nil {
		versions = map[string]string{}
	}
	for name, v := range versions {
		if c, ok := clusterOf[name]; ok {
			// Half of each hash (128 bits of each). These versions are the server's record
			// of what a stream has; on the wire each resource carries the hash of its own
			// content (go-control-plane), so a proxy that reconnects with the versions it has
			// is sent its endpoints again.
			versions[name] = v[:len(v)/2] + clusters[c][:len(clusters[c])/2]
		}
	}
	return versions, nil
}

// serverTLS is creds with client certificates required and verified, also in the
// configurations GetConfigForClient returns.
func serverTLS(creds *tls.Config) *tls.Config {
	cfg := creds.Clone()
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	if get := creds.GetConfigForClient; get != nil {
		cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := get(hello)
			if err != nil || c == nil {
				return c, err
			}
			c = c.Clone()
			c.ClientAuth = tls.RequireAndVerifyClientCert
			return c, nil
		}
	}
	return cfg
}

// OnRejection sets the hook that hears every NACK of a proxy connected to this server, and
// its resolution (an ACK of a later version, or the proxy's disconnection). Set it before
// Run; the hook must not block.
func (s *Server) OnRejection(hook func(Rejection)) {
	s.cb.mu.Lock()
	defer s.cb.mu.Unlock()
	s.cb.onReject = hook
}

// Run listens on addr (host:port) and serves xDS until ctx is done, then stops gracefully.
func (s *Server) Run(ctx context.Context, addr string) error {
	if ctx.Err() != nil {
		return nil
	}
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listening for xDS on %s: %w", addr, err)
	}
	return s.Serve(ctx, lis)
}

// Runnable returns the server as a controller-runtime Runnable serving on addr that does not
// need leader election: every manager replica must serve xDS, since Envoy proxies connect to
// any of them. (manager.RunnableFunc would wait for leadership.) Use mgr.Add(srv.Runnable(a)).
func (s *Server) Runnable(addr string) *Runnable { return &Runnable{srv: s, addr: addr} }

// Runnable runs a Server under a controller-runtime manager; see Server.Runnable.
type Runnable struct {
	srv  *Server
	addr string
}

// Start serves xDS until ctx is done (manager.Runnable).
func (r *Runnable) Start(ctx context.Context) error { return r.srv.Run(ctx, r.addr) }

// NeedLeaderElection is false: every replica serves xDS (manager.LeaderElectionRunnable).
func (r *Runnable) NeedLeaderElection() bool { return false }

// Serve serves xDS on lis until ctx is done, then stops gracefully. It closes lis.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	if s.tls == nil {
		_ = lis.Close()
		return errors.New("serving xDS: no TLS credentials (the server serves only mutual TLS)")
	}
	xds := serverv3.NewServer(ctx, &retryCache{Cache: s.cache, srv: s}, s.cb)
	s.cb.mu.Lock()
	limits := s.cb.limits
	s.cb.mu.Unlock()
	g := grpc.NewServer(append([]grpc.ServerOption{
		grpc.Creds(limitedCreds{TransportCredentials: credentials.NewTLS(serverTLS(s.tls)), cb: s.cb}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}),
		// A client that pings more often than every keepaliveMinPingTime is disconnected.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveMinPingTime, PermitWithoutStream: true}),
		// The limits (see Limits): gRPC announces the streams per connection (a client that
		// goes beyond is refused by the transport; the callbacks count them as well) and
		// refuses a larger request with ResourceExhausted.
		grpc.MaxConcurrentStreams(uint32(limits.StreamsPerConnection)),
		grpc.MaxRecvMsgSize(limits.MaxRequestBytes),
		grpc.MaxHeaderListSize(maxHeaderListBytes),
		// Fixed receive windows (which turns off gRPC's BDP estimation, which would grow
		// them to 16 MiB): a stream whose requests are being delayed (see Limits) holds at
		// most one window of requests in the server. They bound what a client may send
		// ahead; the responses, which Envoy's windows govern, are not affected.
		grpc.InitialWindowSize(streamWindowBytes),
		grpc.InitialConnWindowSize(int32(min(streamWindowBytes*int64(limits.StreamsPerConnection), 16<<20))),
	}, s.grpcOptions...)...)
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(g, xds)
	listenerservice.RegisterListenerDiscoveryServiceServer(g, xds)
	clusterservice.RegisterClusterDiscoveryServiceServer(g, xds)
	endpointservice.RegisterEndpointDiscoveryServiceServer(g, xds)
	routeservice.RegisterRouteDiscoveryServiceServer(g, xds)
	secretservice.RegisterSecretDiscoveryServiceServer(g, xds)
	runtimeservice.RegisterRuntimeDiscoveryServiceServer(g, xds)
	healthv3.RegisterHealthDiscoveryServiceServer(g, &s.hds)

	errc := make(chan error, 1)
	go func() { errc <- g.Serve(lis) }()
	s.log.Info("serving xDS (mutual TLS)", "address", lis.Addr().String())

	select {
	case err := <-errc:
		return fmt.Errorf("xDS server failed: %w", err)
	case <-ctx.Done():
	}
	// The streams end with ctx (the go-control-plane server watches it); GracefulStop then
	// returns quickly. Stop hard if a stream lingers.
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(gracefulStopTimeout):
		g.Stop()
		<-stopped
	}
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	s.log.Info("xDS server stopped")
	return nil
}

// Resources are a tenant's Envoy resources keyed by xDS type URL (see TypeURLs).
type Resources = map[string][]types.Resource

// TypeURLs are the resource types a snapshot carries, in the order they are versioned.
var TypeURLs = []string{
	resource.ClusterType, resource.EndpointType, resource.ListenerType,
	resource.RouteType, resource.SecretType, resource.RuntimeType,
	// The configuration of the tenant's rate-limit service (ratelimit.go).
	resource.RateLimitConfigType,
}

// SetTenant makes res the configuration of the tenant's proxies. It returns changed=false
// (and pushes nothing) when the content is identical to the current snapshot. A snapshot
// that is inconsistent, has a type it does not serve, or has a resource that fails validation
// is refused with an error; the previous snapshot stays in place.
func (s *Server) SetTenant(ctx context.Context, tenant string, res Resources) (bool, error) {
	if tenant == "" {
		return false, errors.New("tenant must not be empty")
	}
	s.mu.Lock()
	prev := s.digests[tenant]
	s.mu.Unlock()
	snap, version, next, err := newSnapshot(res, prev)
	if err != nil {
		return false, fmt.Errorf("refusing snapshot for tenant %s: %w", tenant, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.digests[tenant] = next
	if s.versions[tenant] == version {
		return false, nil
	}
	if err := s.setSnapshot(ctx, tenant, snap); err != nil {
		return false, fmt.Errorf("setting snapshot for tenant %s: %w", tenant, err)
	}
	s.versions[tenant] = version
	s.hds.healthChanged(tenant)
	metrics.ManagerSnapshotUpdates.WithLabelValues(tenant).Inc()
	metrics.ManagerSnapshotListeners.WithLabelValues(tenant).Set(float64(len(res[resource.ListenerType])))
	metrics.ManagerSnapshotClusters.WithLabelValues(tenant).Set(float64(len(res[resource.ClusterType])))
	metrics.ManagerSnapshotEndpoints.WithLabelValues(tenant).Set(float64(countEndpoints(res)))
	s.log.V(1).Info("snapshot set", "tenant", tenant, "version", version,
		"listeners", len(res[resource.ListenerType]), "clusters", len(res[resource.ClusterType]))
	return true, nil
}

// RemoveTenant clears the tenant's configuration: proxies still connected receive an empty
// snapshot (so they close the tenant's listeners), and the tenant's snapshot gauges are
// removed. The cache keeps that small empty snapshot: clearing the cache entry while proxies
// are connected would drop their open watches, and they would miss later updates.
func (s *Server) RemoveTenant(tenant string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.versions[tenant]; !ok {
		return
	}
	snap, _, _, err := newSnapshot(nil, nil)
	if err == nil {
		err = s.setSnapshot(context.Background(), tenant, snap)
	}
	if err != nil {
		s.log.Error(err, "setting the empty snapshot of a removed tenant", "tenant", tenant)
	}
	delete(s.versions, tenant)
	delete(s.digests, tenant)
	s.cb.forgetTenant(tenant)
	s.hds.healthChanged(tenant)
	metrics.ManagerSnapshotListeners.DeleteLabelValues(tenant)
	metrics.ManagerSnapshotClusters.DeleteLabelValues(tenant)
	metrics.ManagerSnapshotEndpoints.DeleteLabelValues(tenant)
	s.log.V(1).Info("tenant removed", "tenant", tenant)
}

// Version returns the version of the tenant's current snapshot, "" when there is none.
func (s *Server) Version(tenant string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.versions[tenant]
}

// TypeVersion returns the version of one resource type in the tenant's current snapshot, ""
// when there is none. Versions are content hashes, so every replica gives the same
// configuration the same versions.
func (s *Server) TypeVersion(tenant string, typeURL string) string {
	snap, err := s.ordered.GetSnapshot(tenant)
	if err != nil {
		return ""
	}
	return snap.GetVersion(typeURL)
}

// validator is implemented by every generated (protoc-gen-validate) Envoy message.
type validator interface{ Validate() error }

// digests are the digests of the resources of a snapshot, by resource (the message itself:
// the back end hands an unchanged resource on as the same message, translator.Cache).
type digests map[types.Resource]digest

// digest is what newSnapshot works out of one resource: the hash of its content and the
// resources it references (a cluster its endpoints, a listener its route configurations;
// go-control-plane's GetResourceReferences), for the consistency check.
type digest struct {
	hash string
	refs map[resource.Type]map[string]bool
	// wire is a virtual host's deterministic wire form (marshalRouteConfig).
	wire []byte
}

// newSnapshot validates the resources and builds a consistent snapshot whose version (for
// each resource type, and overall) is a hash of the content. Each type has its own version,
// so a change of endpoints only re-sends endpoints; but a change of clusters re-sends
// endpoints too (see below).
//
// Every resource's digest is the hex SHA-256 of its deterministic wire form (what
// go-control-plane's delta versions are, HashResource: the snapshot's VersionMap is filled
// with them, so the cache does not marshal and hash every resource again), and a type's
// version hashes its resources' names and digests. Resources found in prev (the digests of
// the tenant's last snapshot) are neither validated nor hashed again: the cost of a snapshot
// follows the resources that changed. next are the digests of this snapshot's resources.
// The snapshot must be consistent as go-control-plane's Snapshot.Consistent defines it (every
// endpoints and route configuration referenced, and no other); the check reads each
// resource's references once, from its digest.
func newSnapshot(res Resources, prev digests) (_ *cache.Snapshot, _ string, next digests, _ error) {
	for typeURL := range res {
		if !slices.Contains(TypeURLs, typeURL) {
			return nil, "", nil, fmt.Errorf("resource type %s is not served", typeURL)
		}
	}
	n := 0
	for _, items := range res {
		n += len(items)
	}
	next = make(digests, n)
	snap := &cache.Snapshot{VersionMap: make(map[string]map[string]string, len(TypeURLs))}
	referenced := map[resource.Type]map[string]bool{}
	var line []byte
	all := sha256.New()
	clusterVersion := ""
	for _, typeURL := range TypeURLs {
		items := res[typeURL]
		h := sha256.New()
		if typeURL == resource.EndpointType {
			// Endpoints are re-sent whenever clusters change: Envoy re-creates a changed EDS
			// cluster and keeps it warming until it receives its ClusterLoadAssignment again
			// (for initial_fetch_timeout, 15s), even when the assignment did not change.
			fmt.Fprintf(h, "clusters=%s;", clusterVersion)
		}
		versions := make(map[string]string, len(items))
		for _, r := range items {
			name := cache.GetResourceName(r)
			if name == "" {
				return nil, "", nil, fmt.Errorf("%s without a name", typeURL)
			}
			if _, dup := versions[name]; dup {
				return nil, "", nil, fmt.Errorf("%s %q appears twice", typeURL, name)
			}
			d, ok := prev[r]
			if !ok {
				v, ok := r.(validator)
				switch m := r.(type) {
				case *rlsconfv3.RateLimitConfig:
					v, ok = rateLimitConfig{m}, true
				case *routev3.RouteConfiguration:
					v = routeConfig{m, prev, next}
				}
				if !ok {
					return nil, "", nil, fmt.Errorf("%s %q cannot be validated", typeURL, name)
				}
				if err := v.Validate(); err != nil {
					return nil, "", nil, fmt.Errorf("%s %q is invalid: %w", typeURL, name, err)
				}
				var b []byte
				var err error
				if rc, ok := r.(*routev3.RouteConfiguration); ok {
					b, err = marshalRouteConfig(rc, prev, next)
				} else {
					b, err = cache.MarshalResource(r)
				}
				if err != nil {
					return nil, "", nil, fmt.Errorf("%s %q: %w", typeURL, name, err)
				}
				d.hash = cache.HashResource(b)
				if typeURL == resource.ClusterType || typeURL == resource.ListenerType {
					d.refs = cache.GetResourceReferences(map[string]types.ResourceWithTTL{name: {Resource: r}})
				}
			}
			next[r] = d
			versions[name] = d.hash
			for t, names := range d.refs {
				if referenced[t] == nil {
					referenced[t] = map[string]bool{}
				}
				maps.Copy(referenced[t], names)
			}
			// "<len>:<name>:<digest>;", without fmt: this runs for every resource.
			line = strconv.AppendInt(line[:0], int64(len(name)), 10)
			line = append(append(append(append(append(line, ':'), name...), ':'), d.hash...), ';')
			h.Write(line)
		}
		version := hex.EncodeToString(h.Sum(nil))[:16]
		if typeURL == resource.ClusterType {
			clusterVersion = version
		}
		fmt.Fprintf(all, "%s=%s;", typeURL, version)
		snap.Resources[cache.GetResponseType(typeURL)] = cache.NewResources(version, items)
		snap.VersionMap[typeURL] = versions
	}
	for _, typeURL := range []string{resource.EndpointType, resource.RouteType} {
		refs, have := referenced[typeURL], snap.VersionMap[typeURL]
		if len(refs) != len(have) {
			return nil, "", nil, fmt.Errorf("inconsistent snapshot: %d %s referenced, %d in the snapshot", len(refs), typeURL, len(have))
		}
		for name := range refs {
			if _, ok := have[name]; !ok {
				return nil, "", nil, fmt.Errorf("inconsistent snapshot: %s %q is referenced but missing", typeURL, name)
			}
		}
	}
	return snap, hex.EncodeToString(all.Sum(nil))[:16], next, nil
}

// routeConfig validates a route configuration one virtual host at a time: its virtual hosts
// validated for the last snapshot (in prev, or already in next: configurations share them)
// are not validated again, so a configuration of thousands of virtual hosts with one changed
// (RDS sends it whole) validates the changed one and the rest of the configuration
// (routeconf.Validate). The virtual hosts of a configuration that validated are recorded in
// next (with no hash: they are not resources of the snapshot). An invalid one is refused with
// protoc-gen-validate's message for the whole configuration, which names it.
//
// The configuration itself is still marshalled and hashed whole: its digest must be
// go-control-plane's HashResource of its wire form, the version a delta response carries and
// the proxy answers with (Applied compares the two).
type routeConfig struct {
	rc         *routev3.RouteConfiguration
	prev, next digests
}

func (v routeConfig) Validate() error {
	hosts := v.rc.VirtualHosts
	err := routeconf.Validate(v.rc, func(i int) bool {
		_, ok := v.prev[hosts[i]]
		if !ok {
			_, ok = v.next[hosts[i]]
		}
		return ok
	})
	if err == nil {
		for _, vh := range hosts {
			v.next[vh] = digest{}
		}
	}
	return err
}

// marshalRouteConfig is cache.MarshalResource(rc), proto's deterministic wire form, made from
// the wire forms of its virtual hosts kept in prev or next (one not found there is marshalled
// and kept in next): a route configuration of thousands of virtual hosts of which one changed
// marshals one. A message's deterministic form is its known fields in field-number order, then
// its unknown fields, and a repeated message field is each element's own form after its tag
// and length; so the configuration's form is its name's (field 1), then its virtual hosts'
// (field 2), then the rest's (TestMarshalRouteConfigIsMarshalResource).
func marshalRouteConfig(rc *routev3.RouteConfiguration, prev, next digests) ([]byte, error) {
	opts := proto.MarshalOptions{Deterministic: true}
	head := &routev3.RouteConfiguration{Name: rc.GetName()}
	rest := &routev3.RouteConfiguration{}
	restRef := rest.ProtoReflect()
	rc.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Number() > 2 {
			restRef.Set(fd, v)
		}
		return true
	})
	restRef.SetUnknown(rc.ProtoReflect().GetUnknown())
	hosts := rc.GetVirtualHosts()
	wires := make([][]byte, len(hosts))
	size := opts.Size(head) + opts.Size(rest)
	for i, vh := range hosts {
		d := next[vh] // a virtual host's digest holds its wire form only
		if d.wire == nil {
			d.wire = prev[vh].wire
		}
		if d.wire == nil {
			var err error
			if d.wire, err = opts.Marshal(vh); err != nil {
				return nil, err
			}
			if d.wire == nil { // an empty virtual host
				d.wire = []byte{}
			}
		}
		next[vh] = d
		wires[i] = d.wire
		size += protowire.SizeTag(2) + protowire.SizeBytes(len(d.wire))
	}
	b, err := opts.MarshalAppend(make([]byte, 0, size), head)
	if err != nil {
		return nil, err
	}
	for _, w := range wires {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, w)
	}
	return opts.MarshalAppend(b, rest)
}

// countEndpoints counts the upstream hosts of the EDS clusters (and of any cluster with inline endpoints).
func countEndpoints(res Resources) int {
	n := 0
	count := func(cla *endpointv3.ClusterLoadAssignment) {
		for _, l := range cla.GetEndpoints() {
			n += len(l.GetLbEndpoints())
		}
	}
	for _, r := range res[resource.EndpointType] {
		if cla, ok := r.(*endpointv3.ClusterLoadAssignment); ok {
			count(cla)
		}
	}
	for _, r := range res[resource.ClusterType] {
		if c, ok := r.(interface {
			GetLoadAssignment() *endpointv3.ClusterLoadAssignment
		}); ok {
			count(c.GetLoadAssignment())
		}
	}
	return n
}

// cacheLogger adapts logr to go-control-plane's logger; its debug chatter goes to V(2).
func cacheLogger(l logr.Logger) log.Logger {
	return log.LoggerFuncs{
		DebugFunc: func(f string, a ...any) { l.V(2).Info(fmt.Sprintf(f, a...)) },
		InfoFunc:  func(f string, a ...any) { l.V(1).Info(fmt.Sprintf(f, a...)) },
		WarnFunc:  func(f string, a ...any) { l.V(1).Info(fmt.Sprintf(f, a...)) },
		ErrorFunc: func(f string, a ...any) { l.Error(nil, fmt.Sprintf(f, a...)) },
	}
}
