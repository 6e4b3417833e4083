package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/testsupport"
	xdsbootstrap "kubelb.dev/kubelb/internal/xds/bootstrap"
)

// burst creates N Services at once across the tenants (round robin) from Clients
// concurrent clients, as a GitOps sync would, and waits until each shows an address.
func (h *harness) burst() *Workload {
	t, n, tenants := h.t, h.cfg.Services, len(h.tenants)
	ctx := context.Background()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = key(h.tenants[i%tenants], svcName(i/tenants))
	}
	if h.cfg.PprofDir != "" {
		stop := framework.CollectProfiles(t, h.cfg.PprofDir, map[string]string{"manager": h.managerP, "ccm": h.ccmP}, 20*time.Second)
		defer stop()
	}
	before := h.mark()
	if err := h.parallel(n, func(i int) error {
		return h.create(ctx, h.tenants[i%tenants], svcName(i/tenants), i/tenants)
	}); err != nil {
		t.Fatalf("burst: %v", err)
	}
	issued := time.Since(before.at)
	h.waitAddressed(keys, fmt.Sprintf("all %d Services of the burst addressed", n))
	var envoySync float64
	if h.cfg.Envoy {
		envoySync = h.startEnvoy()
	}
	// What the burst causes after the last address (status conditions, Events) counts too.
	settled := h.settle()
	w := h.workload(before, h.settledMark(), n)
	lat, last := h.tl.latencies(keys)
	w.IssueSeconds, w.TimeToAddress, w.EnvoySyncSeconds = issued.Seconds(), dist(lat), envoySync
	w.ConvergenceSeconds = last.Sub(before.at).Seconds()
	w.ConvergenceOverIssue = w.ConvergenceSeconds / w.IssueSeconds
	w.SettledSeconds = settled.Sub(before.at).Seconds()
	t.Logf("burst of %d Services across %d tenants: issued in %s, all addressed after %.1f s (p50 %.1f s, p99 %.1f s), settled after %.1f s; %.2f hub writes per Service by kubelb (Events by reason %v); manager %.1f CPU s, peak RSS %.0f MiB",
		n, tenants, issued.Round(time.Millisecond), w.ConvergenceSeconds, w.TimeToAddress.P50, w.TimeToAddress.P99, w.SettledSeconds,
		w.HubWrites.PerService, w.EventsByReason, w.Manager.CPUSeconds, w.Manager.PeakRSSMiB)
	return w
}

// startEnvoy starts a real Envoy for tenant 0 from the bootstrap the manager generated and
// returns the seconds until it holds a listener per Service port of the tenant.
func (h *harness) startEnvoy() float64 {
	t, tn := h.t, h.tenants[0]
	ctx := context.Background()
	want := h.servicePorts(tn)
	// Every worker opens a socket per listener: with one worker per core, 10 000 listeners
	// on 2 cores need more descriptors than this machine's limit (20 000), and Envoy 1.40
	// crashed there ("Too many open files", then a segmentation fault). Past half the limit
	// Envoy runs one worker; the result says so (setup.envoy_workers).
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && uint64(want*runtime.NumCPU()) > lim.Max/2 {
		h.envoyWorkers = 1
	}
	var bootstrap []byte
	testsupport.Eventually(t, time.Minute, "the Envoy bootstrap of "+tn.namespace, func() error {
		var err error
		bootstrap, err = framework.EnvoyBootstrap(ctx, h.sys.Hub.Client, tn.namespace)
		return err
	})
	start := time.Now()
	h.envoy = framework.StartEnvoyWith(t, "envoy-"+tn.name, framework.MountXDSSecret(t, h.sys.Hub.Client, tn.namespace, bootstrap), h.envoyWorkers)
	testsupport.Eventually(t, h.cfg.Timeout, fmt.Sprintf("Envoy of %s holding %d listeners", tn.name, want), func() error {
		if got := h.envoyListeners(); got < want {
			return fmt.Errorf("%d listeners", got)
		}
		return nil
	})
	return time.Since(start).Seconds()
}

// servicePorts counts the ports of a real tenant's LoadBalancer Services.
func (h *harness) servicePorts(tn *tenant) int {
	var list corev1.ServiceList
	if err := tn.cluster.Client.List(context.Background(), &list, client.InNamespace("default")); err != nil {
		h.t.Fatal(err)
	}
	n := 0
	for _, s := range list.Items {
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer && s.DeletionTimestamp == nil {
			n += len(s.Spec.Ports)
		}
	}
	return n
}

// envoyListeners counts the Envoy's active listeners other than its static readiness and
// stats ones.
func (h *harness) envoyListeners() int {
	ls, err := h.envoy.Listeners()
	if err != nil {
		return 0
	}
	n := 0
	for _, l := range ls {
		if l.Name != xdsbootstrap.ReadyListenerName && l.Name != xdsbootstrap.StatsListenerName {
			n++
		}
	}
	return n
}

