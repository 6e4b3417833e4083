package realcluster_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/e2e/realcluster"
)

func TestMain(m *testing.M) { realcluster.Main(m) }

// TestRealClusterSmoke boots a hub cluster (one node) and a tenant cluster (two nodes) in
// one lab, runs a hardened 2-replica Deployment of the test image behind a NodePort Service
// in each (one Pod per node), and checks that the lab reaches both Pods through every
// NodeIP:NodePort, that `kubectl exec` (to the ClusterIP) and `kubectl logs` work, that a
// Pod's ServiceAccount token authenticates it to the API server, that each cluster's Pods
// reach the other cluster's node (NodePort), and that nothing is left on the machine
// afterwards.
func TestRealClusterSmoke(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("real clusters need real root (kubelet and runc need real cgroups and namespaces): run the tests as root")
	}
	before := hostState(t)
	var dirs []string
	// Registered first, so it runs after the clusters' own teardown.
	t.Cleanup(func() { checkNothingLeft(t, before, dirs) })

	begin := time.Now()
	hub := realcluster.Start(t, realcluster.Options{Name: "hub", Registry: realcluster.LabAddress + ":5000"})
	tenant := realcluster.Start(t, realcluster.Options{Name: "tenant", Nodes: 2})
	dirs = append(dirs, filepath.Dir(hub.LogDir), filepath.Dir(tenant.LogDir))
	tars, err := realcluster.ImageTars()
	if err != nil {
		t.Fatal(err)
	}
	importStart := time.Now()
	for _, c := range []*realcluster.Cluster{hub, tenant} {
		if err := c.ImportImage(tars[realcluster.HelloImage]); err != nil {
			t.Fatal(err)
		}
	}
	importTime := time.Since(importStart)

	nodePorts := map[string]int32{}
	for _, c := range []*realcluster.Cluster{hub, tenant} {
		nodePorts[c.Name] = deployHello(t, c)
	}
	workloadsReady := time.Since(begin)

	for _, c := range []*realcluster.Cluster{hub, tenant} {
		pods := helloPods(t, c)
		// From the lab: every NodeIP:NodePort reaches both Pods (with two nodes, one Pod
		// is on the other node: Pod routing between nodes).
		for _, ip := range c.NodeIPs {
			url := fmt.Sprintf("http://%s:%d/", ip, nodePorts[c.Name])
			seen := map[string]bool{}
			// A new connection per request, so that kube-proxy picks a Pod for each.
			client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			deadline := time.Now().Add(30 * time.Second)
			// At most 200 requests, 50 ms apart: kube-proxy may program the second
			// endpoint a moment after the Deployment is ready.
			for i := 0; i < 200 && len(seen) < len(pods) && time.Now().Before(deadline); i++ {
				if i > 0 {
					time.Sleep(50 * time.Millisecond)
				}
				resp, err := client.Get(url)
				if err != nil {
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				seen[strings.TrimSpace(string(body))] = true
			}
			for _, p := range pods {
				if !seen["pod="+p] {
					t.Errorf("%s: %s never answered as %s (seen %v)", c.Name, url, p, seen)
				}
			}
			if t.Failed() {
				out, _ := c.Kubectl("get", "pods,endpointslices", "-o", "wide")
				t.Log(out)
				for i := range c.NodeIPs {
					out, _ := c.NodeExec(i, "sh", "-c", "ip route; ip neigh; nft list ruleset | head -150; ip addr")
					t.Log(out)
				}
				lab, _ := exec.Command("sh", "-c", "ip route; ip neigh; bridge fdb show br lab0").CombinedOutput()
				t.Log(string(lab))
				t.FailNow()
			}
		}
		// kubectl exec: a Pod reaches the Service's ClusterIP.
		svc, err := c.Client.CoreV1().Services("default").Get(context.Background(), "hello", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.Kubectl("exec", pods[0], "--", "/hello", "get", "http://"+svc.Spec.ClusterIP+"/")
		if err != nil || !strings.HasPrefix(out, "pod=hello-") {
			t.Errorf("%s: kubectl exec to the ClusterIP: %q, %v", c.Name, out, err)
		}
		// The Pod's ServiceAccount token authenticates it to the API server (through the
		// kubernetes Service's ClusterIP, trusting the root CA kube-controller-manager
		// publishes).
		out, err = c.Kubectl("exec", pods[0], "--", "/hello", "whoami")
		if err != nil || strings.TrimSpace(out) != "system:serviceaccount:default:default" {
			t.Errorf("%s: the Pod's ServiceAccount token: %q, %v", c.Name, out, err)
		}
		// kubectl logs.
		out, err = c.Kubectl("logs", pods[1])
		if err != nil || !strings.Contains(out, "hello: serving on :8080 as pod \""+pods[1]+"\"") {
			t.Errorf("%s: kubectl logs: %q, %v", c.Name, out, err)
		}
	}
	// Node to node across clusters: a hub Pod reaches the tenant's NodePort and back.
	for _, pair := range [][2]*realcluster.Cluster{{hub, tenant}, {tenant, hub}} {
		from, to := pair[0], pair[1]
		url := fmt.Sprintf("http://%s:%d/", to.NodeIPs[0], nodePorts[to.Name])
		out, err := from.Kubectl("exec", helloPods(t, from)[0], "--", "/hello", "get", url)
		if err != nil || !strings.HasPrefix(out, "pod=hello-") {
			t.Errorf("a %s Pod to %s (%s's NodePort): %q, %v", from.Name, url, to.Name, out, err)
		}
	}
	// What the nodes warn about (e.g. cgroup v1) is logged, not checked.
	for _, c := range []*realcluster.Cluster{hub, tenant} {
		events, err := c.Client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "type=Warning,involvedObject.kind=Node"})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events.Items {
			t.Logf("%s: Warning Event on Node %s: %s: %s", c.Name, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	for _, c := range []*realcluster.Cluster{hub, tenant} {
		rss, procs, err := c.RSS()
		if err != nil {
			t.Error(err)
		}
		t.Logf("%s: %d processes, %d MiB resident", c.Name, procs, rss>>20)
	}
	t.Logf("boot: hub %s, tenant %s; test image import into both %s; both workloads ready %s after the start; checks done %s after the start",
		hub.BootTime.Round(time.Millisecond), tenant.BootTime.Round(time.Millisecond), importTime.Round(time.Millisecond),
		workloadsReady.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))
}

// deployHello runs the hardened 2-replica hello Deployment and its NodePort Service in c,
// waits for both Pods to be ready and returns the NodePort.
func deployHello(t *testing.T, c *realcluster.Cluster) int32 {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": "hello"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](2),
					// One Pod per node where there are two nodes.
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
					}},
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To[int64](realcluster.HelloUID),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:            "hello",
						Image:           realcluster.HelloImage,
						ImagePullPolicy: corev1.PullNever,
						Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}},
							PeriodSeconds: 1,
						},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
				},
			},
		},
	}
	if _, err := c.Client.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("%s: creating the hello Deployment: %v", c.Name, err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	created, err := c.Client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%s: creating the hello Service: %v", c.Name, err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		d, err := c.Client.AppsV1().Deployments("default").Get(ctx, "hello", metav1.GetOptions{})
		if err == nil && d.Status.ReadyReplicas == 2 && d.Status.UpdatedReplicas == 2 {
			break
		}
		if time.Now().After(deadline) {
			out, _ := c.Kubectl("get", "pods,events", "-o", "wide")
			t.Fatalf("%s: the hello Deployment is not ready after 2 minutes (%v):\n%s", c.Name, err, out)
		}
		time.Sleep(250 * time.Millisecond)
	}
	return created.Spec.Ports[0].NodePort
}

