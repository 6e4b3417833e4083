package xds

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/pki"
)

// errNoTenant closes streams of proxies that do not say which tenant they serve.
var errNoTenant = status.Error(codes.InvalidArgument, "node.cluster must be set to the tenant namespace (see the bootstrap kubelb generates)")

// proxy identifies one Envoy: its tenant (node.cluster) and its node.id; or, rateLimit, the
// tenant's rate-limit service (ratelimit.go), which asks only for its configuration.
type proxy struct {
	tenant    string
	node      string
	rateLimit bool
}

// stream identifies an xDS stream; state-of-the-world and delta streams are numbered
// separately by go-control-plane.
type stream struct {
	delta bool
	id    int64
}

// sent is the last response sent on a stream for one type.
type sent struct {
	nonce   string
	version string
	// names are the resources the response carried (state of the world: all those the
	// stream asked for that exist), for applied.
	names []string
}

// callbacks keep the connection and NACK metrics, and stop NACK storms. A proxy counts as
// connected while it has at least one open stream (with ADS that is exactly one), from its
// first request on.
//
// NACK storms, state of the world: a NACK carries the last version Envoy accepted, not the one
// it rejected, so go-control-plane's cache sees an outdated proxy and answers at once with the
// same rejected snapshot, which Envoy rejects again, as fast as both can go (Envoy 1.40,
// go-control-plane 0.14). So a NACK of the latest response is recorded as being at the
// rejected version: the proxy then gets nothing until the snapshot changes, or until the
// retry delay has passed (see retryCache): some rejections go away by themselves (a listener
// port another process held is free again), and the snapshot may not change for hours.
// The delay doubles with every NACK of the stream and type, from RetryRejectedAfter up to
// RetryRejectedAtMost, and starts over when the proxy accepts that type.
//
// Delta: go-control-plane's delta server records the resources of a response as the proxy's
// when it sends them, so a NACK causes no storm, but the rejected resources would never be
// sent again (only changed ones are). So the callbacks remember which resources each response
// carried; those of a NACKed response stay pending until a later response that carries them
// is ACKed, and the cache re-sends the pending ones after the same growing delay (see
// retryCache.CreateDeltaWatch). While resources are pending, each ACK of a newer version
// reports the rejection again at that version (a snapshot change does not resolve it, unlike
// state of the world, where every response carries every resource).
type callbacks struct {
	serverv3.CallbackFuncs
	log      logr.Logger
	onReject func(Rejection)
	// hasTenant reports whether a tenant has a snapshot; a stream for any other is refused.
	hasTenant func(string) bool

	mu sync.Mutex
	// identities: the tenant the client certificate of each open stream names.
	identities map[stream]string
	streams    map[stream]proxy
	proxies    map[proxy]int              // open streams per proxy
	sent       map[stream]map[string]sent // last response per stream and type URL
	// answered: per state-of-the-world stream and type URL, the version of the latest response
	// the proxy answered, accepted or rejected (applied.go), and the resources that response
	// carried; requested: the resources the stream asked for last, per type URL. (Delta
	// streams keep what was answered per resource: deltaType.answered.)
	answered      map[stream]map[string]string
	answeredNames map[stream]map[string][]string
	requested     map[stream]map[string][]string
	// rejected: the type URLs whose latest response the stream's proxy rejected.
	rejected map[stream]map[string]bool
	// backoff: the retry delay of the next held NACK per stream and type URL.
	backoff map[stream]map[string]time.Duration
	// held: the NACK requests being held (see holdRejected), until retryCache takes them.
	held map[*discoveryv3.DiscoveryRequest]heldNACK
	// deltaStreams counts the open delta streams (those open accepted).
	deltaStreams int
	// delta: the state of each delta stream and type URL (NACK guard).
	delta map[stream]map[string]*deltaType
	// deltaHeld: the delta requests of a type with pending resources, until retryCache takes them.
	deltaHeld map[*discoveryv3.DeltaDiscoveryRequest]heldDelta

	// limits bound streams and requests (see Limits); states are the open streams admitted,
	// connStreams count them per connection, tenants per tenant (with its request bucket).
	limits      Limits
	states      map[stream]*streamState
	connStreams map[string]int
	tenants     map[string]*tenantState
	// refusalLog spaces the log lines of refused streams, per reason.
	refusalLog map[string]refusalLog
}

