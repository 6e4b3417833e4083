package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// echoImage is the image of the played Pods; the played kubelet runs the Gateway API
// conformance suite's echo server for it, which answers every HTTP request with the name of
// the Pod that served it.
const echoImage = "registry.k8s.io/gateway-api/echo-basic"

// etpRequests is how many requests each converged phase sends.
const etpRequests = 60

// TestExternalTrafficPolicyLocal proves externalTrafficPolicy Local through the whole system:
// the real kube-controller-manager in the tenant cluster (EndpointSlices with the Pods'
// nodeName), the played kubelet and kube-proxy (which forwards a Local Service's NodePort
// only to the node's own endpoints and answers its healthCheckNodePort as kube-proxy does),
// the real ccm and manager binaries and a real Envoy started from the manager's bootstrap.
//   - With the Service's only Pod on node 0, Envoy health-checks both nodes on the
//     healthCheckNodePort, takes node 1 (503) out, and every request succeeds on node 0's Pod.
//   - The Pod moves to node 1 (a new Pod there, the old one deleted): once Envoy has seen node
//     0 answer 503 (unhealthy threshold × interval at most), every request succeeds on node
//     1's Pod. Requests that fail during the move are counted and reported, not asserted.
//   - A Service with externalTrafficPolicy Cluster and its Pod on node 0 only gets no
//     healthCheckNodePort (neither on the tenant Service nor on the hub LoadBalancer), a TCP
//     connect check in Envoy, and traffic through both nodes, node 1's kube-proxy forwarding
//     to the Pod on node 0.
//
// Converged means: Envoy's admin interface shows the wanted health of each node, and then 12
// requests in a row are served by the wanted Pod (the requests failing before are logged);
// after that, all etpRequests requests must succeed there, and Envoy must open no connection
// to a node without a local endpoint.
//
// It runs in a private network namespace (framework.PrivateNetwork): Pod IPs are not loopback.
// UDP is proven at the Envoy level only (TestEnvoyExternalTrafficPolicyLocal in
// internal/xds): the played kubelet and kube-proxy carry TCP only.
func TestExternalTrafficPolicyLocal(t *testing.T) {
	if !framework.PrivateNetwork(t) {
		return
	}
	pair := testenv.StartPair(t)
	framework.StartControllerManager(t, pair.Tenant)
	sys := framework.StartSystem(t, pair.Hub, framework.Options{})
	a := sys.AddTenant("a", pair.Tenant, 2)
	ctx := context.Background()
	tenant := pair.Tenant.Client
	node0, node1 := "a-node-0", "a-node-1"
	nodes := map[string]string{node0: a.NodeIPs[0], node1: a.NodeIPs[1]}
	framework.PlayKubelet(t, pair.Tenant.Config, tenant, framework.KubeletOptions{
		Nodes:  nodes,
		Images: map[string]string{echoImage: testsupport.BuildBinary(t, "sigs.k8s.io/gateway-api/conformance/echo-basic")},
	})
	framework.PlayKubeProxy(t, tenant, a.NodeIPs)

	// Short health checks keep the test quick (the interval's floor is 1s); the no-traffic
	// interval too, since the clusters are idle until the test sends traffic.
	healthCheck := map[string]string{
		kubelbv1alpha1.AnnotationHealthCheckInterval:           "1s",
		kubelbv1alpha1.AnnotationHealthCheckNoTrafficInterval:  "1s",
		kubelbv1alpha1.AnnotationHealthCheckTimeout:            "1s",
		kubelbv1alpha1.AnnotationHealthCheckUnhealthyThreshold: "2",
		kubelbv1alpha1.AnnotationHealthCheckHealthyThreshold:   "1",
	}
	service := func(name string, policy corev1.ServiceExternalTrafficPolicy) *corev1.Service {
		return a.CreateService(framework.LBService{Name: name,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(3000), Protocol: corev1.ProtocolTCP}},
			Mutate: func(s *corev1.Service) {
				s.Spec.ExternalTrafficPolicy = policy
				s.Annotations = healthCheck
			}})
	}
	local := service("local", corev1.ServiceExternalTrafficPolicyLocal)
	cluster := service("cluster", corev1.ServiceExternalTrafficPolicyCluster)
	createEchoPod(t, tenant, "local-on-"+node0, "local", node0)
	createEchoPod(t, tenant, "cluster-on-"+node0, "cluster", node0)
	a.WaitAddress("local", addressTimeout)
	a.WaitAddress("cluster", addressTimeout)
	envoy := a.StartEnvoy(framework.EnvoyBootstrap)
	localTarget := fmt.Sprintf("127.0.0.1:%d", a.ListenerPorts(local)["http"])
	clusterTarget := fmt.Sprintf("127.0.0.1:%d", a.ListenerPorts(cluster)["http"])
	hcnp := local.Spec.HealthCheckNodePort
	localHost := func(node string) string {
		return net.JoinHostPort(nodes[node], fmt.Sprint(local.Spec.Ports[0].NodePort))
	}
	clusterHost := func(node string) string {
		return net.JoinHostPort(nodes[node], fmt.Sprint(cluster.Spec.Ports[0].NodePort))
	}

	t.Run("the hub LoadBalancer carries the healthCheckNodePort of the Local Service only", func(t *testing.T) {
		if hcnp == 0 {
			t.Fatal("the tenant API server allocated no healthCheckNodePort for the Local Service")
		}
		if cluster.Spec.HealthCheckNodePort != 0 {
			t.Fatalf("the Cluster Service has healthCheckNodePort %d", cluster.Spec.HealthCheckNodePort)
		}
		testsupport.Eventually(t, time.Minute, "healthCheckNodePort on the hub LoadBalancers", func() error {
			for _, c := range []struct {
				svc  *corev1.Service
				want int32
			}{{local, hcnp}, {cluster, 0}} {
				lb := &kubelbv1alpha1.LoadBalancer{}
				if err := pair.Hub.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: string(c.svc.UID)}, lb); err != nil {
					return err
				}
				if lb.Spec.HealthCheckNodePort != c.want {
					return fmt.Errorf("LoadBalancer of %s: healthCheckNodePort %d, want %d", c.svc.Name, lb.Spec.HealthCheckNodePort, c.want)
				}
			}
			return nil
		})
	})

	t.Run("each node answers the health check as kube-proxy does", func(t *testing.T) {
		waitNodeHealth(t, nodes[node0], hcnp, http.StatusOK, 1)
		waitNodeHealth(t, nodes[node1], hcnp, http.StatusServiceUnavailable, 0)
	})

	t.Run("with the Pod on node 0, Envoy sends every request to node 0", func(t *testing.T) {
		waitHealthy(t, envoy, string(local.UID), map[string]bool{localHost(node0): true, localHost(node1): false})
		waitPodServes(t, localTarget, "local-on-"+node0)
		before := hostConnections(t, envoy, string(local.UID))
		if failed, pods := echoRequests(localTarget, etpRequests); failed > 0 || pods["local-on-"+node0] != etpRequests {
			t.Fatalf("%d of %d requests failed after convergence; served by %v", failed, etpRequests, pods)
		}
		after := hostConnections(t, envoy, string(local.UID))
		if n := after[localHost(node1)] - before[localHost(node1)]; n != 0 {
			t.Errorf("Envoy opened %d connections to node 1, which has no local endpoint", n)
		}
	})

	t.Run("when the Pod moves to node 1, every request follows it", func(t *testing.T) {
		var failed, sent atomic.Int64
		stop, done := make(chan struct{}), make(chan struct{})
		go func() { // requests during the move: counted and reported
			defer close(done)
			for i := 0; i < 10000; i++ { // bounded: stops when told, or after 10000 requests
				select {
				case <-stop:
					return
				default:
				}
				f, _ := echoRequests(localTarget, 1)
				failed.Add(int64(f))
				sent.Add(1)
				time.Sleep(20 * time.Millisecond)
			}
		}()
		createEchoPod(t, tenant, "local-on-"+node1, "local", node1)
		waitHealthy(t, envoy, string(local.UID), map[string]bool{localHost(node0): true, localHost(node1): true})
		if err := tenant.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "local-on-" + node0}}); err != nil {
			t.Fatal(err)
		}
		waitNodeHealth(t, nodes[node0], hcnp, http.StatusServiceUnavailable, 0)
		waitHealthy(t, envoy, string(local.UID), map[string]bool{localHost(node0): false, localHost(node1): true})
		waitPodServes(t, localTarget, "local-on-"+node1)
		close(stop)
		<-done
		t.Logf("during the move %d of %d requests failed", failed.Load(), sent.Load())

		before := hostConnections(t, envoy, string(local.UID))
		if failed, pods := echoRequests(localTarget, etpRequests); failed > 0 || pods["local-on-"+node1] != etpRequests {
			hosts, _ := clusterHostsOf(envoy, string(local.UID))
			t.Fatalf("%d of %d requests failed after convergence; served by %v; Envoy's connections per node before %v, hosts now %+v", failed, etpRequests, pods, before, hosts)
		}
		after := hostConnections(t, envoy, string(local.UID))
		if n := after[localHost(node0)] - before[localHost(node0)]; n != 0 {
			t.Errorf("Envoy opened %d connections to node 0, which has no local endpoint any more", n)
		}
	})

	t.Run("with externalTrafficPolicy Cluster nothing is checked on a healthCheckNodePort and both nodes carry traffic", func(t *testing.T) {
		testsupport.Eventually(t, time.Minute, "the health checks of the Cluster Service's cluster", func() error {
			checks, err := healthCheckKinds(envoy, string(cluster.UID))
			if err != nil {
				return err
			}
			if len(checks) != 1 || checks[0] != "tcp_health_check" {
				return fmt.Errorf("health checks %v, want one tcp_health_check", checks)
			}
			return nil
		})
		checks, err := healthCheckKinds(envoy, string(local.UID))
		if err != nil || len(checks) != 1 || checks[0] != "http_health_check" {
			t.Errorf("the Local Service's cluster has health checks %v (%v), want one http_health_check", checks, err)
		}
		waitHealthy(t, envoy, string(cluster.UID), map[string]bool{clusterHost(node0): true, clusterHost(node1): true})
		waitPodServes(t, clusterTarget, "cluster-on-"+node0)
		before := hostConnections(t, envoy, string(cluster.UID))
		if failed, pods := echoRequests(clusterTarget, etpRequests); failed > 0 || pods["cluster-on-"+node0] != etpRequests {
			t.Fatalf("%d of %d requests failed; served by %v", failed, etpRequests, pods)
		}
		after := hostConnections(t, envoy, string(cluster.UID))
		for _, n := range []string{node0, node1} {
			if after[clusterHost(n)] == before[clusterHost(n)] {
				t.Errorf("no request went through %s (connections per node before %v, after %v)", n, before, after)
			}
		}
	})
}

