package xds

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds/xdstest"
)

// registerOnce registers the manager's metrics with controller-runtime's registry, which the
// tests below gather as the manager's /metrics would.
var registerOnce sync.Once

// openADS opens a state-of-the-world ADS stream as tenant on conn, asks for listeners and
// waits for the answer. It returns the open stream, or the error that refused it.
func openADS(ctx context.Context, conn *grpc.ClientConn, tenant string) (discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient, error) {
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "attacker", Cluster: tenant}, TypeUrl: resource.ListenerType}); err != nil {
		_, err = s.Recv() // the stream's status
		return nil, err
	}
	if _, err := s.Recv(); err != nil {
		return nil, err
	}
	return s, nil
}

// connsOf is the number of connections the server counts for tenant.
func connsOf(srv *Server, tenant string) int {
	srv.cb.mu.Lock()
	defer srv.cb.mu.Unlock()
	if t := srv.cb.tenants[tenant]; t != nil {
		return t.conns
	}
	return 0
}

// streamsOf is the number of streams the server holds open for tenant.
func streamsOf(srv *Server, tenant string) int {
	srv.cb.mu.Lock()
	defer srv.cb.mu.Unlock()
	if t := srv.cb.tenants[tenant]; t != nil {
		return t.streams
	}
	return 0
}

