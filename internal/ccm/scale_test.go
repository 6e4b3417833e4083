package ccm

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// TestScaleBurst measures the ccm under a burst of LoadBalancer Services (a measurement, not a
// timed assertion). Run it with KUBELB_CCM_SCALE=<number of Services>, e.g.
//
//	KUBELB_CCM_SCALE=1000 go test ./internal/ccm -run TestScaleBurst -v
//
// It reports the time until every Service has its mirror, the time for a status write on the
// hub to reach a Service while the burst is being mirrored, the time until every Service has
// an address once the hub (played by the test) writes status, and hub writes per Service.
func TestScaleBurst(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("KUBELB_CCM_SCALE"))
	if n <= 0 {
		t.Skip("set KUBELB_CCM_SCALE=<number of Services> to run")
	}
	e := newEnv(t)
	e.namespace(t, "burst")
	// envtest's Service range is a /24; give the tenant API server room for the burst.
	cidr := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "burst"},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/16"}}}
	objects.Create(t, e.Tenant.Client, cidr)
	// kube-controller-manager (not running here) marks it Ready; the test plays it.
	cidr.Status.Conditions = []metav1.Condition{{Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionTrue,
		Reason: "Played", LastTransitionTime: metav1.Now()}}
	if err := e.Tenant.Client.Status().Update(e.ctx, cidr); err != nil {
		t.Fatal(err)
	}
	e.startCCM(t, ccmOpts{})

	// A Service mirrored before the burst, to time its status during the burst.
	probe := lbService("burst", "probe")
	objects.Create(t, e.Tenant.Client, probe)
	probeLB := e.mirrorOf(t, probe, nil)

	writes := hubWrites()
	start := time.Now()
	var created atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				if err := e.Tenant.Client.Create(e.ctx, lbService("burst", fmt.Sprintf("svc-%04d", i))); err != nil {
					errs <- err
					return
				}
				created.Add(1)
			}
		}()
	}
	// Status of the probe while the burst is being created and mirrored.
	testsupport.Eventually(t, wait, "a tenth of the burst created", func() error {
		if c := created.Load(); c < int64(n)/10 {
			return fmt.Errorf("%d created", c)
		}
		return nil
	})
	statusAt := time.Now()
	e.setLBStatus(t, probeLB, "127.0.1.1")
	e.waitServiceIngress(t, probe, "127.0.1.1")
	probeLatency := time.Since(statusAt)
	mirroredThen := countLBs(t, e)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("creating Services: %v", err)
	}
	createdIn := time.Since(start)

	testsupport.Eventually(t, 5*time.Minute, fmt.Sprintf("%d mirrors", n+1), func() error {
		if got := countLBs(t, e); got < n+1 {
			return fmt.Errorf("%d so far", got)
		}
		return nil
	})
	mirroredIn := time.Since(start)

	// The hub (played by the test) addresses every LoadBalancer at once.
	lbs := &v1alpha1.LoadBalancerList{}
	if err := e.Hub.Client.List(e.ctx, lbs, client.InNamespace(tenantNS)); err != nil {
		t.Fatal(err)
	}
	addrAt := time.Now()
	var swg sync.WaitGroup
	work := make(chan *v1alpha1.LoadBalancer)
	for range 16 {
		swg.Add(1)
		go func() {
			defer swg.Done()
			for lb := range work {
				lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "127.0.2.1"}}
				if err := e.Hub.Client.Status().Update(e.ctx, lb); err != nil {
					t.Errorf("writing status: %v", err)
				}
			}
		}()
	}
	for i := range lbs.Items {
		work <- &lbs.Items[i]
	}
	close(work)
	swg.Wait()
	hubWroteIn := time.Since(addrAt)
	testsupport.Eventually(t, 5*time.Minute, "every Service addressed", func() error {
		list := &corev1.ServiceList{}
		if err := e.Tenant.Client.List(e.ctx, list, client.InNamespace("burst")); err != nil {
			return err
		}
		missing := 0
		for _, s := range list.Items {
			if len(s.Status.LoadBalancer.Ingress) == 0 || s.Status.LoadBalancer.Ingress[0].IP != "127.0.2.1" {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d without the address", missing)
		}
		return nil
	})
	addressedIn := time.Since(addrAt)

	t.Logf("%d Services created by the test in %s", n, createdIn.Round(time.Millisecond))
	t.Logf("all mirrored %s after the first create", mirroredIn.Round(time.Millisecond))
	t.Logf("status of an early Service during the burst: %s (%d of %d mirrors existed then)", probeLatency.Round(time.Millisecond), mirroredThen-1, n)
	t.Logf("all %d Services addressed %s after the hub started writing status (its writes took %s)",
		n+1, addressedIn.Round(time.Millisecond), hubWroteIn.Round(time.Millisecond))
	t.Logf("hub writes per Service: %.2f (%s)", (hubWrites()-writes)/float64(n), hubWriteBreakdown())
}

func countLBs(t *testing.T, e *env) int {
	t.Helper()
	list := &v1alpha1.LoadBalancerList{}
	if err := e.Hub.Client.List(e.ctx, list, client.InNamespace(tenantNS)); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// hubWriteBreakdown lists the ccm's hub writes by operation and result.
func hubWriteBreakdown() string {
	var out []string
	for _, op := range []string{opCreate, opUpdate, opPatch, opDelete} {
		for _, res := range []string{metrics.ResultSuccess, metrics.ResultError} {
			if v := testutil.ToFloat64(metrics.CCMOperations.WithLabelValues(op, res)); v > 0 {
				out = append(out, fmt.Sprintf("%s/%s=%v", op, res, v))
			}
		}
	}
	return strings.Join(out, " ")
}
