package xds

import (
	"maps"
	"sync"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
)

// retryCache is the snapshot cache as the go-control-plane server sees it. State of the
// world: a NACK the callbacks hold (a NACK of the latest response, see holdRejected) waits
// at the rejected version, so the rejected configuration is not re-sent at once (a NACK
// storm); when the snapshot has not changed after the hold's delay, the proxy gets the
// current configuration of that type again. Envoy rejects an LDS update per listener and
// applies the others, and some rejections do not last: a listener whose port another process
// held binds once the port is free, and nothing else would ever re-send it. Delta streams
// have a guard of their own with the same delays (see CreateDeltaWatch).
type retryCache struct {
	cache.Cache
	srv *Server
}

// heldWatch is the watch of a held NACK: the cache's watch at the rejected version, until
// the retry replaces it with one that the cache answers at once.
type heldWatch struct {
	req   *discoveryv3.DiscoveryRequest
	sub   cache.Subscription
	value chan cache.Response
	hold  heldNACK
	heldTimer
}

// heldTimer is what both held watches share: the retry's timer and the cache watch it
// replaces, under one lock.
type heldTimer struct {
	timer *time.Timer

	mu     sync.Mutex
	closed bool
	cancel func()
}

// start arms the retry after delay and returns the watch's cancel function: it stops the
// retry and the cache's watch.
func (h *heldTimer) start(delay time.Duration, retry func()) func() {
	h.mu.Lock()
	h.timer = time.AfterFunc(delay, retry)
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.closed = true
		h.timer.Stop()
		if h.cancel != nil {
			h.cancel()
		}
	}
}

// CreateWatch implements cache.ConfigWatcher.
func (r *retryCache) CreateWatch(req *cache.Request, sub cache.Subscription, value chan cache.Response) (func(), error) {
	hold, ok := r.srv.cb.takeHeld(req)
	if !ok {
		return r.Cache.CreateWatch(req, sub, value)
	}
	cancel, err := r.Cache.CreateWatch(req, sub, value)
	if err != nil {
		return nil, err
	}
	w := &heldWatch{req: req, sub: sub, value: value, hold: hold, heldTimer: heldTimer{cancel: cancel}}
	return w.start(hold.delay, func() { r.retry(w) }), nil
}

// retry answers a held watch with the current configuration of its type, unless a newer
// snapshot answered it already or the server closed it. It runs under the server's lock, so
// no snapshot is set meanwhile: the held watch is answered exactly once.
func (r *retryCache) retry(w *heldWatch) {
	r.srv.mu.Lock()
	defer r.srv.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	tenant := tenantHash{}.ID(w.req.GetNode())
	typeURL := w.req.GetTypeUrl()
	snap, err := r.srv.snapshotCache(typeURL).GetSnapshot(tenant)
	if err != nil || snap.GetVersion(typeURL) != w.hold.version {
		return // a newer snapshot answered the held watch (or the tenant is gone)
	}
	if w.cancel != nil {
		w.cancel()
	}
	again := proto.Clone(w.req).(*discoveryv3.DiscoveryRequest)
	again.VersionInfo = "" // not the current version: the cache answers at once
	r.srv.log.V(1).Info("re-sending rejected configuration", "tenant", tenant, "typeURL", typeURL, "version", w.hold.version,
		"after", w.hold.delay.String())
	cancel, err := r.Cache.CreateWatch(again, w.sub, w.value)
	if err != nil {
		r.srv.log.Error(err, "re-sending rejected configuration; holding it again", "tenant", tenant, "typeURL", typeURL)
		cancel, err = r.Cache.CreateWatch(w.req, w.sub, w.value)
		if err != nil {
			r.srv.log.Error(err, "holding rejected configuration", "tenant", tenant, "typeURL", typeURL)
		}
	}
	w.cancel = cancel
}

// CreateDeltaWatch implements cache.ConfigWatcher. A delta request of a type whose proxy
// rejected resources that it has not accepted since (see callbacks.deltaAnswer) gets the
// cache's watch as usual (the cache holds the rejected resources for sent, so it waits for a
// change), and a timer: when the retry delay has passed and no response answered the watch,
// the watch is replaced by one that sees the pending resources as never sent, which the
// cache answers at once with them (and only them, unless something else changed).
func (r *retryCache) CreateDeltaWatch(req *cache.DeltaRequest, sub cache.Subscription, value chan cache.DeltaResponse) (func(), error) {
	if req.GetTypeUrl() == resource.EndpointType {
		if err := r.srv.deltaEndpoints(tenantHash{}.ID(req.GetNode())); err != nil {
			return nil, err
		}
	}
	hold, ok := r.srv.cb.takeDeltaHeld(req)
	if !ok {
		return r.Cache.CreateDeltaWatch(req, sub, value)
	}
	cancel, err := r.Cache.CreateDeltaWatch(req, sub, value)
	if err != nil || cancel == nil {
		return cancel, err // answered at once: the proxy's answer to it comes next
	}
	w := &heldDeltaWatch{req: req, sub: sub, value: value, hold: hold, heldTimer: heldTimer{cancel: cancel}}
	return w.start(hold.delay, func() { r.retryDelta(w) }), nil
}

// heldDeltaWatch is the watch of a delta request whose type has pending resources.
type heldDeltaWatch struct {
	req   *discoveryv3.DeltaDiscoveryRequest
	sub   cache.Subscription
	value chan cache.DeltaResponse
	hold  heldDelta
	heldTimer
}

// retryDelta re-sends the pending resources on a held delta watch, unless the server closed
// it or a response answered it (which the proxy answers in turn: its next request is held
// again). It runs under the server's lock, so no snapshot is set meanwhile. A response a
// snapshot queued just before, not yet sent, is not seen: the proxy then gets the pending
// resources once more than needed, which it takes as an update to the same version.
func (r *retryCache) retryDelta(w *heldDeltaWatch) {
	r.srv.mu.Lock()
	defer r.srv.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	typeURL := w.req.GetTypeUrl()
	pending := r.srv.cb.deltaPending(w.hold.stream, typeURL, w.hold.last)
	if pending == nil {
		return
	}
	if w.cancel != nil {
		w.cancel()
	}
	r.srv.log.V(1).Info("re-sending rejected resources", "tenant", tenantHash{}.ID(w.req.GetNode()), "typeURL", typeURL,
		"resources", len(pending), "after", w.hold.delay.String())
	cancel, err := r.Cache.CreateDeltaWatch(w.req, unsent{Subscription: w.sub, pending: pending}, w.value)
	if err != nil {
		r.srv.log.Error(err, "re-sending rejected resources; holding them again", "typeURL", typeURL)
		cancel, err = r.Cache.CreateDeltaWatch(w.req, w.sub, w.value)
		if err != nil {
			r.srv.log.Error(err, "holding rejected resources", "typeURL", typeURL)
		}
	}
	w.cancel = cancel
}

// unsent is a delta subscription whose pending resources count as never sent, so the cache
// sends them (again).
type unsent struct {
	cache.Subscription
	pending map[string]bool
}

// ReturnedResources implements cache.Subscription.
func (u unsent) ReturnedResources() map[string]string {
	returned := maps.Clone(u.Subscription.ReturnedResources())
	for name := range u.pending {
		delete(returned, name)
	}
	return returned
}
