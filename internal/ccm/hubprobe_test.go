package ccm

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/process"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestHubProbeSeesABlackHole: a hub behind a partition accepts the ccm's connection and
// never answers (no refusal, no reset). The connectivity gauge must still drop to 0 within
// a probe interval and timeout, instead of saying "connected" while the probe waits forever.
func TestHubProbeSeesABlackHole(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 16)
	go func() { // accept and hold: read nothing, answer nothing
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held <- c
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		for {
			select {
			case c := <-held:
				_ = c.Close()
			default:
				return
			}
		}
	})

	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(v1alpha1.GroupVersion.WithKind("TenantState"), meta.RESTScopeNamespace)
	c, err := client.New(&rest.Config{Host: "http://" + l.Addr().String()}, client.Options{Scheme: process.Scheme(), Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	metrics.CCMClusterConnected.Set(1) // as after the last answered request
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&hubProbe{reader: hubReader{c}, namespace: tenantNS}).Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	testsupport.Eventually(t, 30*time.Second, "the connected gauge to drop while the hub does not answer", func() error {
		if v := testutil.ToFloat64(metrics.CCMClusterConnected); v != 0 {
			return fmt.Errorf("connected %v", v)
		}
		return nil
	})
}
