package envoyfleet

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kubelb.dev/kubelb/internal/testenv"
)

// stat reads one counter or gauge from Envoy's admin interface.
func stat(t *testing.T, admin int, name string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, body, err := testenv.HTTPGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/stats?filter=^%s$", admin, name))
	if err != nil {
		return "", err
	}
	_, v, ok := strings.Cut(strings.TrimSpace(body), ": ")
	if !ok {
		return "", fmt.Errorf("no stat %s in %q", name, body)
	}
	return v, nil
}

// TestDrainScriptDrainsRealEnvoy runs the preStop hook against a real Envoy: the hook must
// start a graceful drain (the listener stops accepting after --drain-time-s) and must not
// return while a downstream connection is still open, then return once it is closed.
func TestDrainScriptDrainsRealEnvoy(t *testing.T) {
	t.Parallel()
	admin, listener := testenv.FreePort(t), testenv.FreePort(t)
	bootstrap := fmt.Sprintf(`admin:
  address: {socket_address: {address: 127.0.0.1, port_value: %d}}
static_resources:
  listeners:
  - name: echo
    address: {socket_address: {address: 127.0.0.1, port_value: %d}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.echo
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.echo.v3.Echo}
`, admin, listener)
	path := filepath.Join(t.TempDir(), "bootstrap.yaml")
	if err := os.WriteFile(path, []byte(bootstrap), 0o600); err != nil {
		t.Fatal(err)
	}
	envoy := testenv.StartProcess(t, "envoy", testenv.EnvoyBinary(t), "-c", path, "--disable-hot-restart",
		"--drain-time-s", "2", "-l", "warning")
	testenv.WaitHTTP200(t, envoy, fmt.Sprintf("http://127.0.0.1:%d/ready", admin), 30*time.Second)

	conn, err := net.Dial("tcp", testenv.Loopback(listener))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	testenv.Eventually(t, 10*time.Second, "the connection to be counted", func() error {
		v, err := stat(t, admin, `listener\.127\.0\.0\.1_[0-9]+\.downstream_cx_active`)
		if err == nil && v != "1" {
			err = fmt.Errorf("active %s", v)
		}
		return err
	})

	hook := testenv.StartProcess(t, "drain-hook", "/bin/bash", "-c", DrainScript(admin, time.Second, time.Minute))
	testenv.Eventually(t, 20*time.Second, "the drained listener to stop", func() error {
		v, err := stat(t, admin, `listener_manager\.listener_stopped`)
		if err == nil && v != "1" {
			err = fmt.Errorf("listener_stopped %s", v)
		}
		return err
	})
	if c, err := net.DialTimeout("tcp", testenv.Loopback(listener), time.Second); err == nil {
		c.Close()
		t.Error("the drained listener still accepts connections")
	}
	if hook.Exited() {
		t.Fatalf("the hook returned while a connection was open:\n%s", hook.Output())
	}
	closed := time.Now()
	conn.Close()
	testenv.Eventually(t, 10*time.Second, "the hook to return", func() error {
		if !hook.Exited() {
			return fmt.Errorf("still waiting")
		}
		return nil
	})
	if code, err := hook.Stop(time.Second); code != 0 || err != nil {
		t.Fatalf("hook exit code %d (%v):\n%s", code, err, hook.Output())
	}
	t.Logf("the hook returned %s after the last connection closed", time.Since(closed).Round(10*time.Millisecond))
}