// quiet measures a settled system: nothing but leader-election leases should be written.
func (h *harness) quiet() *Workload {
	before := h.mark()
	time.Sleep(h.cfg.Quiet)
	w := h.workload(before, h.settledMark(), 0)
	h.t.Logf("quiet %s: %d hub writes %v (Events by reason %v), manager %.2f CPU s", h.cfg.Quiet, w.HubWrites.Total, w.HubWrites.ByVerbResource, w.EventsByReason, w.Manager.CPUSeconds)
	return w
}

// change adds a port to one Service of tenant 0 (the largest) and measures until the hub
// LoadBalancer changed, its new port is allocated and, with Envoy, Envoy added the listener.
func (h *harness) change() *Workload {
	t, tn := h.t, h.tenants[0]
	ctx := context.Background()
	name := svcName(0)
	svc := &corev1.Service{}
	if err := tn.cluster.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, svc); err != nil {
		t.Fatalf("change: %v", err)
	}
	listeners := 0
	if h.envoy != nil {
		listeners = h.envoyListeners()
	}
	before := h.mark()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := tn.cluster.Client.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			return err
		}
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "extra", Port: 81, Protocol: corev1.ProtocolTCP})
		h.loadGen.Add(1)
		return tn.cluster.Client.Update(ctx, svc)
	}); err != nil {
		t.Fatalf("change: %v", err)
	}
	var hubAt time.Time
	testsupport.Eventually(t, h.cfg.Timeout, "the hub LoadBalancer of "+name+" to change", func() error {
		at, ok := h.obs.changedSince(tn.namespace, string(svc.UID), before.at)
		if !ok {
			return fmt.Errorf("not yet")
		}
		hubAt = at
		return nil
	})
	var envoyAt time.Time
	if h.envoy != nil {
		testsupport.Eventually(t, h.cfg.Timeout, "Envoy to add the listener of the new port", func() error {
			if got := h.envoyListeners(); got <= listeners {
				return fmt.Errorf("%d listeners", got)
			}
			envoyAt = time.Now()
			return nil
		})
	}
	testsupport.Eventually(t, h.cfg.Timeout, "a listener port allocated for the new port", func() error {
		lb := &kubelbv1alpha1.LoadBalancer{}
		if err := h.sys.Hub.Client.Get(ctx, client.ObjectKey{Namespace: tn.namespace, Name: string(svc.UID)}, lb); err != nil {
			return err
		}
		if len(lb.Status.Service.Ports) < 2 {
			return fmt.Errorf("%d ports allocated", len(lb.Status.Service.Ports))
		}
		return nil
	})
	// Let the status writes and pushes the change causes land before reading the counters.
	settled := h.settle()
	w := h.workload(before, h.settledMark(), 1)
	w.SettledSeconds = settled.Sub(before.at).Seconds()
	w.ChangeToHubSeconds = hubAt.Sub(before.at).Seconds()
	if !envoyAt.IsZero() {
		w.ChangeToEnvoySeconds = envoyAt.Sub(before.at).Seconds()
		w.HubToEnvoySeconds = envoyAt.Sub(hubAt).Seconds()
	}
	t.Logf("one change in tenant %s: hub after %.3f s, Envoy after %.3f s; %d tenants rebuilt, %d hub writes",
		tn.name, w.ChangeToHubSeconds, w.ChangeToEnvoySeconds, w.Envoycp.TenantsBuilt, w.HubWrites.Total)
	return w
}

// settleStill is how long the hub and the manager must be still for the system to count as
// settled; settleLimit bounds the wait (a busy machine may never be still).
const (
	settleStill = 5 * time.Second
	settleLimit = 2 * time.Minute
)

// settle waits until, for settleStill, the manager has built no snapshot and the hub has
// served no write but leader-election leases, and returns when that stillness began (when
// the limit passed first: the last write seen).
func (h *harness) settle() time.Time {
	prev := h.mark()
	stillSince := prev.at
	for deadline := time.Now().Add(settleLimit); time.Now().Before(deadline); {
		time.Sleep(time.Second)
		cur := h.mark()
		_, writes := framework.WritesSince(prev.hub, cur.hub)
		leases := cur.hub["PUT leases"] - prev.hub["PUT leases"]
		if len(deltas(prev.builds, cur.builds)) > 0 || writes != leases {
			stillSince = cur.at
		} else if cur.at.Sub(stillSince) >= settleStill {
			return stillSince
		}
		prev = cur
	}
	h.t.Logf("not still for %s within %s", settleStill, settleLimit)
	return stillSince
}

