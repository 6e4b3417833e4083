package xds

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds/xdstest"
)

// sotwProxy plays what an Envoy proxy does on a state-of-the-world ADS stream with clusters
// and endpoints: it asks for every cluster, then for the endpoints of its EDS clusters; it
// ACKs every endpoints response with the names it wants now, and it holds the ACK of a
// cluster update until every cluster of it has its endpoints (Envoy does not ACK clusters
// that are still warming).
type sotwProxy struct {
	t    *testing.T
	s    discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	node *corev3.Node

	cds         *discoveryv3.DiscoveryResponse // the latest clusters, not yet ACKed when held
	cdsHeld     bool
	want        []string        // the endpoint names of the latest clusters
	have        map[string]bool // the endpoint names received
	lastEDS     *discoveryv3.DiscoveryResponse
	sentEDSWant []string
	// holdAsk keeps the request for the endpoints of new clusters until askEndpoints: the
	// proxy sent it, the server has not read it yet.
	holdAsk bool
}

func (p *sotwProxy) send(typeURL, version, nonce string, names []string) {
	p.t.Helper()
	if err := p.s.Send(&discoveryv3.DiscoveryRequest{Node: p.node, TypeUrl: typeURL, VersionInfo: version,
		ResponseNonce: nonce, ResourceNames: names}); err != nil {
		p.t.Fatalf("sending a %s request: %v", typeURL, err)
	}
}

// recv takes the next response of the stream and acts on it as Envoy would; it returns the
// response's type.
func (p *sotwProxy) recv() string {
	p.t.Helper()
	resp, err := p.s.Recv()
	if err != nil {
		p.t.Fatalf("waiting for the server (the proxy wants the endpoints of %v, has %v): %v", p.want, p.have, err)
	}
	switch resp.GetTypeUrl() {
	case resource.ClusterType:
		p.cds, p.cdsHeld, p.want = resp, true, nil
		for _, a := range resp.GetResources() {
			c := &clusterv3.Cluster{}
			if err := a.UnmarshalTo(c); err != nil {
				p.t.Fatal(err)
			}
			if c.GetType() == clusterv3.Cluster_EDS {
				p.want = append(p.want, cmp.Or(c.GetEdsClusterConfig().GetServiceName(), c.GetName()))
			}
		}
		slices.Sort(p.want)
		if !p.holdAsk {
			p.askEndpoints()
		}
	case resource.EndpointType:
		p.lastEDS = resp
		for _, a := range resp.GetResources() {
			cla := &endpointv3.ClusterLoadAssignment{}
			if err := a.UnmarshalTo(cla); err != nil {
				p.t.Fatal(err)
			}
			p.have[cla.GetClusterName()] = true
		}
		p.sentEDSWant = slices.Clone(p.want)
		p.send(resource.EndpointType, resp.GetVersionInfo(), resp.GetNonce(), p.want)
	default:
		p.t.Fatalf("unexpected %s response", resp.GetTypeUrl())
	}
	p.ackWarmClusters()
	return resp.GetTypeUrl()
}

// askEndpoints asks for the endpoints of the latest clusters when they are not what was
// asked last, with the version and nonce of the last endpoints response taken.
func (p *sotwProxy) askEndpoints() {
	if slices.Equal(p.want, p.sentEDSWant) || len(p.want) == 0 {
		return
	}
	p.sentEDSWant = slices.Clone(p.want)
	p.send(resource.EndpointType, p.lastEDS.GetVersionInfo(), p.lastEDS.GetNonce(), p.want)
}

// ackWarmClusters ACKs the held cluster update once every one of its clusters has endpoints.
func (p *sotwProxy) ackWarmClusters() {
	if !p.cdsHeld || !p.warm() {
		return
	}
	p.cdsHeld = false
	p.send(resource.ClusterType, p.cds.GetVersionInfo(), p.cds.GetNonce(), nil)
}

func (p *sotwProxy) warm() bool {
	for _, n := range p.want {
		if !p.have[n] {
			return false
		}
	}
	return true
}

// TestEndpointsWhileClustersGrow: a snapshot that adds a cluster lands while the proxy is
// still taking the one before. The proxy, holding its cluster update until the new cluster
// has endpoints, asks for the endpoints of the clusters it knows; the snapshot by then has
// the endpoints of one more. That request must be answered with what it names: under
// go-control-plane's ADS rule (answer only a request that names every endpoint resource of
// the snapshot) it was dropped without a watch, the proxy never ACKed the clusters and so
// never heard of the next ones, and Envoy waited for its initial fetch timeout (15 s;
// seen after a leader failover, when the new leader addresses every waiting Service at once).
func TestEndpointsWhileClustersGrow(t *testing.T) {
	t.Parallel()
	const tenant = "tenant-grow"
	srv, addr := startXDS(t)
	ctx := context.Background()
	var lbs []v1alpha1.LoadBalancer
	set := func(name string, listener int) {
		t.Helper()
		lbs = append(lbs, newLB(name).port(corev1.ProtocolTCP, 80, 30000+listener%1000, listener).LoadBalancer)
		in := translate.Input{Tenant: tenant, LoadBalancers: lbs, Addresses: addresses("10.0.0.1"), Policy: loopbackAllowed}
		if _, err := srv.SetTenant(ctx, tenant, mustTranslate(t, in)); err != nil {
			t.Fatal(err)
		}
	}
	set("a", 20001)

	conn := dial(t, addr, xdstest.New(t).ClientTLS(t, tenant))
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(sctx)
	if err != nil {
		t.Fatal(err)
	}
	p := &sotwProxy{t: t, s: s, node: &corev3.Node{Id: "proxy", Cluster: tenant}, have: map[string]bool{}}
	p.send(resource.ClusterType, "", "", nil)
	for !(p.warm() && !p.cdsHeld && len(p.want) == 1) {
		p.recv()
	}

	// b's snapshot: its clusters reach the proxy, which holds them (b is warming) ...
	p.holdAsk = true
	set("b", 20002)
	for p.recv() != resource.ClusterType {
	}
	if len(p.want) != 2 || !p.cdsHeld {
		t.Fatalf("after b the proxy wants the endpoints of %v (clusters held: %v)", p.want, p.cdsHeld)
	}
	// ... and c's snapshot lands before the proxy's request for a's and b's endpoints is read
	// (the proxy sent it as it took b's clusters; the server has not read it yet).
	set("c", 20003)
	p.holdAsk = false
	p.askEndpoints()

	// The proxy gets the endpoints of a and b, ACKs b's clusters, hears of c and gets its
	// endpoints too.
	for !(len(p.want) == 3 && p.warm() && !p.cdsHeld) {
		p.recv()
	}
}
