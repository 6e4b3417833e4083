package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// ccmLease is the ccm's leader election lease in the tenant cluster (cmd/ccm leaderElectionID).
const ccmLease = "kubelb-ccm.kubelb.k8c.io"

// ccmBurst is how many LoadBalancer Services the burst of scenario 6 creates at once.
const ccmBurst = 80

// TestCCMKilledMidBurst is issue 13's scenario 6: a burst of LoadBalancer Services is created
// in a tenant and the ccm is SIGKILLed when about half of them are mirrored into the hub.
// While it is down, Services are deleted (mirrored ones, which the ccm's finalizer holds, and
// ones it never saw), changed (ports replaced and added) and turned into ClusterIP Services.
// The ccm is restarted with the same arguments. Everything converges: one LoadBalancer per
// live Service exposing its current ports, no orphaned or duplicate LoadBalancer, no orphaned
// hub Service, no Service left being deleted, and every Service shows an address.
func TestCCMKilledMidBurst(t *testing.T) {
	ctx := context.Background()
	pair := testenv.StartPair(t)
	sys := framework.StartSystem(t, pair.Hub, framework.Options{})
	a := sys.AddTenant("a", pair.Tenant, 2)
	// A manager that loses its lease on this loaded machine exits; its pod would be restarted.
	manager := framework.Supervise(t, sys.Manager, restartDelay)
	// The ccm is up and mirrors: one Service first.
	a.CreateService(framework.LBService{Name: "first", Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
	a.WaitAddress("first", 2*time.Minute)

	mirrored := func() map[string]bool {
		var lbs kubelbv1alpha1.LoadBalancerList
		if err := pair.Hub.Client.List(ctx, &lbs, client.InNamespace(a.Namespace)); err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, lb := range lbs.Items {
			out[lb.Name] = true
		}
		return out
	}

	// The burst: ccmBurst Services from 4 writers; the ccm is killed once half are mirrored.
	burstStart := time.Now()
	created := make(chan string, ccmBurst)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < ccmBurst; i += 4 {
				name := fmt.Sprintf("burst-%02d", i)
				svc := &corev1.Service{}
				svc.Name, svc.Namespace = name, "default"
				svc.Spec.Type = corev1.ServiceTypeLoadBalancer
				svc.Spec.Selector = map[string]string{"app": name}
				svc.Spec.Ports = []corev1.ServicePort{framework.TCPPort("http", 80), framework.TCPPort("metrics", 9090)}
				if err := pair.Tenant.Client.Create(ctx, svc); err != nil {
					t.Errorf("creating Service %s: %v", name, err)
					return
				}
				created <- name
			}
		}(w)
	}
	oldHolder := pair.Tenant.WaitLeaseHolder(t, "kube-system", ccmLease, time.Minute)
	var atKill int
	testsupport.Eventually(t, 2*time.Minute, "half of the burst mirrored", func() error {
		n := len(mirrored()) - 1 // without "first"
		if n < ccmBurst/2 {
			return fmt.Errorf("%d of %d mirrored", n, ccmBurst)
		}
		atKill = n
		return nil
	})
	a.CCM.Kill()
	killedAt := time.Now()
	wg.Wait()
	close(created)
	if t.Failed() {
		t.FailNow()
	}
	mirroredAtKill := mirrored()
	t.Logf("ccm SIGKILLed %s after the burst began, with %d (≥ %d when seen) of %d Services mirrored",
		killedAt.Sub(burstStart).Round(time.Millisecond), len(mirroredAtKill)-1, atKill, ccmBurst)

	// While the ccm is down: classify the burst by whether it was mirrored, then delete,
	// change and retype some of each.
	var in, out []*corev1.Service
	for i := 0; i < ccmBurst; i++ {
		svc := &corev1.Service{}
		if err := pair.Tenant.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: fmt.Sprintf("burst-%02d", i)}, svc); err != nil {
			t.Fatal(err)
		}
		if mirroredAtKill[string(svc.UID)] {
			in = append(in, svc)
		} else {
			out = append(out, svc)
		}
	}
	if len(out) < 12 {
		t.Fatalf("only %d Services unmirrored at the kill: the ccm mirrored the burst too fast for the scenario", len(out))
	}
	t.Logf("at the kill: %d mirrored, %d not", len(in), len(out))
	del := func(svcs []*corev1.Service) {
		for _, s := range svcs {
			if err := pair.Tenant.Client.Delete(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	change := func(svcs []*corev1.Service) {
		for _, s := range svcs {
			orig := s.DeepCopy()
			s.Spec.Ports[0].Port, s.Spec.Ports[0].Name = 8080, "web"
			s.Spec.Ports = append(s.Spec.Ports, framework.TCPPort("admin", 9443))
			if err := pair.Tenant.Client.Patch(ctx, s, client.MergeFrom(orig)); err != nil {
				t.Fatal(err)
			}
		}
	}
	retype := func(svcs []*corev1.Service) {
		for _, s := range svcs {
			orig := s.DeepCopy()
			s.Spec.Type = corev1.ServiceTypeClusterIP
			for i := range s.Spec.Ports {
				s.Spec.Ports[i].NodePort = 0
			}
			s.Spec.AllocateLoadBalancerNodePorts = nil
			s.Spec.ExternalTrafficPolicy = ""
			if err := pair.Tenant.Client.Update(ctx, s); err != nil {
				t.Fatalf("turning %s into a ClusterIP Service: %v (was %v)", s.Name, err, orig.Spec.Type)
			}
		}
	}
	del(in[:8])
	change(in[8:16])
	retype(in[16:20])
	del(out[:4])
	change(out[4:8])
	retype(out[8:10])
	// The ccm's finalizer holds mirrored Services it did not release: they stay, being deleted.
	held := &corev1.Service{}
	if err := pair.Tenant.Client.Get(ctx, client.ObjectKeyFromObject(in[1]), held); err != nil || held.DeletionTimestamp == nil {
		t.Fatalf("mirrored Service %s deleted while the ccm is down: want it held by the finalizer, got %v (err %v)", in[1].Name, held.DeletionTimestamp, err)
	}
	downFor := time.Since(killedAt)

	restartedAt := time.Now()
	a.RestartCCM()
	testsupport.Eventually(t, 2*time.Minute, "the restarted ccm to take the lease", func() error {
		if h := pair.Tenant.LeaseHolder(t, "kube-system", ccmLease); h == oldHolder || h == "" {
			return fmt.Errorf("lease held by %q", h)
		}
		return nil
	})
	leaseTaken := time.Since(restartedAt)
	testsupport.Eventually(t, 3*time.Minute, "the tenant's Services and the hub's LoadBalancers to agree", func() error {
		return a.CheckMirrors(ctx)
	})
	converged := time.Since(restartedAt)
	t.Logf("ccm down %s; after its restart it took the lease (a SIGKILL releases none) in %s and everything converged in %s",
		downFor.Round(time.Millisecond), leaseTaken.Round(time.Millisecond), converged.Round(time.Millisecond))
	svcs, err := a.LoadBalancerServices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("manager restarts (it exits when it loses its lease): %v", manager.Exits())
	t.Logf("in the end: %d LoadBalancer Services, each with one LoadBalancer and one hub Service, addressed", len(svcs))
	if want := 1 + ccmBurst - 12 - 6; len(svcs) != want {
		t.Errorf("%d LoadBalancer Services in the tenant, want %d", len(svcs), want)
	}
}
