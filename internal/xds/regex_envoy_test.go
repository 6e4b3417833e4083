package xds

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate/translatetest"
)

// TestRegexEnvoyRejectsNeverReachesEnvoy is issue 26's attack on a shared listener: the
// attacker HTTPRoute (gw-regex.in.yaml) sets a path regex Go accepts and Envoy's RE2 refuses
// (program size 124 > 100), and a header regex with an escape above \xFF, on the Gateway
// listener the victim HTTPRoute uses. With a real Envoy: the victim keeps answering 200, the
// attacker's acceptable rule is served too, its refused rules are problems on the attacker's
// HTTPRoute only (PartiallyInvalid, see gw-regex.status.yaml), and Envoy rejected no update
// (every update_rejected counter stays 0). Before the check, Envoy NACKed the route
// configuration and the victim answered 404.
func TestRegexEnvoyRejectsNeverReachesEnvoy(t *testing.T) {
	const tenant = "tenant-regex"
	srv, xdsAddr := startXDS(t)
	e := startEnvoy(t, srv, tenant, xdsAddr, "regex-proxy")
	web := testsupport.StartHTTPBackend(t, "127.0.0.1:0", testsupport.Identity{Node: "node-1", Pod: "web"})
	in, ports := gatewayInput(t, "gw-regex.in.yaml", tenant, func(string, int32) int32 { return backendPort(t, web) })

	_, problems, _, err := translatetest.Pipeline(in)
	if err != nil {
		t.Fatal(err)
	}
	var attacker, others []string
	for _, p := range problems {
		// Problems name the hub Route that carries the attacker's HTTPRoute.
		if p.Object.Name == "0b1a9c3e-0000-4000-8000-000000000002" {
			attacker = append(attacker, p.String())
		} else {
			others = append(others, p.String())
		}
	}
	if len(others) > 0 {
		t.Errorf("problems on objects other than the attacker's HTTPRoute: %q", others)
	}
	if want := []string{"RE2 program size is 124", `escape \x{100} is above \xFF`}; len(attacker) == 0 ||
		!strings.Contains(strings.Join(attacker, "\n"), want[0]) || !strings.Contains(strings.Join(attacker, "\n"), want[1]) {
		t.Errorf("attacker's problems %q, want them to say %q", attacker, want)
	}

	pushAndWait(t, srv, e, in)
	client := &http.Client{Timeout: testsupport.RoundTripTimeout}
	for _, path := range []string{"/victim/a", "/fine/abc"} {
		testsupport.Eventually(t, waitTimeout, "app.example.com"+path+" answered by web", func() error {
			req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", ports[80], path), nil)
			if err != nil {
				return err
			}
			req.Host = "app.example.com"
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1024))
			if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Backend-Pod") != "web" {
				return fmt.Errorf("got %d from %q, want 200 from web", resp.StatusCode, resp.Header.Get("X-Backend-Pod"))
			}
			return nil
		})
	}
	stats, err := e.Stats("update_rejected")
	if err != nil {
		t.Fatal(err)
	}
	rds := 0
	for name, v := range stats {
		if strings.Contains(name, ".rds.") {
			rds++
		}
		if v != 0 {
			t.Errorf("Envoy rejected an update: %s = %d", name, v)
		}
	}
	if rds == 0 {
		t.Errorf("no RDS update_rejected counter among %v: the route configuration never came", stats)
	}
}
