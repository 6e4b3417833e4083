package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// BenchmarkHTTPRouteChange1000 measures, end to end (real hub and tenant API servers, the
// real manager and ccm binaries, a real Envoy), how long a change of one HTTPRoute takes to be
// served in a tenant that has 1000 of them (KUBELB_L7_ROUTES) on one Gateway (HTTP and HTTPS
// listeners): the ccm mirrors the change to the hub, the manager translates the whole tenant
// (every Route) and pushes it over xDS. Each route has its own hostname, a header match on
// /api and a catch-all, to two backend Services (blue, green). It reports the time until all
// routes are served after they were created (16 concurrent clients), and the p50/p95 over
// KUBELB_L7_CHANGES (default 20) changes of one route's catch-all backend from blue to
// green (or back) until a request through Envoy is answered by the new backend. It runs once
// whatever b.N is: `go test ./e2e -run '^$' -bench HTTPRouteChange -benchtime 1x`.
func BenchmarkHTTPRouteChange1000(b *testing.B) {
	n, changes := envInt("KUBELB_L7_ROUTES", 1000), envInt("KUBELB_L7_CHANGES", 20)
	pair := testenv.StartPair(b)
	sys := framework.StartSystem(b, pair.Hub, framework.Options{})
	tenant := sys.AddTenant("routes", pair.Tenant, 1, "--enable-gateway-api")
	tc := pair.Tenant.Client
	ctx := context.Background()
	// The tenant may hold the Gateway and every route (the default limit is 1000 Routes).
	if err := pair.Hub.Client.Patch(ctx, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "routes"}},
		client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"limits":{"routes":%d}}}`, max(n+1, 1000)))); err != nil {
		b.Fatal(err)
	}

	const ns = "apps"
	tenant.CreateNamespace(ns, nil)
	tenant.CreateBackendService(ns, "blue", corev1.ServicePort{Name: "http", Port: 80})
	tenant.CreateBackendService(ns, "green", corev1.ServicePort{Name: "http", Port: 80})
	crt, key := testsupport.SelfSignedPEM(b, "*.example.com")
	if err := tc.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "wildcard", Namespace: ns}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}); err != nil {
		b.Fatal(err)
	}
	testsupport.Eventually(b, time.Minute, "GatewayClass kubelb", func() error {
		return tc.Get(ctx, client.ObjectKey{Name: kubelbv1alpha1.DefaultClass}, &gwv1.GatewayClass{})
	})
	gw := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: ns},
		Spec: gwv1.GatewaySpec{GatewayClassName: kubelbv1alpha1.DefaultClass, Listeners: []gwv1.Listener{
			{Name: "http", Protocol: gwv1.HTTPProtocolType, Port: 80},
			{Name: "https", Protocol: gwv1.HTTPSProtocolType, Port: 443, Hostname: ptr.To(gwv1.Hostname("*.example.com")),
				TLS: &gwv1.ListenerTLSConfig{Mode: ptr.To(gwv1.TLSModeTerminate), CertificateRefs: []gwv1.SecretObjectReference{{Name: "wildcard"}}}},
		}},
	}
	if err := tc.Create(ctx, gw); err != nil {
		b.Fatal(err)
	}
	// The fleet's bootstrap exists once the tenant has a LoadBalancer or a Route.
	tenant.StartEnvoy(framework.EnvoyBootstrap)
	addr := testsupport.Loopback(int(tenant.GatewayPorts(string(gw.UID), 80, 443)[80]))

	host := func(i int) string { return fmt.Sprintf("app-%04d.example.com", i) }
	backend := func(name string) []gwv1.HTTPBackendRef {
		return []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
			Name: gwv1.ObjectName(name), Port: ptr.To(gwv1.PortNumber(80))}}}}
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				route := &gwv1.HTTPRoute{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%04d", i), Namespace: ns},
					Spec: gwv1.HTTPRouteSpec{
						CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
						Hostnames:       []gwv1.Hostname{gwv1.Hostname(host(i))},
						Rules: []gwv1.HTTPRouteRule{
							{Matches: []gwv1.HTTPRouteMatch{{
								Path:    &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To("/api")},
								Headers: []gwv1.HTTPHeaderMatch{{Name: "x-version", Value: "v2"}},
							}}, BackendRefs: backend("green")},
							{BackendRefs: backend("blue")},
						},
					},
				}
				if err := tc.Create(ctx, route); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	created := time.Since(start)
	tenant.ServeBackend(ns, "blue", 80, testsupport.StartHTTPBackend)
	tenant.ServeBackend(ns, "green", 80, testsupport.StartHTTPBackend)
	// Served: every tenth route (the last one included) answers from its backend.
	var sample []int
	for i := 0; i < n; i += 10 {
		sample = append(sample, i)
	}
	sample = append(sample, n-1)
	testsupport.Eventually(b, 5*time.Minute, fmt.Sprintf("all %d HTTPRoutes served", n), func() error {
		for len(sample) > 0 {
			if err := answeredBy(addr, host(sample[0]), "blue-"); err != nil {
				return fmt.Errorf("%s: %w", host(sample[0]), err)
			}
			sample = sample[1:]
		}
		return nil
	})
	allServed := time.Since(start)

	// Split each change: until the hub Route carries it (the ccm), then until Envoy serves it
	// (the manager's Route and envoycp controllers, translation, xDS). The manager's own
	// figures (snapshot builds and their time) are read from its metrics.
	uids := map[string]string{}
	var routes gwv1.HTTPRouteList
	if err := tc.List(ctx, &routes, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	for _, r := range routes.Items {
		uids[r.Name] = string(r.UID)
	}
	metricsBefore := managerMetrics(b, sys.MetricsAddr, tenant.Namespace)
	var took, toHub []time.Duration
	for k := range changes {
		i := (k * 397) % n // spread over the routes
		to := "green"
		route := &gwv1.HTTPRoute{}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := tc.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("app-%04d", i)}, route); err != nil {
				return err
			}
			if route.Spec.Rules[1].BackendRefs[0].Name == "green" {
				to = "blue"
			}
			route.Spec.Rules[1].BackendRefs = backend(to)
			return tc.Update(ctx, route)
		})
		if err != nil {
			b.Fatal(err)
		}
		// Polled every 10 ms (testsupport.Eventually polls every 100 ms, too coarse here).
		changed := time.Now()
		var onHub time.Duration
		for err := answeredBy(addr, host(i), to+"-"); err != nil; err = answeredBy(addr, host(i), to+"-") {
			if onHub == 0 && hubRouteBackend(ctx, pair.Hub.Client, tenant.Namespace, uids[route.Name]) == to {
				onHub = time.Since(changed)
			}
			if time.Since(changed) > time.Minute {
				b.Fatalf("%s not served by %s a minute after the change: %v", host(i), to, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		took = append(took, time.Since(changed))
		if onHub == 0 {
			onHub = took[len(took)-1]
		}
		toHub = append(toHub, onHub)
	}
	metricsAfter := managerMetrics(b, sys.MetricsAddr, tenant.Namespace)
	b.StopTimer()
	slices.Sort(took)
	slices.Sort(toHub)
	pct := func(d []time.Duration, p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	b.ReportMetric(allServed.Seconds(), "s-to-all-served")
	b.ReportMetric(pct(took, 0.50).Seconds(), "s-change-p50")
	b.ReportMetric(pct(took, 0.95).Seconds(), "s-change-p95")
	b.ReportMetric(pct(toHub, 0.50).Seconds(), "s-change-on-hub-p50")
	builds := metricsAfter["build_count"] - metricsBefore["build_count"]
	buildTime := metricsAfter["build_sum"] - metricsBefore["build_sum"]
	if builds > 0 {
		b.ReportMetric(buildTime/builds, "s/snapshot-build")
	}
	b.ReportMetric(builds/float64(changes), "snapshot-builds/change")
	cpu, _ := framework.ProcessCPU(sys.Manager.Cmd.Process.Pid)
	b.Logf("%d HTTPRoutes created in %s, all served after %s; %d changes served after %v (p50 %s, p95 %s), on the hub after %v; "+
		"during the changes the manager built %.0f snapshots (%.3f s each on average), pushed %.0f; manager %.1f CPU s in all",
		n, created.Round(time.Millisecond), allServed.Round(time.Millisecond), len(took), took, pct(took, 0.5), pct(took, 0.95), toHub,
		builds, buildTime/max(builds, 1), metricsAfter["updates"]-metricsBefore["updates"], cpu)
}

// hubRouteBackend is the backend of the catch-all rule of the HTTPRoute a hub Route embeds
// ("" when it cannot be read).
func hubRouteBackend(ctx context.Context, hub client.Client, namespace, name string) string {
	r := &kubelbv1alpha1.Route{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, r); err != nil || r.Spec.Source.Kubernetes == nil {
		return ""
	}
	rules, _, _ := unstructured.NestedSlice(r.Spec.Source.Kubernetes.Route.Object, "spec", "rules")
	if len(rules) < 2 {
		return ""
	}
	refs, _, _ := unstructured.NestedSlice(rules[1].(map[string]any), "backendRefs")
	if len(refs) == 0 {
		return ""
	}
	name, _, _ = unstructured.NestedString(refs[0].(map[string]any), "name")
	return name
}

// managerMetrics reads the manager's snapshot figures for a tenant from its /metrics:
// build_count and build_sum of the snapshot build duration, and updates (snapshots pushed).
func managerMetrics(b *testing.B, addr, tenant string) map[string]float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]float64{}
	label := `{tenant="` + tenant + `"}`
	for _, line := range strings.Split(string(body), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		switch name {
		case "kubelb_manager_envoycp_snapshot_build_duration_seconds_count" + label:
			out["build_count"] = v
		case "kubelb_manager_envoycp_snapshot_build_duration_seconds_sum" + label:
			out["build_sum"] = v
		case "kubelb_manager_envoycp_snapshot_updates_total" + label:
			out["updates"] = v
		}
	}
	return out
}

// answeredBy sends a request for host through Envoy and checks a Pod whose name starts with
// pod answered.
func answeredBy(addr, host, pod string) error {
	r, err := framework.HTTPRequest(addr, host, "/", nil, nil)
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Pod, pod) {
		return fmt.Errorf("status %d from %q (%s), want 200 from %s*", r.Status, r.Pod, r.Body, pod)
	}
	return nil
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
