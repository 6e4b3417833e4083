package xds

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/genproto/googleapis/rpc/status"
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
	var inc translate.Incremental
	var back translator.Cache
	build := func() Resources {
		t.Helper()
		r, err := inc.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		res, problems, err := back.Translate(r.Config)
		if err != nil || len(problems) > 0 {
			t.Fatal(err, problems)
		}
		return res
	}
	srv := NewServer(logr.Discard(), nil)
	if _, err := srv.SetTenant(ctx, tenant, build()); err != nil {
		t.Fatal(err)
	}
	// One LoadBalancer's endpoint port changes: its listener, cluster and endpoints are new
	// messages, the other 19 LoadBalancers' are reused.
	in.LoadBalancers = slices.Clone(in.LoadBalancers)
	in.LoadBalancers[7].Spec = *in.LoadBalancers[7].Spec.DeepCopy()
	in.LoadBalancers[7].Spec.Endpoints[0].Ports[0].Port = 32000
	in.LoadBalancers[7].ResourceVersion = "2"
	res := build()
	if back.Reused != 57 || back.Built != 3 {
		t.Fatalf("the back end built %d resources and reused %d; want the changed LoadBalancer's 3 built, 57 reused", back.Built, back.Reused)
	}
	if changed, err := srv.SetTenant(ctx, tenant, res); err != nil || !changed {
		t.Fatalf("SetTenant = %v, %v", changed, err)
	}
	fresh := NewServer(logr.Discard(), nil)
	if _, err := fresh.SetTenant(ctx, tenant, mustTranslate(t, in)); err != nil {
		t.Fatal(err)
	}
	if srv.Version(tenant) != fresh.Version(tenant) {
		t.Errorf("version %s, a fresh server's %s", srv.Version(tenant), fresh.Version(tenant))
	}
	for _, typeURL := range TypeURLs {
		if a, b := srv.TypeVersion(tenant, typeURL), fresh.TypeVersion(tenant, typeURL); a != b {
			t.Errorf("%s: version %s, a fresh server's %s", typeURL, a, b)
		}
	}
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
