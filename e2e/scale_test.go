package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// BenchmarkBurstLoadBalancerServices creates a burst of LoadBalancer Services in one tenant
// (1000, or KUBELB_BURST) against the real binaries and reports the time until every Service
// shows an address, the hub writes per Service made by kubelb (the played hub LoadBalancer
// implementation's writes are subtracted), and the manager's CPU seconds and peak RSS.
// It runs once whatever b.N is: `go test ./e2e -run '^$' -bench Burst -benchtime 1x`.
func BenchmarkBurstLoadBalancerServices(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("KUBELB_BURST")); err == nil && v > 0 {
		n = v
	}
	pair := testenv.StartPair(b)
	sys := framework.StartSystem(b, pair.Hub, framework.Options{})
	tenant := sys.AddTenant("burst", pair.Tenant, 3)
	ctx := context.Background()
	// The tenant may hold all of them (the default limits are 1000 LoadBalancers, 500
	// listener ports), and its hub Services take no hub NodePorts (as with MetalLB), which
	// would cap the hub at 2768 LoadBalancer ports. The tenant cluster's own NodePort range
	// (one NodePort per tenant Service, which the hub sends traffic to) still caps KUBELB_BURST
	// at 2768 here.
	limits := fmt.Sprintf(`{"spec":{"limits":{"loadBalancers":%d,"listenerPorts":%d},"loadBalancer":{"allocateNodePorts":false}}}`, max(n, 1000), max(n, 1000))
	if err := pair.Hub.Client.Patch(ctx, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "burst"}},
		client.RawPatch(types.MergePatchType, []byte(limits))); err != nil {
		b.Fatal(err)
	}
	// Let the tenant settle (its ccm has published the nodes) before measuring.
	testsupport.Eventually(b, time.Minute, "Addresses/default of the tenant", func() error {
		return pair.Hub.Client.Get(ctx, client.ObjectKey{Namespace: tenant.Namespace, Name: kubelbv1alpha1.DefaultAddressesName}, &kubelbv1alpha1.Addresses{})
	})

	writesBefore, err := framework.APIWrites(ctx, pair.Hub.Config)
	if err != nil {
		b.Fatal(err)
	}
	playerBefore := sys.HubLBWrites.Load()
	cpuBefore, _ := framework.ProcessCPU(sys.Manager.Cmd.Process.Pid)
	b.ResetTimer()
	start := time.Now()
	// The burst: 16 clients creating Services at once, as a GitOps sync would.
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				svc := &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%04d", i), Namespace: "default"},
					Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "x"},
						Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
				}
				if err := pair.Tenant.Client.Create(ctx, svc); err != nil {
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
	testsupport.Eventually(b, 10*time.Minute, fmt.Sprintf("all %d Services addressed", n), func() error {
		var svcs corev1.ServiceList
		if err := pair.Tenant.Client.List(ctx, &svcs, client.InNamespace("default")); err != nil {
			return err
		}
		addressed := 0
		for _, s := range svcs.Items {
			if len(s.Status.LoadBalancer.Ingress) > 0 {
				addressed++
			}
		}
		if addressed < n {
			return fmt.Errorf("%d of %d addressed", addressed, n)
		}
		return nil
	})
	elapsed := time.Since(start)
	b.StopTimer()
	writesAfter, err := framework.APIWrites(ctx, pair.Hub.Config)
	if err != nil {
		b.Fatal(err)
	}
	byKind, total := framework.WritesSince(writesBefore, writesAfter)
	// The API server's own IPAddress objects (one per ClusterIP) and the played hub
	// LoadBalancer implementation's status writes are not kubelb's.
	kubelbWrites := total - byKind["POST ipaddresses"] - (sys.HubLBWrites.Load() - playerBefore)
	b.Logf("hub writes by verb and resource (the played hub LoadBalancer made %d of the services/status ones): %v",
		sys.HubLBWrites.Load()-playerBefore, byKind)
	cpu, _ := framework.ProcessCPU(sys.Manager.Cmd.Process.Pid)
	rss, _ := framework.ProcessPeakRSS(sys.Manager.Cmd.Process.Pid)
	b.ReportMetric(elapsed.Seconds(), "s-to-all-addressed")
	b.ReportMetric(float64(kubelbWrites)/float64(n), "hub-writes/svc")
	b.ReportMetric(cpu-cpuBefore, "manager-cpu-s")
	b.ReportMetric(float64(rss)/(1<<20), "manager-peak-rss-MiB")
	b.Logf("%d Services created in %s, all addressed after %s; %d hub writes by kubelb (%.2f per Service); manager %.1f CPU s, peak RSS %.0f MiB",
		n, created.Round(time.Millisecond), elapsed.Round(time.Millisecond), kubelbWrites, float64(kubelbWrites)/float64(n), cpu-cpuBefore, float64(rss)/(1<<20))
}
