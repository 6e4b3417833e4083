package realcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// writePKI writes the cluster's CA, the serving and client certificates of its
// components, their kubeconfigs and the ServiceAccount token signing key.
func (c *Cluster) writePKI() error {
	var err error
	if c.pki, err = newPKI(filepath.Join(c.dir, "pki"), c.Name); err != nil {
		return err
	}
	p := c.pki
	cp := c.nodes[0]
	_, svcNet, err := net.ParseCIDR(c.ServiceCIDR)
	if err != nil {
		return fmt.Errorf("parsing %s: %w", c.ServiceCIDR, err)
	}
	apiServiceIP := append(net.IP(nil), svcNet.IP.To4()...)
	apiServiceIP[3] = 1
	issues := []struct {
		name, cn string
		orgs     []string
		ips      []net.IP
		dns      []string
	}{
		{"apiserver", "kube-apiserver", nil, []net.IP{cp.ip, apiServiceIP, net.IPv4(127, 0, 0, 1)},
			[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost", cp.name}},
		{"admin", "realcluster-admin", []string{"system:masters"}, nil, nil},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil, nil},
		{"kube-controller-manager", "system:kube-controller-manager", nil, nil, nil},
		{"kube-scheduler", "system:kube-scheduler", nil, nil, nil},
		{"kube-proxy", "system:kube-proxy", nil, nil, nil},
	}
	for _, n := range c.nodes {
		issues = append(issues,
			struct {
				name, cn string
				orgs     []string
				ips      []net.IP
				dns      []string
			}{n.name + "-kubelet", "system:node:" + n.name, []string{"system:nodes"}, []net.IP{n.ip}, []string{n.name}})
	}
	for _, is := range issues {
		if err := p.issue(is.name, is.cn, is.orgs, is.ips, is.dns); err != nil {
			return err
		}
	}
	return p.serviceAccountKey()
}

// startContainerd writes n's containerd and CNI configuration and starts containerd.
func (c *Cluster) startContainerd(n *node, registry string) error {
	certsD := filepath.Join(n.dir, "certs.d")
	if err := os.MkdirAll(certsD, 0o755); err != nil {
		return fmt.Errorf("making %s: %w", certsD, err)
	}
	if registry != "" {
		hostDir := filepath.Join(certsD, registry)
		if err := os.MkdirAll(hostDir, 0o755); err != nil {
			return fmt.Errorf("making %s: %w", hostDir, err)
		}
		hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n  skip_verify = true\n",
			"http://"+registry, "http://"+registry)
		if err := os.WriteFile(filepath.Join(hostDir, "hosts.toml"), []byte(hosts), 0o644); err != nil {
			return fmt.Errorf("writing the registry hosts of %s: %w", n.name, err)
		}
	}
	// Bridge CNI, no masquerade: each node's Pods have a /24 of the cluster's PodCIDR and
	// every node (and the lab) routes each other node's /24 to that node (addNode).
	cni := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "realcluster",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}
    }
  ]
}
`, n.podCIDR)
	if err := os.WriteFile(filepath.Join(n.dir, "net.d", "10-realcluster.conflist"), []byte(cni), 0o644); err != nil {
		return fmt.Errorf("writing the CNI configuration of %s: %w", n.name, err)
	}
	config := fmt.Sprintf(`version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.internal.v1.opt"]

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = %q
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q
`, PauseImage, filepath.Join(c.tools.node, "runc"), filepath.Join(c.tools.node, "cni"), filepath.Join(n.dir, "net.d"), certsD)
	path := filepath.Join(n.dir, "containerd.toml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := c.start(n, "containerd", filepath.Join(c.tools.node, "containerd"), "--config", path); err != nil {
		return err
	}
	return c.waitFor(time.Minute, "containerd on "+n.name, func() (bool, error) {
		err := n.run(c.tools.nsenter, filepath.Join(c.tools.node, "ctr"), "--address", "/run/containerd/containerd.sock", "version")
		return err == nil, err
	})
}

// startControlPlane starts etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler on n and waits until the API server is ready.
func (c *Cluster) startControlPlane(n *node, server string) error {
	p := c.pki
	k8s := func(name string) string { return filepath.Join(c.tools.k8s, name) }
	if err := c.start(n, "etcd", k8s("etcd"), "--name=default", "--data-dir=/var/lib/etcd",
		"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=default=http://127.0.0.1:2380", "--unsafe-no-fsync", "--log-level=warn"); err != nil {
		return err
	}
	if err := c.start(n, "kube-apiserver", k8s("kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=0.0.0.0", "--secure-port=6443", "--advertise-address="+n.ip.String(),
		"--service-cluster-ip-range="+c.ServiceCIDR, "--service-node-port-range="+c.NodePortRange,
		"--tls-cert-file="+p.path("apiserver.crt"), "--tls-private-key-file="+p.path("apiserver.key"),
		"--client-ca-file="+p.path("ca.crt"),
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+p.path("sa.pub"), "--service-account-signing-key-file="+p.path("sa.key"),
		"--kubelet-client-certificate="+p.path("apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+p.path("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--allow-privileged=true", "--profiling=false", "--v=1"); err != nil {
		return err
	}
	ctx := context.Background()
	if err := c.waitFor(2*time.Minute, "kube-apiserver on "+n.name, func() (bool, error) {
		body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Raw()
		return err == nil && strings.TrimSpace(string(body)) == "ok", err
	}); err != nil {
		return err
	}
	kcm, err := p.kubeconfig("kube-controller-manager", server)
	if err != nil {
		return err
	}
	if err := c.start(n, "kube-controller-manager", k8s("kube-controller-manager"),
		"--kubeconfig="+kcm, "--leader-elect=false", "--secure-port=0",
		"--cluster-cidr="+c.PodCIDR, "--allocate-node-cidrs=false", "--service-cluster-ip-range="+c.ServiceCIDR,
		"--service-account-private-key-file="+p.path("sa.key"), "--root-ca-file="+p.path("ca.crt"),
		"--use-service-account-credentials=true",
		"--cluster-signing-cert-file="+p.path("ca.crt"), "--cluster-signing-key-file="+p.path("ca.key"),
		"--flex-volume-plugin-dir=/var/lib/kube-controller-manager/volume-plugins",
		"--profiling=false", "--v=1"); err != nil {
		return err
	}
	sched, err := p.kubeconfig("kube-scheduler", server)
	if err != nil {
		return err
	}
	if err := c.start(n, "kube-scheduler", k8s("kube-scheduler"),
		"--kubeconfig="+sched, "--leader-elect=false", "--secure-port=0", "--profiling=false", "--v=1"); err != nil {
		return err
	}
	// The scheduler is ready when the API server has its default priority classes and it
	// has not exited; Pods wait in Pending until it runs.
	return c.waitFor(time.Minute, "the default namespace", func() (bool, error) {
		_, err := c.Client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
}

// startNodeAgents starts kubelet and kube-proxy (nftables mode) on n.
func (c *Cluster) startNodeAgents(n *node, server string) error {
	p := c.pki
	kubeconfig, err := p.kubeconfig(n.name+"-kubelet", server)
	if err != nil {
		return err
	}
	resolv := filepath.Join(n.dir, "resolv.conf")
	// No cluster DNS runs: Pods get this (a name server that never answers, in the lab).
	if err := os.WriteFile(resolv, []byte("nameserver "+LabAddress+"\noptions timeout:1 attempts:1\n"), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", resolv, err)
	}
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %s}
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: %s
cgroupsPerQOS: true
failCgroupV1: false
protectKernelDefaults: true
failSwapOn: false
resolvConf: %s
clusterDomain: cluster.local
volumePluginDir: /var/lib/kubelet/volume-plugins
serializeImagePulls: false
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, n.ip, p.path(n.name+"-kubelet.crt"), p.path(n.name+"-kubelet.key"), p.path("ca.crt"), n.cgroup, resolv)
	path := filepath.Join(n.dir, "kubelet.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := c.start(n, "kubelet", filepath.Join(c.tools.k8s, "kubelet"), "--config="+path, "--kubeconfig="+kubeconfig,
		"--hostname-override="+n.name, "--node-ip="+n.ip.String(), "--v=1"); err != nil {
		return err
	}
	proxyKubeconfig, err := p.kubeconfig("kube-proxy", server)
	if err != nil {
		return err
	}
	proxyConfig := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
clusterCIDR: %s
conntrack:
  maxPerCore: 0
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
`, proxyKubeconfig, n.name, c.PodCIDR)
	proxyPath := filepath.Join(n.dir, "kube-proxy.yaml")
	if err := os.WriteFile(proxyPath, []byte(proxyConfig), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", proxyPath, err)
	}
	return c.start(n, "kube-proxy", filepath.Join(c.tools.k8s, "kube-proxy"), "--config="+proxyPath, "--v=1")
}
