// Package framework is the e2e harness: real hub and tenant API servers, the real kubelb and
// ccm binaries, real Envoy processes started from the bootstrap the manager generated, and
// backend servers on the tenant nodes' addresses and NodePorts. It plays only what has no
// place on one machine: the kubelets (Nodes, pods), kube-proxy (backends listen on
// node-address:NodePort) and the hub's own LoadBalancer implementation.
package framework

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/admission"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// ManagerNamespace is where the e2e runs the manager.
const ManagerNamespace = "kubelb"

// LoopbackCIDR is the range of the tenant nodes' addresses; AddTenant allows it in the
// Tenant's endpoint policy (spec.endpointPolicy.allow), since it is denied by default.
const LoopbackCIDR = "127.0.0.0/8"

// LoopbackIPv6CIDR is the IPv6 loopback address as a range, for tenant nodes on ::1. The
// endpoint policy denies it by default, and allowing LoopbackCIDR does not open it: AddTenant
// allows it explicitly beside LoopbackCIDR.
const LoopbackIPv6CIDR = "::1/128"

// System is a running hub with the manager.
type System struct {
	T           testenv.TB
	Hub         *testenv.Cluster
	Manager     *testsupport.Process
	ManagerArgs []string
	// ManagerEnv is Options.ManagerEnv.
	ManagerEnv  []string
	XDSPort     int
	MetricsAddr string
	ProbeAddr   string
	tenantIPs   int
	// HubLBWrites counts the writes of the played hub LoadBalancer implementation.
	HubLBWrites *atomic.Int64

	// Replicated systems (Options.Replicated) reach the manager's xDS through the played
	// kubelb Service; replicaArgs builds a replica's flags from its own addresses.
	replicaArgs func(xds, metrics, probe string) []string
	replicasMu  sync.Mutex
	replicas    []*Replica
}

// Replica is one manager process of a replicated System, with its own xDS, metrics and
// probe addresses; every replica shares the hub, the namespace and the leader election.
type Replica struct {
	Process     *testsupport.Process
	XDSAddr     string
	MetricsAddr string
	ProbeAddr   string
}

// Options tune the system.
type Options struct {
	// ManagerKubeconfig runs the manager with this kubeconfig instead of the hub admin's
	// (e.g. one that impersonates the Helm chart's ServiceAccount).
	ManagerKubeconfig string
	// HubLB tunes the played hub load balancer.
	HubLB HubLBOptions
	// ExtraManagerArgs are appended to the manager's flags.
	ExtraManagerArgs []string
	// ManagerEnv are environment variables (KEY=value) added to the manager's, e.g. the
	// GOMEMLIMIT a container's memory limit would give it (process.SetMemoryLimit).
	ManagerEnv []string
	// Replicated plays the kubelb Service in front of the manager's xDS: the Envoy bootstrap
	// names the Service address (XDSPort), a forwarder there passes each connection (TLS
	// and all) to a live replica, as kube-proxy would, and AddManagerReplica starts more
	// replicas, each on its own xDS port. Without it, the one manager listens on XDSPort.
	Replicated bool
	// AdmissionWebhook runs the manager's admission webhook on loopback and points the hub's
	// ValidatingWebhookConfiguration at it by URL (envtest has no Service network): the
	// chart's, when a chart installed it, else admission.Configuration. Not with Replicated.
	AdmissionWebhook bool
}