func helloPods(t *testing.T, c *realcluster.Cluster) []string {
	t.Helper()
	list, err := c.Client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=hello"})
	if err != nil {
		t.Fatalf("%s: listing the hello Pods: %v", c.Name, err)
	}
	var names []string
	nodes := map[string]bool{}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			names = append(names, p.Name)
			nodes[p.Spec.NodeName] = true
		}
	}
	sort.Strings(names)
	if len(names) != 2 {
		t.Fatalf("%s: hello Pods: %v, want 2", c.Name, names)
	}
	if len(nodes) != min(2, len(c.NodeNames)) {
		t.Fatalf("%s: the hello Pods run on %v, want one per node", c.Name, nodes)
	}
	return names
}

// machine is what the test checks the machine for before and after: kernel settings
// kubelet would write, the fixed paths of containerd, kubelet and CNI, the machine's
// network links and nftables ruleset, and its mounts (those of the test process outside
// the lab, realcluster.MachinePID).
type machine struct {
	sysctls, links, ruleset string
	// paths says whether each fixed path of containerd, kubelet and CNI exists, and when
	// it last changed (another test on the machine may use them; this one must not).
	paths  string
	mounts []string
}

func hostState(t *testing.T) machine {
	t.Helper()
	var m machine
	for _, key := range []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops", "vm/panic_on_oom"} {
		b, err := os.ReadFile("/proc/sys/" + key)
		if err != nil {
			t.Fatal(err)
		}
		m.sysctls += key + "=" + strings.TrimSpace(string(b)) + " "
	}
	for _, p := range []string{"/run/containerd", "/var/log/pods", "/var/log/containers", "/var/lib/cni", "/var/lib/kubelet", "/var/lib/containerd", "/run/netns", "/etc/cni", "/opt/cni"} {
		if fi, err := os.Stat(p); err == nil {
			m.paths += fmt.Sprintf("%s: modified %s\n", p, fi.ModTime().UTC().Format(time.RFC3339Nano))
		} else {
			m.paths += p + ": absent\n"
		}
	}
	machine := fmt.Sprintf("/proc/%d", realcluster.MachinePID())
	out, err := exec.Command("nsenter", "--net="+machine+"/ns/net", "ip", "-o", "link").CombinedOutput()
	if err != nil {
		t.Fatalf("listing the machine's links: %v: %s", err, out)
	}
	m.links = strings.TrimSpace(string(out))
	out, err = exec.Command("nsenter", "--net="+machine+"/ns/net", "nft", "list", "ruleset").CombinedOutput()
	if err != nil {
		t.Fatalf("listing the machine's nftables ruleset: %v: %s", err, out)
	}
	m.ruleset = string(out)
	b, err := os.ReadFile(machine + "/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			m.mounts = append(m.mounts, f[4])
		}
	}
	sort.Strings(m.mounts)
	return m
}

