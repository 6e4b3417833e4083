package xds

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/translator"
	"kubelb.dev/kubelb/internal/xds/xdstest"
)

var (
	_ manager.Runnable               = (*Runnable)(nil)
	_ manager.LeaderElectionRunnable = (*Runnable)(nil)
)

func TestSetTenantVersions(t *testing.T) {
	t.Parallel()
	const tenant = "tenant-unit"
	srv := NewServer(logr.Discard(), nil)
	in := translate.Input{
		Tenant:        tenant,
		LoadBalancers: []v1alpha1.LoadBalancer{newLB("a").port(corev1.ProtocolTCP, 80, 31080, 20001).LoadBalancer},
		Addresses:     addresses("10.0.0.1", "10.0.0.2"),
	}
	ctx := context.Background()
	updates := func() float64 { return testutil.ToFloat64(metrics.ManagerSnapshotUpdates.WithLabelValues(tenant)) }
	updatesBefore := updates()

	if changed, err := srv.SetTenant(ctx, "", nil); err == nil || changed {
		t.Fatalf("empty tenant: %v, %v", changed, err)
	}
	if changed, err := srv.SetTenant(ctx, tenant, mustTranslate(t, in)); err != nil || !changed {
		t.Fatalf("first SetTenant = %v, %v", changed, err)
	}
	v1 := srv.Version(tenant)
	if changed, err := srv.SetTenant(ctx, tenant, mustTranslate(t, in)); err != nil || changed {
		t.Fatalf("identical SetTenant = %v, %v", changed, err)
	}
	if got := updates() - updatesBefore; got != 1 {
		t.Fatalf("snapshot updates grew by %v, want 1", got)
	}

	// Only the endpoints change: only the endpoint version moves.
	lds, cds, eds := srv.TypeVersion(tenant, resource.ListenerType), srv.TypeVersion(tenant, resource.ClusterType), srv.TypeVersion(tenant, resource.EndpointType)
	in.Addresses = addresses("10.0.0.1")
	if changed, err := srv.SetTenant(ctx, tenant, mustTranslate(t, in)); err != nil || !changed {
		t.Fatalf("changed SetTenant = %v, %v", changed, err)
	}
	if srv.Version(tenant) == v1 {
		t.Fatal("version did not change")
	}
	if srv.TypeVersion(tenant, resource.ListenerType) != lds || srv.TypeVersion(tenant, resource.ClusterType) != cds {
		t.Error("listener or cluster version changed although only endpoints did")
	}
	if srv.TypeVersion(tenant, resource.EndpointType) == eds {
		t.Error("endpoint version did not change")
	}
	if got := testutil.ToFloat64(metrics.ManagerSnapshotEndpoints.WithLabelValues(tenant)); got != 1 {
		t.Errorf("endpoints gauge = %v, want 1", got)
	}

	// Duplicate names are refused.
	dup := mustTranslate(t, in)
	dup[resource.ListenerType] = append(dup[resource.ListenerType], dup[resource.ListenerType][0])
	if _, err := srv.SetTenant(ctx, tenant, dup); err == nil {
		t.Error("duplicate listener accepted")
	}

	srv.RemoveTenant(tenant)
	if srv.Version(tenant) != "" {
		t.Error("version kept after RemoveTenant")
	}
	if snap, err := srv.ordered.GetSnapshot(tenant); err != nil || len(snap.GetResources(resource.ListenerType)) != 0 {
		t.Errorf("after RemoveTenant the cache holds %v, %v; want an empty snapshot", snap, err)
	}
	if snap, err := srv.endpoints.GetSnapshot(tenant); err != nil || len(snap.GetResources(resource.EndpointType)) != 0 {
		t.Errorf("after RemoveTenant the endpoints cache holds %v, %v; want an empty snapshot", snap, err)
	}
	srv.RemoveTenant("never-seen") // no-op
}