// StartSystem starts the hub control plane and the real kubelb manager binary.
func StartSystem(t testenv.TB, hub *testenv.Cluster, opts Options) *System {
	t.Helper()
	ctx := context.Background()
	// The namespace exists already when a Helm chart was installed into it.
	if err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ManagerNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	s := &System{T: t, Hub: hub, XDSPort: testsupport.FreePort(t),
		MetricsAddr: testsupport.Loopback(testsupport.FreePort(t)), ProbeAddr: testsupport.Loopback(testsupport.FreePort(t))}
	kubeconfig := hub.Kubeconfig
	if opts.ManagerKubeconfig != "" {
		kubeconfig = opts.ManagerKubeconfig
	}
	xds := testsupport.Loopback(s.XDSPort)
	args := func(listen, metrics, probe string) []string {
		return append([]string{
			"--kubeconfig", kubeconfig, "--namespace", ManagerNamespace,
			"--listen-address", listen, "--envoy-xds-address", xds, "--envoy-listener-address", "127.0.0.1",
			"--metrics-addr", metrics, "--health-probe-bind-address", probe,
			"--tenant-kubeconfig-server", hub.Config.Host, "--log-format", "console",
		}, opts.ExtraManagerArgs...)
	}
	if opts.AdmissionWebhook {
		opts.ExtraManagerArgs = append(opts.ExtraManagerArgs, s.pointWebhookHere()...)
	}
	listen := xds
	if opts.Replicated {
		// The first replica listens on its own port; the played Service owns XDSPort.
		listen = testsupport.Loopback(testsupport.FreePort(t))
		s.replicaArgs = args
		s.playXDSService()
	}
	s.ManagerArgs = args(listen, s.MetricsAddr, s.ProbeAddr)
	s.ManagerEnv = opts.ManagerEnv
	s.HubLBWrites = PlayHubLoadBalancerWith(t, hub.Config, hub.Client, opts.HubLB)
	s.StartManager()
	if opts.Replicated {
		s.replicasMu.Lock()
		s.replicas = []*Replica{{Process: s.Manager, XDSAddr: listen, MetricsAddr: s.MetricsAddr, ProbeAddr: s.ProbeAddr}}
		s.replicasMu.Unlock()
	}
	return s
}

// playXDSService plays the kubelb Service of a replicated System: a TCP forwarder on the
// address the Envoy bootstrap names, whose endpoints are the replicas that are ready and
// still running. A replica whose process has ended (e.g. SIGKILLed) leaves the endpoints
// at the next pass, and its forwarded connections close with it, so Envoy reconnects
// through the Service to a live replica. The manager's xDS certificate names the host of
// --envoy-xds-address (127.0.0.1, the same for every replica), so the pass-through TLS
// still verifies.
func (s *System) playXDSService() {
	t := s.T
	f, err := forwardTCP(testsupport.Loopback(s.XDSPort), nil)
	if err != nil {
		t.Fatalf("playing the kubelb Service: %v", err)
	}
	t.Cleanup(f.Close)
	Every(t, 50*time.Millisecond, func(context.Context) bool {
		var live []string
		for _, r := range s.Replicas() {
			if !r.Process.Exited() {
				live = append(live, r.XDSAddr)
			}
		}
		f.setUpstreams(live)
		return false
	})
}

// Replicas returns the manager replicas of a replicated System, in the order they started
// (dead ones included).
func (s *System) Replicas() []*Replica {
	s.replicasMu.Lock()
	defer s.replicasMu.Unlock()
	return append([]*Replica(nil), s.replicas...)
}

// AddManagerReplica starts one more manager replica of a replicated System, on its own xDS,
// metrics and probe ports, and waits until it is ready (its caches synced); the played
// kubelb Service then forwards to it too.
func (s *System) AddManagerReplica() *Replica {
	t := s.T
	t.Helper()
	if s.replicaArgs == nil {
		t.Fatal("AddManagerReplica needs a System started with Options.Replicated")
	}
	r := &Replica{XDSAddr: testsupport.Loopback(testsupport.FreePort(t)),
		MetricsAddr: testsupport.Loopback(testsupport.FreePort(t)), ProbeAddr: testsupport.Loopback(testsupport.FreePort(t))}
	s.replicasMu.Lock()
	n := len(s.replicas)
	s.replicasMu.Unlock()
	r.Process = testsupport.StartProcess(t, fmt.Sprintf("kubelb-%d", n), testsupport.BuildBinary(t, "./cmd/kubelb"),
		s.replicaArgs(r.XDSAddr, r.MetricsAddr, r.ProbeAddr)...)
	testsupport.WaitHTTP200(t, r.Process, "http://"+r.ProbeAddr+"/readyz", 2*time.Minute)
	s.replicasMu.Lock()
	s.replicas = append(s.replicas, r)
	s.replicasMu.Unlock()
	return r
}

// IsLeader reports whether the replica holds the manager's leader lease, from its own
// leader_election_master_status metric.
func (r *Replica) IsLeader() (bool, error) {
	resp, err := http.Get("http://" + r.MetricsAddr + "/metrics")
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "leader_election_master_status{") && strings.Contains(line, `name="`+ManagerLeaderElectionID+`"`) {
			return strings.HasSuffix(strings.TrimSpace(line), " 1"), nil
		}
	}
	return false, nil
}