// TestHostileTenantXDSLimits: tenant B, with a valid client certificate of its own, attacks
// the xDS server while tenant A's real Envoy is connected to it. B opens far more streams
// than the limits allow over many connections, asks for made-up type URLs (also as NACKs,
// which are counted per type URL), and floods requests. Asserted: the streams beyond the
// limits are refused with ResourceExhausted and the server never holds more than the limit;
// made-up type URLs are refused with InvalidArgument and leave no series in the registry; the
// requests the server processes for B stay within its token bucket; and A's Envoy receives a
// configuration change made during the attack (its latency is logged).
func TestHostileTenantXDSLimits(t *testing.T) {
	registerOnce.Do(metrics.RegisterManager)
	const (
		victim, attacker = "tenant-xdslim-a", "tenant-xdslim-b"
		perConn          = 4
		perTenant        = 24
		connLimit        = 20
		connections      = 16 // × perConn streams: far more than perTenant
		madeUp           = 40
	)
	limits := Limits{ConnectionsPerTenant: connLimit, StreamsPerConnection: perConn, StreamsPerTenant: perTenant, RequestsPerSecond: 20, RequestBurst: 40,
		TenantRequestsPerSecond: 50, TenantRequestBurst: 100, MaxRequestBytes: DefaultMaxRequestBytes}
	p := xdstest.New(t)
	srv, addr := startXDSLimits(t, limits)

	// The requests the server processes for B (counted once the callback returns: after
	// the rate limits held it).
	var processed atomic.Int64
	sotw := srv.cb.StreamRequestFunc
	srv.cb.StreamRequestFunc = func(id int64, req *discoveryv3.DiscoveryRequest) error {
		err := sotw(id, req)
		if req.GetNode().GetCluster() == attacker {
			processed.Add(1)
		}
		return err
	}

	// The victim: a real Envoy of tenant A with one listener.
	lbPorts := []int{testsupport.FreePort(t, "127.0.0.1"), testsupport.FreePort(t, "127.0.0.1")}
	victimResources := func(n int) Resources {
		var lbs []v1alpha1.LoadBalancer
		for i := range n {
			lb := newLB(fmt.Sprintf("victim-%d", i)).port(corev1.ProtocolTCP, 80, 30080+i, lbPorts[i]).LoadBalancer
			lb.Namespace = victim
			lbs = append(lbs, lb)
		}
		return mustTranslate(t, translate.Input{Tenant: victim, LoadBalancers: lbs, Addresses: addresses("10.0.0.1"),
			Options: translate.Options{ListenerAddress: "127.0.0.1"}})
	}
	if _, err := srv.SetTenant(context.Background(), victim, victimResources(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.SetTenant(context.Background(), attacker, nil); err != nil {
		t.Fatal(err)
	}
	e := startEnvoy(t, srv, victim, addr, "victim-proxy")
	waitListeners := func(want int) {
		t.Helper()
		testsupport.Eventually(t, time.Minute, fmt.Sprintf("the victim's Envoy has %d listeners", want), func() error {
			got, err := listenerNames(e)
			if err != nil {
				return err
			}
			if len(got) != want {
				return fmt.Errorf("listeners %v", got)
			}
			return nil
		})
	}
	waitListeners(1)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conns := make([]*grpc.ClientConn, connections)
	for i := range conns {
		conns[i] = dial(t, addr, p.ClientTLS(t, attacker))
	}

	open := make([]int, connections) // streams accepted per connection
	t.Run("streams beyond the limits are refused", func(t *testing.T) {
		var (
			wg                sync.WaitGroup
			mu                sync.Mutex
			accepted, refused int
			other             []error
		)
		for i, conn := range conns {
			for range perConn {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := openADS(ctx, conn, attacker) // kept open until the test ends
					mu.Lock()
					defer mu.Unlock()
					switch status.Code(err) {
					case codes.OK:
						accepted++
						open[i]++
					case codes.ResourceExhausted:
						refused++
					default:
						other = append(other, err)
					}
				}()
			}
		}
		wg.Wait()
		t.Logf("%d streams asked for over %d connections: %d accepted, %d refused", connections*perConn, connections, accepted, refused)
		if len(other) > 0 {
			t.Errorf("streams failed otherwise: %v", other)
		}
		if accepted != perTenant || refused != connections*perConn-perTenant {
			t.Errorf("%d accepted, %d refused; want %d accepted (the tenant's limit), the rest refused with ResourceExhausted",
				accepted, refused, perTenant)
		}
		if n := streamsOf(srv, attacker); n > perTenant {
			t.Errorf("the server holds %d streams of %s, more than the limit %d", n, attacker, perTenant)
		}
		if got := testutil.ToFloat64(metrics.XDSStreamsRefused.WithLabelValues(attacker, refusedPerTenant)); got != float64(refused) {
			t.Errorf("kubelb_xds_streams_refused_total{reason=%s} = %v, want %d", refusedPerTenant, got, refused)
		}
		// One more stream on a connection that has its limit open is not served: the
		// client is told the connection's limit and waits (gRPC) until it gives up.
		if full := slices.Index(open, perConn); full >= 0 {
			short, stop := context.WithTimeout(ctx, 2*time.Second)
			defer stop()
			if _, err := openADS(short, conns[full], attacker); status.Code(err) != codes.DeadlineExceeded {
				t.Errorf("a stream beyond the connection's limit of %d: %v; want it to wait in the client until its deadline", perConn, err)
			}
		}
		if n := streamsOf(srv, attacker); n > perTenant {
			t.Errorf("the server holds %d streams of %s, more than the limit %d", n, attacker, perTenant)
		}
	})

	t.Run("connections beyond the limit are closed", func(t *testing.T) {
		extra := connLimit - connections + 4
		var wg sync.WaitGroup
		errs := make([]error, extra)
		extras := make([]*grpc.ClientConn, extra)
		for i := range extra {
			extras[i] = dial(t, addr, p.ClientTLS(t, attacker))
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = openADS(ctx, extras[i], attacker)
			}()
		}
		wg.Wait()
		defer func() {
			for _, c := range extras {
				_ = c.Close()
			}
		}()
		var unavailable int
		for _, err := range errs {
			switch status.Code(err) {
			case codes.Unavailable: // the connection was closed after its handshake
				unavailable++
			case codes.ResourceExhausted: // a connection in the limit: the tenant's streams are full
			default:
				t.Errorf("a stream on an extra connection: %v; want Unavailable or ResourceExhausted", err)
			}
		}
		t.Logf("%d extra connections beyond %d open: %d closed by the server", extra, connections, unavailable)
		if unavailable < extra-(connLimit-connections) {
			t.Errorf("%d of %d extra connections were closed, want at least %d (the limit is %d)", unavailable, extra, extra-(connLimit-connections), connLimit)
		}
		if got := testutil.ToFloat64(metrics.XDSStreamsRefused.WithLabelValues(attacker, refusedConnections)); got < 1 {
			t.Errorf("kubelb_xds_streams_refused_total{reason=%s} = %v, want at least 1", refusedConnections, got)
		}
		if n := connsOf(srv, attacker); n > connLimit {
			t.Errorf("the server counts %d connections of %s, more than the limit %d", n, attacker, connLimit)
		}
	})
	testsupport.Eventually(t, 30*time.Second, "the extra connections are released", func() error {
		if n := connsOf(srv, attacker); n != connections {
			return fmt.Errorf("%d connections open, want %d", n, connections)
		}
		return nil
	})

	// A connection with nothing open, for the requests below (they close their streams).
	free := dial(t, addr, p.ClientTLS(t, attacker))
	// Make room among the tenant's streams for the requests below: close connections
	// until at most perTenant-perConn streams are open.
	left := 0
	for _, n := range open {
		left += n
	}
	for i := 0; left > perTenant-perConn; i++ {
		_ = conns[i].Close()
		left -= open[i]
	}
	testsupport.Eventually(t, 30*time.Second, "the closed connections' streams are released", func() error {
		if n := streamsOf(srv, attacker); n != left {
			return fmt.Errorf("%d streams open, want %d", n, left)
		}
		return nil
	})

	t.Run("made-up type URLs are refused and leave no series", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make([]error, madeUp)
		for i := range madeUp {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rctx, stop := context.WithTimeout(ctx, 10*time.Second)
				defer stop()
				s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(free).StreamAggregatedResources(rctx)
				if err != nil {
					errs[i] = err
					return
				}
				typeURL := fmt.Sprintf("type.googleapis.com/made.up.Type%d", i)
				req := &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "attacker", Cluster: attacker}, TypeUrl: typeURL}
				if i%2 == 1 { // a NACK: today's code counts it per type URL
					req.ResponseNonce, req.ErrorDetail = "1", &rpcstatus.Status{Message: "made up"}
				}
				if err := s.Send(req); err != nil && !errors.Is(err, context.DeadlineExceeded) {
					errs[i] = err
				}
				_, errs[i] = s.Recv()
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("made-up type URL %d: %v; want InvalidArgument", i, err)
			}
		}
		if got := testutil.ToFloat64(metrics.XDSStreamsRefused.WithLabelValues(attacker, refusedTypeURL)); got != madeUp {
			t.Errorf("kubelb_xds_streams_refused_total{reason=%s} = %v, want %d", refusedTypeURL, got, madeUp)
		}
		families, err := ctrlmetrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if strings.Contains(l.GetValue(), "made.up") {
						t.Errorf("series %s{%s=%q} for a made-up type URL", f.GetName(), l.GetName(), l.GetValue())
					}
				}
			}
		}
	})

	t.Run("a request larger than the limit closes its stream", func(t *testing.T) {
		rctx, stop := context.WithTimeout(ctx, 10*time.Second)
		defer stop()
		s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(free).StreamAggregatedResources(rctx)
		if err != nil {
			t.Fatal(err)
		}
		huge := &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "attacker", Cluster: attacker}, TypeUrl: resource.ClusterType,
			ResourceNames: []string{strings.Repeat("x", limits.MaxRequestBytes)}}
		_ = s.Send(huge)
		if _, err := s.Recv(); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("a request of %d bytes: %v; want ResourceExhausted", limits.MaxRequestBytes, err)
		}
	})

	t.Run("a request flood is held to the tenant's rate while the victim is served", func(t *testing.T) {
		const flooders = 3
		var streams []discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
		fctx, stopFlood := context.WithCancel(ctx)
		defer stopFlood()
		for range flooders {
			s, err := openADS(fctx, free, attacker)
			if err != nil {
				t.Fatal(err)
			}
			streams = append(streams, s)
		}
		delayedBefore := testutil.ToFloat64(metrics.XDSRequestsDelayed.WithLabelValues(attacker))
		processed.Store(0)
		start := time.Now()
		var sent atomic.Int64
		var wg sync.WaitGroup
		for _, s := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A stale nonce: go-control-plane ignores the request after the callbacks,
				// so each costs the server exactly the work the limits govern.
				for i := 0; i < 100000 && fctx.Err() == nil; i++ {
					if s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ListenerType, ResponseNonce: fmt.Sprint("stale-", i)}) != nil {
						return
					}
					sent.Add(1)
				}
			}()
		}

		// During the flood, the victim's configuration changes.
		time.Sleep(time.Second) // the flood has filled B's buckets
		changed := time.Now()
		if _, err := srv.SetTenant(context.Background(), victim, victimResources(2)); err != nil {
			t.Fatal(err)
		}
		waitListeners(2)
		latency := time.Since(changed)
		time.Sleep(time.Until(start.Add(3 * time.Second)))
		n := processed.Load()
		elapsed := time.Since(start)
		stopFlood()
		wg.Wait()

		bound := float64(limits.TenantRequestBurst) + limits.TenantRequestsPerSecond*elapsed.Seconds() + flooders
		t.Logf("flood: %d requests sent by %d streams in %v, %d processed (bound %.0f); victim's update arrived in %v",
			sent.Load(), flooders, elapsed.Round(time.Millisecond), n, bound, latency.Round(time.Millisecond))
		if float64(n) > bound {
			t.Errorf("the server processed %d requests of %s in %v, more than its bucket allows (%.0f)", n, attacker, elapsed, bound)
		}
		if got := testutil.ToFloat64(metrics.XDSRequestsDelayed.WithLabelValues(attacker)); got <= delayedBefore {
			t.Errorf("kubelb_xds_requests_delayed_total{tenant=%s} did not grow (%v)", attacker, got)
		}
		if got := testutil.ToFloat64(metrics.XDSRequestsDelayed.WithLabelValues(victim)); got != 0 {
			t.Errorf("%v requests of the victim's Envoy were delayed", got)
		}
		if got := testutil.ToFloat64(metrics.XDSStreamsRefused.WithLabelValues(victim, refusedPerTenant)); got != 0 {
			t.Errorf("%v streams of the victim were refused", got)
		}
	})
	if e.Exited() {
		t.Fatal("the victim's Envoy exited")
	}
}

