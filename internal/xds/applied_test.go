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
	// The snapshot's route configurations and their versions, as Server.Applied reads them.
	routes1 := map[string]map[string]string{resource.RouteType: {"http": "h1"}}
	routes2 := map[string]map[string]string{resource.RouteType: {"http": "h1", "other": "o1"}}

	if !c.applied(tenant, v1, routes1) {
		t.Fatal("a tenant without proxies waits for nothing, but Applied is false")
	}
	// The state-of-the-world proxy asks for listeners and route "http" and is sent v1.
	must(c.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "sotw", Cluster: tenant}, TypeUrl: resource.ListenerType}))
	askHTTP := &discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteType, ResourceNames: []string{"http"}}
	must(c.OnStreamRequest(1, askHTTP))
	must(c.OnStreamRequest(3, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "elsewhere", Cluster: other}, TypeUrl: resource.ListenerType}))
	c.OnStreamResponse(context.Background(), 1, nil, &discoveryv3.DiscoveryResponse{TypeUrl: resource.ListenerType, VersionInfo: "l1", Nonce: "1"})
	c.OnStreamResponse(context.Background(), 1, askHTTP, &discoveryv3.DiscoveryResponse{TypeUrl: resource.RouteType, VersionInfo: "r1", Nonce: "2"})
	c.OnStreamResponse(context.Background(), 3, nil, &discoveryv3.DiscoveryResponse{TypeUrl: resource.ListenerType, VersionInfo: "x", Nonce: "1"})
	if c.applied(tenant, v1, routes1) {
		t.Fatal("Applied before the proxy answered")
	}
	must(c.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: resource.ListenerType, VersionInfo: "l1", ResponseNonce: "1"}))
	if c.applied(tenant, v1, routes1) {
		t.Fatal("Applied while the routes are not answered")
	}
	must(c.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteType, VersionInfo: "r1", ResponseNonce: "2", ResourceNames: []string{"http"}}))
	if !c.applied(tenant, v1, routes1) {
		t.Fatal("the proxy accepted v1, but Applied is false (another tenant's proxy must not count)")
	}
	if c.applied(tenant, v2, routes1) {
		t.Fatal("Applied for routes r2, which the proxy was not sent")
	}
	// A new listener makes the proxy ask for route "other" too; the request carries the
	// version it has, r1, like an ACK. Until a response with "other" is answered, the proxy
	// does not serve it.
	askBoth := &discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteType, VersionInfo: "r1", ResponseNonce: "2", ResourceNames: []string{"http", "other"}}
	must(c.OnStreamRequest(1, askBoth))
	if c.applied(tenant, v1, routes2) {
		t.Fatal("Applied while the proxy waits for route \"other\", which it just asked for")
	}
	c.OnStreamResponse(context.Background(), 1, askBoth, &discoveryv3.DiscoveryResponse{TypeUrl: resource.RouteType, VersionInfo: "r1", Nonce: "3"})
	must(c.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteType, VersionInfo: "r1", ResponseNonce: "3", ResourceNames: []string{"http", "other"}}))
	if !c.applied(tenant, v1, routes2) {
		t.Fatal("the proxy accepted both routes, but Applied is false")
	}
	// A rejection is an answer too: the rejection reaches the objects by its own path.
	c.OnStreamResponse(context.Background(), 1, askBoth, &discoveryv3.DiscoveryResponse{TypeUrl: resource.RouteType, VersionInfo: "r2", Nonce: "4"})
	must(c.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteType, VersionInfo: "r1", ResponseNonce: "4", ErrorDetail: &status.Status{Message: "no"}}))
	if !c.applied(tenant, v2, routes2) {
		t.Fatal("the proxy rejected r2: nothing more to wait for, but Applied is false")
	}

	// A delta proxy: listeners must be answered at the current version; of the routes, those
	// it subscribed to at their current versions.
	c.OnStreamClosed(1, nil)
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "delta", Cluster: tenant}, TypeUrl: resource.ListenerType}))
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteType, ResourceNamesSubscribe: []string{"http"}}))
	c.OnStreamDeltaResponse(2, nil, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ListenerType, SystemVersionInfo: "l1", Nonce: "a"})
	if c.applied(tenant, v1, routes1) {
		t.Fatal("Applied before the delta proxy answered")
	}
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ListenerType, ResponseNonce: "a"}))
	if c.applied(tenant, v1, routes1) {
		t.Fatal("Applied while route \"http\", subscribed to, was not even sent yet")
	}
	c.OnStreamDeltaResponse(2, nil, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.RouteType, SystemVersionInfo: "r1", Nonce: "b",
		Resources: []*discoveryv3.Resource{{Name: "http", Version: "h1"}}})
	if c.applied(tenant, v1, routes1) {
		t.Fatal("Applied while the route response waits for its answer")
	}
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteType, ResponseNonce: "b"}))
	if !c.applied(tenant, v1, routes1) {
		t.Fatal("the delta proxy accepted v1, but Applied is false")
	}
	if !c.applied(tenant, v2, routes2) {
		t.Fatal("routes r2 changed none of the delta proxy's routes (nothing sent, nothing to answer), but Applied is false")
	}
	v3 := map[string]string{resource.ListenerType: "l2", resource.RouteType: "r2"}
	if c.applied(tenant, v3, routes2) {
		t.Fatal("Applied for listeners l2, which every proxy is sent and this one did not answer")
	}
	// Listeners l2 make the proxy subscribe to route "other" (before it answers them, as Envoy
	// does); the route is answered after.
	c.OnStreamDeltaResponse(2, nil, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ListenerType, SystemVersionInfo: "l2", Nonce: "c"})
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteType, ResourceNamesSubscribe: []string{"other"}}))
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ListenerType, ResponseNonce: "c"}))
	if c.applied(tenant, v3, routes2) {
		t.Fatal("Applied while route \"other\", just subscribed to, was not sent")
	}
	c.OnStreamDeltaResponse(2, nil, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.RouteType, SystemVersionInfo: "r2", Nonce: "d",
		Resources: []*discoveryv3.Resource{{Name: "other", Version: "o1"}}})
	if c.applied(tenant, v3, routes2) {
		t.Fatal("Applied while a route response waits for its answer")
	}
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteType, ResponseNonce: "d"}))
	if !c.applied(tenant, v3, routes2) {
		t.Fatal("the delta proxy accepted v3, but Applied is false")
	}
	// A route the proxy unsubscribed from is not waited for.
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteType, ResourceNamesUnsubscribe: []string{"other"}}))
	if !c.applied(tenant, v3, map[string]map[string]string{resource.RouteType: {"http": "h1", "other": "o2"}}) {
		t.Fatal("a route the proxy no longer subscribes to is waited for")
	}
	c.OnDeltaStreamClosed(2, nil)
	if !c.applied(tenant, map[string]string{resource.ListenerType: "l9"}, nil) {
		t.Fatal("a disconnected proxy is still waited for")
	}
}