// ManagerLeaderElectionID is the name of the manager's leader Lease (in ManagerNamespace).
const ManagerLeaderElectionID = "kubelb-manager.kubelb.k8c.io"

// StartManager starts (or restarts) the manager binary and waits until it is ready.
func (s *System) StartManager() {
	t := s.T
	t.Helper()
	s.Manager = testsupport.StartProcessWithEnv(t, "kubelb", testsupport.BuildBinary(t, "./cmd/kubelb"), s.ManagerEnv, s.ManagerArgs...)
	testsupport.WaitHTTP200(t, s.Manager, "http://"+s.ProbeAddr+"/readyz", 2*time.Minute)
	s.replicasMu.Lock()
	if len(s.replicas) > 0 {
		s.replicas[0].Process = s.Manager
	}
	s.replicasMu.Unlock()
}

// StopManager stops the manager with SIGTERM and checks it exits cleanly.
func (s *System) StopManager() {
	t := s.T
	t.Helper()
	if code, err := s.Manager.Stop(30 * time.Second); err != nil || code != 0 {
		t.Fatalf("manager exit code %d, err %v", code, err)
	}
}

// Tenant is an onboarded tenant cluster with its ccm.
type Tenant struct {
	Name      string
	Namespace string
	Cluster   *testenv.Cluster
	CCM       *testsupport.Process
	NodeIPs   []string
	// MetricsAddr is where the ccm serves /metrics.
	MetricsAddr string
	sys         *System
	Envoy       *Envoy
}

// TenantOptions tune how a tenant's ccm runs.
type TenantOptions struct {
	// Nodes is the number of Ready nodes registered in the tenant cluster.
	Nodes int
	// Kubeconfig of the tenant cluster for the ccm (default: the cluster's admin).
	Kubeconfig string
	// LeaderElectionNamespace of the ccm (default kube-system).
	LeaderElectionNamespace string
	// Args are appended to the ccm's flags.
	Args []string
	// ExtraNodeAddresses registers one more Ready node per address (e.g. "::1"), after the
	// Nodes on fresh loopback addresses.
	ExtraNodeAddresses []string
	// EndpointAllow is the Tenant's spec.endpointPolicy.allow (default: LoopbackCIDR and
	// LoopbackIPv6CIDR).
	EndpointAllow []string
	// HubServer replaces the hub API server address in the kubeconfig the manager made for
	// the ccm (e.g. an APIProxy's URL).
	HubServer string
	// StaticAddresses is the Tenant's spec.gatewayAPI.staticAddresses: the addresses its
	// Gateways may ask for (none by default).
	StaticAddresses []string
}

// AddTenant onboards a tenant whose ccm runs with the tenant cluster's admin credentials.
func (s *System) AddTenant(name string, cluster *testenv.Cluster, nodes int, ccmArgs ...string) *Tenant {
	s.T.Helper()
	return s.AddTenantWith(name, cluster, TenantOptions{Nodes: nodes, Args: ccmArgs})
}