func TestCallbacks(t *testing.T) {
	t.Parallel()
	const tenant = "tenant-callbacks"
	c := newCallbacks(logr.Discard(), func(string) bool { return true })
	for _, id := range []int64{1, 10, 11} { // the client certificates name the tenant
		c.identities[stream{id: id}] = tenant
	}
	connected := func() float64 { return testutil.ToFloat64(metrics.ManagerXDSConnectedProxies.WithLabelValues(tenant)) }
	node := &corev3.Node{Id: "p1", Cluster: tenant}
	nacks := func() float64 {
		return testutil.ToFloat64(metrics.ManagerXDSNacks.WithLabelValues(tenant, resource.ListenerType))
	}
	nacksBefore := nacks()

	if err := c.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "anonymous"}}); err == nil {
		t.Error("a stream without node.cluster was accepted")
	}
	// Two streams of one proxy count once; the node is only in the first request.
	for _, id := range []int64{10, 11} {
		if err := c.OnStreamRequest(id, &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: resource.ClusterType}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.OnStreamRequest(10, &discoveryv3.DiscoveryRequest{TypeUrl: resource.ListenerType}); err != nil {
		t.Fatal(err)
	}
	if got := connected(); got != 1 {
		t.Fatalf("connected = %v, want 1", got)
	}

	// A NACK of the latest response is held at the rejected version and counted.
	c.OnStreamResponse(context.Background(), 10, nil, &discoveryv3.DiscoveryResponse{TypeUrl: resource.ListenerType, VersionInfo: "bad", Nonce: "7"})
	nack := &discoveryv3.DiscoveryRequest{TypeUrl: resource.ListenerType, VersionInfo: "good", ResponseNonce: "7", ErrorDetail: &status.Status{Message: "no"}}
	if err := c.OnStreamRequest(10, nack); err != nil {
		t.Fatal(err)
	}
	if nack.VersionInfo != "bad" {
		t.Errorf("NACK version = %q, want the rejected %q", nack.VersionInfo, "bad")
	}
	stale := &discoveryv3.DiscoveryRequest{TypeUrl: resource.ListenerType, VersionInfo: "good", ResponseNonce: "6", ErrorDetail: &status.Status{Message: "no"}}
	_ = c.OnStreamRequest(10, stale)
	if stale.VersionInfo != "good" {
		t.Error("a NACK of an older response was changed")
	}
	if got := nacks() - nacksBefore; got != 2 {
		t.Errorf("nacks grew by %v, want 2", got)
	}
	// The held NACK is re-sent after a delay that doubles with every NACK, up to a bound,
	// and starts over once the proxy accepts the type; a NACK of an older response is not held.
	if h, ok := c.takeHeld(nack); !ok || h.delay != RetryRejectedAfter || h.version != "bad" {
		t.Errorf("held %+v, %v; want version bad for %s", h, ok, RetryRejectedAfter)
	}
	if _, ok := c.takeHeld(stale); ok {
		t.Error("a NACK of an older response is held")
	}
	want := RetryRejectedAfter
	for i, nonce := range []string{"8", "9", "10", "11", "12", "13"} {
		c.OnStreamResponse(context.Background(), 10, nil, &discoveryv3.DiscoveryResponse{TypeUrl: resource.ListenerType, VersionInfo: "bad" + nonce, Nonce: nonce})
		again := &discoveryv3.DiscoveryRequest{TypeUrl: resource.ListenerType, VersionInfo: "good", ResponseNonce: nonce, ErrorDetail: &status.Status{Message: "no"}}
		if err := c.OnStreamRequest(10, again); err != nil {
			t.Fatal(err)
		}
		want = min(2*want, RetryRejectedAtMost)
		if h, _ := c.takeHeld(again); h.delay != want {
			t.Errorf("NACK %d held for %s, want %s", i+2, h.delay, want)
		}
	}
	if want != RetryRejectedAtMost {
		t.Errorf("the delay did not reach its bound: %s", want)
	}
	c.OnStreamResponse(context.Background(), 10, nil, &discoveryv3.DiscoveryResponse{TypeUrl: resource.ListenerType, VersionInfo: "fixed", Nonce: "14"})
	if err := c.OnStreamRequest(10, &discoveryv3.DiscoveryRequest{TypeUrl: resource.ListenerType, VersionInfo: "fixed", ResponseNonce: "14"}); err != nil {
		t.Fatal(err)
	}
	c.OnStreamResponse(context.Background(), 10, nil, &discoveryv3.DiscoveryResponse{TypeUrl: resource.ListenerType, VersionInfo: "bad2", Nonce: "15"})
	afterACK := &discoveryv3.DiscoveryRequest{TypeUrl: resource.ListenerType, VersionInfo: "fixed", ResponseNonce: "15", ErrorDetail: &status.Status{Message: "no"}}
	if err := c.OnStreamRequest(10, afterACK); err != nil {
		t.Fatal(err)
	}
	if len(c.held) != 1 {
		t.Errorf("%d NACKs held, want 1", len(c.held))
	}
	if h, _ := c.takeHeld(afterACK); h.delay != RetryRejectedAfter {
		t.Errorf("after an ACK, a NACK is held for %s, want %s again", h.delay, RetryRejectedAfter)
	}

	// A held NACK the server never hands to the cache is forgotten with its stream.
	c.OnStreamResponse(context.Background(), 10, nil, &discoveryv3.DiscoveryResponse{TypeUrl: resource.ListenerType, VersionInfo: "bad3", Nonce: "16"})
	if err := c.OnStreamRequest(10, &discoveryv3.DiscoveryRequest{TypeUrl: resource.ListenerType, ResponseNonce: "16", ErrorDetail: &status.Status{Message: "no"}}); err != nil {
		t.Fatal(err)
	}
	c.OnStreamClosed(10, node)
	if len(c.held) != 0 || len(c.backoff) != 0 {
		t.Errorf("after the stream closed: %d held NACKs, %d backoffs", len(c.held), len(c.backoff))
	}
	if got := connected(); got != 1 {
		t.Fatalf("connected = %v after closing one of two streams, want 1", got)
	}
	c.OnStreamClosed(11, node)
	c.OnStreamClosed(11, node) // twice is harmless
	if got := connected(); got != 0 {
		t.Fatalf("connected = %v, want 0", got)
	}
}