// deltaType is what the callbacks know of one type on one delta stream.
type deltaType struct {
	// unanswered: the responses sent and not yet ACKed or NACKed, oldest first (at most
	// maxUnanswered; Envoy answers each in order).
	unanswered []deltaResponse
	// last is the nonce of the latest response sent.
	last string
	// pending: the resources of NACKed responses not accepted since; version and message of
	// the rejection as last reported.
	pending  map[string]bool
	version  string
	message  string
	retryDue time.Time
	// subscribed: the resources the proxy subscribed to by name (types other than the
	// wildcard ones); answered: the version of each resource as of the latest response that
	// carried it and that the proxy answered (accepted or rejected). applied compares them
	// with the snapshot.
	subscribed map[string]struct{}
	answered   map[string]string
}

// deltaResponse is a delta response sent: its nonce, system version and resource names
// (those it carried and those it removed).
type deltaResponse struct {
	nonce, version string
	names          []string
	// versions are the versions of the resources carried, by index of names ("" for those
	// removed).
	versions []string
}

// maxUnanswered bounds the delta responses remembered per stream and type.
const maxUnanswered = 16

// heldDelta marks a delta request whose type has pending resources: the cache is to re-send
// them after delay unless a response answers the watch first (the latest response is then
// no longer last).
type heldDelta struct {
	stream stream
	last   string
	delay  time.Duration
}

// heldNACK is a NACK of the latest response that the cache is to hold at the rejected
// version for delay, then answer with the current snapshot again.
type heldNACK struct {
	stream  stream
	version string
	delay   time.Duration
}

// The retry delays of a rejected response (see callbacks); variables for tests.
var (
	RetryRejectedAfter  = 5 * time.Second
	RetryRejectedAtMost = 30 * time.Second
)

// Rejection is Envoy's answer to a configuration: a proxy rejected (NACKed) the resources of
// one type at one version, or (Resolved) a proxy that had rejected a type accepted a later
// version of it, or disconnected from this server.
type Rejection struct {
	// Tenant is the proxy's node.cluster, Proxy its node.id.
	Tenant string
	Proxy  string
	// TypeURL of the rejected resources.
	TypeURL string
	// Version that was rejected: the version of the type in the snapshot the rejected response
	// came from (on delta streams its system_version_info); "" when not known (a NACK of a
	// response the server no longer remembers). On delta, while rejected resources stay
	// pending, each ACK of a newer version reports the rejection again at that version.
	Version string
	// Message is Envoy's error detail; it names the rejected resources.
	Message string
	// Resolved is true when the rejection no longer holds.
	Resolved bool
}

