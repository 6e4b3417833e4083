// Package testenv starts real control planes (kube-apiserver + etcd through controller-runtime's
// envtest) for integration and end-to-end tests: a hub and a tenant side by side, each with
// kubelb's CRDs and the Gateway API CRDs installed, handing out clients and kubeconfig files.
//
// The binaries come from `make tools` (bin/k8s/<version>); KUBEBUILDER_ASSETS overrides the
// folder. Tests fail, with the command to run, when they are missing. Processes, ports,
// Eventually, Envoy and backends are in internal/testsupport, which this package builds on.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"kubelb.dev/kubelb/internal/envoygatewaycrds"
	"kubelb.dev/kubelb/internal/gatewaycrds"
	"kubelb.dev/kubelb/internal/process"
	"kubelb.dev/kubelb/internal/testsupport"
)

// KubernetesVersion is the version of kube-apiserver and kubectl the tests use; hack/tools.sh
// builds the same. (Envoy's and Helm's are in internal/testsupport.)
const KubernetesVersion = "1.36.4"

// AssetsDir is the folder with kube-apiserver, etcd and kubectl.
func AssetsDir(t TB) string {
	t.Helper()
	dir := testsupport.Tool(t, "KUBEBUILDER_ASSETS", filepath.Join("k8s", KubernetesVersion), "kube-apiserver/etcd folder")
	for _, b := range []string{"kube-apiserver", "kube-controller-manager", "etcd", "kubectl"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			t.Fatalf("%s missing in %s: run `make tools`", b, dir)
		}
	}
	return dir
}

// Scheme knows the core kinds, kubelb's kinds and Gateway API's kinds.
func Scheme() *k8sruntime.Scheme { return process.Scheme() }

// Cluster is one running control plane.
type Cluster struct {
	Name string
	// Config is an admin (system:masters) rest config.
	Config *rest.Config
	// Client is an admin client with Scheme().
	Client client.Client
	// Kubeconfig is the path of an admin kubeconfig file.
	Kubeconfig string
	env        *envtest.Environment
	dir        string
}

// quietLogs keeps envtest's own logging out of test output; controllers under test that want
// logs set a logger of their own.
var quietLogs sync.Once

// Options tune a control plane.
type Options struct {
	// GatewayAPIChannel installs the Gateway API CRDs of that channel; "" installs none.
	GatewayAPIChannel string
	// WithoutKubelbCRDs leaves kubelb's CRDs out (for tests that install them, e.g. Helm).
	WithoutKubelbCRDs bool
	// KubelbCRDsDir installs the CRDs of this folder instead of kubelb's (e.g. KubeLBCECRDs).
	KubelbCRDsDir string
	// ServiceNodePortRange is the API server's --service-node-port-range ("30000-30009");
	// "" keeps the default (30000-32767).
	ServiceNodePortRange string
	// DualStack gives the API server an IPv6 Service range (DualStackServiceRange) after the
	// IPv4 one: Services may then ask for IPv6 and dual-stack (ipFamilyPolicy). Without it
	// the control plane is IPv4 single-stack and refuses them.
	DualStack bool
}

// ServiceRange and DualStackServiceRange are the API server's --service-cluster-ip-range,
// single-stack and with DualStack. (IPv6 ranges must be /108 or narrower for the
// API server's allocator.)
const (
	ServiceRange          = "10.0.0.0/16"
	DualStackServiceRange = ServiceRange + ",fd00:10::/108"
)

