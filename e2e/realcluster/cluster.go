package realcluster

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// K8sVersion is the version of the Kubernetes binaries (bin/k8s/<K8sVersion>/).
const K8sVersion = "1.36.4"

// KeepEnv, when set, keeps every cluster's folder (logs, configuration, certificates) after
// its teardown, as a failed test does.
const KeepEnv = "KUBELB_REALCLUSTER_KEEP"

// DefaultNodePortRange is the NodePort range of every cluster.
const DefaultNodePortRange = "30000-32767"

// Options says what cluster Start boots.
type Options struct {
	// Name names the cluster (its nodes are <Name>-0, <Name>-1, ...). Required; unique in
	// the lab while the cluster runs.
	Name string
	// Nodes is the number of nodes (1 when 0). Node 0 runs the control plane; every node
	// runs containerd, kubelet and kube-proxy.
	Nodes int
	// Registry, when set, is a plain-HTTP registry ("<LabAddress>:<port>") the nodes'
	// containerd pulls from (a hosts.toml under its registry config_path).
	Registry string
}

// Cluster is a running real cluster; Start stops it when the test ends.
type Cluster struct {
	// Name is Options.Name.
	Name string
	// Kubeconfig is the path of a system:masters kubeconfig (server https://<node 0>:6443).
	Kubeconfig string
	// RESTConfig is Kubeconfig's client configuration.
	RESTConfig *rest.Config
	// Client is a clientset for RESTConfig.
	Client kubernetes.Interface
	// NodeNames and NodeIPs are the nodes' names and lab addresses, node 0 first.
	NodeNames []string
	NodeIPs   []string
	// PodCIDR is the cluster's Pod range (node i has its /24 number i); ServiceCIDR its
	// Service range; NodePortRange its NodePort range.
	PodCIDR, ServiceCIDR, NodePortRange string
	// LogDir holds every component's log (<node>-<component>.log). It is kept, and named
	// in the test's output, when the test fails or KeepEnv is set.
	LogDir string
	// BootTime is how long Start took, ImportTime of it how long importing the pause image.
	BootTime, ImportTime time.Duration

	t        testing.TB
	dir      string
	tools    tools
	pki      *pki
	nodes    []*node
	stopOnce sync.Once
}

type node struct {
	name    string
	index   int // in the lab: names its veth and picks its address
	ip      net.IP
	podCIDR string
	cgroup  string // kubelet's cgroupRoot
	routed  bool   // the routes to its Pods are in every other node and the lab
	dir     string
	init    *exec.Cmd
	procs   []*proc
}

type proc struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// The lab's bookkeeping: addresses and CIDRs handed out, and the running nodes (for routes).
var (
	labMu       sync.Mutex
	labNodes    = map[*node]bool{}
	labNextNode int
	labClusters = map[string]bool{}
	labNextCIDR int
)

type tools struct {
	k8s, node, nsenter, nft string
}