// churn creates a Service in tenant 0 every 1/rate seconds and, once churnPool of them live,
// deletes the oldest, for the configured duration; then waits until the live ones are
// addressed.
func (h *harness) churn() *Workload {
	t, tn := h.t, h.tenants[0]
	ctx := context.Background()
	interval := time.Duration(float64(time.Second) / h.cfg.ChurnPerSecond)
	var live, keys []string
	ops := 0
	before := h.mark()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := 0; time.Since(before.at) < h.cfg.ChurnDuration; i++ {
		name := fmt.Sprintf("churn-%05d", i)
		if err := h.create(ctx, tn, name, 0); err != nil {
			t.Fatalf("churn: %v", err)
		}
		live, keys = append(live, name), append(keys, key(tn, name))
		ops++
		if len(live) > churnPool {
			h.loadGen.Add(1)
			if err := tn.cluster.Client.Delete(ctx, tenantService(live[0])); err != nil && !apierrors.IsNotFound(err) {
				t.Fatalf("churn: %v", err)
			}
			live = live[1:]
			ops++
		}
		<-tick.C
	}
	issued := time.Since(before.at)
	// Only the live ones must end addressed; a deleted one may never have been.
	h.waitAddressed(keys[len(keys)-len(live):], "the churned Services that live to be addressed")
	w := h.workload(before, h.settledMark(), ops)
	lat, last := h.tl.latencies(keys)
	w.IssueSeconds, w.TimeToAddress = issued.Seconds(), dist(lat)
	w.ConvergenceSeconds = last.Sub(before.at).Seconds()
	t.Logf("churn at %.1f/s for %s: %d operations, time to address p50 %.2f s p99 %.2f s; %.2f hub writes per operation; manager %.2f CPU s",
		h.cfg.ChurnPerSecond, h.cfg.ChurnDuration, ops, w.TimeToAddress.P50, w.TimeToAddress.P99, w.HubWrites.PerService, w.Manager.CPUSeconds)
	return w
}

// deleteAll deletes every Service of the run (played tenants: their LoadBalancers, as their
// ccm would) and waits until the hub holds nothing of them and the tenant Services are gone.
func (h *harness) deleteAll() *Workload {
	t := h.t
	ctx := context.Background()
	type victim struct {
		tn  *tenant
		obj client.Object
	}
	var all []victim
	for _, tn := range h.tenants {
		if tn.real != nil {
			var list corev1.ServiceList
			if err := tn.cluster.Client.List(ctx, &list, client.InNamespace("default")); err != nil {
				t.Fatal(err)
			}
			for i := range list.Items {
				if list.Items[i].Spec.Type == corev1.ServiceTypeLoadBalancer {
					all = append(all, victim{tn, &list.Items[i]})
				}
			}
			continue
		}
		var list kubelbv1alpha1.LoadBalancerList
		if err := h.sys.Hub.Client.List(ctx, &list, client.InNamespace(tn.namespace)); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			all = append(all, victim{tn, &list.Items[i]})
		}
	}
	if h.cfg.PprofDir != "" {
		dir := filepath.Join(h.cfg.PprofDir, "delete")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		stop := framework.CollectProfiles(t, dir, map[string]string{"manager": h.managerP, "ccm": h.ccmP}, 10*time.Second)
		defer stop()
	}
	before := h.mark()
	if err := h.parallel(len(all), func(i int) error {
		v := all[i]
		if v.tn.real != nil {
			h.loadGen.Add(1)
			return client.IgnoreNotFound(v.tn.cluster.Client.Delete(ctx, v.obj))
		}
		h.played.Add(1)
		return client.IgnoreNotFound(h.sys.Hub.Client.Delete(ctx, v.obj))
	}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	issued := time.Since(before.at)
	var done time.Time
	gone := map[string]float64{}
	testsupport.Eventually(t, h.cfg.Timeout, "every LoadBalancer, hub Service and tenant Service gone", func() error {
		lbs, svcs, tsvcs := h.obs.remaining()
		for kind, n := range map[string]int{"LoadBalancers": lbs, "hub Services": svcs, "tenant Services": tsvcs} {
			if _, seen := gone[kind]; !seen && n == 0 {
				gone[kind] = time.Since(before.at).Seconds()
			}
		}
		if lbs+svcs+tsvcs > 0 {
			return fmt.Errorf("%d LoadBalancers, %d hub Services, %d tenant Services left", lbs, svcs, tsvcs)
		}
		done = time.Now()
		return nil
	})
	w := h.workload(before, h.settledMark(), len(all))
	w.IssueSeconds = issued.Seconds()
	w.ConvergenceSeconds = done.Sub(before.at).Seconds()
	w.ConvergenceOverIssue = w.ConvergenceSeconds / w.IssueSeconds
	w.GoneSeconds = gone
	t.Logf("delete of %d Services: issued in %s, converged after %.1f s (all gone: %v); %.2f hub writes per Service by kubelb; manager %.1f CPU s; error log lines: manager %d, ccm %d",
		len(all), issued.Round(time.Millisecond), w.ConvergenceSeconds, gone, w.HubWrites.PerService, w.Manager.CPUSeconds,
		w.Manager.ErrorLogLines, w.CCM.ErrorLogLines)
	return w
}