// peerCtx is the context of a stream on the connection from addr.
func peerCtx(addr string) context.Context {
	a, _ := net.ResolveTCPAddr("tcp", addr)
	return peer.NewContext(context.Background(), &peer.Peer{Addr: a})
}

// TestStreamLimitsPerConnection: the callbacks' own count of streams per connection (gRPC's
// SETTINGS_MAX_CONCURRENT_STREAMS is the first line; a client that ignores it, or streams
// gRPC counts as ended while go-control-plane still runs them, meet this one) and per
// tenant, and their release when streams close.
func TestStreamLimitsPerConnection(t *testing.T) {
	c := newCallbacks(logr.Discard(), func(string) bool { return true })
	c.limits.StreamsPerConnection, c.limits.StreamsPerTenant = 2, 3
	const tenant = "tenant-perconn"
	admit := func(id int64, conn string) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.admit(peerCtx(conn), stream{id: id}, tenant, resource.AnyType)
	}
	var codesSeen []codes.Code
	for id, conn := range []string{"127.0.0.1:1001", "127.0.0.1:1001", "127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1003"} {
		codesSeen = append(codesSeen, status.Code(admit(int64(id), conn)))
	}
	want := []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted, codes.OK, codes.ResourceExhausted}
	if !slices.Equal(codesSeen, want) {
		t.Errorf("admitted %v, want %v (2 per connection, 3 per tenant)", codesSeen, want)
	}
	c.closed(stream{id: 0})
	if err := admit(10, "127.0.0.1:1003"); err != nil {
		t.Errorf("after a stream closed, a new one was refused: %v", err)
	}
	if err := c.checkType(stream{id: 1}, "type.googleapis.com/made.up"); status.Code(err) != codes.InvalidArgument {
		t.Errorf("made-up type: %v, want InvalidArgument", err)
	}
	for _, typeURL := range append([]string{""}, TypeURLs...) {
		if err := c.checkType(stream{id: 1}, typeURL); err != nil {
			t.Errorf("type %q refused: %v", typeURL, err)
		}
	}
}