func findTools() (tools, error) {
	var tl tools
	root, err := repoRoot()
	if err != nil {
		return tl, err
	}
	tl.k8s = os.Getenv("KUBEBUILDER_ASSETS")
	if tl.k8s == "" {
		tl.k8s = filepath.Join(root, "bin", "k8s", K8sVersion)
	}
	tl.node = filepath.Join(root, "bin", "node")
	var missing []string
	for _, p := range []string{
		filepath.Join(tl.k8s, "etcd"), filepath.Join(tl.k8s, "kube-apiserver"),
		filepath.Join(tl.k8s, "kube-controller-manager"), filepath.Join(tl.k8s, "kube-scheduler"),
		filepath.Join(tl.k8s, "kubelet"), filepath.Join(tl.k8s, "kube-proxy"), filepath.Join(tl.k8s, "kubectl"),
		filepath.Join(tl.node, "containerd"), filepath.Join(tl.node, "containerd-shim-runc-v2"),
		filepath.Join(tl.node, "ctr"), filepath.Join(tl.node, "runc"),
		filepath.Join(tl.node, "cni", "bridge"), filepath.Join(tl.node, "cni", "host-local"),
		filepath.Join(tl.node, "cni", "loopback"),
	} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if tl.nsenter, err = exec.LookPath("nsenter"); err != nil {
		missing = append(missing, "nsenter (util-linux)")
	}
	if tl.nft, err = exec.LookPath("nft"); err != nil {
		if _, serr := os.Stat("/usr/sbin/nft"); serr != nil {
			missing = append(missing, "nft (hack/tools.sh nftables)")
		}
	}
	if len(missing) > 0 {
		return tl, fmt.Errorf("real clusters need these tools, missing: %s; run `make tools` (hack/tools.sh nodes and nftables)", strings.Join(missing, ", "))
	}
	return tl, nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding the repository: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Start boots a real cluster in the lab (see the package documentation) and stops it when
// the test ends: every process it started is killed (with the nodes' inits), its cgroups,
// routes and files are removed (its folder is kept when the test failed). It skips the test
// when not run as root and fails it when a tool is missing or Main is not the TestMain.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("real clusters need real root (kubelet and runc need real cgroups and namespaces): run the tests as root")
	}
	if !inLab {
		t.Fatal("realcluster.Start needs the lab namespace: call realcluster.Main(m) from TestMain")
	}
	if opts.Name == "" {
		t.Fatal("realcluster.Options.Name is required")
	}
	if opts.Nodes == 0 {
		opts.Nodes = 1
	}
	tl, err := findTools()
	if err != nil {
		t.Fatal(err)
	}
	images, err := ImageTars()
	if err != nil {
		t.Fatalf("building the pause and test images: %v", err)
	}
	begin := time.Now()
	c := &Cluster{Name: opts.Name, NodePortRange: DefaultNodePortRange, t: t, tools: tl}
	labMu.Lock()
	if labClusters[opts.Name] {
		labMu.Unlock()
		t.Fatalf("a cluster named %q already runs in the lab", opts.Name)
	}
	labClusters[opts.Name] = true
	cidr := labNextCIDR
	labNextCIDR++
	labMu.Unlock()
	c.PodCIDR = fmt.Sprintf("10.%d.0.0/16", 200+cidr)
	c.ServiceCIDR = fmt.Sprintf("10.%d.0.0/16", 96+cidr)
	t.Cleanup(c.stop)
	if err := c.boot(opts, images[PauseImage]); err != nil {
		t.Fatalf("starting real cluster %s: %v", opts.Name, err)
	}
	c.BootTime = time.Since(begin)
	t.Logf("real cluster %s: %d node(s) %v ready in %s (pause image import %s); logs in %s",
		c.Name, len(c.nodes), c.NodeIPs, c.BootTime.Round(time.Millisecond), c.ImportTime.Round(time.Millisecond), c.LogDir)
	return c
}

func (c *Cluster) boot(opts Options, pauseTar string) error {
	var err error
	if c.dir, err = os.MkdirTemp("", "realcluster-"+hostPID()+"-"+c.Name+"-"); err != nil {
		return fmt.Errorf("making the cluster's folder: %w", err)
	}
	c.LogDir = filepath.Join(c.dir, "logs")
	sysctls := filepath.Join(c.dir, "sysctl")
	for _, d := range []string{c.LogDir, sysctls, filepath.Join(c.dir, "pki"), filepath.Join(c.dir, "home")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("making %s: %w", d, err)
		}
	}
	for key, value := range kubeletSysctls {
		if err := os.WriteFile(filepath.Join(sysctls, strings.ReplaceAll(key, "/", ".")), []byte(value+"\n"), 0o444); err != nil {
			return fmt.Errorf("writing the node's %s: %w", key, err)
		}
	}
	// The nodes: namespaces, addresses and routes.
	for i := 0; i < opts.Nodes; i++ {
		if err := c.addNode(i, sysctls); err != nil {
			return err
		}
	}
	if err := c.writePKI(); err != nil {
		return err
	}
	cp := c.nodes[0]
	server := "https://" + cp.ip.String() + ":6443"
	if c.Kubeconfig, err = c.pki.kubeconfig("admin", server); err != nil {
		return err
	}
	if c.RESTConfig, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return fmt.Errorf("loading %s: %w", c.Kubeconfig, err)
	}
	if c.Client, err = kubernetes.NewForConfig(c.RESTConfig); err != nil {
		return fmt.Errorf("making a client: %w", err)
	}
	for _, n := range c.nodes {
		if err := c.startContainerd(n, opts.Registry); err != nil {
			return err
		}
	}
	if err := c.startControlPlane(cp, server); err != nil {
		return err
	}
	importStart := time.Now()
	if err := c.ImportImage(pauseTar); err != nil {
		return err
	}
	c.ImportTime = time.Since(importStart)
	for _, n := range c.nodes {
		if err := c.startNodeAgents(n, server); err != nil {
			return err
		}
	}
	ctx := context.Background()
	for _, n := range c.nodes {
		name := n.name
		if err := c.waitFor(2*time.Minute, "node "+name+" to be Ready", func() (bool, error) {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					return cond.Status == corev1.ConditionTrue, fmt.Errorf("Ready=%s: %s", cond.Status, cond.Message)
				}
			}
			return false, errors.New("no Ready condition yet")
		}); err != nil {
			return err
		}
	}
	if err := c.waitFor(time.Minute, "the default ServiceAccount", func() (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	}); err != nil {
		return err
	}
	return c.publishClusterInfo(ctx, server)
}