func newCallbacks(l logr.Logger, hasTenant func(string) bool) *callbacks {
	c := &callbacks{log: l, hasTenant: hasTenant, identities: map[stream]string{}, streams: map[stream]proxy{}, proxies: map[proxy]int{},
		sent: map[stream]map[string]sent{}, answered: map[stream]map[string]string{}, answeredNames: map[stream]map[string][]string{},
		requested: map[stream]map[string][]string{}, rejected: map[stream]map[string]bool{},
		backoff: map[stream]map[string]time.Duration{}, held: map[*discoveryv3.DiscoveryRequest]heldNACK{},
		delta: map[stream]map[string]*deltaType{}, deltaHeld: map[*discoveryv3.DeltaDiscoveryRequest]heldDelta{},
		limits: DefaultLimits(), states: map[stream]*streamState{}, connStreams: map[string]int{}, tenants: map[string]*tenantState{},
		refusalLog: map[string]refusalLog{}}
	c.StreamOpenFunc = func(ctx context.Context, id int64, typeURL string) error {
		return c.open(ctx, stream{id: id}, typeURL)
	}
	c.DeltaStreamOpenFunc = func(ctx context.Context, id int64, typeURL string) error {
		return c.open(ctx, stream{delta: true, id: id}, typeURL)
	}
	c.StreamRequestFunc = func(id int64, req *discoveryv3.DiscoveryRequest) error {
		s := stream{id: id}
		// The type first: a request for a type not served reaches neither the cache nor a
		// metric (the server has set a per-type stream's type URL; ADS requires one).
		if err := c.checkType(s, req.GetTypeUrl()); err != nil {
			return err
		}
		c.throttle(s)
		version := ""
		if req.GetErrorDetail() != nil {
			version = c.holdRejected(s, req)
		}
		if err := c.request(s, req.GetNode(), req.GetTypeUrl(), req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil); err != nil {
			return err
		}
		c.answer(s, req, version)
		return nil
	}
	c.StreamResponseFunc = func(_ context.Context, id int64, req *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) {
		size := proto.Size(resp)
		c.mu.Lock()
		defer c.mu.Unlock()
		s := stream{id: id}
		c.countSent(s, size)
		if c.sent[s] == nil {
			c.sent[s] = map[string]sent{}
		}
		c.sent[s][resp.GetTypeUrl()] = sent{nonce: resp.GetNonce(), version: resp.GetVersionInfo(), names: sotwNames(req, resp)}
	}
	c.StreamDeltaRequestFunc = func(id int64, req *discoveryv3.DeltaDiscoveryRequest) error {
		s := stream{delta: true, id: id}
		// The delta server calls back before it sets a per-type stream's type URL.
		if err := c.checkType(s, req.GetTypeUrl()); err != nil {
			return err
		}
		c.throttle(s)
		if err := c.request(s, req.GetNode(), c.streamType(s, req.GetTypeUrl()), req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil); err != nil {
			return err
		}
		c.deltaAnswer(s, req)
		return nil
	}
	c.StreamDeltaResponseFunc = func(id int64, _ *discoveryv3.DeltaDiscoveryRequest, resp *discoveryv3.DeltaDiscoveryResponse) {
		c.deltaSent(stream{delta: true, id: id}, resp)
	}
	c.StreamClosedFunc = func(id int64, _ *corev3.Node) { c.closed(stream{id: id}) }
	c.DeltaStreamClosedFunc = func(id int64, _ *corev3.Node) { c.closed(stream{delta: true, id: id}) }
	c.FetchRequestFunc = func(ctx context.Context, req *discoveryv3.DiscoveryRequest) error {
		identity, err := peerTenant(ctx)
		if err != nil {
			return err
		}
		if !servedType(req.GetTypeUrl()) {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.refuse(identity, refusedTypeURL, errUnknownType(req.GetTypeUrl()))
		}
		if err := c.authorize(identity, req.GetNode(), true); err != nil {
			return err
		}
		c.throttleFetch(ctx, identity)
		return nil
	}
	return c
}

// holdRejected makes a NACK of the latest response on the stream look like a request at the
// rejected version, so the cache waits for a new snapshot instead of resending the rejected
// one, and marks it held for the retry delay (retryCache). The server hands this same
// request to the cache right after the callback. It returns the rejected version, "" when
// the NACK is not of the latest response.
func (c *callbacks) holdRejected(s stream, req *discoveryv3.DiscoveryRequest) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	last, ok := c.sent[s][req.GetTypeUrl()]
	if !ok || last.nonce != req.GetResponseNonce() {
		return ""
	}
	req.VersionInfo = last.version
	c.held[req] = heldNACK{stream: s, version: last.version, delay: c.nextDelay(s, req.GetTypeUrl())}
	return last.version
}

// nextDelay returns the retry delay of a NACK on the stream of the type, and doubles the
// next one up to RetryRejectedAtMost. The caller holds c.mu.
func (c *callbacks) nextDelay(s stream, typeURL string) time.Duration {
	if c.backoff[s] == nil {
		c.backoff[s] = map[string]time.Duration{}
	}
	delay := c.backoff[s][typeURL]
	if delay == 0 {
		delay = RetryRejectedAfter
	}
	c.backoff[s][typeURL] = min(2*delay, RetryRejectedAtMost)
	return min(delay, RetryRejectedAtMost)
}