// TestEnvoyFleetReconnectIsNotLimited: the default limits never hold back a real fleet. A
// fleet of real Envoys (delta, the default protocol) with listeners and clusters connects,
// the server restarts so that the whole fleet reconnects at once (a reconnect storm), and
// its configuration changes: no request of the fleet was delayed and no stream or connection
// refused. The requests each proxy sent are logged.
func TestEnvoyFleetReconnectIsNotLimited(t *testing.T) {
	const (
		tenant  = "tenant-xdslim-fleet"
		proxies = 3
	)
	var requests atomic.Int64
	p := xdstest.New(t)
	srv := NewServer(logr.Discard(), p.ServerTLS())
	countSotw, countDelta := srv.cb.StreamRequestFunc, srv.cb.StreamDeltaRequestFunc
	srv.cb.StreamRequestFunc = func(id int64, req *discoveryv3.DiscoveryRequest) error {
		requests.Add(1)
		return countSotw(id, req)
	}
	srv.cb.StreamDeltaRequestFunc = func(id int64, req *discoveryv3.DeltaDiscoveryRequest) error {
		requests.Add(1)
		return countDelta(id, req)
	}
	// Listeners every proxy binds (Envoy sets SO_REUSEPORT), each with its cluster.
	ports := []int{testsupport.FreePort(t, "127.0.0.1"), testsupport.FreePort(t, "127.0.0.1"), testsupport.FreePort(t, "127.0.0.1")}
	fleetResources := func(n int) Resources {
		var lbs []v1alpha1.LoadBalancer
		for i := range n {
			lb := newLB(fmt.Sprintf("fleet-%d", i)).port(corev1.ProtocolTCP, 80, 30080+i, ports[i]).LoadBalancer
			lb.Namespace = tenant
			lbs = append(lbs, lb)
		}
		return mustTranslate(t, translate.Input{Tenant: tenant, LoadBalancers: lbs, Addresses: addresses("10.0.0.1"),
			Options: translate.Options{ListenerAddress: "127.0.0.1"}})
	}
	if _, err := srv.SetTenant(context.Background(), tenant, fleetResources(2)); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	stop := serveOn(t, srv, lis)
	var fleet []*testsupport.Envoy
	for i := range proxies {
		fleet = append(fleet, startEnvoy(t, srv, tenant, addr, fmt.Sprintf("fleet-proxy-%d", i)))
	}
	waitFleet := func(what string, listeners int) {
		t.Helper()
		testsupport.Eventually(t, time.Minute, what, func() error {
			if err := connectedProxies(tenant, proxies); err != nil {
				return err
			}
			for _, e := range fleet {
				names, err := listenerNames(e)
				if err != nil {
					return err
				}
				if len(names) != listeners {
					return fmt.Errorf("listeners %v", names)
				}
			}
			return nil
		})
	}
	waitFleet("the fleet connected with 2 listeners each", 2)
	atConnect := requests.Load()

	// A reconnect storm: every proxy reconnects at once to the restarted server.
	stop()
	lis, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer serveOn(t, srv, lis)()
	waitFleet("the fleet reconnected", 2)
	if _, err := srv.SetTenant(context.Background(), tenant, fleetResources(3)); err != nil {
		t.Fatal(err)
	}
	waitFleet("the fleet took a third listener", 3)
	t.Logf("%d proxies: %d xDS requests to connect, %d more to reconnect and take one change (delta)",
		proxies, atConnect, requests.Load()-atConnect)

	if got := testutil.ToFloat64(metrics.XDSRequestsDelayed.WithLabelValues(tenant)); got != 0 {
		t.Errorf("%v requests of the fleet were delayed by the default limits", got)
	}
	for _, reason := range []string{refusedConnections, refusedPerConnection, refusedPerTenant, refusedTypeURL} {
		if got := testutil.ToFloat64(metrics.XDSStreamsRefused.WithLabelValues(tenant, reason)); got != 0 {
			t.Errorf("%v streams of the fleet refused (%s) by the default limits", got, reason)
		}
	}
}
