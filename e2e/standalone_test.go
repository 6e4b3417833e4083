package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/e2e/prom"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestStandaloneServesOnNodeAddresses runs the real ccm binary in standalone mode (no hub) on a
// real API server. Two played nodes carry the node-set label; the harness plays kube-proxy
// (PlayLoadBalancerAddresses: a load balancer address:port goes to the Service's endpoints)
// and the endpoints (echo servers on each node's NodePort). Real TCP requests to
// <node address>:<port> must reach the backends, follow node readiness, and a port conflict
// must leave the later Service pending until the holder goes.
func TestStandaloneServesOnNodeAddresses(t *testing.T) {
	cluster := testenv.Start(t, "standalone", testenv.Options{WithoutKubelbCRDs: true})
	ctx := context.Background()
	c := cluster.Client
	nodes := map[string]string{"s-node-0": "127.0.6.1", "s-node-1": "127.0.6.2"}
	nodeIPs := []string{"127.0.6.1", "127.0.6.2"}
	for name, ip := range nodes {
		framework.AddNodeWith(t, c, name, []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
			map[string]string{"kubelb.k8c.io/use-as-loadbalancer": "true"})
	}
	// The unlabelled node never gives its address.
	framework.AddNodeWith(t, c, "s-node-2", []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.6.3"}}, nil)
	metricsAddr := testsupport.Loopback(testsupport.FreePort(t))
	testsupport.StartProcess(t, "ccm-standalone", testsupport.BuildBinary(t, "./cmd/ccm"),
		"--mode=standalone", "--kubeconfig", cluster.Kubeconfig, "--leader-election-namespace", "kube-system",
		"--metrics-addr", metricsAddr,
		"--health-probe-bind-address", testsupport.Loopback(testsupport.FreePort(t)), "--log-format", "console")
	framework.PlayLoadBalancerAddresses(t, c, nodeIPs)

	create := func(name string) *corev1.Service {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 18080, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		}}
		if err := c.Create(ctx, svc); err != nil {
			t.Fatalf("creating Service %s: %v", name, err)
		}
		for node, ip := range nodes {
			testsupport.StartTCPBackend(t, net.JoinHostPort(ip, fmt.Sprint(svc.Spec.Ports[0].NodePort)),
				testsupport.Identity{Node: node, Pod: name + "-" + node})
		}
		return svc
	}
	addresses := func(name string, want ...string) {
		t.Helper()
		testsupport.Eventually(t, time.Minute, fmt.Sprintf("Service %s addressed %v", name, want), func() error {
			svc := &corev1.Service{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, svc); err != nil {
				return err
			}
			var got []string
			for _, in := range svc.Status.LoadBalancer.Ingress {
				got = append(got, in.IP)
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("status.loadBalancer.ingress %v", got)
			}
			return nil
		})
	}

	web := create("web")
	t.Run("a LoadBalancer Service gets the labelled nodes' addresses and serves on them", func(t *testing.T) {
		addresses("web", "127.0.6.1", "127.0.6.2")
		for _, ip := range nodeIPs {
			framework.WaitServes(t, ip+":18080", "s-node-0", "s-node-1")
		}
	})

	t.Run("a NotReady node loses its address; the other keeps serving", func(t *testing.T) {
		framework.SetNodeReady(t, c, "s-node-1", false)
		addresses("web", "127.0.6.1")
		framework.WaitServes(t, "127.0.6.1:18080", "s-node-0", "s-node-1") // kube-proxy still reaches every endpoint
		framework.SetNodeReady(t, c, "s-node-1", true)
		addresses("web", "127.0.6.1", "127.0.6.2")
	})

	t.Run("a second Service on the same port waits for the first and is then served", func(t *testing.T) {
		// The harness's backends stand for endpoints on NodePorts; "late" gets its own.
		create("late")
		testsupport.Eventually(t, time.Minute, "a PortConflict Event on Service late", func() error {
			evs := &eventsv1.EventList{}
			if err := c.List(ctx, evs, client.InNamespace("default")); err != nil {
				return err
			}
			for _, e := range evs.Items {
				if e.Regarding.Name == "late" && e.Type == corev1.EventTypeWarning && e.Reason == "PortConflict" {
					return nil
				}
			}
			return fmt.Errorf("no PortConflict Event among %d", len(evs.Items))
		})
		addresses("late")
		if err := c.Delete(ctx, web); err != nil {
			t.Fatal(err)
		}
		addresses("late", "127.0.6.1", "127.0.6.2")
		// The address now carries late's traffic: its backends answer on its NodePorts.
		testsupport.Eventually(t, time.Minute, "127.0.6.1:18080 reaching Service late", func() error {
			reply, err := testsupport.TCPRoundTrip("127.0.6.1:18080", "ping")
			if err != nil {
				return err
			}
			if reply.Pod != "late-"+reply.Node {
				return fmt.Errorf("answered by pod %s", reply.Pod)
			}
			return nil
		})
	})

	t.Run("the ccm dashboard's address provider panels show the node-IP mode", func(t *testing.T) {
		checkAddressProviderPanels(t, "ccm", metricsAddr, ccmProvidersRow,
			"Address pool usage", "Address provider decisions by result", "Address provider decision duration p95")
	})
}

