package xds

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/pki"
	"kubelb.dev/kubelb/internal/textcut"
)

// Limits bound what one xDS client, and all the clients of one tenant together, may cost the
// server (issue 26: tenants are untrusted, and a tenant's fleet certificate is in a Secret of
// its namespace). They hold per server (manager replica).
//
//   - Connections: a tenant may have ConnectionsPerTenant connections open (counted once
//     the TLS handshake has named the tenant); the server closes one more right after its
//     handshake. Envoy opens one connection per proxy.
//   - Streams: a connection may have StreamsPerConnection streams open at once (the HTTP/2
//     SETTINGS_MAX_CONCURRENT_STREAMS the server announces, and a check of its own), a
//     tenant StreamsPerTenant over all its connections. A stream beyond either is refused
//     with ResourceExhausted when it opens. Envoy opens one ADS stream per proxy.
//   - Requests: each stream has a token bucket (RequestsPerSecond, RequestBurst) and each
//     tenant one (TenantRequestsPerSecond, TenantRequestBurst), unary fetches included. A
//     request beyond them is delayed, not refused: the stream's next request is read only
//     after it, so a flooding client is held back by gRPC flow control and costs the server
//     no more than the rate. An Envoy sends 6 requests when it connects (delta) and one
//     ACK per changed type on an update; the manager sets a tenant's snapshot at most every
//     100 ms (envoycp.HoldOff), so a proxy sends at most about 60 requests a second, and a
//     fleet of 200 proxies about 2000 a second when only endpoints churn. The defaults leave
//     that undelayed, reconnect storms of the whole fleet (bursts) included.
//   - Bytes: a request may be at most MaxRequestBytes (gRPC's MaxRecvMsgSize).
//   - Type URLs: a request for a type the server does not serve (TypeURLs) is refused with
//     InvalidArgument before the snapshot cache sees it; it creates no watch and no series.
//
// Every refused stream is counted in kubelb_xds_streams_refused_total{tenant,reason} and
// logged (at most once per refusalLogInterval and reason, with the number left unlogged);
// every delayed request in kubelb_xds_requests_delayed_total{tenant}.
type Limits struct {
	ConnectionsPerTenant    int
	StreamsPerConnection    int
	StreamsPerTenant        int
	RequestsPerSecond       float64
	RequestBurst            int
	TenantRequestsPerSecond float64
	TenantRequestBurst      int
	MaxRequestBytes         int
}

// Defaults of Limits (the flags of kubelb, docs/configuration.md).
const (
	DefaultConnectionsPerTenant    = 256
	DefaultStreamsPerConnection    = 8
	DefaultStreamsPerTenant        = 512
	DefaultRequestsPerSecond       = 100
	DefaultRequestBurst            = 1000
	DefaultTenantRequestsPerSecond = 2000
	DefaultTenantRequestBurst      = 20000
	DefaultMaxRequestBytes         = 4 << 20
)

// DefaultLimits are the limits of a server unless SetLimits says otherwise.
func DefaultLimits() Limits {
	return Limits{
		ConnectionsPerTenant: DefaultConnectionsPerTenant,
		StreamsPerConnection: DefaultStreamsPerConnection, StreamsPerTenant: DefaultStreamsPerTenant,
		RequestsPerSecond: DefaultRequestsPerSecond, RequestBurst: DefaultRequestBurst,
		TenantRequestsPerSecond: DefaultTenantRequestsPerSecond, TenantRequestBurst: DefaultTenantRequestBurst,
		MaxRequestBytes: DefaultMaxRequestBytes,
	}
}

