package xds

import (
	"sync"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/proto"
)

// retryCache is the snapshot cache as the go-control-plane server sees it: a NACK the
// callbacks hold (a state-of-the-world NACK of the latest response, see holdRejected) waits
// at the rejected version, so the rejected configuration is not re-sent at once (a NACK
// storm); when the snapshot has not changed after the hold's delay, the proxy gets the
// current configuration of that type again. Envoy rejects an LDS update per listener and
// applies the others, and some rejections do not last: a listener whose port another process
// held binds once the port is free, and nothing else would ever re-send it.
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
	timer *time.Timer

	mu     sync.Mutex
	closed bool
	cancel func()
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
	w := &heldWatch{req: req, sub: sub, value: value, hold: hold, cancel: cancel}
	w.mu.Lock()
	w.timer = time.AfterFunc(hold.delay, func() { r.retry(w) })
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.closed = true
		w.timer.Stop()
		if w.cancel != nil {
			w.cancel()
		}
	}, nil
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