// AddTenantWith creates a Tenant (allowing LoopbackCIDR and LoopbackIPv6CIDR endpoints) on the hub, waits for the kubeconfig the manager made for
// it, registers nodes (Ready, on fresh loopback addresses) in the tenant cluster and starts the
// real ccm binary with exactly that kubeconfig.
func (s *System) AddTenantWith(name string, cluster *testenv.Cluster, opts TenantOptions) *Tenant {
	t := s.T
	t.Helper()
	ctx := context.Background()
	tn := &Tenant{Name: name, Namespace: hubnames.TenantNamespace(name), Cluster: cluster, sys: s,
		MetricsAddr: testsupport.Loopback(testsupport.FreePort(t))}
	// The tenant's nodes live on loopback addresses, which the endpoint policy denies by
	// default: the Tenant allows them.
	allow := opts.EndpointAllow
	if allow == nil {
		allow = []string{LoopbackCIDR, LoopbackIPv6CIDR}
	}
	spec := kubelbv1alpha1.TenantSpec{EndpointPolicy: &kubelbv1alpha1.EndpointPolicy{Allow: allow}}
	spec.GatewayAPI.StaticAddresses = opts.StaticAddresses
	if err := s.Hub.Client.Create(ctx, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{}
	testsupport.Eventually(t, time.Minute, "the ccm kubeconfig of tenant "+name, func() error {
		return s.Hub.Client.Get(ctx, client.ObjectKey{Namespace: tn.Namespace, Name: kubelbv1alpha1.CCMKubeconfigSecretName}, secret)
	})
	kubeconfig := filepath.Join(t.TempDir(), "kubelb-"+name)
	hubKubeconfig := secret.Data[kubelbv1alpha1.CCMKubeconfigSecretKey]
	if opts.HubServer != "" {
		var err error
		if hubKubeconfig, err = RewriteKubeconfigServer(hubKubeconfig, opts.HubServer); err != nil {
			t.Fatalf("pointing the ccm kubeconfig of tenant %s at %s: %v", name, opts.HubServer, err)
		}
	}
	if err := os.WriteFile(kubeconfig, hubKubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < opts.Nodes; i++ {
		s.tenantIPs++
		ip := fmt.Sprintf("127.0.0.%d", 10+s.tenantIPs)
		AddNode(t, cluster.Client, fmt.Sprintf("%s-node-%d", name, i), ip)
		tn.NodeIPs = append(tn.NodeIPs, ip)
	}
	for _, ip := range opts.ExtraNodeAddresses {
		AddNode(t, cluster.Client, fmt.Sprintf("%s-node-%d", name, len(tn.NodeIPs)), ip)
		tn.NodeIPs = append(tn.NodeIPs, ip)
	}
	tenantKubeconfig, leNamespace := cluster.Kubeconfig, "kube-system"
	if opts.Kubeconfig != "" {
		tenantKubeconfig = opts.Kubeconfig
	}
	if opts.LeaderElectionNamespace != "" {
		leNamespace = opts.LeaderElectionNamespace
	}
	args := append([]string{
		"--kubeconfig", tenantKubeconfig, "--kubelb-kubeconfig", kubeconfig, "--cluster-name", tn.Namespace,
		"--node-address-type", "InternalIP", "--metrics-addr", tn.MetricsAddr,
		"--leader-election-namespace", leNamespace,
		"--health-probe-bind-address", testsupport.Loopback(testsupport.FreePort(t)), "--log-format", "console",
	}, opts.Args...)
	tn.CCM = testsupport.StartProcess(t, "ccm-"+name, testsupport.BuildBinary(t, "./cmd/ccm"), args...)
	return tn
}

// LBService describes a tenant Service of type LoadBalancer.
type LBService struct {
	Name  string
	Ports []corev1.ServicePort
	Class *string
	// Mutate adjusts the Service before it is created.
	Mutate func(*corev1.Service)
}

// CreateService creates a LoadBalancer Service in the tenant's default namespace and returns
// it once the tenant API server has allocated its NodePorts.
func (tn *Tenant) CreateService(svc LBService) *corev1.Service {
	t := tn.sys.T
	t.Helper()
	obj := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, Ports: svc.Ports, LoadBalancerClass: svc.Class,
			Selector: map[string]string{"app": svc.Name},
		},
	}
	for i := range obj.Spec.Ports {
		if obj.Spec.Ports[i].TargetPort.IntValue() == 0 {
			obj.Spec.Ports[i].TargetPort = intstr.FromInt32(obj.Spec.Ports[i].Port)
		}
	}
	if svc.Mutate != nil {
		svc.Mutate(obj)
	}
	if err := tn.Cluster.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating Service %s: %v", svc.Name, err)
	}
	return obj
}

// StartBackends plays kube-proxy and the pods: for every node and every port of the Service,
// an echo server on node-address:NodePort that names the node and a Pod of the Service on it
// (<service>-<node>).
func (tn *Tenant) StartBackends(svc *corev1.Service) map[string][]*testsupport.Backend {
	t := tn.sys.T
	t.Helper()
	out := map[string][]*testsupport.Backend{}
	for _, p := range svc.Spec.Ports {
		for i, ip := range tn.NodeIPs {
			node := fmt.Sprintf("%s-node-%d", tn.Name, i)
			id := testsupport.Identity{Node: node, Pod: svc.Name + "-" + node}
			addr := net.JoinHostPort(ip, fmt.Sprint(p.NodePort))
			var b *testsupport.Backend
			if p.Protocol == corev1.ProtocolUDP {
				b = testsupport.StartUDPBackend(t, addr, id)
			} else {
				b = testsupport.StartTCPBackend(t, addr, id)
			}
			out[p.Name] = append(out[p.Name], b)
		}
	}
	return out
}

