package faults

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// tenantCut is how long the tenant API server is unreachable in scenario 4.
const tenantCut = 30 * time.Second

// TestTenantAPIServerUnreachable is issue 13's scenario 4. The tenant API server becomes a
// black hole (framework.APIProxy) for the ccm for tenantCut, while Services are created,
// changed (a port added) and deleted in the tenant (by a client that bypasses the cut). The
// hub is untouched all along: its LoadBalancers and Services, compared object by object
// (name, ports, resourceVersion), are the same at the end of the cut as before it, and a
// stable Service's traffic sees zero failed requests. The ccm cannot renew its lease in the
// tenant cluster, exits cleanly and is restarted by the played kubelet; once the tenant API
// server is back it catches up: the tenant Services and the hub objects match as sets, every
// Service addressed.
func TestTenantAPIServerUnreachable(t *testing.T) {
	pair := testenv.StartPair(t)
	tenantPath := framework.StartAPIProxy(t, pair.Tenant)
	sys := framework.StartSystem(t, pair.Hub, framework.Options{})
	a := sys.AddTenantWith("a", pair.Tenant, framework.TenantOptions{Nodes: 2, Kubeconfig: tenantPath.Kubeconfig(t, pair.Tenant.Kubeconfig)})
	ccm := framework.Supervise(t, a.CCM, restartDelay)
	defer ccm.Stop()

	web := a.CreateService(framework.LBService{Name: "web", Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
	for _, name := range []string{"keep", "change", "gone"} {
		a.CreateService(framework.LBService{Name: name, Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
	}
	a.StartBackends(web)
	envoy := a.StartEnvoy(framework.EnvoyBootstrap)
	target := fmt.Sprintf("127.0.0.1:%d", a.ListenerPorts(web)["http"])
	framework.WaitServes(t, target, "a-node-0", "a-node-1")
	framework.WaitEnvoyConnected(t, envoy, 1)
	waitConverged(t, sys, a)
	removedBefore := envoy.Counters(t, envoyRemovals...)
	before := a.Footprint(web)
	hubBefore := hubObjects(t, sys, a)

	traffic := framework.StartTraffic(t, target, cutRequestEvery, 20*60*3) // 3 minutes' worth
	traffic.Phase("tenant cut")
	cutAt := time.Now()
	tenantPath.Cut()
	a.CreateService(framework.LBService{Name: "new", Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
	changeService(t, a, "change", func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, framework.TCPPort("extra", 81))
	})
	deleteService(t, a, "gone")
	testsupport.Eventually(t, tenantCut, "the ccm to exit on its lost lease", func() error {
		if len(ccm.Exits()) == 0 {
			return fmt.Errorf("still running")
		}
		return nil
	})
	if exit := ccm.Exits()[0]; !strings.Contains(exit.Tail, "leader election lost") {
		t.Errorf("the ccm did not say it lost the leader election; its last lines:\n%s", exit.Tail)
	}
	time.Sleep(time.Until(cutAt.Add(tenantCut))) // the cut's length, not an assertion

	// Nothing on the hub moved: no write of the ccm took anything away, and the manager had
	// nothing to do.
	hubDuring := hubObjects(t, sys, a)
	stats := tenantPath.Restore()
	restoredAt := time.Now()
	traffic.Phase("after tenant cut")
	t.Logf("%s", stats)
	if !maps.Equal(hubBefore, hubDuring) {
		t.Errorf("the hub objects changed while the tenant API server was away:\nbefore %v\nafter  %v", hubBefore, hubDuring)
	}
	exitsInCut := ccm.Exits()
	for _, e := range exitsInCut {
		t.Logf("%s exited %s into the cut, code %d: %s", e.Process, e.At.Sub(cutAt).Round(100*time.Millisecond), e.Code, lastLines(e.Tail, 1))
		checkCleanExit(t, e)
	}

	waitConverged(t, sys, a)
	t.Logf("after the cut: converged after %s (ccm restarts %d)", time.Since(restoredAt).Round(100*time.Millisecond), ccm.Restarts())
	res := traffic.Stop()
	t.Logf("requests: %s", res)
	for _, e := range ccm.Exits()[len(exitsInCut):] {
		t.Logf("after the cut: %s exited, code %d: %s", e.Process, e.Code, lastLines(e.Tail, 1))
		checkCleanExit(t, e)
	}
	if res.OK["tenant cut"] == 0 {
		t.Errorf("no request was answered during the cut")
	}
	if n := res.FailedTotal(); n > 0 {
		t.Errorf("%d requests failed: %s", n, strings.Join(res.Failures, "; "))
	}
	// Envoy removed the deleted Service's listener and cluster, and nothing else.
	testsupport.Eventually(t, time.Minute, "Envoy to remove the deleted Service's listener and cluster", func() error {
		now := envoy.Counters(t, envoyRemovals...)
		for _, name := range envoyRemovals {
			if d := now[name] - removedBefore[name]; d != 1 {
				return fmt.Errorf("%s moved by %d, want 1", name, d)
			}
		}
		return nil
	})
	// The stable Service kept its listener port, hub Service ports and address.
	a.ExpectFootprint(t, before)
	framework.WaitServes(t, target, "a-node-0", "a-node-1")
}

// hubObjects returns the tenant's hub LoadBalancers and Services, by kind and name, with their
// ports; a LoadBalancer's generation and Ready and Programmed conditions (the hub's own
// health checks may change its BackendsReachable meanwhile: that is not the ccm's write),
// a Service's resourceVersion.
func hubObjects(t *testing.T, sys *framework.System, tn *framework.Tenant) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	var lbs kubelbv1alpha1.LoadBalancerList
	if err := sys.Hub.Client.List(ctx, &lbs, client.InNamespace(tn.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, lb := range lbs.Items {
		out["LoadBalancer/"+lb.Name] = lbPorts(lb.Spec.Ports, func(p kubelbv1alpha1.LoadBalancerPort) string { return fmt.Sprintf("%d/%s", p.Port, p.Protocol) }) +
			fmt.Sprintf(" gen %d Ready=%s Programmed=%s", lb.Generation, conditionStatus(lb.Status.Conditions, "Ready"), conditionStatus(lb.Status.Conditions, "Programmed"))
	}
	var svcs corev1.ServiceList
	if err := sys.Hub.Client.List(ctx, &svcs, client.InNamespace(tn.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs.Items {
		out["Service/"+s.Name] = lbPorts(s.Spec.Ports, func(p corev1.ServicePort) string {
			return fmt.Sprintf("%d→%s/%s", p.Port, p.TargetPort.String(), p.Protocol)
		}) + " rv " + s.ResourceVersion
	}
	return out
}

// conditionStatus is the status of the condition of type typ ("" when there is none).
func conditionStatus(conds []metav1.Condition, typ string) string {
	if c := meta.FindStatusCondition(conds, typ); c != nil {
		return string(c.Status)
	}
	return ""
}
