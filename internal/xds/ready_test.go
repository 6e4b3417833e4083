package xds

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/xdstest"
)

// TestReadyListenerExposesOnlyReady starts a real Envoy whose admin interface is on loopback
// and whose ready and stats listeners answer probes and Prometheus: GET /ready and GET
// /stats/prometheus reach the admin's, and nothing else of the admin API (which can stop
// Envoy) is reachable through either.
func TestReadyListenerExposesOnlyReady(t *testing.T) {
	t.Parallel()
	// Static listeners open once Envoy has its first configuration: serve it an empty one.
	srv, xdsAddr := startXDS(t)
	if _, err := srv.SetTenant(context.Background(), "tenant-r", nil); err != nil {
		t.Fatal(err)
	}
	admin := testsupport.Loopback(testsupport.FreePort(t))
	ready := testsupport.Loopback(testsupport.FreePort(t))
	stats := testsupport.Loopback(testsupport.FreePort(t))
	b := xdstest.New(t).Bootstrap(t, bootstrap.Options{Tenant: "tenant-r", XDSAddress: xdsAddr, AdminAddress: admin, ReadyAddress: ready, StatsAddress: stats})
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
	resp, err := client.Get("http://" + stats + bootstrap.StatsPath)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "# TYPE envoy_server_live gauge") {
		t.Errorf("GET %s through the stats listener: %d, want 200 with Envoy's metrics:\n%.400s", bootstrap.StatsPath, resp.StatusCode, body)
	}
	for _, listener := range []string{ready, stats} {
		for _, path := range []string{"/quitquitquit", "/drain_listeners", "/config_dump", "/stats", "/"} {
			code, err := status(http.MethodPost, "http://"+listener+path)
			if err != nil || code != http.StatusNotFound {
				t.Errorf("POST %s through %s: %d %v, want 404", path, listener, code, err)
			}
		}
	}
	if e.Exited() {
		t.Fatal("Envoy exited: the admin API was reachable through the ready listener")
	}
}