// WaitAddress waits until the tenant Service shows an address in status.loadBalancer.ingress.
func (tn *Tenant) WaitAddress(name string, timeout time.Duration) string {
	t := tn.sys.T
	t.Helper()
	var ip string
	testsupport.Eventually(t, timeout, "an address on Service "+name, func() error {
		svc := &corev1.Service{}
		if err := tn.Cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, svc); err != nil {
			return err
		}
		if len(svc.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no ingress yet")
		}
		ip = svc.Status.LoadBalancer.Ingress[0].IP
		return nil
	})
	return ip
}

// WaitAddresses waits until the tenant Service shows n addresses in
// status.loadBalancer.ingress and returns them.
func (tn *Tenant) WaitAddresses(name string, n int, timeout time.Duration) []string {
	t := tn.sys.T
	t.Helper()
	var ips []string
	testsupport.Eventually(t, timeout, fmt.Sprintf("%d addresses on Service %s", n, name), func() error {
		svc := &corev1.Service{}
		if err := tn.Cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, svc); err != nil {
			return err
		}
		ips = ips[:0]
		for _, in := range svc.Status.LoadBalancer.Ingress {
			ips = append(ips, in.IP)
		}
		if len(ips) != n {
			return fmt.Errorf("ingress %v", ips)
		}
		return nil
	})
	return ips
}

// ListenerPorts returns the Envoy listener ports allocated for a tenant Service, by Service
// port name, from the hub LoadBalancer's status.
func (tn *Tenant) ListenerPorts(svc *corev1.Service) map[string]int32 {
	t := tn.sys.T
	t.Helper()
	out := map[string]int32{}
	testsupport.Eventually(t, time.Minute, "allocated ports of "+svc.Name, func() error {
		lb := &kubelbv1alpha1.LoadBalancer{}
		if err := tn.sys.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: tn.Namespace, Name: string(svc.UID)}, lb); err != nil {
			return err
		}
		if len(lb.Status.Service.Ports) < len(svc.Spec.Ports) {
			return fmt.Errorf("%d of %d ports allocated", len(lb.Status.Service.Ports), len(svc.Spec.Ports))
		}
		for _, p := range lb.Status.Service.Ports {
			out[p.Name] = p.UpstreamTargetPort
		}
		return nil
	})
	return out
}

// StartEnvoy waits for the Envoy bootstrap the manager generated for this tenant and starts
// a real Envoy with it.
func (tn *Tenant) StartEnvoy(bootstrapOf func(ctx context.Context, c client.Reader, namespace string) ([]byte, error)) *Envoy {
	t := tn.sys.T
	t.Helper()
	var bootstrap []byte
	testsupport.Eventually(t, time.Minute, "the Envoy bootstrap of "+tn.Namespace, func() error {
		var err error
		bootstrap, err = bootstrapOf(context.Background(), tn.sys.Hub.Client, tn.Namespace)
		return err
	})
	tn.Envoy = StartEnvoy(t, "envoy-"+tn.Name, MountXDSSecret(t, tn.sys.Hub.Client, tn.Namespace, bootstrap))
	return tn.Envoy
}

// pointWebhookHere points the hub's ValidatingWebhookConfiguration for tenant objects at a
// loopback port (the chart's, or admission.Configuration when none is installed) and returns
// the manager flags that serve the webhook there.
func (s *System) pointWebhookHere() []string {
	t := s.T
	t.Helper()
	ctx := context.Background()
	addr := testsupport.Loopback(testsupport.FreePort(t))
	cc := admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://" + addr + admission.Path)}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	err := s.Hub.Client.Get(ctx, client.ObjectKey{Name: admission.ConfigurationName}, vwc)
	switch {
	case apierrors.IsNotFound(err):
		if err := s.Hub.Client.Create(ctx, admission.Configuration(cc)); err != nil {
			t.Fatalf("creating the ValidatingWebhookConfiguration: %v", err)
		}
	case err != nil:
		t.Fatalf("getting the ValidatingWebhookConfiguration: %v", err)
	default:
		for i := range vwc.Webhooks {
			vwc.Webhooks[i].ClientConfig = cc
		}
		if err := s.Hub.Client.Update(ctx, vwc); err != nil {
			t.Fatalf("pointing the chart's ValidatingWebhookConfiguration at the manager: %v", err)
		}
	}
	return []string{"--admission-webhook-address", addr, "--admission-webhook-host", "127.0.0.1"}
}
