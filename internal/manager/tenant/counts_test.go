package tenant

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

func TestCountsDue(t *testing.T) {
	now := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	a, b := objectCounts{loadBalancers: 1}, objectCounts{loadBalancers: 2, routes: 1}
	for _, c := range []struct {
		name       string
		have, want objectCounts
		last       time.Time
		write      bool
		wait       time.Duration
	}{
		{"unchanged", a, a, time.Time{}, false, 0},
		{"first write", a, b, time.Time{}, true, 0},
		{"written long ago", a, b, now.Add(-time.Minute), true, 0},
		{"written 4 s ago", a, b, now.Add(-4 * time.Second), false, 6 * time.Second},
		{"unchanged, written just now", b, b, now, false, 0},
	} {
		write, wait := countsDue(c.have, c.want, c.last, now, 10*time.Second)
		if write != c.write || wait != c.wait {
			t.Errorf("%s: write %v wait %s, want %v %s", c.name, write, wait, c.write, c.wait)
		}
	}
}

// TestTenantCounts: on a real API server, the Tenant's status counts its LoadBalancers and
// Routes; a burst of 40 LoadBalancers costs a Tenant status write per counts interval, not
// one per object, and the deletion of some is counted too.
func TestTenantCounts(t *testing.T) {
	const interval = 2 * time.Second
	s := startHubWith(t, func(o *Options, hub *testenv.Cluster) {
		o.HubAPIServerURL, o.countsInterval = hub.Config.Host, interval
	})
	c := s.hub.Client
	create(t, c, tenantObj("count"))
	tn := waitReady(t, c, "count")
	ns := "tenant-count"

	wc, err := client.NewWithWatch(s.hub.Config, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(bg, &kubelbv1alpha1.TenantList{}, client.MatchingFields{"metadata.name": "count"},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: tn.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	writes := make(chan string, 1000)
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Modified {
				continue
			}
			if got, isTenant := ev.Object.(*kubelbv1alpha1.Tenant); isTenant {
				writes <- fmt.Sprintf("%d/%d", got.Status.LoadBalancers, got.Status.Routes)
			}
		}
		close(writes)
	}()

	start := time.Now()
	for i := range 40 {
		create(t, c, loadBalancer(ns, fmt.Sprintf("lb-%02d", i)))
	}
	create(t, c, &kubelbv1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: "r1", Namespace: ns}},
		&kubelbv1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: "r2", Namespace: ns}})
	burst := time.Since(start)
	waitCounts(t, c, 40, 2)
	took := time.Since(start)
	for i := range 10 {
		if err := c.Delete(bg, loadBalancer(ns, fmt.Sprintf("lb-%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	waitCounts(t, c, 30, 2)
	total := time.Since(start)
	w.Stop()
	var seen []string
	for s := range writes {
		seen = append(seen, s)
	}
	t.Logf("42 objects created in %s, counted after %s; 10 deleted, counted after %s; Tenant writes (loadBalancers/routes): %v",
		burst.Round(time.Millisecond), took.Round(time.Millisecond), total.Round(time.Millisecond), seen)
	// One write per interval at most, and one more for the first.
	if max := int(total/interval) + 2; len(seen) > max {
		t.Errorf("%d Tenant writes in %s, want at most %d (one per %s)", len(seen), total.Round(time.Millisecond), max, interval)
	}
}

// waitCounts waits for Tenant "count" to show the counts.
func waitCounts(t *testing.T, c client.Client, lbs, routes int32) {
	t.Helper()
	testsupport.Eventually(t, 30*time.Second, fmt.Sprintf("Tenant count to show %d LoadBalancers and %d Routes", lbs, routes), func() error {
		tn := tenantObj("count")
		if err := c.Get(bg, client.ObjectKeyFromObject(tn), tn); err != nil {
			return err
		}
		if tn.Status.LoadBalancers != lbs || tn.Status.Routes != routes {
			return fmt.Errorf("%d LoadBalancers, %d Routes", tn.Status.LoadBalancers, tn.Status.Routes)
		}
		return nil
	})
}
