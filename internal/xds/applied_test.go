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
	// The same proxies after a reconnect.
	c.identities[stream{id: 4}], c.identities[stream{delta: true, id: 5}], c.identities[stream{delta: true, id: 6}] = tenant, tenant, tenant
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	v1 := map[string]string{resource.ListenerType: "l1", resource.SecretType: "r1"}
	v2 := map[string]string{resource.ListenerType: "l1", resource.SecretType: "r2"}
	// The snapshot's resources and their versions, as Server.Applied reads them. Secrets are
	// sent only to the proxies that ask for them by name.
	snap := func(listener string, routes ...string) map[string]map[string]string {
		out := map[string]map[string]string{resource.ListenerType: {"lis": listener}, resource.SecretType: {}}
		for i := 0; i+1 < len(routes); i += 2 {
			out[resource.SecretType][routes[i]] = routes[i+1]
		}
		return out
	}
	snap1, snap2 := snap("L1", "http", "h1"), snap("L1", "http", "h1", "other", "o1")

	if !c.applied(tenant, v1, snap1) {
		t.Fatal("a tenant without proxies waits for nothing, but Applied is false")
	}
	// The state-of-the-world proxy asks for listeners and route "http" and is sent v1.
	must(c.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "sotw", Cluster: tenant}, TypeUrl: resource.ListenerType}))
	askHTTP := &discoveryv3.DiscoveryRequest{TypeUrl: resource.SecretType, ResourceNames: []string{"http"}}
	must(c.OnStreamRequest(1, askHTTP))
	must(c.OnStreamRequest(3, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "elsewhere", Cluster: other}, TypeUrl: resource.ListenerType}))
	if c.applied(tenant, v1, snap1) {
		t.Fatal("Applied before the proxy was even sent the listeners")
	}
	c.OnStreamResponse(context.Background(), 1, nil, &discoveryv3.DiscoveryResponse{TypeUrl: resource.ListenerType, VersionInfo: "l1", Nonce: "1"})
	c.OnStreamResponse(context.Background(), 1, askHTTP, &discoveryv3.DiscoveryResponse{TypeUrl: resource.SecretType, VersionInfo: "r1", Nonce: "2"})
	c.OnStreamResponse(context.Background(), 3, nil, &discoveryv3.DiscoveryResponse{TypeUrl: resource.ListenerType, VersionInfo: "x", Nonce: "1"})
	if c.applied(tenant, v1, snap1) {
		t.Fatal("Applied before the proxy answered")
	}
	must(c.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: resource.ListenerType, VersionInfo: "l1", ResponseNonce: "1"}))
	if c.applied(tenant, v1, snap1) {
		t.Fatal("Applied while the secrets are not answered")
	}
	must(c.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: resource.SecretType, VersionInfo: "r1", ResponseNonce: "2", ResourceNames: []string{"http"}}))
	if !c.applied(tenant, v1, snap1) {
		t.Fatal("the proxy accepted v1, but Applied is false (another tenant's proxy must not count)")
	}
	if c.applied(tenant, v2, snap1) {
		t.Fatal("Applied for secrets r2, which the proxy was not sent")
	}
	// A new listener makes the proxy ask for route "other" too; the request carries the
	// version it has, r1, like an ACK. Until a response with "other" is answered, the proxy
	// does not serve it.
	askBoth := &discoveryv3.DiscoveryRequest{TypeUrl: resource.SecretType, VersionInfo: "r1", ResponseNonce: "2", ResourceNames: []string{"http", "other"}}
	must(c.OnStreamRequest(1, askBoth))
	if c.applied(tenant, v1, snap2) {
		t.Fatal("Applied while the proxy waits for secret \"other\", which it just asked for")
	}
	c.OnStreamResponse(context.Background(), 1, askBoth, &discoveryv3.DiscoveryResponse{TypeUrl: resource.SecretType, VersionInfo: "r1", Nonce: "3"})
	must(c.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: resource.SecretType, VersionInfo: "r1", ResponseNonce: "3", ResourceNames: []string{"http", "other"}}))
	if !c.applied(tenant, v1, snap2) {
		t.Fatal("the proxy accepted both secrets, but Applied is false")
	}
	// A rejection is an answer too: the rejection reaches the objects by its own path.
	c.OnStreamResponse(context.Background(), 1, askBoth, &discoveryv3.DiscoveryResponse{TypeUrl: resource.SecretType, VersionInfo: "r2", Nonce: "4"})
	must(c.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: resource.SecretType, VersionInfo: "r1", ResponseNonce: "4", ErrorDetail: &status.Status{Message: "no"}}))
	if !c.applied(tenant, v2, snap2) {
		t.Fatal("the proxy rejected r2: nothing more to wait for, but Applied is false")
	}
	c.OnStreamClosed(1, nil)
	// A proxy that reconnects with the current version is sent nothing, and has it.
	must(c.OnStreamRequest(4, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "sotw", Cluster: tenant}, TypeUrl: resource.ListenerType, VersionInfo: "l1"}))
	if !c.applied(tenant, map[string]string{resource.ListenerType: "l1"}, snap1) {
		t.Fatal("a proxy that reconnected with the current listeners is waited for")
	}
	c.OnStreamClosed(4, nil)

	// A delta proxy: every listener, and each route it subscribed to, at its current version.
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "delta", Cluster: tenant}, TypeUrl: resource.ListenerType}))
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.SecretType, ResourceNamesSubscribe: []string{"http"}}))
	if c.applied(tenant, v1, snap1) {
		t.Fatal("Applied before the delta proxy was even sent the listeners")
	}
	c.OnStreamDeltaResponse(2, nil, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ListenerType, SystemVersionInfo: "l1", Nonce: "a",
		Resources: []*discoveryv3.Resource{{Name: "lis", Version: "L1"}}})
	if c.applied(tenant, v1, snap1) {
		t.Fatal("Applied before the delta proxy answered")
	}
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ListenerType, ResponseNonce: "a"}))
	if c.applied(tenant, v1, snap1) {
		t.Fatal("Applied while secret \"http\", subscribed to, was not even sent yet")
	}
	c.OnStreamDeltaResponse(2, nil, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.SecretType, SystemVersionInfo: "r1", Nonce: "b",
		Resources: []*discoveryv3.Resource{{Name: "http", Version: "h1"}}})
	if c.applied(tenant, v1, snap1) {
		t.Fatal("Applied while the secret response waits for its answer")
	}
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.SecretType, ResponseNonce: "b"}))
	if !c.applied(tenant, v1, snap1) {
		t.Fatal("the delta proxy accepted v1, but Applied is false")
	}
	if !c.applied(tenant, v2, snap2) {
		t.Fatal("a secret the delta proxy does not subscribe to changed (nothing sent, nothing to answer), but Applied is false")
	}
	v3, snap3 := map[string]string{resource.ListenerType: "l2", resource.SecretType: "r2"}, snap("L2", "http", "h1", "other", "o1")
	if c.applied(tenant, v3, snap3) {
		t.Fatal("Applied for listener version L2, which every proxy is sent and this one did not answer")
	}
	// Listeners l2 make the proxy subscribe to route "other" (before it answers them, as Envoy
	// does); the route is answered after.
	c.OnStreamDeltaResponse(2, nil, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ListenerType, SystemVersionInfo: "l2", Nonce: "c",
		Resources: []*discoveryv3.Resource{{Name: "lis", Version: "L2"}}})
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.SecretType, ResourceNamesSubscribe: []string{"other"}}))
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ListenerType, ResponseNonce: "c"}))
	if c.applied(tenant, v3, snap3) {
		t.Fatal("Applied while secret \"other\", just subscribed to, was not sent")
	}
	c.OnStreamDeltaResponse(2, nil, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.SecretType, SystemVersionInfo: "r2", Nonce: "d",
		Resources: []*discoveryv3.Resource{{Name: "other", Version: "o1"}}})
	if c.applied(tenant, v3, snap3) {
		t.Fatal("Applied while a secret response waits for its answer")
	}
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.SecretType, ResponseNonce: "d"}))
	if !c.applied(tenant, v3, snap3) {
		t.Fatal("the delta proxy accepted v3, but Applied is false")
	}
	// A secret the proxy unsubscribed from is not waited for.
	must(c.OnStreamDeltaRequest(2, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.SecretType, ResourceNamesUnsubscribe: []string{"other"}}))
	if !c.applied(tenant, v3, snap("L2", "http", "h1", "other", "o2")) {
		t.Fatal("a secret the proxy no longer subscribes to is waited for")
	}
	c.OnDeltaStreamClosed(2, nil)
	if !c.applied(tenant, map[string]string{resource.ListenerType: "l9"}, snap("L9")) {
		t.Fatal("a disconnected proxy is still waited for")
	}
	// A delta proxy that reconnects with the resources it has is sent nothing, and has them.
	must(c.OnStreamDeltaRequest(5, &discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "delta", Cluster: tenant}, TypeUrl: resource.ListenerType,
		InitialResourceVersions: map[string]string{"lis": "L2"}}))
	if !c.applied(tenant, v3, snap3) {
		t.Fatal("a delta proxy that reconnected with the current listeners is waited for")
	}

	c.OnDeltaStreamClosed(5, nil)

	// Route configurations and endpoints: every proxy gets every listener and cluster, and so
	// asks for every one they reference; one it has not asked for yet is waited for (Envoy asks
	// for a new cluster's endpoints sometimes after it answered the clusters), unless it
	// rejected the clusters.
	must(c.OnStreamDeltaRequest(6, &discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "delta", Cluster: tenant}, TypeUrl: resource.ClusterType}))
	c.OnStreamDeltaResponse(6, nil, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, SystemVersionInfo: "c1", Nonce: "e",
		Resources: []*discoveryv3.Resource{{Name: "new", Version: "N1"}}})
	must(c.OnStreamDeltaRequest(6, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: "e"}))
	vc := map[string]string{resource.ClusterType: "c1", resource.EndpointType: "e1"}
	snapc := map[string]map[string]string{resource.ClusterType: {"new": "N1"}, resource.EndpointType: {"new": "E1"}}
	if c.applied(tenant, vc, snapc) {
		t.Fatal("Applied while the new cluster's endpoints were neither asked for nor sent")
	}
	must(c.OnStreamDeltaRequest(6, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: []string{"new"}}))
	c.OnStreamDeltaResponse(6, nil, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.EndpointType, SystemVersionInfo: "e1", Nonce: "f",
		Resources: []*discoveryv3.Resource{{Name: "new", Version: "E1"}}})
	must(c.OnStreamDeltaRequest(6, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResponseNonce: "f"}))
	if !c.applied(tenant, vc, snapc) {
		t.Fatal("the proxy accepted the cluster and its endpoints, but Applied is false")
	}
	// It rejects the next clusters: the endpoints of a cluster it does not have are not waited for.
	c.OnStreamDeltaResponse(6, nil, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, SystemVersionInfo: "c2", Nonce: "g",
		Resources: []*discoveryv3.Resource{{Name: "bad", Version: "B1"}}})
	must(c.OnStreamDeltaRequest(6, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: "g", ErrorDetail: &status.Status{Message: "no"}}))
	if !c.applied(tenant, map[string]string{resource.ClusterType: "c2", resource.EndpointType: "e2"},
		map[string]map[string]string{resource.ClusterType: {"new": "N1", "bad": "B1"}, resource.EndpointType: {"new": "E1", "bad": "X1"}}) {
		t.Fatal("the proxy rejected the clusters, yet the rejected cluster's endpoints are waited for")
	}
}