// Start starts one control plane and stops it when the test ends.
func Start(t TB, name string, opts Options) *Cluster {
	t.Helper()
	c, err := start(t, AssetsDir(t), name, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// start may run off the test goroutine: it returns errors instead of failing the test.
func start(t TB, assets, name string, opts Options) (*Cluster, error) {
	quietLogs.Do(func() { ctrllog.SetLogger(logr.Discard()) })
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		ErrorIfCRDPathMissing: true,
		// envtest's default (20 s) is too short for a loaded 2-core machine starting several
		// API servers at once; a slow start is not a failure of the code under test.
		ControlPlaneStartTimeout: 2 * time.Minute,
		// The same for the wait until the CRDs are served (envtest's default: 10 s), which
		// failed TestHubForbidden once in a CI run beside other work.
		CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: time.Minute},
	}
	// Room for thousands of Services (envtest's default is a /24), for burst tests.
	serviceRange := ServiceRange
	if opts.DualStack {
		serviceRange = DualStackServiceRange
	}
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", serviceRange)
	// The played kubelets (e2e/framework) serve Pod logs on their node's InternalIP; their
	// Hostname addresses (the node names) resolve nowhere.
	env.ControlPlane.GetAPIServer().Configure().Set("kubelet-preferred-address-types", "InternalIP,ExternalIP,Hostname")
	if opts.ServiceNodePortRange != "" {
		env.ControlPlane.GetAPIServer().Configure().Set("service-node-port-range", opts.ServiceNodePortRange)
	}
	switch {
	case opts.KubelbCRDsDir != "":
		env.CRDDirectoryPaths = []string{opts.KubelbCRDsDir}
	case !opts.WithoutKubelbCRDs:
		env.CRDDirectoryPaths = []string{filepath.Join(testsupport.RepoRoot(), "config", "crd", "bases")}
	}
	if opts.GatewayAPIChannel != "" {
		crds, err := gatewaycrds.CRDs(opts.GatewayAPIChannel)
		if err != nil {
			return nil, err
		}
		// Tenants with Gateway API also serve Envoy Gateway's BackendTrafficPolicy,
		// SecurityPolicy and ClientTrafficPolicy, whose policies kubelb's ccm reads.
		eg, err := envoygatewaycrds.All()
		if err != nil {
			return nil, err
		}
		env.CRDs = append(crds, eg...)
	}
	cfg, err := env.Start()
	if err != nil {
		// envtest leaves etcd and the API server running when what follows their start
		// fails (installing the CRDs): stop them, or they outlive the test.
		if stopErr := env.Stop(); stopErr != nil {
			t.Logf("stopping %s control plane after a failed start: %v", name, stopErr)
		}
		return nil, fmt.Errorf("starting %s control plane: %w", name, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stopping %s control plane: %v", name, err)
		}
	})
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, err
	}
	cl := &Cluster{Name: name, Config: cfg, Client: c, env: env, dir: t.TempDir()}
	if cl.Kubeconfig, err = cl.writeKubeconfig("admin", []string{"system:masters"}); err != nil {
		return nil, err
	}
	return cl, nil
}

// WriteKubeconfig adds a user to the control plane (client certificate) and writes a kubeconfig
// for it into a temporary folder.
func (c *Cluster) WriteKubeconfig(t TB, user string, groups []string) string {
	t.Helper()
	p, err := c.writeKubeconfig(user, groups)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (c *Cluster) writeKubeconfig(user string, groups []string) (string, error) {
	u, err := c.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return "", fmt.Errorf("adding user %s to %s: %w", user, c.Name, err)
	}
	raw, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	p := filepath.Join(c.dir, fmt.Sprintf("%s-%s.kubeconfig", c.Name, user))
	return p, os.WriteFile(p, raw, 0o600)
}

// Pair is a hub and a tenant control plane.
type Pair struct {
	Hub    *Cluster
	Tenant *Cluster
}

// StartPair starts a hub and a tenant control plane side by side (start-up is mostly
// waiting, so both start at once). The hub gets kubelb's CRDs, both the standard Gateway API
// CRDs.
func StartPair(t TB) *Pair {
	t.Helper()
	return StartPairWith(t, PairOptions{})
}

// PairOptions tune StartPairWith.
type PairOptions struct {
	// DualStack gives both control planes a dual-stack Service range (Options.DualStack).
	DualStack bool
	// HubCRDsDir gives the hub the CRDs of this folder instead of kubelb's (e.g. KubeLBCECRDs:
	// a KubeLB CE hub).
	HubCRDsDir string
	// TenantServiceNodePortRange is the tenant API server's --service-node-port-range
	// (default 30000-32767: 2768 ports, one per port of a tenant LoadBalancer Service).
	TenantServiceNodePortRange string
}

// StartPairWith is StartPair with options.
func StartPairWith(t TB, o PairOptions) *Pair {
	t.Helper()
	assets := AssetsDir(t)
	var tenant *Cluster
	var tenantErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		tenant, tenantErr = start(t, assets, "tenant", Options{GatewayAPIChannel: "standard", WithoutKubelbCRDs: true,
			DualStack: o.DualStack, ServiceNodePortRange: o.TenantServiceNodePortRange})
	}()
	hub, hubErr := start(t, assets, "hub", Options{GatewayAPIChannel: "standard", DualStack: o.DualStack, KubelbCRDsDir: o.HubCRDsDir})
	<-done
	if hubErr != nil || tenantErr != nil {
		t.Fatalf("starting control planes: hub: %v, tenant: %v", hubErr, tenantErr)
	}
	return &Pair{Hub: hub, Tenant: tenant}
}

// EtcdMetricsURL is the /metrics address of the cluster's etcd (e.g. for
// etcd_mvcc_db_total_size_in_bytes).
func (c *Cluster) EtcdMetricsURL() string {
	u := *c.env.ControlPlane.Etcd.URL
	u.Path = "/metrics"
	return u.String()
}