// TestStandaloneServesOnPoolAddress runs the real ccm binary in standalone mode with the
// address pools (--address-provider=ipam): a LoadBalancer Service gets the default pool's first
// address, and real TCP requests to <pool address>:<port> reach its backends through the
// played kube-proxy, as a router or BGP speaker would bring them to a node.
func TestStandaloneServesOnPoolAddress(t *testing.T) {
	cluster := testenv.Start(t, "standalone-ipam", testenv.Options{})
	ctx := context.Background()
	c := cluster.Client
	nodes := map[string]string{"p-node-0": "127.0.6.21", "p-node-1": "127.0.6.22"}
	var nodeIPs []string
	for name, ip := range nodes {
		framework.AddNode(t, c, name, ip)
		nodeIPs = append(nodeIPs, ip)
	}
	if err := c.Create(ctx, &kubelbv1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: kubelbv1alpha1.AddressPoolSpec{Default: true, Addresses: []string{"127.0.9.1-127.0.9.2"}}}); err != nil {
		t.Fatal(err)
	}
	metricsAddr := testsupport.Loopback(testsupport.FreePort(t))
	testsupport.StartProcess(t, "ccm-standalone-ipam", testsupport.BuildBinary(t, "./cmd/ccm"),
		"--mode=standalone", "--address-provider=ipam", "--kubeconfig", cluster.Kubeconfig, "--leader-election-namespace", "kube-system",
		"--metrics-addr", metricsAddr,
		"--health-probe-bind-address", testsupport.Loopback(testsupport.FreePort(t)), "--log-format", "console")
	framework.PlayLoadBalancerAddresses(t, c, nodeIPs)

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
		Ports: []corev1.ServicePort{{Name: "http", Port: 18080, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
	}}
	if err := c.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	for node, ip := range nodes {
		testsupport.StartTCPBackend(t, net.JoinHostPort(ip, fmt.Sprint(svc.Spec.Ports[0].NodePort)), testsupport.Identity{Node: node, Pod: "web-" + node})
	}
	testsupport.Eventually(t, time.Minute, "Service web addressed from the pool", func() error {
		cur := &corev1.Service{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(svc), cur); err != nil {
			return err
		}
		if in := cur.Status.LoadBalancer.Ingress; len(in) != 1 || in[0].IP != "127.0.9.1" {
			return fmt.Errorf("status.loadBalancer.ingress %v", in)
		}
		return nil
	})
	framework.WaitServes(t, "127.0.9.1:18080", "p-node-0", "p-node-1")
	// A real Prometheus scrapes the ccm: every panel of the dashboard's address provider row
	// has data (the pool is half used).
	checkAddressProviderPanels(t, "ccm", metricsAddr, ccmProvidersRow)
}

// The dashboard rows about the address providers (charts/*/dashboards).
const (
	managerProvidersRow = "Address providers (--address-provider)"
	ccmProvidersRow     = "Standalone mode: address providers"
)

// checkAddressProviderPanels has a real Prometheus scrape one binary (as job) and checks that
// every query of the dashboard row returns data, but for the panels named in without.
func checkAddressProviderPanels(t *testing.T, job, metricsAddr, row string, without ...string) {
	t.Helper()
	p := prom.Start(t, map[string][]string{job: {metricsAddr}})
	p.WaitTargetsUp(t, time.Minute)
	prom.CheckDashboards(t, testsupport.RepoRoot(), p.URL, prom.CheckOptions{Timeout: time.Minute,
		Only: func(q prom.Query) bool { return q.Row == row && !slices.Contains(without, q.Panel) }})
}