// TestDeltaEndpointVersions: on delta, the version of a cluster's endpoints moves with the
// cluster (Envoy keeps a changed EDS cluster warming until it gets its endpoints again) and
// with the endpoints themselves, and no other endpoints' version moves. Without a delta
// stream the versions are built when a delta watch of endpoints comes (deltaEndpoints), with
// one when the snapshot is set.
func TestDeltaEndpointVersions(t *testing.T) {
	t.Parallel()
	const tenant = "tenant-delta-versions"
	srv := NewServer(logr.Discard(), nil)
	lbs := []v1alpha1.LoadBalancer{
		newLB("a").port(corev1.ProtocolTCP, 80, 31080, 20001).LoadBalancer,
		newLB("b").port(corev1.ProtocolTCP, 80, 31081, 20002).LoadBalancer,
	}
	in := translate.Input{Tenant: tenant, LoadBalancers: lbs, Addresses: addresses("10.0.0.1", "10.0.0.2")}
	versions := func() map[string]string {
		t.Helper()
		if _, err := srv.SetTenant(context.Background(), tenant, mustTranslate(t, in)); err != nil {
			t.Fatal(err)
		}
		if !srv.cb.hasDeltaStreams() {
			if err := srv.deltaEndpoints(tenant); err != nil {
				t.Fatal(err)
			}
		}
		snap, err := srv.endpoints.GetSnapshot(tenant)
		if err != nil {
			t.Fatal(err)
		}
		v := snap.GetVersionMap(resource.EndpointType)
		if len(v) != 2 {
			t.Fatalf("delta versions of %d endpoints, want 2: %v", len(v), v)
		}
		return v
	}
	before := versions()
	srv.cb.mu.Lock()
	srv.cb.deltaStreams++ // a delta stream is open from now on
	srv.cb.mu.Unlock()
	// Only a's cluster changes (PROXY protocol), not its endpoints.
	in.LoadBalancers = []v1alpha1.LoadBalancer{
		newLB("a").annotate(v1alpha1.AnnotationProxyProtocol, "v2").port(corev1.ProtocolTCP, 80, 31080, 20001).LoadBalancer, lbs[1]}
	clusterChanged := versions()
	// Only b's endpoints change (its NodePort).
	in.LoadBalancers[1] = newLB("b").port(corev1.ProtocolTCP, 80, 31082, 20002).LoadBalancer
	endpointsChanged := versions()
	var moved []string
	for name, v := range clusterChanged {
		if v != before[name] {
			moved = append(moved, "cluster change: "+name)
		}
		if endpointsChanged[name] != v {
			moved = append(moved, "endpoints change: "+name)
		}
	}
	slices.Sort(moved)
	if want := []string{"cluster change: a-tcp-80", "endpoints change: b-tcp-80"}; !slices.Equal(moved, want) {
		t.Errorf("moved %v, want %v", moved, want)
	}
}

