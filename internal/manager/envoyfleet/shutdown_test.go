package envoyfleet

import (
	"fmt"
	"net"
	"testing"
	"time"

	"kubelb.dev/kubelb/internal/testsupport"
)

// stat reads the one counter or gauge whose name matches the regular expression.
func stat(e *testsupport.Envoy, name string) (int64, error) {
	stats, err := e.Stats("^" + name + "$")
	if err != nil {
		return 0, err
	}
	if len(stats) > 1 {
		return 0, fmt.Errorf("%d stats match %s: %v", len(stats), name, stats)
	}
	for _, v := range stats {
		return v, nil
	}
	return 0, fmt.Errorf("no stat %s", name)
}

// TestDrainScriptDrainsRealEnvoy runs the preStop hook against a real Envoy: the hook must
// start a graceful drain (the listener stops accepting after --drain-time-s) and must not
// return while a downstream connection is still open, then return once it is closed.
func TestDrainScriptDrainsRealEnvoy(t *testing.T) {
	t.Parallel()
	admin, listener := testsupport.FreePort(t), testsupport.FreePort(t)
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
	envoy := testsupport.StartEnvoy(t, "envoy", []byte(bootstrap), testsupport.EnvoyOptions{
		LogLevel: "warning", DrainTime: 2 * time.Second, Args: []string{"--disable-hot-restart"},
	})
	envoy.WaitReady(t, 30*time.Second)

	conn, err := net.Dial("tcp", testsupport.Loopback(listener))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	testsupport.Eventually(t, 10*time.Second, "the connection to be counted", func() error {
		v, err := stat(envoy, `listener\.127\.0\.0\.1_[0-9]+\.downstream_cx_active`)
		if err == nil && v != 1 {
			err = fmt.Errorf("active %d", v)
		}
		return err
	})

	hook := testsupport.StartProcess(t, "drain-hook", "/bin/bash", "-c", DrainScript(admin, time.Second, time.Minute))
	testsupport.Eventually(t, 20*time.Second, "the drained listener to stop", func() error {
		v, err := stat(envoy, `listener_manager\.listener_stopped`)
		if err == nil && v != 1 {
			err = fmt.Errorf("listener_stopped %d", v)
		}
		return err
	})
	if c, err := net.DialTimeout("tcp", testsupport.Loopback(listener), time.Second); err == nil {
		c.Close()
		t.Error("the drained listener still accepts connections")
	}
	if hook.Exited() {
		t.Fatalf("the hook returned while a connection was open:\n%s", hook.Output())
	}
	closed := time.Now()
	conn.Close()
	testsupport.Eventually(t, 10*time.Second, "the hook to return", func() error {
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
