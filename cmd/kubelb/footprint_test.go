package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// The largest tenant the default limits allow, of every kind at once (docs/performance.md,
// "A hostile tenant's largest footprint"): the most LoadBalancers and Routes, of a size that
// together fills spec.limits.objectBytes; the most Addresses, at their largest (5000
// addresses); as many SyncSecrets as the ResourceQuota counts (250), each at its largest
// (1000 KiB of data), of which the admission webhook lets only those within
// spec.limits.syncSecretBytes into etcd.
const (
	footprintLBs         = int(settings.DefaultLimitLoadBalancers)
	footprintRoutes      = int(settings.DefaultLimitRoutes)
	footprintAddresses   = int(settings.DefaultLimitAddresses)
	footprintSyncSecrets = int(settings.DefaultLimitSyncSecrets)
	footprintSecretBytes = 1000 * 1024
	// footprintLBAddresses are the inline endpoint addresses of one LoadBalancer: the
	// LoadBalancers take about 3.6 MiB together whatever the default count (150 addresses,
	// about 3.6 KiB each, at 1000 LoadBalancers; 15 at 10 000).
	footprintLBAddresses  = 150 * 1000 / footprintLBs
	footprintRoutePadding = 3800
)

// TestLargestTenantFootprint runs the real kubelb binary (KUBELB_FOOTPRINT_BINARY, else built
// from this tree) against a real API server and etcd, writes the largest tenant the default
// limits allow and reports the manager's peak RSS (VmHWM of its process) and Go heap in use,
// and the growth of etcd's database. It measures, it asserts nothing about the figures; it
// runs only with KUBELB_FOOTPRINT=1 (it writes about 80 MiB).
func TestLargestTenantFootprint(t *testing.T) {
	if os.Getenv("KUBELB_FOOTPRINT") == "" {
		t.Skip("set KUBELB_FOOTPRINT=1 to measure the largest tenant's footprint")
	}
	hub := testenv.Start(t, "hub", testenv.Options{})
	ctx := context.Background()
	c := hub.Client
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubelb"}}))
	must(c.Create(ctx, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "big"}}))
	etcdBefore := etcdDBSize(t, hub.EtcdMetricsURL())

	bin := os.Getenv("KUBELB_FOOTPRINT_BINARY")
	if bin == "" {
		bin = testsupport.BuildBinary(t, "./cmd/kubelb")
	}
	m := startWithWebhook(t, hub, bin)
	proc, metricsPort, pprofPort := m.proc, m.metricsPort, m.pprofPort
	ns := hubnames.TenantNamespace("big")
	testsupport.Eventually(t, time.Minute, "the Tenant's namespace", func() error {
		return c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
	})
	idle := procStatus(t, proc.Cmd.Process.Pid)
	t.Logf("manager idle: VmRSS %s, VmHWM %s", idle["VmRSS"], idle["VmHWM"])

	start := time.Now()
	var objs []client.Object
	for a := range footprintAddresses {
		addrs := make([]kubelbv1alpha1.EndpointAddress, 5000)
		for i := range addrs {
			addrs[i] = kubelbv1alpha1.EndpointAddress{IP: fmt.Sprintf("10.%d.%d.%d", 16+a, i/250, i%250+1)}
		}
		name := kubelbv1alpha1.DefaultAddressesName
		if a > 0 {
			name = fmt.Sprintf("nodes-%d", a)
		}
		objs = append(objs, &kubelbv1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kubelbv1alpha1.AddressesSpec{Addresses: addrs}})
	}
	for l := range footprintLBs {
		addrs := make([]kubelbv1alpha1.EndpointAddress, footprintLBAddresses)
		for i := range addrs {
			addrs[i] = kubelbv1alpha1.EndpointAddress{IP: fmt.Sprintf("10.%d.%d.%d", 64+l/250, l%250, i+1)}
		}
		objs = append(objs, &kubelbv1alpha1.LoadBalancer{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("lb-%04d", l)},
			Spec: kubelbv1alpha1.LoadBalancerSpec{
				Endpoints: []kubelbv1alpha1.LoadBalancerEndpoints{{Addresses: addrs,
					Ports: []kubelbv1alpha1.EndpointPort{{Name: "http", Port: 30080, Protocol: corev1.ProtocolTCP}}}},
				Ports: []kubelbv1alpha1.LoadBalancerPort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
				Type:  corev1.ServiceTypeClusterIP,
			},
		})
	}
	for r := range footprintRoutes {
		rt := &kubelbv1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("route-%04d", r)}}
		rt.Spec.Source.Kubernetes = &kubelbv1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
			"metadata": map[string]any{"name": fmt.Sprintf("r-%d", r), "namespace": "apps"},
			"spec": map[string]any{"rules": []any{map[string]any{"matches": []any{
				map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/" + strings.Repeat("p", footprintRoutePadding)}},
			}}}},
		}}}
		objs = append(objs, rt)
	}
	big := bytes.Repeat([]byte("s"), footprintSecretBytes)
	for s := range footprintSyncSecrets {
		objs = append(objs, &kubelbv1alpha1.SyncSecret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("secret-%03d", s), Labels: map[string]string{
				kubelbv1alpha1.LabelOriginName: fmt.Sprintf("s-%d", s), kubelbv1alpha1.LabelOriginNamespace: "apps",
				kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue,
			}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{"k": big},
		})
	}
	refused := createAll(t, c, objs, 8)
	t.Logf("wrote %d objects in %v; the API server refused %d (the admission webhook: past a byte limit)", len(objs)-refused, time.Since(start).Round(time.Second), refused)

	// Settled: every LoadBalancer and SyncSecret has a status from the manager, and the
	// manager's work queues are empty.
	testsupport.Eventually(t, 10*time.Minute, "every LoadBalancer and SyncSecret to have a status", func() error {
		lbs := &kubelbv1alpha1.LoadBalancerList{}
		if err := c.List(ctx, lbs, client.InNamespace(ns)); err != nil {
			return err
		}
		done := 0
		for _, lb := range lbs.Items {
			if len(lb.Status.Conditions) > 0 {
				done++
			}
		}
		sss := &kubelbv1alpha1.SyncSecretList{}
		if err := c.List(ctx, sss, client.InNamespace(ns)); err != nil {
			return err
		}
		ssDone := 0
		for _, ss := range sss.Items {
			if len(ss.Status.Conditions) > 0 {
				ssDone++
			}
		}
		if done < len(lbs.Items) || ssDone < len(sss.Items) {
			return fmt.Errorf("%d of %d LoadBalancers and %d of %d SyncSecrets have a status", done, len(lbs.Items), ssDone, len(sss.Items))
		}
		return nil
	})
	time.Sleep(20 * time.Second) // let the Envoy control plane finish its rebuilds (measured, not asserted)
	settled := time.Since(start).Round(time.Second)
	peak := procStatus(t, proc.Cmd.Process.Pid)
	heap := promValue(t, "http://"+testsupport.Loopback(metricsPort)+"/metrics", "go_memstats_heap_inuse_bytes")
	etcdAfter := etcdDBSize(t, hub.EtcdMetricsURL())
	secrets := &corev1.SecretList{}
	must(c.List(ctx, secrets, client.InNamespace(ns), client.HasLabels{"kubelb.k8c.io/syncsecret"}))
	t.Logf("settled %v after the first write", settled)
	t.Logf("manager: VmHWM (peak RSS) %s, VmRSS %s, Go heap in use %.0f MiB", peak["VmHWM"], peak["VmRSS"], heap/(1<<20))
	t.Logf("etcd db size: %.0f MiB before, %.0f MiB after (+%.0f MiB)", etcdBefore/(1<<20), etcdAfter/(1<<20), (etcdAfter-etcdBefore)/(1<<20))
	t.Logf("hub Secrets made from the %d SyncSecrets attempted: %d", footprintSyncSecrets, len(secrets.Items))
	if dir := os.Getenv("KUBELB_PPROF_DIR"); dir != "" {
		resp, err := http.Get("http://" + testsupport.Loopback(pprofPort) + "/debug/pprof/heap") //nolint:noctx // a test, loopback
		must(err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		must(err)
		must(os.WriteFile(dir+"/manager-heap.pprof", b, 0o600))
	}
}

// createAll creates objs with workers goroutines and returns how many the API server refused
// as Forbidden (the admission webhook); any other error fails the test.
func createAll(t *testing.T, c client.Client, objs []client.Object, workers int) int {
	t.Helper()
	ch := make(chan client.Object)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	forbidden := 0
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range ch {
				if err := c.Create(context.Background(), o); err != nil {
					mu.Lock()
					if apierrors.IsForbidden(err) {
						forbidden++
						mu.Unlock()
						continue
					}
					errs = append(errs, fmt.Errorf("%T %s: %w", o, o.GetName(), err))
					mu.Unlock()
				}
			}
		}()
	}
	for _, o := range objs {
		ch <- o
	}
	close(ch)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d creates failed, the first: %v", len(errs), errs[0])
	}
	return forbidden
}

// procStatus reads /proc/<pid>/status.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// etcdDBSize is etcd_mvcc_db_total_size_in_bytes.
func etcdDBSize(t *testing.T, url string) float64 {
	return promValue(t, url, "etcd_mvcc_db_total_size_in_bytes")
}

// promValue reads one unlabelled series from a Prometheus text endpoint on loopback.
func promValue(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url) //nolint:noctx // a test, loopback
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("%s has no %s", url, name)
	return 0
}