// deltaSent records a delta response about to be sent.
func (c *callbacks) deltaSent(s stream, resp *discoveryv3.DeltaDiscoveryResponse) {
	names := make([]string, 0, len(resp.GetResources())+len(resp.GetRemovedResources()))
	versions := make([]string, len(resp.GetResources()), cap(names))
	for i, r := range resp.GetResources() {
		names = append(names, r.GetName())
		versions[i] = r.GetVersion()
	}
	names = append(names, resp.GetRemovedResources()...)
	versions = versions[:len(names)]
	size := proto.Size(resp)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.countSent(s, size)
	t := c.deltaType(s, resp.GetTypeUrl())
	if len(t.unanswered) == maxUnanswered {
		t.unanswered = slices.Delete(t.unanswered, 0, 1)
	}
	t.unanswered = append(t.unanswered, deltaResponse{nonce: resp.GetNonce(), version: resp.GetSystemVersionInfo(), names: names, versions: versions})
	t.last = resp.GetNonce()
}

// countSent counts the bytes of a response sent on a stream for its tenant (the
// resources are already serialized: the size costs no second marshalling). The caller
// holds c.mu.
func (c *callbacks) countSent(s stream, size int) {
	if p, ok := c.streams[s]; ok {
		metrics.ManagerXDSSentBytes.WithLabelValues(p.tenant).Add(float64(size))
	}
}

// deltaType returns the state of a type on a delta stream. The caller holds c.mu.
func (c *callbacks) deltaType(s stream, typeURL string) *deltaType {
	if c.delta[s] == nil {
		c.delta[s] = map[string]*deltaType{}
	}
	t := c.delta[s][typeURL]
	if t == nil {
		t = &deltaType{}
		c.delta[s][typeURL] = t
	}
	return t
}

// deltaAnswer handles an ACK or NACK on a delta stream. A NACK makes the resources of the
// rejected response pending and is reported; an ACK accepts the resources of its response,
// and resolves the rejection once none is pending (or, when some still are, reports it again
// at the ACKed version, which is the current one). A request of a type with pending resources
// is marked for retryCache, which re-sends them when their delay has passed.
func (c *callbacks) deltaAnswer(s stream, req *discoveryv3.DeltaDiscoveryRequest) {
	typeURL := req.GetTypeUrl()
	c.mu.Lock()
	t := c.deltaType(s, typeURL)
	t.subscribe(req)
	var resp deltaResponse
	answered := false
	if nonce := req.GetResponseNonce(); nonce != "" {
		if i := slices.IndexFunc(t.unanswered, func(r deltaResponse) bool { return r.nonce == nonce }); i >= 0 {
			resp, answered = t.unanswered[i], true
			t.unanswered = slices.Delete(t.unanswered, i, i+1)
			t.answer(resp)
		}
	}
	var report *Rejection
	p := c.streams[s]
	switch {
	case req.GetErrorDetail() != nil:
		if t.pending == nil {
			t.pending = map[string]bool{}
		}
		for _, n := range resp.names {
			t.pending[n] = true
		}
		t.version, t.message = resp.version, req.GetErrorDetail().GetMessage()
		if len(t.pending) > 0 {
			t.retryDue = time.Now().Add(c.nextDelay(s, typeURL))
		}
	case answered && c.rejected[s][typeURL]:
		for _, n := range resp.names {
			delete(t.pending, n)
		}
		if len(t.pending) == 0 {
			delete(c.rejected[s], typeURL)
			delete(c.backoff[s], typeURL)
			report = &Rejection{Tenant: p.tenant, Proxy: p.node, TypeURL: typeURL, Version: resp.version, Resolved: true}
		} else if resp.version != t.version {
			t.version = resp.version
			report = &Rejection{Tenant: p.tenant, Proxy: p.node, TypeURL: typeURL, Version: resp.version, Message: t.message}
		}
	}
	if len(t.pending) > 0 {
		c.deltaHeld[req] = heldDelta{stream: s, last: t.last, delay: max(time.Until(t.retryDue), 0)}
	}
	hook := c.onReject
	c.mu.Unlock()
	if req.GetErrorDetail() != nil {
		c.reject(s, typeURL, resp.version, req.GetErrorDetail().GetMessage())
	}
	if report != nil && hook != nil {
		hook(*report)
	}
}