func checkNothingLeft(t *testing.T, before machine, dirs []string) {
	t.Helper()
	after := hostState(t)
	if after.sysctls != before.sysctls {
		t.Errorf("kernel settings changed: %s -> %s", before.sysctls, after.sysctls)
	}
	if after.links != before.links {
		t.Errorf("the machine's links changed:\n%s\n->\n%s", before.links, after.links)
	}
	if after.ruleset != before.ruleset {
		t.Errorf("the machine's nftables ruleset changed:\n%s\n->\n%s", before.ruleset, after.ruleset)
	}
	if strings.Join(after.mounts, "\n") != strings.Join(before.mounts, "\n") {
		t.Errorf("the machine's mounts changed: %v -> %v", before.mounts, after.mounts)
	}
	if after.paths != before.paths {
		t.Errorf("the machine's fixed paths of containerd, kubelet and CNI changed:\n%s\n->\n%s", before.paths, after.paths)
	}
	left, err := realcluster.CgroupsLeft()
	if err != nil {
		t.Error(err)
	}
	if len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
	if t.Failed() {
		return
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil && os.Getenv(realcluster.KeepEnv) == "" {
			t.Errorf("the cluster folder %s is left", d)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, d := range dirs {
			if d != "." && strings.Contains(string(b), d) {
				t.Errorf("a process is left: %s: %s", p, strings.ReplaceAll(string(b), "\x00", " "))
			}
		}
	}
}