// Validate reports a limit that is not positive.
func (l Limits) Validate() error {
	var bad []string
	for _, f := range []struct {
		name string
		ok   bool
	}{
		{"connections per tenant", l.ConnectionsPerTenant > 0},
		{"streams per connection", l.StreamsPerConnection > 0 && l.StreamsPerConnection <= 1<<16},
		{"streams per tenant", l.StreamsPerTenant > 0},
		{"requests per second", l.RequestsPerSecond > 0},
		{"request burst", l.RequestBurst > 0},
		{"tenant requests per second", l.TenantRequestsPerSecond > 0},
		{"tenant request burst", l.TenantRequestBurst > 0},
		{"request bytes", l.MaxRequestBytes > 0},
	} {
		if !f.ok {
			bad = append(bad, f.name)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("xDS limits must be positive (streams per connection at most 65536): %s", strings.Join(bad, ", "))
	}
	return nil
}

// SetLimits replaces the server's limits; call it before Run.
func (s *Server) SetLimits(l Limits) error {
	if err := l.Validate(); err != nil {
		return err
	}
	s.cb.mu.Lock()
	defer s.cb.mu.Unlock()
	s.cb.limits = l
	return nil
}

// Reasons a stream is refused: the values of the reason label of
// kubelb_xds_streams_refused_total.
const (
	refusedConnections   = "connections_per_tenant"
	refusedPerConnection = "streams_per_connection"
	refusedPerTenant     = "streams_per_tenant"
	refusedTypeURL       = "unknown_type_url"
)

// refusalLogInterval spaces the log lines of refusals of one reason.
const refusalLogInterval = 10 * time.Second

// streamState is what the limits keep of one open stream.
type streamState struct {
	ctx     context.Context
	conn    string
	tenant  string
	typeURL string // the type of a per-type service, resource.AnyType for ADS
	limiter *rate.Limiter
}

// tenantState is what the limits keep of one tenant with open streams.
type tenantState struct {
	streams int
	conns   int
	limiter *rate.Limiter
}

// servedType reports whether the server serves typeURL.
func servedType(typeURL string) bool { return slices.Contains(TypeURLs, typeURL) }

// errUnknownType is the error of a request for a type the server does not serve.
func errUnknownType(typeURL string) error {
	const most = 64 + len(textcut.Dots) // the client's string, quoted back shortened
	typeURL = textcut.Cut(typeURL, most, textcut.Dots)
	return status.Errorf(codes.InvalidArgument, "type URL %q is not served (served: %v)", typeURL, TypeURLs)
}

// connOf names the connection of a stream: the client's address, as gRPC saw it.
func connOf(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// admit counts a new stream of tenant against the stream limits. It returns the error that
// refuses it, or nil with the stream recorded. The caller holds c.mu.
func (c *callbacks) admit(ctx context.Context, s stream, tenant, typeURL string) error {
	conn := connOf(ctx)
	if c.connStreams[conn] >= c.limits.StreamsPerConnection {
		return c.refuse(tenant, refusedPerConnection, status.Errorf(codes.ResourceExhausted,
			"this connection has %d xDS streams open, the most one connection may have", c.connStreams[conn]))
	}
	t := c.tenant(tenant)
	if t.streams >= c.limits.StreamsPerTenant {
		return c.refuse(tenant, refusedPerTenant, status.Errorf(codes.ResourceExhausted,
			"tenant %s has %d xDS streams open on this server, the most one tenant may have", tenant, t.streams))
	}
	t.streams++
	c.connStreams[conn]++
	c.states[s] = &streamState{ctx: ctx, conn: conn, tenant: tenant, typeURL: typeURL,
		limiter: rate.NewLimiter(rate.Limit(c.limits.RequestsPerSecond), c.limits.RequestBurst)}
	return nil
}

// release forgets a stream admit recorded. The caller holds c.mu.
func (c *callbacks) release(s stream) {
	st, ok := c.states[s]
	if !ok {
		return
	}
	delete(c.states, s)
	if c.connStreams[st.conn]--; c.connStreams[st.conn] <= 0 {
		delete(c.connStreams, st.conn)
	}
	if t := c.tenants[st.tenant]; t != nil {
		t.streams--
	}
}

// refuse counts and logs a refused stream and returns err. The caller holds c.mu.
func (c *callbacks) refuse(tenant, reason string, err error) error {
	metrics.XDSStreamsRefused.WithLabelValues(tenant, reason).Inc()
	now := time.Now()
	l := c.refusalLog[reason]
	if now.Sub(l.last) < refusalLogInterval {
		l.suppressed++
		c.refusalLog[reason] = l
		return err
	}
	c.log.Info("refusing xDS stream", "tenant", tenant, "reason", reason, "error", status.Convert(err).Message(),
		"refusedUnlogged", l.suppressed)
	c.refusalLog[reason] = refusalLog{last: now}
	return err
}

// refusalLog spaces the log lines of one refusal reason.
type refusalLog struct {
	last       time.Time
	suppressed int
}

// checkType refuses a request of stream s for a type the server does not serve. An empty
// type URL is the stream's own (a per-type service; go-control-plane refuses it on ADS).
func (c *callbacks) checkType(s stream, typeURL string) error {
	if typeURL == "" || servedType(typeURL) {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	tenant := c.identities[s]
	return c.refuse(tenant, refusedTypeURL, errUnknownType(typeURL))
}

// streamType is the type a request of stream s is for: its own, or the stream's.
func (c *callbacks) streamType(s stream, typeURL string) string {
	if typeURL != "" {
		return typeURL
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.states[s]; st != nil {
		return st.typeURL
	}
	return ""
}

// throttle delays a request of stream s until both the stream's and its tenant's token
// buckets allow it, or the stream ends. A stream processes its requests one at a time, so
// a tenant waits at most its open streams' worth of tokens.
func (c *callbacks) throttle(s stream) {
	c.mu.Lock()
	st := c.states[s]
	var t *tenantState
	if st != nil {
		t = c.tenants[st.tenant]
	}
	c.mu.Unlock()
	if st == nil || t == nil {
		return
	}
	c.wait(st.ctx, st.tenant, st.limiter, t.limiter)
}

// throttleFetch delays a unary fetch of tenant until the tenant's token bucket allows it.
func (c *callbacks) throttleFetch(ctx context.Context, tenant string) {
	c.mu.Lock()
	t := c.tenant(tenant)
	c.mu.Unlock()
	c.wait(ctx, tenant, t.limiter)
}

// tenant returns the state of a tenant, made on first use. It lives until the tenant is
// removed (forgetTenant), so closing its streams does not refill a tenant's bucket; tenant
// names come from certificates of the manager's CA, so there are as many as tenants. The
// caller holds c.mu.
func (c *callbacks) tenant(name string) *tenantState {
	t := c.tenants[name]
	if t == nil {
		t = &tenantState{limiter: rate.NewLimiter(rate.Limit(c.limits.TenantRequestsPerSecond), c.limits.TenantRequestBurst)}
		c.tenants[name] = t
	}
	return t
}

// forgetTenant drops the state of a removed tenant without open streams or connections.
func (c *callbacks) forgetTenant(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.tenants[name]; t != nil && t.streams == 0 && t.conns == 0 {
		delete(c.tenants, name)
	}
}

// wait reserves a token of each limiter and sleeps until they are due (or ctx ends).
func (c *callbacks) wait(ctx context.Context, tenant string, limiters ...*rate.Limiter) {
	now := time.Now()
	var delay time.Duration
	for _, l := range limiters {
		delay = max(delay, l.ReserveN(now, 1).DelayFrom(now))
	}
	if delay <= 0 {
		return
	}
	metrics.XDSRequestsDelayed.WithLabelValues(tenant).Inc()
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}

// limitedCreds are the server's TLS credentials with the limit of connections per tenant:
// once the handshake has verified the client certificate, a connection beyond the tenant's
// limit is closed, and the others are counted until they close.
type limitedCreds struct {
	credentials.TransportCredentials
	cb *callbacks
}

// ServerHandshake is the TLS handshake, then the count of the tenant's connections.
func (l limitedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := l.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return conn, info, err
	}
	tls, ok := info.(credentials.TLSInfo)
	if !ok || len(tls.State.VerifiedChains) == 0 || len(tls.State.VerifiedChains[0]) == 0 {
		return conn, info, nil // the streams are refused (peerTenant)
	}
	tenant, err := pki.TenantOf(tls.State.VerifiedChains[0][0])
	if err != nil {
		return conn, info, nil // the streams are refused (peerTenant)
	}
	c := l.cb
	c.mu.Lock()
	t := c.tenant(tenant)
	if t.conns >= c.limits.ConnectionsPerTenant {
		err := c.refuse(tenant, refusedConnections, fmt.Errorf("tenant %s has %d xDS connections open on this server, the most one tenant may have", tenant, t.conns))
		c.mu.Unlock()
		_ = conn.Close()
		return nil, nil, err
	}
	t.conns++
	c.mu.Unlock()
	return &countedConn{Conn: conn, release: sync.OnceFunc(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		t.conns--
	})}, info, nil
}

// Clone keeps the limit.
func (l limitedCreds) Clone() credentials.TransportCredentials {
	return limitedCreds{TransportCredentials: l.TransportCredentials.Clone(), cb: l.cb}
}

// countedConn is a connection counted against its tenant's limit until it closes.
type countedConn struct {
	net.Conn
	release func()
}

// Close closes the connection and releases its count (once).
func (c *countedConn) Close() error {
	c.release()
	return c.Conn.Close()
}
