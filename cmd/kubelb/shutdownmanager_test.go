package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/envoydrain"
	"kubelb.dev/kubelb/internal/manager/envoyfleet"
	"kubelb.dev/kubelb/internal/process"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/testsupport"
)

func TestParseShutdownManager(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want shutdownManagerOptions
		err  string
	}{
		{name: "defaults", want: shutdownManagerOptions{
			adminAddress: process.Address{Value: "127.0.0.1:9901"}, listenAddress: process.Address{Value: ":9902"},
			controlSocket: "@kubelb-envoy-shutdown-manager", minDrain: 10 * time.Second, drainTimeout: 30 * time.Second,
		}},
		{name: "set", args: []string{"--admin-address=127.0.0.1:19000", "--listen-address=127.0.0.1:0", "--control-socket=@x", "--min-drain-duration=1s", "--drain-timeout=2m"},
			want: shutdownManagerOptions{
				adminAddress: process.Address{Value: "127.0.0.1:19000"}, listenAddress: process.Address{Value: "127.0.0.1:0"},
				controlSocket: "@x", minDrain: time.Second, drainTimeout: 2 * time.Minute,
			}},
		{name: "drain", args: []string{"drain"}, want: shutdownManagerOptions{drain: true, controlSocket: "@kubelb-envoy-shutdown-manager"}},
		{name: "drain with a socket", args: []string{"drain", "--control-socket=@y"}, want: shutdownManagerOptions{drain: true, controlSocket: "@y"}},
		{name: "bad address", args: []string{"--admin-address=nope"}, err: `invalid value "nope" for flag --admin-address`},
		{name: "negative", args: []string{"--drain-timeout=-1s"}, err: "must not be negative"},
		{name: "drain takes no drain flags", args: []string{"drain", "--drain-timeout=1s"}, err: "flag provided but not defined: --drain-timeout"},
		{name: "unknown subcommand", args: []string{"stop"}, err: `unexpected argument "stop"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o, _, err := parseShutdownManager(tc.args)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *o != tc.want {
				t.Errorf("options %+v, want %+v", *o, tc.want)
			}
		})
	}
}

// TestEnvoyPodRunsTheShutdownManager: the sidecar's command line and its preStop hook, as
// the fleet controller writes them into the Envoy pods, are this binary's subcommand and
// carry the Config's drain times.
func TestEnvoyPodRunsTheShutdownManager(t *testing.T) {
	t.Parallel()
	config := &kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{EnvoyProxy: kubelbv1alpha1.EnvoyProxy{GracefulShutdown: &kubelbv1alpha1.GracefulShutdown{
		DrainTimeout: &metav1.Duration{Duration: 45 * time.Second}, MinDrainDuration: &metav1.Duration{Duration: 7 * time.Second},
	}}}}
	f := envoyfleet.Build(envoyfleet.Input{Namespace: "tenant-a", Settings: settings.Resolve(config, nil), Image: "envoy", ShutdownManagerImage: "kubelb", Bootstrap: []byte("{}")})
	pod := f.Deployment.Spec.Template.Spec
	sidecar := pod.Containers[1]
	argv := append(append([]string(nil), sidecar.Command...), sidecar.Args...)
	hook := sidecar.Lifecycle.PreStop.Exec.Command
	for _, cmd := range [][]string{argv, hook} {
		if cmd[0] != envoyfleet.ManagerBinary || cmd[1] != envoydrain.Command {
			t.Fatalf("command %q is not kubelb's %s", cmd, envoydrain.Command)
		}
	}
	o, _, err := parseShutdownManager(argv[2:])
	if err != nil {
		t.Fatalf("the sidecar's arguments %q: %v", argv[2:], err)
	}
	if o.drain || o.minDrain != 7*time.Second || o.drainTimeout != 45*time.Second || o.adminAddress.Value != "127.0.0.1:9901" ||
		o.controlSocket != envoydrain.DefaultControlSocket {
		t.Errorf("the sidecar runs with %+v", *o)
	}
	if _, port, _ := net.SplitHostPort(o.listenAddress.Value); port != pod.Containers[0].Lifecycle.PreStop.HTTPGet.Port.String() {
		t.Errorf("the sidecar listens on %s, Envoy's hook calls port %s", o.listenAddress.Value, pod.Containers[0].Lifecycle.PreStop.HTTPGet.Port.String())
	}
	h, _, err := parseShutdownManager(hook[2:])
	if err != nil || !h.drain || h.controlSocket != o.controlSocket {
		t.Errorf("the hook %q: %+v %v, want a drain request on %s", hook, h, err, o.controlSocket)
	}
}

func TestShutdownManagerFlagsAreDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	section := process.DocSection(string(doc), "## `kubelb envoy-shutdown-manager`")
	if section == "" {
		t.Fatal("docs/configuration.md has no section ## `kubelb envoy-shutdown-manager`")
	}
	for _, args := range [][]string{nil, {"drain"}} {
		_, fs, err := parseShutdownManager(args)
		if err != nil {
			t.Fatal(err)
		}
		if missing := fs.Undocumented(section); len(missing) > 0 {
			t.Errorf("docs/configuration.md lacks the flags of %s %q: %v", envoydrain.Command, args, missing)
		}
	}
}

// TestShutdownManagerDrainsRealEnvoy runs the built binary as in an Envoy pod, against a real
// Envoy with an open connection: the shutdown manager, then its preStop hook ("kubelb
// envoy-shutdown-manager drain") and Envoy's (GET /drained) at once. Both return only after
// the connection closed; the shutdown manager exits 0 on SIGTERM.
func TestShutdownManagerDrainsRealEnvoy(t *testing.T) {
	t.Parallel()
	bin := testsupport.BuildBinary(t, "./cmd/kubelb")
	envoy, _, listenerAddr := testsupport.StartEchoEnvoy(t, 2*time.Second)
	wait := testsupport.FreePort(t)
	conn, err := net.DialTimeout("tcp", listenerAddr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintln(conn, "hello"); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil {
		t.Fatalf("no echo: %v", err)
	}

	socket := fmt.Sprintf("@kubelb-cmd-test-%d", time.Now().UnixNano())
	sidecar := testsupport.StartProcess(t, "shutdown-manager", bin, envoydrain.Command,
		"--admin-address="+envoy.AdminAddr, "--listen-address="+testsupport.Loopback(wait), "--control-socket="+socket,
		"--min-drain-duration=1s", "--drain-timeout=1m")
	testsupport.Eventually(t, 10*time.Second, "the shutdown manager to listen", func() error {
		c, err := net.DialTimeout("tcp", testsupport.Loopback(wait), time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	// Envoy's hook, as the kubelet sends it.
	type answer struct {
		status int
		body   string
		err    error
	}
	envoyHook := make(chan answer, 1)
	go func() {
		resp, err := (&http.Client{Timeout: time.Minute}).Get("http://" + testsupport.Loopback(wait) + envoydrain.DrainedPath)
		if err != nil {
			envoyHook <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		envoyHook <- answer{resp.StatusCode, string(b), err}
	}()
	sidecarHook := testsupport.StartProcess(t, "sidecar-hook", bin, envoydrain.Command, envoydrain.DrainCommand, "--control-socket="+socket)
	testsupport.Eventually(t, 20*time.Second, "the drained listener to stop", func() error {
		v, err := envoy.Stat("listener_manager.listener_stopped")
		if err == nil && v != 1 {
			err = fmt.Errorf("listener_stopped %d", v)
		}
		return err
	})
	if sidecarHook.Exited() {
		t.Fatalf("the sidecar's hook returned with a connection open: %s", sidecarHook.Output())
	}
	select {
	case a := <-envoyHook:
		t.Fatalf("Envoy's hook returned with a connection open: %+v", a)
	default:
	}
	closed := time.Now()
	conn.Close()
	testsupport.Eventually(t, 10*time.Second, "the sidecar's hook to return", func() error {
		if !sidecarHook.Exited() {
			return fmt.Errorf("still waiting")
		}
		return nil
	})
	if code, err := sidecarHook.Stop(time.Second); code != 0 || err != nil || !strings.HasPrefix(sidecarHook.Output(), "drained: ") {
		t.Errorf("the sidecar's hook: exit code %d (%v), output %q", code, err, sidecarHook.Output())
	}
	select {
	case a := <-envoyHook:
		if a.err != nil || a.status != http.StatusOK || !strings.HasPrefix(a.body, "drained: ") {
			t.Errorf("Envoy's hook: %+v", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Envoy's hook did not return within 10s of the drain")
	}
	t.Logf("the hooks returned %s after the last connection closed", time.Since(closed).Round(10*time.Millisecond))
	if code, err := sidecar.Stop(10 * time.Second); code != 0 || err != nil {
		t.Errorf("the shutdown manager on SIGTERM: exit code %d (%v)", code, err)
	}
}
