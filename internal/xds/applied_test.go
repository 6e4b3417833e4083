package xds

import (
	"context"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"
	"google.golang.org/genproto/googleapis/rpc/status"
)

// A Route's status waits until the tenant's proxies answered the configuration that carries
// it (status.WithApplied): Applied is what it asks, for state-of-the-world and delta streams.
func TestApplied(t *testing.T) {
	t.Parallel()
	const tenant, other = "tenant-applied", "tenant-applied-other"
	c := newCallbacks(logr.Discard(), func(string) bool { return true })
	sotw, delta, elsewhere := stream{id: 1}, stream{delta: true, id: 2}, stream{id: 3}
	c.identities[sotw], c.identities[delta], c.identities[elsewhere] = tenant, tenant, other
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	v1 := map[string]string{resource.ListenerType: "l1", resource.RouteType: "r1"}
	v2 := map[string]string{resource.ListenerType: "l1", resource.RouteType: "r2"}

	if !c.applied(tenant, v1) {
		t.Fatal("a tenant without proxies waits for nothing, but Applied is false")
	}
	// The state-of-the-world proxy asks for listeners and routes and is sent v1.
	must(c.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "sotw", Cluster: tenant}, TypeUrl: resource.ListenerType}))
	must(c.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteType}))
	must(c.OnStreamRequest(3, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "elsewhere", Cluster: other}, TypeUrl: resource.ListenerType}))
	c.OnStreamResponse(context.Background(), 1, nil, &discoveryv3.DiscoveryResponse{TypeUrl: resource.ListenerType, VersionInfo: "l1", Nonce: "1"})
	c.OnStreamResponse(context.Background(), 1, nil, &discoveryv3.DiscoveryResponse{TypeUrl: resource.RouteType, VersionInfo: "r1", Nonce: "2"})
	c.OnStreamResponse(context.Background(), 3, nil, &discoveryv3.DiscoveryResponse{TypeUrl: resource.ListenerType, VersionInfo: "x", Nonce: "1"})
	if c.applied(tenant, v1) {
		t.Fatal("Applied before the proxy answered")
	}
	must(c.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: resource.ListenerType, VersionInfo: "l1", ResponseNonce: "1"}))
	if c.applied(tenant, v1) {
		t.Fatal("Applied while the routes are not answered")
	}
	must(c.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteType, VersionInfo: "r1", ResponseNonce: "2"}))
	if !c.applied(tenant, v1) {
		t.Fatal("the proxy accepted v1, but Applied is false (another tenant's proxy must not count)")
	}
	if c.applied(tenant, v2) {
		t.Fatal("Applied for routes r2, which the proxy was not sent")
	}
	// A rejection is an answer too: the rejection reaches the objects by its own path.
	c.OnStreamResponse(context.Background(), 1, nil, &discoveryv3.DiscoveryResponse{TypeUrl: resource.RouteType, VersionInfo: "r2", Nonce: "3"})
	must(c.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteType, VersionInfo: "r1", ResponseNonce: "3", ErrorDetail: &status.Status{Message: "no"}}))
	if !c.applied(tenant, v2) {
		t.Fatal("the proxy rejected r2: nothing more to wait for, but Applied is false")
	}

	// A delta proxy: listeners must be answered at the current version; a route change that
	// concerned none of its routes sent it nothing, and leaves nothing to wait for.
	c.OnStreamClosed(1, nil)
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "delta", Cluster: tenant}, TypeUrl: resource.ListenerType}))
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteType}))
	c.OnStreamDeltaResponse(2, nil, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ListenerType, SystemVersionInfo: "l1", Nonce: "a"})
	c.OnStreamDeltaResponse(2, nil, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.RouteType, SystemVersionInfo: "r1", Nonce: "b"})
	if c.applied(tenant, v1) {
		t.Fatal("Applied before the delta proxy answered")
	}
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ListenerType, ResponseNonce: "a"}))
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteType, ResponseNonce: "b"}))
	if !c.applied(tenant, v1) {
		t.Fatal("the delta proxy accepted v1, but Applied is false")
	}
	if !c.applied(tenant, v2) {
		t.Fatal("routes r2 changed none of the delta proxy's routes (nothing sent, nothing unanswered), but Applied is false")
	}
	v3 := map[string]string{resource.ListenerType: "l2", resource.RouteType: "r2"}
	if c.applied(tenant, v3) {
		t.Fatal("Applied for listeners l2, which every proxy is sent and this one did not answer")
	}
	c.OnStreamDeltaResponse(2, nil, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.RouteType, SystemVersionInfo: "r2", Nonce: "c"})
	c.OnStreamDeltaResponse(2, nil, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ListenerType, SystemVersionInfo: "l2", Nonce: "d"})
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ListenerType, ResponseNonce: "d"}))
	if c.applied(tenant, v3) {
		t.Fatal("Applied while a route response waits for its answer")
	}
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteType, ResponseNonce: "c"}))
	if !c.applied(tenant, v3) {
		t.Fatal("the delta proxy accepted v3, but Applied is false")
	}
	c.OnDeltaStreamClosed(2, nil)
	if !c.applied(tenant, map[string]string{resource.ListenerType: "l9"}) {
		t.Fatal("a disconnected proxy is still waited for")
	}
}