// takeDeltaHeld returns (and forgets) the hold of a delta request deltaAnswer marked.
func (c *callbacks) takeDeltaHeld(req *discoveryv3.DeltaDiscoveryRequest) (heldDelta, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.deltaHeld[req]
	delete(c.deltaHeld, req)
	return h, ok
}

// deltaPending returns the pending resources of a type on a delta stream, or nil when a
// response was sent after last (it answered the watch the hold was for).
func (c *callbacks) deltaPending(s stream, typeURL, last string) map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.delta[s][typeURL]
	if t == nil || t.last != last || len(t.pending) == 0 {
		return nil
	}
	return maps.Clone(t.pending)
}

// takeHeld returns (and forgets) the hold of a request holdRejected marked.
func (c *callbacks) takeHeld(req *discoveryv3.DiscoveryRequest) (heldNACK, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.held[req]
	delete(c.held, req)
	return h, ok
}

// answer hands a NACK, or an ACK of the latest response after a NACK, to the hook.
func (c *callbacks) answer(s stream, req *discoveryv3.DiscoveryRequest, rejectedVersion string) {
	c.mu.Lock()
	if last, ok := c.sent[s][req.GetTypeUrl()]; ok && req.GetResponseNonce() == last.nonce {
		c.answeredVersion(s, req.GetTypeUrl(), last.version)
		c.answeredNamesOf(s, req.GetTypeUrl(), last.names)
	}
	c.requestedNames(s, req)
	c.mu.Unlock()
	if req.GetErrorDetail() != nil {
		c.reject(s, req.GetTypeUrl(), rejectedVersion, req.GetErrorDetail().GetMessage())
		return
	}
	c.mu.Lock()
	last, ok := c.sent[s][req.GetTypeUrl()]
	acked := ok && req.GetResponseNonce() == last.nonce && req.GetVersionInfo() == last.version && c.rejected[s][req.GetTypeUrl()]
	if acked {
		delete(c.rejected[s], req.GetTypeUrl())
		delete(c.backoff[s], req.GetTypeUrl())
	}
	p, hook := c.streams[s], c.onReject
	c.mu.Unlock()
	if acked && hook != nil {
		hook(Rejection{Tenant: p.tenant, Proxy: p.node, TypeURL: req.GetTypeUrl(), Version: last.version, Resolved: true})
	}
}

func (c *callbacks) reject(s stream, typeURL, version, message string) {
	c.mu.Lock()
	if c.rejected[s] == nil {
		c.rejected[s] = map[string]bool{}
	}
	c.rejected[s][typeURL] = true
	p, hook := c.streams[s], c.onReject
	c.mu.Unlock()
	if hook != nil {
		hook(Rejection{Tenant: p.tenant, Proxy: p.node, TypeURL: typeURL, Version: version, Message: message})
	}
}

// peerTenant is the tenant the verified client certificate of the connection names.
func peerTenant(ctx context.Context) (string, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", status.Error(codes.PermissionDenied, "no peer information")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return "", status.Error(codes.PermissionDenied, "no verified client certificate")
	}
	tenant, err := pki.TenantOf(info.State.VerifiedChains[0][0])
	if err != nil {
		return "", status.Error(codes.PermissionDenied, err.Error())
	}
	return tenant, nil
}

// open records the tenant the client certificate of a new stream names, and refuses the
// stream when its connection or its tenant has as many streams open as the limits allow.
// typeURL is the type of a per-type service, resource.AnyType for ADS.
func (c *callbacks) open(ctx context.Context, s stream, typeURL string) error {
	tenant, err := peerTenant(ctx)
	if err != nil {
		c.log.Info("refusing xDS stream", "error", err)
		return err
	}
	c.mu.Lock()
	if err := c.admit(ctx, s, tenant, typeURL); err != nil {
		c.mu.Unlock()
		return err
	}
	c.identities[s] = tenant
	if s.delta {
		c.deltaStreams++
	}
	limiter := c.tenants[tenant].limiter
	c.mu.Unlock()
	// Opening a stream costs a token of the tenant's bucket: a client that opens and closes
	// streams in a loop is held back like one that floods requests.
	c.wait(ctx, tenant, limiter)
	return nil
}