// TestDeltaCallbacks: the NACK guard of delta streams. A NACK makes the resources of the
// rejected response pending, is reported with the response's version and counted; the
// requests of that type are then held with a delay that doubles with every NACK; an ACK of a
// response without the pending resources reports the rejection again at its version, one
// that carries them resolves it and starts the delay over.
func TestDeltaCallbacks(t *testing.T) {
	t.Parallel()
	const tenant = "tenant-delta-callbacks"
	c := newCallbacks(logr.Discard(), func(string) bool { return true })
	var heard []Rejection
	c.onReject = func(r Rejection) { heard = append(heard, r) }
	s := stream{delta: true, id: 1}
	c.identities[s] = tenant
	node := &corev3.Node{Id: "p1", Cluster: tenant}
	nacks := func() float64 {
		return testutil.ToFloat64(metrics.ManagerXDSNacks.WithLabelValues(tenant, resource.ListenerType))
	}
	connected := func() float64 { return testutil.ToFloat64(metrics.ManagerXDSConnectedProxies.WithLabelValues(tenant)) }
	send := func(nonce, version string, names ...string) {
		resp := &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ListenerType, Nonce: nonce, SystemVersionInfo: version}
		for _, n := range names {
			resp.Resources = append(resp.Resources, &discoveryv3.Resource{Name: n})
		}
		c.OnStreamDeltaResponse(1, nil, resp)
	}
	answer := func(nonce string, nack bool) *discoveryv3.DeltaDiscoveryRequest {
		t.Helper()
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ListenerType, ResponseNonce: nonce}
		if nack {
			req.ErrorDetail = &status.Status{Message: "Error adding/updating listener(s) bad: cannot bind"}
		}
		if err := c.OnStreamDeltaRequest(1, req); err != nil {
			t.Fatal(err)
		}
		return req
	}

	if err := c.OnStreamDeltaRequest(1, &discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.ListenerType}); err != nil {
		t.Fatal(err)
	}
	if got := connected(); got != 1 {
		t.Fatalf("connected = %v, want 1", got)
	}
	before := nacks()
	send("1", "v1", "good", "bad")
	if _, held := c.takeDeltaHeld(answer("1", false)); held || len(heard) != 0 {
		t.Fatalf("an ACK without a rejection: held %v, heard %+v", held, heard)
	}

	// A NACK: reported with the rejected version, counted; the next requests are held.
	send("2", "v2", "bad")
	nack := answer("2", true)
	if len(heard) != 1 || heard[0].Resolved || heard[0].Version != "v2" || heard[0].TypeURL != resource.ListenerType || heard[0].Proxy != "p1" {
		t.Fatalf("heard %+v, want the rejection of listeners v2", heard)
	}
	if got := nacks() - before; got != 1 {
		t.Errorf("nacks grew by %v, want 1", got)
	}
	h, ok := c.takeDeltaHeld(nack)
	if !ok || h.delay <= 0 || h.delay > RetryRejectedAfter || h.last != "2" {
		t.Fatalf("held %+v %v; want a delay of at most %s after nonce 2", h, ok, RetryRejectedAfter)
	}
	if p := c.deltaPending(s, resource.ListenerType, "2"); len(p) != 1 || !p["bad"] {
		t.Errorf("pending %v, want bad", p)
	}
	// The delay doubles with every NACK, up to its bound.
	want := RetryRejectedAfter
	for i, nonce := range []string{"3", "4", "5", "6", "7"} {
		send(nonce, "v2", "bad")
		h, _ := c.takeDeltaHeld(answer(nonce, true))
		want = min(2*want, RetryRejectedAtMost)
		if h.delay <= want-time.Second || h.delay > want {
			t.Errorf("NACK %d held for %s, want about %s", i+2, h.delay, want)
		}
	}
	// A response sent after the hold answers its watch: nothing is re-sent on it.
	send("8", "v3", "other")
	if p := c.deltaPending(s, resource.ListenerType, "7"); p != nil {
		t.Errorf("pending %v for a watch a later response answered", p)
	}
	// Its ACK does not resolve the rejection (bad is still not applied) but reports it at v3.
	heard = nil
	if _, held := c.takeDeltaHeld(answer("8", false)); !held {
		t.Error("the ACK of a response without the pending resources is not held")
	}
	if len(heard) != 1 || heard[0].Resolved || heard[0].Version != "v3" || heard[0].Message == "" {
		t.Errorf("heard %+v, want the rejection again at v3", heard)
	}
	// The re-sent resources are accepted: resolved, nothing held, the delay starts over.
	heard = nil
	send("9", "v3", "bad")
	if _, held := c.takeDeltaHeld(answer("9", false)); held {
		t.Error("a request is held after the pending resources were accepted")
	}
	if len(heard) != 1 || !heard[0].Resolved || heard[0].Version != "v3" {
		t.Errorf("heard %+v, want the rejection resolved at v3", heard)
	}
	send("10", "v4", "bad")
	if h, _ := c.takeDeltaHeld(answer("10", true)); h.delay <= RetryRejectedAfter-time.Second || h.delay > RetryRejectedAfter {
		t.Errorf("after the rejection was resolved, a NACK is held for %s, want %s again", h.delay, RetryRejectedAfter)
	}
	// Closing the stream resolves what it rejected and forgets it.
	send("11", "v4", "bad")
	answer("11", true) // held, never handed to the cache
	heard = nil
	c.OnDeltaStreamClosed(1, node)
	if len(heard) != 1 || !heard[0].Resolved {
		t.Errorf("heard %+v on close, want the rejection resolved", heard)
	}
	if len(c.delta) != 0 || len(c.deltaHeld) != 0 || len(c.backoff) != 0 || len(c.rejected) != 0 {
		t.Errorf("after the stream closed: %d delta states, %d held, %d backoffs, %d rejected", len(c.delta), len(c.deltaHeld), len(c.backoff), len(c.rejected))
	}
	if got := connected(); got != 0 {
		t.Errorf("connected = %v, want 0", got)
	}
	// Responses are remembered up to a bound when the proxy does not answer them.
	c.identities[s] = tenant
	for i := range 3 * maxUnanswered {
		send(fmt.Sprint(i), "v", "x")
	}
	if n := len(c.delta[s][resource.ListenerType].unanswered); n != maxUnanswered {
		t.Errorf("%d unanswered responses remembered, want %d", n, maxUnanswered)
	}
}

