package testsupport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"kubelb.dev/kubelb/internal/envoyclusters"
)

// writeBootstrap writes a bootstrap into a fresh temporary folder and returns its path.
func writeBootstrap(t TB, bootstrap []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bootstrap.yaml")
	if err := os.WriteFile(path, bootstrap, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// ValidateEnvoy runs "envoy --mode validate" on a bootstrap, with args appended (e.g.
// "--service-node", "proxy-1"), and returns Envoy's complaint, if any.
func ValidateEnvoy(t TB, bootstrap []byte, args ...string) error {
	t.Helper()
	path := writeBootstrap(t, bootstrap)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	argv := append([]string{"--mode", "validate", "-c", path, "--disable-hot-restart", "-l", "warning"}, args...)
	out, err := exec.CommandContext(ctx, EnvoyBinary(t), argv...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("envoy --mode validate: %w\n%s", err, out)
	}
	return nil
}

// EnvoyOptions tune how StartEnvoy runs Envoy.
type EnvoyOptions struct {
	// Node is --service-node (none when empty).
	Node string
	// LogLevel is --log-level; default "info".
	LogLevel string
	// DrainTime is --drain-time-s; default 1s.
	DrainTime time.Duration
	// Concurrency is --concurrency; 0 leaves Envoy's default (one worker per core).
	Concurrency int
	// Args are appended to the command line.
	Args []string
}

// Envoy is a running Envoy process.
type Envoy struct {
	*Process
	// AdminAddr is the ip:port of the admin interface, as Envoy reported it.
	AdminAddr string
}

// StartEnvoy runs Envoy with the bootstrap and waits until it has opened its admin
// interface. The bootstrap's admin address may have port 0: the port Envoy picks is read back
// from --admin-address-path. A dynamic base id keeps several Envoys on one machine apart.
// Envoy is killed by its PID when the test ends; its log is printed if the test failed.
func StartEnvoy(t TB, name string, bootstrap []byte, opts EnvoyOptions) *Envoy {
	t.Helper()
	path := writeBootstrap(t, bootstrap)
	dir := filepath.Dir(path)
	if opts.LogLevel == "" {
		opts.LogLevel = "info"
	}
	if opts.DrainTime == 0 {
		opts.DrainTime = time.Second
	}
	addrPath := filepath.Join(dir, "admin-address")
	argv := []string{
		"-c", path,
		"--use-dynamic-base-id", "--base-id-path", filepath.Join(dir, "base-id"),
		"--admin-address-path", addrPath,
		"--log-level", opts.LogLevel,
		"--drain-time-s", strconv.Itoa(int(opts.DrainTime.Seconds())),
	}
	if opts.Node != "" {
		argv = append(argv, "--service-node", opts.Node)
	}
	if opts.Concurrency > 0 {
		argv = append(argv, "--concurrency", strconv.Itoa(opts.Concurrency))
	}
	e := &Envoy{Process: StartProcess(t, name, EnvoyBinary(t), append(argv, opts.Args...)...)}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(addrPath); err == nil && len(bytes.TrimSpace(b)) > 0 {
			e.AdminAddr = strings.TrimSpace(string(b))
			return e
		}
		if e.Exited() {
			t.Fatalf("%s exited at start:\n%s", name, e.Tail(50))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not write its admin address within 30s:\n%s", name, e.Tail(50))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// AdminURL is the URL of an admin path, e.g. AdminURL("/ready").
func (e *Envoy) AdminURL(path string) string { return "http://" + e.AdminAddr + path }

// Get fetches an admin path, e.g. "/listeners" or "/config_dump?resource=dynamic_listeners";
// any status but 200 is an error.
func (e *Envoy) Get(path string) (string, error) {
	return HTTPGetOK(e.AdminURL(path), 5*time.Second)
}

// GetJSON fetches an admin path and decodes its JSON into v.
func (e *Envoy) GetJSON(path string, v any) error {
	body, err := e.Get(path)
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(body), v)
}

// WaitReady waits until the admin interface's /ready answers 200 (Envoy is LIVE).
func (e *Envoy) WaitReady(t TB, timeout time.Duration) {
	t.Helper()
	WaitHTTP200(t, e.Process, e.AdminURL("/ready"), timeout)
}

// ConfigDump decodes /config_dump into v; query is appended (e.g. "?include_eds").
func (e *Envoy) ConfigDump(query string, v any) error { return e.GetJSON("/config_dump"+query, v) }

// Listener is one of Envoy's active listeners.
type Listener struct {
	Name string
	// Address is ip:port.
	Address string
}

// Listeners lists Envoy's active listeners, in the order Envoy reports them.
func (e *Envoy) Listeners() ([]Listener, error) {
	var doc struct {
		ListenerStatuses []struct {
			Name         string `json:"name"`
			LocalAddress struct {
				SocketAddress struct {
					Address   string `json:"address"`
					PortValue int    `json:"port_value"`
				} `json:"socket_address"`
			} `json:"local_address"`
		} `json:"listener_statuses"`
	}
	if err := e.GetJSON("/listeners?format=json", &doc); err != nil {
		return nil, err
	}
	out := make([]Listener, 0, len(doc.ListenerStatuses))
	for _, l := range doc.ListenerStatuses {
		sa := l.LocalAddress.SocketAddress
		out = append(out, Listener{Name: l.Name, Address: fmt.Sprintf("%s:%d", sa.Address, sa.PortValue)})
	}
	return out, nil
}

// Stats returns the counters and gauges whose names match the regular expression filter
// (Envoy's /stats?filter=), by name. Histograms are left out.
func (e *Envoy) Stats(filter string) (map[string]int64, error) {
	body, err := e.Get("/stats?filter=" + filter)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(body, "\n") {
		name, val, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok {
			continue
		}
		if v, err := strconv.ParseInt(val, 10, 64); err == nil {
			out[name] = v
		}
	}
	return out, nil
}

// Stat returns one counter or gauge by its exact name; it is an error when Envoy does not
// report it.
func (e *Envoy) Stat(name string) (int64, error) {
	stats, err := e.Stats("^" + regexp.QuoteMeta(name) + "$")
	if err != nil {
		return 0, err
	}
	v, ok := stats[name]
	if !ok {
		return 0, fmt.Errorf("Envoy reports no stat %s", name)
	}
	return v, nil
}

// EnvoyHost is one host of an Envoy cluster as the admin interface's /clusters reports it.
type EnvoyHost struct {
	// Healthy is false when EDS or any health check marks the host unhealthy.
	Healthy bool
	// Connections is the host's cx_total.
	Connections int64
}

// ClusterHosts returns the hosts ("ip:port", IPv6 in brackets) of the first cluster whose name
// match accepts, from the admin interface's /clusters.
func (e *Envoy) ClusterHosts(match func(cluster string) bool) (map[string]EnvoyHost, error) {
	body, err := e.Get(envoyclusters.Path)
	if err != nil {
		return nil, err
	}
	clusters, err := envoyclusters.Parse([]byte(body))
	if err != nil {
		return nil, err
	}
	for _, c := range clusters {
		if !match(c.Name) {
			continue
		}
		hosts := map[string]EnvoyHost{}
		for _, h := range c.Hosts {
			hosts[h.Address] = EnvoyHost{Healthy: h.Healthy, Connections: h.Connections}
		}
		return hosts, nil
	}
	return nil, fmt.Errorf("no such cluster in Envoy's /clusters")
}

// StartEchoEnvoy runs a real Envoy with an admin interface and one TCP echo listener on
// loopback, with --drain-time-s drainTime (for tests of the drain); it waits until Envoy is
// ready and returns it, the admin address and the listener address.
func StartEchoEnvoy(t TB, drainTime time.Duration) (envoy *Envoy, admin, listener string) {
	t.Helper()
	adminPort, listenerPort := FreePort(t), FreePort(t)
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
`, adminPort, listenerPort)
	envoy = StartEnvoy(t, "envoy", []byte(bootstrap), EnvoyOptions{
		LogLevel: "warning", DrainTime: drainTime, Args: []string{"--disable-hot-restart"},
	})
	envoy.WaitReady(t, 30*time.Second)
	return envoy, Loopback(adminPort), Loopback(listenerPort)
}
