package xds

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
)

// TestAppliedMeansServed: once Applied says a real Envoy answered a configuration that adds a
// load balancer (a listener and a new cluster whose endpoints come over EDS), the new cluster
// is no longer warming and the new listener reaches the backend. Envoy
// asks for a new cluster's endpoints before it answers the clusters; counting it current then
// would say "served" while the cluster still waits for its endpoints (a request mirrored to
// it is dropped). Several additions in a row, both protocols.
func TestAppliedMeansServed(t *testing.T) {
	for _, p := range []bootstrap.Protocol{bootstrap.ProtocolDelta, bootstrap.ProtocolSotW} {
		t.Run(string(p), func(t *testing.T) { testAppliedMeansServed(t, p) })
	}
}

func testAppliedMeansServed(t *testing.T, protocol bootstrap.Protocol) {
	tenant := "tenant-applied-" + string(protocol)
	srv, xdsAddr := startXDS(t)
	nodePort := testsupport.FreePort(t, "127.0.0.1")
	testsupport.StartTCPBackend(t, net.JoinHostPort("127.0.0.1", fmt.Sprint(nodePort)), testsupport.Identity{Node: "node1", Pod: "echo-1"})
	in := translate.Input{Tenant: tenant, Addresses: addresses("127.0.0.1"), Policy: loopbackAllowed,
		Options: translate.Options{ListenerAddress: "127.0.0.1"}}
	e := startEnvoyProtocol(t, srv, tenant, xdsAddr, "applied-proxy", protocol)
	// Applied knows only the proxies connected (a tenant without any waits for nothing).
	testsupport.Eventually(t, waitTimeout, "one connected proxy", func() error { return connectedProxies(tenant, 1) })
	versions := func() map[string]string {
		out := map[string]string{}
		for _, typeURL := range TypeURLs {
			out[typeURL] = srv.TypeVersion(tenant, typeURL)
		}
		return out
	}
	const additions = 8
	for i := range additions {
		listener := testsupport.FreePort(t)
		in.LoadBalancers = append(in.LoadBalancers, newLB(fmt.Sprintf("lb-%d", i)).port(corev1.ProtocolTCP, 80, nodePort, listener).LoadBalancer)
		if _, err := srv.SetTenant(context.Background(), tenant, mustTranslate(t, in)); err != nil {
			t.Fatal(err)
		}
		want := versions()
		deadline := time.Now().Add(waitTimeout)
		for !srv.Applied(tenant, want) {
			if time.Now().After(deadline) {
				t.Fatalf("addition %d: Envoy did not answer within %s", i, waitTimeout)
			}
			time.Sleep(time.Millisecond)
		}
		// Right when Applied turns true: nothing warms, and the listener serves.
		warming, err := e.Stat("cluster_manager.warming_clusters")
		if err != nil {
			t.Fatal(err)
		}
		if warming != 0 {
			t.Fatalf("addition %d: Applied while %d clusters still wait for their endpoints", i, warming)
		}
		// Envoy answers from its main thread and its workers start listening on a new
		// listener right after: a connection refused in that moment is tried again, briefly.
		addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(listener))
		var err2 error
		for range 100 {
			if _, err2 = testsupport.TCPRoundTrip(addr, fmt.Sprintf("first-%d", i)); err2 == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err2 != nil {
			t.Fatalf("addition %d: no connection within 1 s after Applied: %v", i, err2)
		}
	}
}
