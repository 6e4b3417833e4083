package xds

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
)

// TestEnvoyRetriesRejectedListener: a real Envoy rejects one listener of its configuration
// because another process holds its port, and applies the other one. The rejected
// configuration is not re-sent at once (no NACK storm) but again after a growing delay; once
// the port is free, the next re-send binds it, without any change of the tenant's snapshot,
// and the rejection is resolved. Both protocols: the delta stream has a guard of its own.
func TestEnvoyRetriesRejectedListener(t *testing.T) {
	after, atMost := RetryRejectedAfter, RetryRejectedAtMost
	RetryRejectedAfter, RetryRejectedAtMost = time.Second, 2*time.Second
	t.Cleanup(func() { RetryRejectedAfter, RetryRejectedAtMost = after, atMost })
	for _, p := range []bootstrap.Protocol{bootstrap.ProtocolDelta, bootstrap.ProtocolSotW} {
		t.Run(string(p), func(t *testing.T) { testEnvoyRetriesRejectedListener(t, p) })
	}
}

func testEnvoyRetriesRejectedListener(t *testing.T, protocol bootstrap.Protocol) {
	tenant := "tenant-retry-" + string(protocol)
	srv, xdsAddr := startXDS(t)
	var mu sync.Mutex
	var heard []Rejection
	srv.OnRejection(func(r Rejection) {
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, r)
	})
	lastHeard := func() (Rejection, int) {
		mu.Lock()
		defer mu.Unlock()
		if len(heard) == 0 {
			return Rejection{}, 0
		}
		return heard[len(heard)-1], len(heard)
	}

	nodePort := testsupport.FreePort(t, "127.0.0.1")
	testsupport.StartTCPBackend(t, net.JoinHostPort("127.0.0.1", fmt.Sprint(nodePort)), testsupport.Identity{Node: "node1", Pod: "echo-1"})
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	echoPort := testsupport.FreePort(t)
	in := translate.Input{Tenant: tenant, Addresses: addresses("127.0.0.1"), Policy: loopbackAllowed,
		Options: translate.Options{ListenerAddress: "127.0.0.1"},
		LoadBalancers: []v1alpha1.LoadBalancer{
			newLB("echo").port(corev1.ProtocolTCP, 80, nodePort, echoPort).LoadBalancer,
			newLB("busy").port(corev1.ProtocolTCP, 80, nodePort, busyPort).LoadBalancer,
		}}
	if _, err := srv.SetTenant(context.Background(), tenant, mustTranslate(t, in)); err != nil {
		t.Fatal(err)
	}
	version := srv.TypeVersion(tenant, resource.ListenerType)
	nacks := func() float64 {
		return testutil.ToFloat64(metrics.ManagerXDSNacks.WithLabelValues(tenant, resource.ListenerType))
	}
	e := startEnvoyProtocol(t, srv, tenant, xdsAddr, "retry-proxy", protocol)

	testsupport.Eventually(t, waitTimeout, "Envoy to reject the listener it cannot bind", func() error {
		r, n := lastHeard()
		if n == 0 {
			return fmt.Errorf("no rejection heard")
		}
		if r.Resolved || r.TypeURL != resource.ListenerType || r.Version != version || !strings.Contains(r.Message, "busy-tcp-80") {
			return fmt.Errorf("heard %+v; want a rejection of listeners %s naming busy-tcp-80", r, version)
		}
		return nil
	})
	// Envoy applied the other listener.
	echo := net.JoinHostPort("127.0.0.1", fmt.Sprint(echoPort))
	if _, err := testsupport.TCPRoundTrip(echo, "beside-the-nack"); err != nil {
		t.Fatalf("the accepted listener does not serve: %v", err)
	}

	// Re-sent after the delay, rejected again, and not more: 1 s, then every 2 s here.
	testsupport.Eventually(t, waitTimeout, "the rejected listeners to be re-sent", func() error {
		if n := nacks(); n < 2 {
			return fmt.Errorf("%v NACKs", n)
		}
		return nil
	})
	start, n0 := time.Now(), nacks()
	time.Sleep(4 * time.Second) // a window to count NACKs in, not an assertion
	if n, window := nacks()-n0, time.Since(start); n > 4 {
		t.Fatalf("%v NACKs in %s: the rejected listeners are re-sent too often", n, window.Round(time.Millisecond))
	}
	if srv.TypeVersion(tenant, resource.ListenerType) != version {
		t.Fatal("the snapshot changed")
	}

	// The port is free: the next re-send binds it, and the rejection is resolved.
	busy.Close()
	testsupport.Eventually(t, waitTimeout, "Envoy to bind the listener once its port is free", func() error {
		if _, err := testsupport.TCPRoundTrip(net.JoinHostPort("127.0.0.1", fmt.Sprint(busyPort)), "after-retry"); err != nil {
			return err
		}
		if lds, _, err := configVersions(e); err != nil || lds != version {
			return fmt.Errorf("Envoy's listeners at %q (%v), want %s", lds, err, version)
		}
		if r, _ := lastHeard(); !r.Resolved || r.TypeURL != resource.ListenerType {
			return fmt.Errorf("last heard %+v; want the rejection resolved", r)
		}
		return nil
	})
	// Accepted: nothing is re-sent any more.
	settled := nacks()
	time.Sleep(3 * time.Second) // longer than the retry delay, not an assertion
	if n := nacks(); n != settled {
		t.Fatalf("%v NACKs after Envoy accepted the listeners", n-settled)
	}
}