// hasDeltaStreams reports whether a delta stream is open.
func (c *callbacks) hasDeltaStreams() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deltaStreams > 0
}

// authorize refuses a request whose node.cluster is not the certificate's tenant and, when
// first (the first request of a stream, or a fetch), one whose tenant has no snapshot on this
// server. A request without a node (Envoy sends it only on the first request of a stream)
// keeps the stream's first node.
func (c *callbacks) authorize(identity string, node *corev3.Node, first bool) error {
	if node != nil && node.GetCluster() != identity {
		if node.GetCluster() == "" {
			return errNoTenant
		}
		c.log.Info("refusing xDS request for another tenant", "certificate", identity, "cluster", node.GetCluster(), "node", node.GetId())
		return status.Error(codes.PermissionDenied, fmt.Sprintf("the client certificate names tenant %q, not node.cluster %q", identity, node.GetCluster()))
	}
	if first && !c.hasTenant(identity) {
		c.log.V(1).Info("refusing xDS request for a tenant without configuration", "tenant", identity)
		return status.Error(codes.PermissionDenied, fmt.Sprintf("tenant %q has no configuration on this server", identity))
	}
	return nil
}

// request checks a request against the stream's client certificate, records the proxy of a
// stream on its first request and counts NACKs. Envoy may send the node only in the first
// request of a stream.
func (c *callbacks) request(s stream, node *corev3.Node, typeURL, nackMessage string, nack bool) error {
	c.mu.Lock()
	identity, authenticated := c.identities[s]
	_, known := c.streams[s]
	c.mu.Unlock()
	if !authenticated {
		return status.Error(codes.PermissionDenied, "no verified client certificate")
	}
	rateLimit := !known && rateLimitClient(node, typeURL, identity)
	if !known && node.GetCluster() == "" {
		c.log.Info("refusing xDS stream without node.cluster", "node", node.GetId())
		return errNoTenant
	}
	// hasTenant takes the server's lock: not under c.mu.
	if err := c.authorize(identity, node, !known); err != nil {
		return err
	}
	c.mu.Lock()
	p, known := c.streams[s]
	if !known {
		p = proxy{tenant: identity, node: node.GetId(), rateLimit: rateLimit}
		c.streams[s] = p
		c.proxies[p]++
		if c.proxies[p] == 1 && !p.rateLimit {
			metrics.ManagerXDSConnectedProxies.WithLabelValues(p.tenant).Inc()
			c.log.V(1).Info("proxy connected", "tenant", p.tenant, "node", p.node)
		}
	}
	c.mu.Unlock()

	if nack {
		metrics.ManagerXDSNacks.WithLabelValues(p.tenant, typeURL).Inc()
		c.log.Info("Envoy rejected configuration", "tenant", p.tenant, "node", p.node, "typeURL", typeURL, "error", nackMessage)
	}
	return nil
}

func (c *callbacks) closed(s stream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, open := c.identities[s]; open && s.delta {
		c.deltaStreams--
	}
	delete(c.identities, s)
	c.release(s)
	p, ok := c.streams[s]
	if !ok {
		return
	}
	if c.onReject != nil {
		for typeURL := range c.rejected[s] {
			// The hook must not block: it runs under the lock here.
			c.onReject(Rejection{Tenant: p.tenant, Proxy: p.node, TypeURL: typeURL, Resolved: true})
		}
	}
	delete(c.rejected, s)
	delete(c.backoff, s)
	for req, h := range c.held {
		if h.stream == s {
			delete(c.held, req)
		}
	}
	delete(c.delta, s)
	for req, h := range c.deltaHeld {
		if h.stream == s {
			delete(c.deltaHeld, req)
		}
	}
	delete(c.streams, s)
	delete(c.sent, s)
	delete(c.answered, s)
	delete(c.answeredNames, s)
	delete(c.requested, s)
	c.proxies[p]--
	if c.proxies[p] <= 0 {
		delete(c.proxies, p)
		if !p.rateLimit {
			metrics.ManagerXDSConnectedProxies.WithLabelValues(p.tenant).Dec()
		}
		c.log.V(1).Info("proxy disconnected", "tenant", p.tenant, "node", p.node)
	}
}