func TestRunnableStopsWithContext(t *testing.T) {
	t.Parallel()
	r := NewServer(logr.Discard(), xdstest.New(t).ServerTLS()).Runnable("127.0.0.1:0")
	if r.NeedLeaderElection() {
		t.Error("the xDS server must run on every replica")
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Start(ctx) }()
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return after cancellation")
	}
	if err := NewServer(logr.Discard(), nil).Run(context.Background(), "not an address"); err == nil {
		t.Error("Run accepted a bad address")
	}
}

// TestSetTenantReusesDigests: a snapshot set again with mostly the same messages (as
// translator.Cache hands them on) gets the versions a fresh server gives the same content,
// and its per-resource versions (the delta protocol's) are go-control-plane's own hashes.
func TestSetTenantReusesDigests(t *testing.T) {
	t.Parallel()
	const tenant = "tenant-digests"
	ctx := context.Background()
	var lbs []v1alpha1.LoadBalancer
	for i := range 20 {
		lbs = append(lbs, newLB(fmt.Sprintf("lb-%d", i)).port(corev1.ProtocolTCP, 80, 31000+i, 20000+i).LoadBalancer)
	}
	in := translate.Input{Tenant: tenant, LoadBalancers: lbs, Addresses: addresses("10.0.0.1")}
	in.HubServices = translatetest.HubServicesFromStatus(in.LoadBalancers)
	for i := range in.LoadBalancers {
		in.LoadBalancers[i].UID, in.LoadBalancers[i].ResourceVersion = types.UID(in.LoadBalancers[i].Name), "1"
	}
	for _, svc := range in.HubServices {
		svc.ResourceVersion = "1"
	}
	var back translator.Cache
	build := pipeline(t, &in, &back)
	srv := NewServer(logr.Discard(), nil)
	if _, err := srv.SetTenant(ctx, tenant, build()); err != nil {
		t.Fatal(err)
	}
	// One LoadBalancer's endpoint port changes: its cluster and endpoints are new messages;
	// its listener (translated again, equal to the last one) and the other 19
	// LoadBalancers' resources are reused.
	in.LoadBalancers = slices.Clone(in.LoadBalancers)
	in.LoadBalancers[7].Spec = *in.LoadBalancers[7].Spec.DeepCopy()
	in.LoadBalancers[7].Spec.Endpoints[0].Ports[0].Port = 32000
	in.LoadBalancers[7].ResourceVersion = "2"
	res := build()
	if back.Reused != 58 || back.Built != 2 {
		t.Fatalf("the back end built %d resources and reused %d; want the changed LoadBalancer's cluster and endpoints built, 58 reused", back.Built, back.Reused)
	}
	if changed, err := srv.SetTenant(ctx, tenant, res); err != nil || !changed {
		t.Fatalf("SetTenant = %v, %v", changed, err)
	}
	fresh := NewServer(logr.Discard(), nil)
	if _, err := fresh.SetTenant(ctx, tenant, mustTranslate(t, in)); err != nil {
		t.Fatal(err)
	}
	sameVersions(t, srv, fresh, tenant)
	snap, err := srv.ordered.GetSnapshot(tenant)
	if err != nil {
		t.Fatal(err)
	}
	for _, typeURL := range []string{resource.ClusterType, resource.ListenerType, resource.EndpointType} {
		versions := snap.GetVersionMap(typeURL)
		for _, r := range res[typeURL] {
			b, err := cache.MarshalResource(r)
			if err != nil {
				t.Fatal(err)
			}
			if name := cache.GetResourceName(r); versions[name] != cache.HashResource(b) {
				t.Errorf("%s %s: delta version %q, want go-control-plane's hash", typeURL, name, versions[name])
			}
		}
	}
}

