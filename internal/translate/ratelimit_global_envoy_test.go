package translate_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/pki"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds"
	"kubelb.dev/kubelb/internal/xds/bootstrap"
	"kubelb.dev/kubelb/internal/xds/translator"
	"kubelb.dev/kubelb/internal/xds/xdsenvoy"
	"kubelb.dev/kubelb/internal/xds/xdstest"
)

// ratelimitVersion is the version of Envoy's rate-limit service hack/tools.sh builds
// (RATELIMIT_VERSION; TestRateLimitToolVersion).
const ratelimitVersion = "v1.4.1-0.20260122083618-3fb702589d36"

// TestRateLimitToolVersion: the tests look for the rate-limit service hack/tools.sh builds.
func TestRateLimitToolVersion(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testsupport.RepoRoot(), "hack", "tools.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^RATELIMIT_VERSION=\$\{RATELIMIT_VERSION:-([^}]+)\}$`).FindSubmatch(b); m == nil || string(m[1]) != ratelimitVersion {
		t.Errorf("hack/tools.sh builds ratelimit %q, the tests look for %s", m, ratelimitVersion)
	}
}

// startRedis starts Debian's redis-server (hack/tools.sh redis) on a free loopback port,
// keeping nothing on disk, and returns its address once it answers PING.
func startRedis(t *testing.T) string {
	t.Helper()
	bin := testsupport.Tool(t, "KUBELB_REDIS", filepath.Join("redis", "redis-server"), "redis-server")
	addr := testsupport.Loopback(testsupport.FreePort(t))
	_, port, _ := net.SplitHostPort(addr)
	testsupport.StartProcess(t, "redis", bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	testsupport.Eventually(t, 30*time.Second, "redis to answer PING", func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			return err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || line != "+PONG\r\n" {
			return fmt.Errorf("answer %q: %v", line, err)
		}
		return nil
	})
	return addr
}