// publishClusterInfo writes the ConfigMap kube-public/cluster-info as kubeadm's
// bootstrap-token phase does: key "kubeconfig", a kubeconfig with one unnamed cluster (the
// API server's address and CA, no user), readable by anonymous clients through the Role
// and RoleBinding kubeadm:bootstrap-signer-clusterinfo. Programs that find the cluster's
// public address there (kubelb's manager writes the tenants' kubeconfigs from it) see what
// they see in a kubeadm cluster.
func (c *Cluster) publishClusterInfo(ctx context.Context, server string) error {
	kubeconfig := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: \"\"\n  cluster:\n    certificate-authority-data: %s\n    server: %s\ncontexts: []\ncurrent-context: \"\"\npreferences: {}\nusers: []\n",
		base64.StdEncoding.EncodeToString(c.pki.caPEM()), server)
	const name = "kubeadm:bootstrap-signer-clusterinfo"
	if _, err := c.Client.CoreV1().ConfigMaps(metav1.NamespacePublic).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-info", Namespace: metav1.NamespacePublic},
		Data:       map[string]string{"kubeconfig": kubeconfig},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating kube-public/cluster-info: %w", err)
	}
	if _, err := c.Client.RbacV1().Roles(metav1.NamespacePublic).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespacePublic},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"cluster-info"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the Role %s: %w", name, err)
	}
	if _, err := c.Client.RbacV1().RoleBindings(metav1.NamespacePublic).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespacePublic},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "system:anonymous"}},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the RoleBinding %s: %w", name, err)
	}
	return nil
}

