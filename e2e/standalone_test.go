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

// TestStandaloneOneToOneNAT: on a cloud that gives nodes public IPs by 1:1 NAT, the address on
// the node's interface is the private one. The test plays such a cloud in its private network
// namespace (framework.PlayOneToOneNAT: nft rewrites the public destination to the node's
// private address, in the namespace's local range) and the nodes report the public IP as
// ExternalIP, the private one as InternalIP. The real standalone ccm gives the Service the public addresses; without
// --node-ip-nat nothing answers on them (kube-proxy does not match the private address), with
// it the ccm makes the shadow Service (externalIPs: the private addresses) and real TCP
// requests to the public addresses reach the backends; deleting the Service takes the shadow
// and the traffic away.
func TestStandaloneOneToOneNAT(t *testing.T) {
	if !framework.PrivateNetwork(t) {
		return
	}
	nat := map[string]string{"203.0.113.10": "10.245.6.41", "203.0.113.11": "10.245.6.42"}
	framework.PlayOneToOneNAT(t, nat)
	cluster := testenv.Start(t, "standalone-nat", testenv.Options{WithoutKubelbCRDs: true})
	ctx := context.Background()
	c := cluster.Client
	nodes := map[string][2]string{"n-node-0": {"203.0.113.10", "10.245.6.41"}, "n-node-1": {"203.0.113.11", "10.245.6.42"}}
	var privateIPs []string
	for name, a := range nodes {
		framework.AddNodeWith(t, c, name, []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: a[0]}, {Type: corev1.NodeInternalIP, Address: a[1]}},
			map[string]string{"kubelb.k8c.io/use-as-loadbalancer": "true"})
		privateIPs = append(privateIPs, a[1])
	}
	slices.Sort(privateIPs)
	framework.PlayLoadBalancerAddresses(t, c, privateIPs)
	ccm := func(extra ...string) *testsupport.Process {
		return testsupport.StartProcess(t, "ccm-standalone-nat", testsupport.BuildBinary(t, "./cmd/ccm"),
			append([]string{"--mode=standalone", "--kubeconfig", cluster.Kubeconfig, "--leader-election-namespace", "kube-system",
				"--metrics-addr", "0", "--health-probe-bind-address", "0", "--log-format", "console"}, extra...)...)
	}
	withoutNAT := ccm()

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
		Ports: []corev1.ServicePort{{Name: "http", Port: 18080, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
	}}
	if err := c.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	for node, a := range nodes {
		testsupport.StartTCPBackend(t, net.JoinHostPort(a[1], fmt.Sprint(svc.Spec.Ports[0].NodePort)), testsupport.Identity{Node: node, Pod: "web-" + node})
	}
	testsupport.Eventually(t, time.Minute, "Service web addressed with the public IPs", func() error {
		cur := &corev1.Service{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(svc), cur); err != nil {
			return err
		}
		var got []string
		for _, in := range cur.Status.LoadBalancer.Ingress {
			got = append(got, in.IP)
		}
		if !slices.Equal(got, []string{"203.0.113.10", "203.0.113.11"}) {
			return fmt.Errorf("status.loadBalancer.ingress %v", got)
		}
		return nil
	})

	t.Run("without --node-ip-nat nothing answers on the public addresses", func(t *testing.T) {
		for i := 0; i < 5; i++ { // a bounded look over a few of the played kube-proxy's rounds
			if reply, err := testsupport.TCPRoundTrip("203.0.113.10:18080", "ping"); err == nil {
				t.Fatalf("203.0.113.10:18080 answered (%+v) with no shadow Service", reply)
			}
			time.Sleep(framework.PlayInterval)
		}
	})

	t.Run("with --node-ip-nat the shadow Service carries the traffic of the public addresses", func(t *testing.T) {
		if _, err := withoutNAT.Stop(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		ccm("--node-ip-nat")
		testsupport.Eventually(t, 2*time.Minute, "the shadow Service web-kubelb-nat", func() error {
			sh := &corev1.Service{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "web-kubelb-nat"}, sh); err != nil {
				return err
			}
			if got := slices.Sorted(slices.Values(sh.Spec.ExternalIPs)); !slices.Equal(got, privateIPs) {
				return fmt.Errorf("externalIPs %v, want the private addresses %v", got, privateIPs)
			}
			return nil
		})
		framework.WaitServes(t, "203.0.113.10:18080", "n-node-0", "n-node-1")
		framework.WaitServes(t, "203.0.113.11:18080", "n-node-0", "n-node-1")
	})

	t.Run("deleting the Service takes its shadow and the traffic away", func(t *testing.T) {
		if err := c.Delete(ctx, svc); err != nil {
			t.Fatal(err)
		}
		testsupport.Eventually(t, time.Minute, "the shadow Service gone and 203.0.113.10:18080 silent", func() error {
			if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "web-kubelb-nat"}, &corev1.Service{}); err == nil {
				return fmt.Errorf("the shadow Service still exists")
			}
			if _, err := testsupport.TCPRoundTrip("203.0.113.10:18080", "ping"); err == nil {
				return fmt.Errorf("203.0.113.10:18080 still answers")
			}
			return nil
		})
	})
}
