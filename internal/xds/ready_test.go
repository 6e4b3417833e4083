package xds

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdstest"
)

// TestReadyListenerExposesOnlyReady starts a real Envoy whose admin interface is on loopback
// and whose ready listener answers probes: GET /ready reaches the admin's /ready, and nothing
// else of the admin API (which can stop Envoy) is reachable through it.
func TestReadyListenerExposesOnlyReady(t *testing.T) {
	t.Parallel()
	// Static listeners open once Envoy has its first configuration: serve it an empty one.
	srv, xdsAddr := startXDS(t)
	if _, err := srv.SetTenant(context.Background(), "tenant-r", nil); err != nil {
		t.Fatal(err)
	}
	admin := testsupport.Loopback(testsupport.FreePort(t))
	ready := testsupport.Loopback(testsupport.FreePort(t))
	b := xdstest.New(t).Bootstrap(t, bootstrap.Options{Tenant: "tenant-r", XDSAddress: xdsAddr, AdminAddress: admin, ReadyAddress: ready})
	if !strings.Contains(string(b), bootstrap.ReadyListenerName) {
		t.Fatalf("no ready listener in:\n%s", b)
	}
	e := testsupport.StartEnvoy(t, "ready-proxy", b, testsupport.EnvoyOptions{Node: "ready-proxy", Concurrency: 1})
	client := &http.Client{Timeout: 2 * time.Second}
	status := func(method, url string) (int, error) {
		req, err := http.NewRequest(method, url, nil)
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	testsupport.Eventually(t, 30*time.Second, "GET /ready through the ready listener", func() error {
		code, err := status(http.MethodGet, "http://"+ready+"/ready")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("status %d", code)
		}
		return err
	})
	for _, path := range []string{"/quitquitquit", "/drain_listeners", "/config_dump", "/"} {
		code, err := status(http.MethodPost, "http://"+ready+path)
		if err != nil || code != http.StatusNotFound {
			t.Errorf("POST %s through the ready listener: %d %v, want 404", path, code, err)
		}
	}
	if e.Exited() {
		t.Fatal("Envoy exited: the admin API was reachable through the ready listener")
	}
}