// createEchoPod creates a Pod of the Service app on node (spec.nodeName, as the scheduler
// would bind it) running the echo server, which names the Pod in every answer.
func createEchoPod(t *testing.T, c client.Client, name, app, node string) {
	t.Helper()
	fromField := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "echo", Image: echoImage + ":v1",
			Env: []corev1.EnvVar{
				{Name: "POD_NAME", ValueFrom: fromField("metadata.name")},
				{Name: "NAMESPACE", ValueFrom: fromField("metadata.namespace")},
			},
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 3000, Protocol: corev1.ProtocolTCP}},
		}}},
	}
	if err := c.Create(context.Background(), pod); err != nil {
		t.Fatalf("creating Pod %s: %v", name, err)
	}
}

// echoRequests sends n HTTP requests to target, each on a new connection, and returns how
// many failed and how many each Pod answered.
func echoRequests(target string, n int) (failed int, pods map[string]int) {
	pods = map[string]int{}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := 0; i < n; i++ {
		pod, err := echoRequest(hc, target)
		if err != nil {
			failed++
			pods["error: "+err.Error()]++
			continue
		}
		pods[pod]++
	}
	return failed, pods
}

func echoRequest(hc *http.Client, target string) (string, error) {
	resp, err := hc.Get("http://" + target + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	var body struct {
		Pod string `json:"pod"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", err
	}
	return body.Pod, nil
}

// waitNodeHealth waits until a node's healthCheckNodePort answers /healthz with code and a
// kube-proxy body counting local endpoints.
func waitNodeHealth(t *testing.T, nodeIP string, port int32, code, local int) {
	t.Helper()
	url := fmt.Sprintf("http://%s/healthz", net.JoinHostPort(nodeIP, fmt.Sprint(port)))
	hc := &http.Client{Timeout: 5 * time.Second}
	testsupport.Eventually(t, time.Minute, fmt.Sprintf("%s to answer %d", url, code), func() error {
		resp, err := hc.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var body framework.HealthCheckReply
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return err
		}
		if resp.StatusCode != code || body.LocalEndpoints != local || body.Service != (framework.HealthCheckService{Namespace: "default", Name: "local"}) {
			return fmt.Errorf("status %d, body %+v", resp.StatusCode, body)
		}
		return nil
	})
}

// clusterHostsOf returns the hosts of the Envoy cluster whose name starts with prefix (a
// LoadBalancer's clusters are named by its name, the tenant Service's UID), by address.
func clusterHostsOf(e *framework.Envoy, prefix string) (map[string]testsupport.EnvoyHost, error) {
	return e.ClusterHosts(func(name string) bool { return strings.HasPrefix(name, prefix+"-") })
}

// waitPodServes waits for convergence as traffic shows it: until 12 requests in a row succeed
// on the Pod, and logs how many failed on the way. Envoy's admin interface shows a host's
// new health at once, but its workers may route by the old one a while longer: health
// changes within Envoy's update merge window (common_lb_config.update_merge_window, 1s by
// default; the translation leaves it unset) reach them together when it ends. In about one
// run in ten a batch of requests right after the admin interface showed node 0 unhealthy
// still went half to node 0.
func waitPodServes(t *testing.T, target, pod string) {
	t.Helper()
	failed, sent := 0, 0
	testsupport.Eventually(t, time.Minute, fmt.Sprintf("12 requests in a row to %s served by %s", target, pod), func() error {
		f, pods := echoRequests(target, 12)
		failed, sent = failed+f, sent+12
		if f > 0 || pods[pod] != 12 {
			return fmt.Errorf("served by %v", pods)
		}
		return nil
	})
	if failed > 0 {
		t.Logf("%d of %d requests to %s failed before 12 in a row were served by %s", failed, sent, target, pod)
	}
}

// waitHealthy waits until Envoy sees exactly the wanted health of each host of a cluster.
func waitHealthy(t *testing.T, e *framework.Envoy, prefix string, want map[string]bool) {
	t.Helper()
	testsupport.Eventually(t, time.Minute, fmt.Sprintf("Envoy's health of %v", want), func() error {
		hosts, err := clusterHostsOf(e, prefix)
		if err != nil {
			return err
		}
		if len(hosts) != len(want) {
			return fmt.Errorf("hosts %v", hosts)
		}
		for addr, healthy := range want {
			if h, ok := hosts[addr]; !ok || h.Healthy != healthy {
				return fmt.Errorf("hosts %+v", hosts)
			}
		}
		return nil
	})
}

// hostConnections returns how many connections Envoy opened to each host of a cluster.
func hostConnections(t *testing.T, e *framework.Envoy, prefix string) map[string]int64 {
	t.Helper()
	hosts, err := clusterHostsOf(e, prefix)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for addr, h := range hosts {
		out[addr] = h.Connections
	}
	return out
}

// healthCheckKinds returns the kind of each health check of the cluster named prefix-*
// (tcp_health_check, http_health_check, …) from Envoy's configuration.
func healthCheckKinds(e *framework.Envoy, prefix string) ([]string, error) {
	var dump struct {
		Configs []struct {
			Cluster struct {
				Name         string                       `json:"name"`
				HealthChecks []map[string]json.RawMessage `json:"health_checks"`
			} `json:"cluster"`
		} `json:"configs"`
	}
	if err := e.ConfigDump("?resource=dynamic_active_clusters", &dump); err != nil {
		return nil, err
	}
	for _, c := range dump.Configs {
		if !strings.HasPrefix(c.Cluster.Name, prefix+"-") {
			continue
		}
		var kinds []string
		for _, hc := range c.Cluster.HealthChecks {
			for k := range hc {
				if strings.HasSuffix(k, "_health_check") {
					kinds = append(kinds, k)
				}
			}
		}
		return kinds, nil
	}
	return nil, fmt.Errorf("no cluster %s-*", prefix)
}