// TestSetTenantRouteConfigurationsByVirtualHost: a route configuration is validated one
// virtual host at a time (routeConfig). After one HTTPRoute of 30 changed, the incremental
// pipeline's snapshot (most virtual hosts handed on as the same messages) gets the versions a
// fresh server gives the same content built from scratch, and each route configuration's
// delta version is go-control-plane's hash of its wire form (what the proxy answers with: a
// hash of our own kept Applied from ever seeing it answered); a changed virtual host changes
// the route configurations' version; an invalid virtual host, or an invalid field beside
// them, is refused as protoc-gen-validate says.
func TestSetTenantRouteConfigurationsByVirtualHost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	in := translatetest.HTTPRoutesTenantCached(t, 30)
	var back translator.Cache
	build := pipeline(t, &in, &back)
	fromScratch := pipeline(t, &in, nil)
	srv := NewServer(logr.Discard(), nil)
	if _, err := srv.SetTenant(ctx, in.Tenant, build()); err != nil {
		t.Fatal(err)
	}
	first := srv.TypeVersion(in.Tenant, resource.RouteType)
	translatetest.ChangeOneHTTPRoute(&in, 7)
	res := build()
	if changed, err := srv.SetTenant(ctx, in.Tenant, res); err != nil || !changed {
		t.Fatalf("SetTenant = %v, %v", changed, err)
	}
	if srv.TypeVersion(in.Tenant, resource.RouteType) == first {
		t.Error("a changed virtual host left the route configurations' version as it was")
	}
	fresh := NewServer(logr.Discard(), nil)
	if _, err := fresh.SetTenant(ctx, in.Tenant, fromScratch()); err != nil {
		t.Fatal(err)
	}
	sameVersions(t, srv, fresh, in.Tenant)
	a, _ := srv.ordered.GetSnapshot(in.Tenant)
	b, _ := fresh.ordered.GetSnapshot(in.Tenant)
	if !maps.Equal(a.GetVersionMap(resource.RouteType), b.GetVersionMap(resource.RouteType)) {
		t.Error("the route configurations' delta versions differ from a fresh server's")
	}
	for _, r := range res[resource.RouteType] {
		wire, err := cache.MarshalResource(r)
		if err != nil {
			t.Fatal(err)
		}
		if name := cache.GetResourceName(r); a.GetVersionMap(resource.RouteType)[name] != cache.HashResource(wire) {
			t.Errorf("route configuration %s: delta version %q, want go-control-plane's hash", name, a.GetVersionMap(resource.RouteType)[name])
		}
	}

	// Invalid parts: a copy of the snapshot with one route configuration broken.
	broken := func(change func(*routev3.RouteConfiguration)) Resources {
		out := Resources{}
		maps.Copy(out, res)
		routes := slices.Clone(res[resource.RouteType])
		rc := proto.Clone(routes[0]).(*routev3.RouteConfiguration)
		change(rc)
		routes[0] = rc
		out[resource.RouteType] = routes
		return out
	}
	for name, c := range map[string]struct {
		change func(*routev3.RouteConfiguration)
		want   string
	}{
		"a virtual host without domains": {func(rc *routev3.RouteConfiguration) { rc.VirtualHosts[3].Domains = nil }, "VirtualHosts[3]"},
		"a header without a name": {func(rc *routev3.RouteConfiguration) {
			rc.ResponseHeadersToAdd = []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{}}}
		}, "ResponseHeadersToAdd[0]"},
	} {
		_, err := srv.SetTenant(ctx, in.Tenant, broken(c.change))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: SetTenant = %v, want an error naming %s", name, err, c.want)
		}
	}
}

