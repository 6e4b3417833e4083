// Package e2e runs kubelb end to end: real hub and tenant API servers, the real kubelb and
// ccm binaries, a real Envoy per tenant started from the bootstrap the manager generated, and
// real TCP/UDP traffic to backends on the tenant nodes' addresses and NodePorts.
package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

const addressTimeout = 2 * time.Minute

// roundTrips sends n requests through Envoy (each on a new connection) and returns how many
// each backend answered; it fails on any error after the first success.
func roundTrips(t *testing.T, target string, n int) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for i := 0; i < n; i++ {
		reply, err := testsupport.TCPRoundTrip(target, fmt.Sprintf("req-%d", i))
		if err != nil {
			t.Fatalf("request %d to %s: %v", i, target, err)
		}
		seen[reply.Node]++
	}
	return seen
}

func TestL4EndToEnd(t *testing.T) {
	pair := testenv.StartPair(t)
	tenantB := testenv.Start(t, "tenant-b", testenv.Options{GatewayAPIChannel: "standard", WithoutKubelbCRDs: true})
	sys := framework.StartSystem(t, pair.Hub, framework.Options{})
	a := sys.AddTenant("a", pair.Tenant, 2)
	ctx := context.Background()

	created := time.Now()
	web := a.CreateService(framework.LBService{Name: "web", Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
	ip := a.WaitAddress("web", addressTimeout)
	t.Logf("tenant Service web addressed %s %s after its creation", ip, time.Since(created).Round(time.Millisecond))
	a.StartBackends(web)
	envoy := a.StartEnvoy(framework.EnvoyBootstrap)
	webTarget := fmt.Sprintf("127.0.0.1:%d", a.ListenerPorts(web)["http"])
	var b *framework.Tenant // a second tenant, whose ccm filters on loadBalancerClass kubelb
	var webB *corev1.Service

	t.Run("TCP Service gets the hub address and traffic reaches both nodes", func(t *testing.T) {
		if !strings.HasPrefix(ip, "127.0.1.") {
			t.Fatalf("address %q is not the hub Service's", ip)
		}
		framework.WaitServes(t, webTarget, "a-node-0", "a-node-1")
	})

	t.Run("UDP datagrams are echoed through Envoy", func(t *testing.T) {
		dns := a.CreateService(framework.LBService{Name: "dns", Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}})
		a.StartBackends(dns)
		a.WaitAddress("dns", addressTimeout)
		target := fmt.Sprintf("127.0.0.1:%d", a.ListenerPorts(dns)["dns"])
		testsupport.Eventually(t, time.Minute, "a UDP echo through Envoy", func() error {
			_, err := testsupport.UDPRoundTrip(target, "hello-udp")
			return err
		})
	})

	t.Run("multi-port Service and a second tenant with the same ports", func(t *testing.T) {
		multi := a.CreateService(framework.LBService{Name: "multi", Ports: []corev1.ServicePort{framework.TCPPort("http", 80), framework.TCPPort("https", 443)}})
		a.StartBackends(multi)
		a.WaitAddress("multi", addressTimeout)
		ports := a.ListenerPorts(multi)
		if ports["http"] == ports["https"] {
			t.Fatalf("both ports share listener %d", ports["http"])
		}
		for _, name := range []string{"http", "https"} {
			framework.WaitServes(t, fmt.Sprintf("127.0.0.1:%d", ports[name]), "a-node-0", "a-node-1")
		}

		b = sys.AddTenant("b", tenantB, 1, "--use-loadbalancer-class")
		webB = b.CreateService(framework.LBService{Name: "web", Class: ptr.To(kubelbv1alpha1.DefaultClass), Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
		b.StartBackends(webB)
		b.StartEnvoy(framework.EnvoyBootstrap)
		b.WaitAddress("web", addressTimeout)
		targetB := fmt.Sprintf("127.0.0.1:%d", b.ListenerPorts(webB)["http"])
		framework.WaitServes(t, targetB, "b-node-0")
		framework.WaitServes(t, webTarget, "a-node-0", "a-node-1") // tenant a is unaffected
	})

	t.Run("a NotReady node stops receiving traffic and comes back", func(t *testing.T) {
		framework.SetNodeReady(t, pair.Tenant.Client, "a-node-1", false)
		framework.WaitServes(t, webTarget, "a-node-0")
		framework.SetNodeReady(t, pair.Tenant.Client, "a-node-1", true)
		framework.WaitServes(t, webTarget, "a-node-0", "a-node-1")
	})

	t.Run("with no Ready node the app team is told why on its Service, and told again when it recovers", func(t *testing.T) {
		// The hub LoadBalancer is not Programmed (no usable endpoint), and the ccm carries the
		// verdict to the tenant Service as an Event the app team sees with kubectl describe.
		for _, n := range []string{"a-node-0", "a-node-1"} {
			framework.SetNodeReady(t, pair.Tenant.Client, n, false)
		}
		a.WaitServiceEvent(t, "web", corev1.EventTypeWarning, "NoEndpoints")
		for _, n := range []string{"a-node-0", "a-node-1"} {
			framework.SetNodeReady(t, pair.Tenant.Client, n, true)
		}
		a.WaitServiceEvent(t, "web", corev1.EventTypeNormal, "Programmed")
		framework.WaitServes(t, webTarget, "a-node-0", "a-node-1")
	})

	t.Run("manager restart keeps ports and Envoy serves throughout", func(t *testing.T) {
		before := a.ListenerPorts(web)
		removedBefore := envoy.Stat(t, "listener_manager.listener_removed")
		var failures, successes atomic.Int64
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < 10000; i++ { // bounded: stops when told, or after 10000 requests
				select {
				case <-stop:
					return
				default:
				}
				if _, err := testsupport.TCPRoundTrip(webTarget, "during-restart"); err != nil {
					failures.Add(1)
				} else {
					successes.Add(1)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		sys.StopManager()
		sys.StartManager()
		// A change after the restart must reach Envoy over the new xDS connection.
		late := a.CreateService(framework.LBService{Name: "late", Ports: []corev1.ServicePort{framework.TCPPort("http", 8080)}})
		a.StartBackends(late)
		a.WaitAddress("late", addressTimeout)
		framework.WaitServes(t, fmt.Sprintf("127.0.0.1:%d", a.ListenerPorts(late)["http"]), "a-node-0", "a-node-1")
		close(stop)
		<-done
		if failures.Load() > 0 {
			t.Errorf("%d of %d requests failed while the manager restarted", failures.Load(), failures.Load()+successes.Load())
		}
		if after := a.ListenerPorts(web); after["http"] != before["http"] {
			t.Errorf("listener port changed across the restart: %d → %d", before["http"], after["http"])
		}
		if removed := envoy.Stat(t, "listener_manager.listener_removed"); removed != removedBefore {
			t.Errorf("Envoy removed %d listeners across the restart", removed-removedBefore)
		}
	})

	t.Run("deleting the Service removes everything and the port is reused", func(t *testing.T) {
		gone := a.CreateService(framework.LBService{Name: "gone", Ports: []corev1.ServicePort{framework.TCPPort("http", 9090)}})
		a.WaitAddress("gone", addressTimeout)
		port := a.ListenerPorts(gone)["http"]
		if err := pair.Tenant.Client.Delete(ctx, gone); err != nil {
			t.Fatal(err)
		}
		testsupport.Eventually(t, time.Minute, "the Service, its LoadBalancer and hub Service to be gone", func() error {
			if err := pair.Tenant.Client.Get(ctx, client.ObjectKeyFromObject(gone), &corev1.Service{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("tenant Service still there (finalizer?): %v", err)
			}
			if err := pair.Hub.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: string(gone.UID)}, &kubelbv1alpha1.LoadBalancer{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("LoadBalancer still there: %v", err)
			}
			var svcs corev1.ServiceList
			if err := pair.Hub.Client.List(ctx, &svcs, client.MatchingLabels{kubelbv1alpha1.LabelLoadBalancerName: string(gone.UID)}); err != nil || len(svcs.Items) > 0 {
				return fmt.Errorf("hub Service still there: %v", err)
			}
			listeners, err := envoy.Listeners()
			if err != nil {
				return err
			}
			for _, l := range listeners {
				if strings.HasSuffix(l.Address, fmt.Sprintf(":%d", port)) {
					return fmt.Errorf("Envoy still listens on %d: %s", port, l.Name)
				}
			}
			return nil
		})
		next := a.CreateService(framework.LBService{Name: "next", Ports: []corev1.ServicePort{framework.TCPPort("http", 9091)}})
		if got := a.ListenerPorts(next)["http"]; got != port {
			t.Errorf("next Service got port %d, want the freed %d", got, port)
		}
	})

	t.Run("a quiet system writes nothing but leases", func(t *testing.T) {
		assertQuiet(t, pair.Hub, pair.Tenant, tenantB)
	})

	t.Run("Services of another loadBalancerClass are never touched", func(t *testing.T) {
		// Tenant a does not filter: a Service of another implementation's class is still not ours.
		other := a.CreateService(framework.LBService{Name: "other", Class: ptr.To("example.com/other"), Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
		// Tenant b filters on class kubelb: a Service without a class is left alone too.
		classless := b.CreateService(framework.LBService{Name: "classless", Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
		// Services the ccms do handle, created after, prove they have seen the others.
		a.CreateService(framework.LBService{Name: "ours", Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
		a.WaitAddress("ours", addressTimeout)
		b.CreateService(framework.LBService{Name: "ours", Class: ptr.To(kubelbv1alpha1.DefaultClass), Ports: []corev1.ServicePort{framework.TCPPort("http", 80)}})
		b.WaitAddress("ours", addressTimeout)
		for _, c := range []struct {
			tenant *framework.Tenant
			svc    *corev1.Service
		}{{a, other}, {b, classless}} {
			got := &corev1.Service{}
			if err := c.tenant.Cluster.Client.Get(ctx, client.ObjectKeyFromObject(c.svc), got); err != nil {
				t.Fatal(err)
			}
			if len(got.Finalizers) > 0 || len(got.Status.LoadBalancer.Ingress) > 0 {
				t.Errorf("%s/%s was touched: finalizers %v, status %v", c.tenant.Name, got.Name, got.Finalizers, got.Status.LoadBalancer)
			}
			err := pair.Hub.Client.Get(ctx, client.ObjectKey{Namespace: c.tenant.Namespace, Name: string(c.svc.UID)}, &kubelbv1alpha1.LoadBalancer{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("a LoadBalancer was made for %s/%s: %v", c.tenant.Name, got.Name, err)
			}
		}
	})

	t.Run("deleting a Tenant with live LoadBalancers leaves the others alone; re-creating it works", func(t *testing.T) {
		framework.PlayNamespaceController(t, pair.Hub.Config, pair.Hub.Client)
		var lbsA kubelbv1alpha1.LoadBalancerList
		if err := pair.Hub.Client.List(ctx, &lbsA, client.InNamespace(a.Namespace)); err != nil {
			t.Fatal(err)
		}
		if err := pair.Hub.Client.Delete(ctx, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "b"}}); err != nil {
			t.Fatal(err)
		}
		testsupport.Eventually(t, 2*time.Minute, "Tenant b and its namespace to be gone", func() error {
			if err := pair.Hub.Client.Get(ctx, client.ObjectKey{Name: "b"}, &kubelbv1alpha1.Tenant{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("Tenant still there: %v", err)
			}
			if err := pair.Hub.Client.Get(ctx, client.ObjectKey{Name: b.Namespace}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace still there: %v", err)
			}
			return nil
		})
		var svcs corev1.ServiceList
		if err := pair.Hub.Client.List(ctx, &svcs, client.HasLabels{kubelbv1alpha1.LabelLoadBalancerName}); err != nil {
			t.Fatal(err)
		}
		for _, s := range svcs.Items {
			if s.Namespace == b.Namespace {
				t.Errorf("hub Service %s/%s of the deleted tenant is left", s.Namespace, s.Name)
			}
		}
		// Tenant a was not touched and still serves. (Its spec, by its generation: the hub's own
		// health checks may write its BackendsReachable condition meanwhile.)
		for _, lb := range lbsA.Items {
			now := &kubelbv1alpha1.LoadBalancer{}
			if err := pair.Hub.Client.Get(ctx, client.ObjectKeyFromObject(&lb), now); err != nil || now.Generation != lb.Generation ||
				meta.IsStatusConditionTrue(now.Status.Conditions, "Ready") != meta.IsStatusConditionTrue(lb.Status.Conditions, "Ready") {
				t.Errorf("LoadBalancer %s of tenant a changed while tenant b was deleted: %v", lb.Name, err)
			}
		}
		framework.WaitServes(t, webTarget, "a-node-0", "a-node-1")

		// Re-created, the tenant gets a new kubeconfig; a ccm started with it mirrors the
		// tenant's Services again.
		if code, err := b.CCM.Stop(30 * time.Second); err != nil || code != 0 {
			t.Fatalf("old ccm of b: exit %d, %v", code, err)
		}
		b2 := sys.AddTenant("b", tenantB, 0, "--use-loadbalancer-class")
		if ports := b2.ListenerPorts(webB); ports["http"] == 0 {
			t.Fatal("no listener port for tenant b's Service after re-creation")
		}
	})
}

// writesButLeases is the writes an API server served, leader-election leases left out.
func writesButLeases(t *testing.T, c *testenv.Cluster) map[string]int64 {
	t.Helper()
	w, err := framework.APIWrites(context.Background(), c.Config)
	if err != nil {
		t.Fatal(err)
	}
	for k := range w {
		if strings.HasSuffix(k, " leases") {
			delete(w, k)
		}
	}
	return w
}

// assertQuiet waits until neither API server sees any write but leases over a few seconds:
// a settled system must not keep rewriting objects (status churn, needless updates).
func assertQuiet(t *testing.T, clusters ...*testenv.Cluster) {
	t.Helper()
	before := make([]map[string]int64, len(clusters))
	for i, c := range clusters {
		before[i] = writesButLeases(t, c)
	}
	testsupport.Eventually(t, time.Minute, "a quiet system (no writes but leases for 3s)", func() error {
		time.Sleep(3 * time.Second) // the observation window, not synchronisation
		var churn []string
		for i, c := range clusters {
			after := writesButLeases(t, c)
			if diff, n := framework.WritesSince(before[i], after); n > 0 {
				churn = append(churn, fmt.Sprintf("%s: %v", c.Name, diff))
			}
			before[i] = after
		}
		if len(churn) > 0 {
			return fmt.Errorf("still writing: %v", churn)
		}
		return nil
	})
}