// addNode makes node i: its init (namespaces), its veth on the lab bridge, its address,
// and routes between its Pod /24 and every other node of the lab.
func (c *Cluster) addNode(i int, sysctls string) error {
	labMu.Lock()
	index := labNextNode
	labNextNode++
	labMu.Unlock()
	n := &node{
		name:    fmt.Sprintf("%s-%d", c.Name, i),
		index:   index,
		ip:      labNodeIP(index),
		podCIDR: strings.Replace(c.PodCIDR, ".0.0/16", fmt.Sprintf(".%d.0/24", i), 1),
	}
	n.cgroup = fmt.Sprintf("/realcluster-%s-%s", hostPID(), n.name)
	n.dir = filepath.Join(c.dir, n.name)
	if err := os.MkdirAll(filepath.Join(n.dir, "net.d"), 0o755); err != nil {
		return fmt.Errorf("making %s: %w", n.dir, err)
	}
	log, err := os.Create(filepath.Join(c.LogDir, n.name+"-init.log"))
	if err != nil {
		return fmt.Errorf("creating the init log of %s: %w", n.name, err)
	}
	defer log.Close()
	if n.init, err = startNodeInit(n.name, sysctls, log); err != nil {
		return err
	}
	c.nodes = append(c.nodes, n)
	c.NodeNames = append(c.NodeNames, n.name)
	c.NodeIPs = append(c.NodeIPs, n.ip.String())
	veth := fmt.Sprintf("rc%d", n.index)
	pid := strconv.Itoa(n.init.Process.Pid)
	for _, args := range [][]string{
		{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", pid},
		{"link", "set", veth, "master", LabBridge, "up"},
	} {
		if err := run("ip", args...); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
	}
	for _, args := range [][]string{
		{"addr", "add", n.ip.String() + "/24", "dev", "eth0"},
		{"link", "set", "eth0", "up"},
		{"route", "add", "default", "via", LabAddress},
	} {
		if err := n.run(c.tools.nsenter, "ip", args...); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
	}
	if err := createCgroup(n.cgroup); err != nil {
		return fmt.Errorf("node %s: %w", n.name, err)
	}
	labMu.Lock()
	defer labMu.Unlock()
	for other := range labNodes {
		if err := n.run(c.tools.nsenter, "ip", "route", "add", other.podCIDR, "via", other.ip.String()); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
		if err := other.run(c.tools.nsenter, "ip", "route", "add", n.podCIDR, "via", n.ip.String()); err != nil {
			return fmt.Errorf("node %s: %w", other.name, err)
		}
	}
	if err := run("ip", "route", "add", n.podCIDR, "via", n.ip.String()); err != nil {
		return fmt.Errorf("lab route to node %s's Pods: %w", n.name, err)
	}
	labNodes[n] = true
	n.routed = true
	return nil
}

// nsenterArgs returns the arguments of nsenter that run args in every namespace of n.
func (n *node) nsenterArgs(args ...string) []string {
	return append([]string{"--target", strconv.Itoa(n.init.Process.Pid), "--net", "--mount", "--pid", "--uts", "--ipc", "--"}, args...)
}

// run runs a short command in n's namespaces.
func (n *node) run(nsenter, name string, args ...string) error {
	cmd := exec.Command(nsenter, n.nsenterArgs(append([]string{name}, args...)...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// nodeEnv is the environment of every node process: the tools first on PATH, HOME and
// TMPDIR on the node's tmpfs.
func (c *Cluster) nodeEnv() []string {
	return []string{
		"PATH=" + c.tools.node + ":" + c.tools.k8s + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/run/home", "TMPDIR=/run/tmp",
	}
}

// start starts a long-running component in n's namespaces, its output in LogDir.
func (c *Cluster) start(n *node, name string, args ...string) error {
	logPath := filepath.Join(c.LogDir, n.name+"-"+name+".log")
	log, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("creating %s: %w", logPath, err)
	}
	cmd := exec.Command(c.tools.nsenter, n.nsenterArgs(args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = c.nodeEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("starting %s on %s: %w", name, n.name, err)
	}
	p := &proc{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	n.procs = append(n.procs, p)
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return nil
}

// exited returns an error naming the first component that ended, with its log's end.
func (c *Cluster) exited() error {
	for _, n := range c.nodes {
		for _, p := range n.procs {
			select {
			case <-p.done:
				return fmt.Errorf("%s on %s exited (%v); the end of %s:\n%s", p.name, n.name, p.err, p.log, tail(p.log, 25))
			default:
			}
		}
	}
	return nil
}

// waitFor polls cond every 200 ms until it holds, a component exits or timeout passes.
func (c *Cluster) waitFor(timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		last = err
		if err := c.exited(); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: not after %s (last: %v)", what, timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// ImportImage imports an OCI image layout tar into every node's
// containerd, in the k8s.io namespace the kubelet uses (`ctr images import`). The image's
// name comes from the tar's index (annotation io.containerd.image.name).
func (c *Cluster) ImportImage(tarPath string) error {
	for i := range c.nodes {
		if _, err := c.Ctr(i, "-n", "k8s.io", "images", "import", tarPath); err != nil {
			return fmt.Errorf("importing %s: %w", tarPath, err)
		}
	}
	return nil
}

// NodeExec runs a program in every namespace of node i (0 first), as root, with the node's
// environment, and returns its combined output (e.g. NodeExec(0, "ip", "route")).
func (c *Cluster) NodeExec(i int, name string, args ...string) (string, error) {
	if i < 0 || i >= len(c.nodes) {
		return "", fmt.Errorf("cluster %s has no node %d", c.Name, i)
	}
	cmd := exec.Command(c.tools.nsenter, c.nodes[i].nsenterArgs(append([]string{name}, args...)...)...)
	cmd.Env = c.nodeEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s on %s: %w: %s", name, strings.Join(args, " "), c.nodes[i].name, err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Ctr runs ctr against the containerd of node i (0 first), in its namespaces, and returns
// its combined output; e.g. Ctr(0, "-n", "k8s.io", "images", "ls"). Paths given must be
// readable from the node (anything outside its /run, /var/log and /var/lib is).
func (c *Cluster) Ctr(i int, args ...string) (string, error) {
	return c.NodeExec(i, filepath.Join(c.tools.node, "ctr"), append([]string{"--address", "/run/containerd/containerd.sock"}, args...)...)
}

// ClientEnv returns the environment for a client program run against the cluster from the
// lab (kubectl, helm): KUBECONFIG is the admin kubeconfig and HOME a folder of the cluster's
// own (their caches), e.g. cmd.Env = append(os.Environ(), c.ClientEnv()...).
func (c *Cluster) ClientEnv() []string {
	return []string{"KUBECONFIG=" + c.Kubeconfig, "HOME=" + filepath.Join(c.dir, "home")}
}

// Kubectl runs kubectl with the cluster's admin kubeconfig (ClientEnv) and returns its
// standard output; the error carries its standard error.
func (c *Cluster) Kubectl(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(c.tools.k8s, "kubectl"), args...)
	cmd.Env = append(os.Environ(), c.ClientEnv()...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// Stop stops the cluster now rather than when the test ends (see stop); it is safe to
// call more than once.
func (c *Cluster) Stop() { c.stop() }

// stop kills every node (its init, and with it every process of its PID namespace), waits
// for the components, removes the routes to its Pods and its cgroups, and removes its
// folder (kept, and named, when the test failed).
func (c *Cluster) stop() {
	c.stopOnce.Do(func() {
		t := c.t
		begin := time.Now()
		var problems []string
		for _, n := range c.nodes {
			if n.init == nil {
				continue
			}
			_ = n.init.Process.Kill()
			_ = n.init.Wait()
		}
		deadline := time.After(30 * time.Second)
		for _, n := range c.nodes {
			for _, p := range n.procs {
				select {
				case <-p.done:
				case <-deadline:
					problems = append(problems, fmt.Sprintf("%s on %s did not end", p.name, n.name))
				}
			}
		}
		labMu.Lock()
		for _, n := range c.nodes {
			delete(labNodes, n)
		}
		for _, n := range c.nodes {
			if !n.routed {
				continue
			}
			for other := range labNodes {
				if err := other.run(c.tools.nsenter, "ip", "route", "del", n.podCIDR); err != nil {
					problems = append(problems, err.Error())
				}
			}
			if err := run("ip", "route", "del", n.podCIDR); err != nil {
				problems = append(problems, err.Error())
			}
		}
		delete(labClusters, c.Name)
		labMu.Unlock()
		for _, n := range c.nodes {
			if err := removeCgroup(n.cgroup, 20*time.Second); err != nil {
				problems = append(problems, err.Error())
			}
		}
		if len(problems) > 0 {
			t.Errorf("stopping real cluster %s: %s", c.Name, strings.Join(problems, "; "))
		}
		if c.dir == "" {
			return
		}
		if t.Failed() || os.Getenv(KeepEnv) != "" {
			var names []string
			entries, _ := os.ReadDir(c.LogDir)
			for _, e := range entries {
				names = append(names, e.Name())
			}
			sort.Strings(names)
			if err := os.WriteFile(filepath.Join(c.dir, keptMarker), nil, 0o644); err != nil {
				t.Errorf("marking %s kept: %v", c.dir, err)
			}
			t.Logf("real cluster %s stopped; its folder (logs: %s) is kept: %s", c.Name, strings.Join(names, ", "), c.dir)
			return
		}
		if err := os.RemoveAll(c.dir); err != nil {
			t.Errorf("removing %s: %v", c.dir, err)
		}
		t.Logf("real cluster %s stopped in %s", c.Name, time.Since(begin).Round(time.Millisecond))
	})
}

// RSS returns the resident memory of every process of the cluster's nodes (control plane,
// containerd, kubelet, kube-proxy, shims and containers: every process a node's PID
// namespace sees, read from the node's own /proc), in bytes, and how many processes that is.
func (c *Cluster) RSS() (bytes int64, processes int, err error) {
	for _, n := range c.nodes {
		procfs := fmt.Sprintf("/proc/%d/root/proc", n.init.Process.Pid)
		entries, err := os.ReadDir(procfs)
		if err != nil {
			return 0, 0, fmt.Errorf("listing the processes of %s: %w", n.name, err)
		}
		for _, e := range entries {
			if _, err := strconv.Atoi(e.Name()); err != nil {
				continue
			}
			status, err := os.ReadFile(filepath.Join(procfs, e.Name(), "status"))
			if err != nil {
				continue // ended meanwhile
			}
			for _, line := range strings.Split(string(status), "\n") {
				if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
					kib, _ := strconv.ParseInt(f[1], 10, 64)
					bytes += kib * 1024
					processes++
				}
			}
		}
	}
	return bytes, processes, nil
}