// pipeline returns what envoycp does on each rebuild of *in: one
// translate.Incremental and one translator.Cache (back) kept from call to call; with back nil,
// a translation from scratch every time (translate.Run, translator.Translate). An error or a
// problem fails t.
func pipeline(t *testing.T, in *translate.Input, back *translator.Cache) func() Resources {
	var inc translate.Incremental
	return func() Resources {
		t.Helper()
		run, build := inc.Run, back.Translate
		if back == nil {
			run, build = translate.Run, translator.Translate
		}
		r, err := run(*in)
		if err != nil {
			t.Fatal(err)
		}
		res, problems, err := build(r.Config)
		if err != nil || len(problems) > 0 {
			t.Fatal(err, problems)
		}
		return res
	}
}

// sameVersions fails t when the tenant's snapshot on srv has another version, or another
// version of a type, than on fresh.
func sameVersions(t *testing.T, srv, fresh *Server, tenant string) {
	t.Helper()
	if srv.Version(tenant) != fresh.Version(tenant) {
		t.Errorf("version %s, a fresh server's %s", srv.Version(tenant), fresh.Version(tenant))
	}
	for _, typeURL := range TypeURLs {
		if a, b := srv.TypeVersion(tenant, typeURL), fresh.TypeVersion(tenant, typeURL); a != b {
			t.Errorf("%s: version %s, a fresh server's %s", typeURL, a, b)
		}
	}
}

// TestMarshalRouteConfigIsMarshalResource checks that the wire form newSnapshot hashes a route
// configuration by, made from its virtual hosts' kept forms (marshalRouteConfig), is byte for
// byte go-control-plane's MarshalResource — the version a delta response carries and the
// proxy answers with — for the route configurations of every golden scenario (every feature
// of the translation: typed per-filter configuration, headers, CORS, retries…), made once
// from nothing and once again from the kept forms.
func TestMarshalRouteConfigIsMarshalResource(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../translate/testdata/*.in.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	seen := 0
	for _, file := range files {
		in, err := translatetest.LoadInput(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range translatetest.Resources(t, in)[resource.RouteType] {
			rc := item.(*routev3.RouteConfiguration)
			want, err := cache.MarshalResource(rc)
			if err != nil {
				t.Fatal(err)
			}
			first := digests{}
			got, err := marshalRouteConfig(rc, nil, first)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s: route configuration %s: %v; the wire form differs from MarshalResource's", file, rc.Name, err)
			}
			again, err := marshalRouteConfig(rc, first, digests{})
			if err != nil || !bytes.Equal(again, want) {
				t.Fatalf("%s: route configuration %s made from the kept virtual hosts: %v; the wire form differs", file, rc.Name, err)
			}
			seen++
		}
	}
	if seen < 50 {
		t.Fatalf("only %d route configurations in the golden scenarios", seen)
	}
}