// startRateLimit starts Envoy's rate-limit service (hack/tools.sh ratelimit) on loopback,
// gRPC on grpcPort, with its counters in the redis at redisAddr and its configuration from
// the xDS server at xdsAddr (CONFIG_TYPE=GRPC_XDS_SOTW, as the manager's rate-limit services
// get it), with the client certificate of the tenant's fleet (certs); it returns the process
// once it has loaded the configuration of domain.
func startRateLimit(t *testing.T, redisAddr, xdsAddr, domain string, certs map[string][]byte, grpcPort int) *testsupport.Process {
	t.Helper()
	bin := testsupport.Tool(t, "KUBELB_RATELIMIT", filepath.Join("ratelimit", ratelimitVersion, "ratelimit"), "Envoy's ratelimit")
	dir := t.TempDir()
	for _, k := range []string{pki.KeyCert, pki.KeyKey, pki.KeyCA} {
		if err := os.WriteFile(filepath.Join(dir, k), certs[k], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	httpPort, debugPort := testsupport.FreePort(t), testsupport.FreePort(t)
	p := testsupport.StartProcessWithEnv(t, "ratelimit", bin, []string{
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(httpPort),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(grpcPort),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(debugPort),
		"USE_STATSD=false", "USE_PROMETHEUS=false", "LOG_LEVEL=debug",
		"BACKEND_TYPE=redis", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + redisAddr,
		"CONFIG_TYPE=GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL=" + xdsAddr, "CONFIG_GRPC_XDS_NODE_ID=ratelimit-0",
		"CONFIG_GRPC_XDS_SERVER_USE_TLS=true", "CONFIG_GRPC_XDS_SERVER_TLS_SAN=" + xdstest.ServerName,
		"CONFIG_GRPC_XDS_CLIENT_TLS_CERT=" + filepath.Join(dir, pki.KeyCert), "CONFIG_GRPC_XDS_CLIENT_TLS_KEY=" + filepath.Join(dir, pki.KeyKey),
		"CONFIG_GRPC_XDS_SERVER_TLS_CACERT=" + filepath.Join(dir, pki.KeyCA),
		"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL=1s", "XDS_CLIENT_BACKOFF_MAX_INTERVAL=2s",
		"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED=true",
	})
	testsupport.Eventually(t, 60*time.Second, "the rate-limit service to load its configuration", func() error {
		if p.Exited() {
			t.Fatalf("ratelimit exited:\n%s", p.Tail(20))
		}
		code, _, err := testsupport.HTTPGet(t.Context(), "http://"+testsupport.Loopback(httpPort)+"/healthcheck")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("healthcheck: %d %v", code, err)
		}
		code, body, err := testsupport.HTTPGet(t.Context(), "http://"+testsupport.Loopback(debugPort)+"/rlconfig")
		if err != nil || code != http.StatusOK || !strings.Contains(body, domain+".") {
			return fmt.Errorf("rlconfig: %d %v %q", code, err, body)
		}
		return nil
	})
	return p
}

// namedRules replaces the rules of Route r's HTTPRoute by copies of its first rule, named
// and matching a path prefix each (name, path pairs).
func namedRules(r *v1alpha1.Route, namesAndPaths ...string) {
	obj := r.Spec.Source.Kubernetes.Route.Object
	rules := obj["spec"].(map[string]any)["rules"].([]any)
	var out []any
	for i := 0; i+1 < len(namesAndPaths); i += 2 {
		rule := map[string]any{}
		for k, v := range rules[0].(map[string]any) {
			rule[k] = v
		}
		rule["name"] = namesAndPaths[i]
		rule["matches"] = []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": namesAndPaths[i+1]}}}
		out = append(out, rule)
	}
	obj["spec"].(map[string]any)["rules"] = out
}

// TestGlobalRateLimitThroughEnvoy: a global rate limit counts once for the tenant's whole
// fleet. Two Envoys of one tenant (the same routes; each binds its own loopback address) ask
// one real rate-limit service, its counters in a real redis, its configuration
// (translator.RateLimitConfig) over xDS from the first proxy's xDS server with the fleet's
// client certificate. HTTPRoute web has rules open
// (/), limited (/limited: 6 an hour for the rule, a BackendTrafficPolicy on the rule) and
// per-user (/user: 3 an hour per X-User value). Requests alternate between the proxies: 6 to
// /limited are served and the 7th and 8th answered 429, whichever proxy they reach; / is
// never limited; alice gets 3 on /user and then 429, bob his own 3. The service stopped,
// both proxies serve /limited again (fail open).
func TestGlobalRateLimitThroughEnvoy(t *testing.T) {
	const tenant = "tenant-global-ratelimit"
	nodePort := serveOnNodes(t, func(int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	})
	in, httpPort := trafficInput(t, tenant, nodePort, nil)
	namedRules(&in.Routes[1], "open", "/", "limited", "/limited", "per-user", "/user")
	global := func(name string, r v1alpha1.TrafficRateLimitRule) *v1alpha1.BackendTraffic {
		return &v1alpha1.BackendTraffic{Namespace: "shop", Name: name, RateLimit: &v1alpha1.TrafficRateLimit{
			Type: "Global", Global: &v1alpha1.TrafficGlobalRateLimit{Rules: []v1alpha1.TrafficRateLimitRule{r}}}}
	}
	in.Routes[1].Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{PolicySections: []v1alpha1.PolicySection{
		{Name: "limited", BackendTraffic: global("limited", v1alpha1.TrafficRateLimitRule{Limit: v1alpha1.TrafficRateLimitValue{Requests: 6, Unit: "Hour"}})},
		{Name: "per-user", BackendTraffic: global("per-user", v1alpha1.TrafficRateLimitRule{
			ClientSelectors: []v1alpha1.TrafficRateLimitSelector{{Headers: []v1alpha1.TrafficRateLimitHeader{{Name: "X-User", Type: "Distinct"}}}},
			Limit:           v1alpha1.TrafficRateLimitValue{Requests: 3, Unit: "Hour"},
		})},
	}}

	// The rate-limit service is reached before it starts: its address goes into the
	// translation, and its configuration comes out of it.
	grpcPort := testsupport.FreePort(t)
	in.Options.RateLimitService = testsupport.Loopback(grpcPort)
	var proxies []string
	var envoys []*testsupport.Envoy
	var config []byte
	var xdsAddr string
	var certs *xdstest.PKI
	for i, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		one := in
		one.Options.ListenerAddress = ip // each proxy of the fleet binds its own address here
		cfg, problems, res, err := translatetest.Pipeline(one)
		if err != nil {
			t.Fatal(err)
		}
		if len(problems) != 0 {
			t.Fatalf("problems: %v", problems)
		}
		rlc, err := translator.RateLimitConfig(cfg)
		if err != nil || rlc == nil {
			t.Fatalf("RateLimitConfig: %v, %v", rlc, err)
		}
		if y := translator.RateLimitConfigYAML(rlc); config == nil {
			config = y
		} else if string(y) != string(config) {
			t.Fatalf("the proxies' rate-limit configurations differ:\n%s\n%s", config, y)
		}
		name := fmt.Sprintf("envoy-%d", i)
		if i == 0 {
			// The first proxy's xDS server also serves the rate-limit service its
			// configuration, in the tenant's snapshot.
			res[resource.RateLimitConfigType] = []types.Resource{rlc}
			xdsAddr, certs = xdsenvoy.Serve(t, tenant, xds.Resources(res))
			envoys = append(envoys, testsupport.StartEnvoy(t, name, certs.Bootstrap(t, bootstrap.Options{Tenant: tenant, XDSAddress: xdsAddr,
				AdminAddress: testsupport.Loopback(testsupport.FreePort(t))}), testsupport.EnvoyOptions{Concurrency: 1, Node: name}))
		} else {
			envoys = append(envoys, xdsenvoy.Start(t, name, tenant, res, bootstrap.Options{}, testsupport.EnvoyOptions{Concurrency: 1}))
		}
		proxies = append(proxies, net.JoinHostPort(ip, strconv.Itoa(httpPort)))
	}
	t.Logf("the rate-limit service's configuration:\n%s", config)
	rls := startRateLimit(t, startRedis(t), xdsAddr, tenant, certs.ClientSecretData(t, tenant), grpcPort)

	get := func(addr, path string, headers ...string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			t.Fatalf("GET %s%s: %v", addr, path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, p := range proxies {
		testsupport.Eventually(t, 30*time.Second, "Envoy "+p+" to serve the route", func() error {
			if code := get(p, "/"); code != http.StatusOK {
				return fmt.Errorf("status %d", code)
			}
			return nil
		})
	}

	// Each proxy connects to the rate-limit service with a request of a user of its own (a
	// budget nothing else spends), so that no counted request waits for a connection.
	for i, p := range proxies {
		if code := get(p, "/user", "X-User", fmt.Sprintf("warm-up-%d", i)); code != http.StatusOK {
			t.Fatalf("warming up proxy %d: status %d", i, code)
		}
	}

	// 8 requests to /limited, alternating between the proxies.
	var codes []int
	for i := range 8 {
		codes = append(codes, get(proxies[i%2], "/limited"))
	}
	t.Logf("/limited, alternating proxies: %v", codes)
	defer func() {
		if t.Failed() { // what the filters counted: ok, over_limit, error, failure_mode_allowed
			for i, e := range envoys {
				st, _ := e.Stats("ratelimit")
				t.Logf("proxy %d's rate-limit stats: %v", i, st)
			}
		}
	}()
	for i, c := range codes {
		want := http.StatusOK
		if i >= 6 {
			want = http.StatusTooManyRequests
		}
		if c != want {
			t.Errorf("/limited request %d (proxy %d): status %d, want %d (6 an hour for the whole fleet)", i+1, i%2, c, want)
		}
	}
	// The open rule has no limit.
	for i := range 10 {
		if c := get(proxies[i%2], "/"); c != http.StatusOK {
			t.Errorf("/ request %d: status %d, want 200 (no policy)", i+1, c)
		}
	}
	// Each X-User value has its own 3.
	for _, user := range []string{"alice", "bob"} {
		var got []int
		for i := range 4 {
			got = append(got, get(proxies[i%2], "/user", "X-User", user))
		}
		t.Logf("/user as %s: %v", user, got)
		if want := []int{200, 200, 200, 429}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("/user as %s: %v, want %v (3 an hour per X-User value, fleet-wide)", user, got, want)
		}
	}

	// The rate-limit service stops: the proxies let requests through (fail open).
	rls.Kill()
	for i := range 4 {
		if c := get(proxies[i%2], "/limited"); c != http.StatusOK {
			t.Errorf("/limited with the rate-limit service stopped (proxy %d): status %d, want 200 (fail open)", i%2, c)
		}
	}
}
