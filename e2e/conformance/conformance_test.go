// Package conformance runs the official Gateway API conformance suite
// (sigs.k8s.io/gateway-api/conformance) against kubelb: the suite writes Gateways, routes,
// Services and Deployments into a real tenant API server, and its requests take the whole
// kubelb path — ccm → hub → manager → real Envoy → the tenant's nodes → the echo Pods.
package conformance

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/apis/v1alpha2"
	"sigs.k8s.io/gateway-api/apis/v1alpha3"
	xv1alpha1 "sigs.k8s.io/gateway-api/apisx/v1alpha1"
	"sigs.k8s.io/gateway-api/conformance"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/tests"
	conformanceconfig "sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/e2e/framework"
	"kubelb.dev/kubelb/internal/ccm/source"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// Profiles are the conformance profiles kubelb claims.
var Profiles = []suite.ConformanceProfileName{
	suite.GatewayHTTPConformanceProfileName,
	suite.GatewayGRPCConformanceProfileName,
	suite.GatewayTLSConformanceProfileName,
	suite.GatewayTCPConformanceProfileName,
	suite.GatewayUDPConformanceProfileName,
}

// ReportEnv names the file the conformance report is always written to (`make conformance`
// sets it to ReportFile). Without it the report is written to ReportFile only when it says
// something else than the one there (keptReport), so `make test` keeps the committed report
// true and leaves it alone when only its date or commit would change.
const ReportEnv = "KUBELB_CONFORMANCE_REPORT"

// ReportFile is the committed report, relative to the repository root.
const ReportFile = "docs/conformance/gateway-api-v1.6.3-report.yaml"

// RunTestEnv runs one conformance test by its short name (for debugging).
const RunTestEnv = "KUBELB_CONFORMANCE_RUN_TEST"

// ExperimentalReportFile is the committed report of the experimental channel's run,
// relative to the repository root.
const ExperimentalReportFile = "docs/conformance/gateway-api-v1.6.3-experimental-report.yaml"

// ExperimentalReportEnv is ReportEnv for ExperimentalReportFile.
const ExperimentalReportEnv = "KUBELB_CONFORMANCE_EXPERIMENTAL_REPORT"

// ExperimentalFeatures are the claimed features whose fields exist only in Gateway API's
// experimental channel (HTTPRoute rules[].retry): with the standard channel's CRDs the API
// server drops those fields, so the main run leaves them out and the experimental run checks
// them.
var ExperimentalFeatures = []features.FeatureName{
	features.SupportHTTPRouteRetry, features.SupportHTTPRouteRetryBackendTimeout, features.SupportHTTPRouteRetryConnectionError,
}

// TestGatewayAPIConformance runs the suite twice on one kubelb. The main run: every test of
// the claimed profiles and features against a tenant with the standard channel's CRDs (what
// most users install), claiming every supported feature but ExperimentalFeatures; its report
// is ReportFile. Then the experimental run (subtest "experimental"): the tenant's CRDs are
// upgraded in place to the experimental channel's, as a user would, and only the tests of
// ExperimentalFeatures run, claiming every supported feature; its report is
// ExperimentalReportFile. The second run shares the start-up and the suite's base resources,
// so it adds seconds, not a second start.
func TestGatewayAPIConformance(t *testing.T) {
	c, opts := harness(t)
	only := os.Getenv(RunTestEnv)
	experimental := experimentalTests()
	onlyExperimental := only != "" && slices.ContainsFunc(experimental, func(c suite.ConformanceTest) bool { return c.ShortName == only })
	if !onlyExperimental && only != TrafficTest {
		main := opts
		main.SupportedFeatures = slices.DeleteFunc(slices.Clone(source.SupportedFeatures), func(f features.FeatureName) bool {
			return slices.Contains(ExperimentalFeatures, f)
		})
		main.ConformanceProfiles = Profiles
		main.ReportOutputPath = filepath.Join(t.TempDir(), "report.yaml")
		// The suite writes its report in a cleanup, once its parallel tests are done; this one
		// runs after it (cleanups run last registered first).
		t.Cleanup(func() { keepReport(t, main.ReportOutputPath, ReportFile, ReportEnv) })
		conformance.RunConformanceWithOptions(t, main)
	}
	if only == TrafficTest {
		applyBaseResources(t, opts) // the main run, which applies them, did not run
	}
	if only == "" || only == TrafficTest {
		t.Run("traffic", func(t *testing.T) { trafficThroughStaticAddress(t, c, opts) })
	}
	if only != "" && !onlyExperimental {
		return
	}
	t.Run("experimental", func(t *testing.T) {
		if err := source.InstallCRDs(t.Context(), c, c, "experimental"); err != nil {
			t.Fatalf("upgrading the tenant's Gateway API CRDs to the experimental channel: %v", err)
		}
		exp := opts
		exp.SupportedFeatures = source.SupportedFeatures
		exp.ConformanceProfiles = []suite.ConformanceProfileName{suite.GatewayHTTPConformanceProfileName}
		// The main run deletes the base resources when the whole test ends.
		exp.CleanupBaseResources = onlyExperimental
		exp.ReportOutputPath = filepath.Join(t.TempDir(), "report.yaml")
		t.Cleanup(func() { keepReport(t, exp.ReportOutputPath, ExperimentalReportFile, ExperimentalReportEnv) })
		runTests(t, exp, experimental)
	})
}

// runTests runs some of the suite's tests (RunConformanceWithOptions runs them all) and
// writes their report to opts.ReportOutputPath.
func runTests(t *testing.T, opts suite.ConformanceOptions, selected []suite.ConformanceTest) {
	cSuite, err := suite.NewConformanceTestSuite(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r, err := cSuite.Report()
		if err != nil {
			t.Errorf("the suite's report: %v", err)
			return
		}
		b, err := yaml.Marshal(r)
		if err == nil {
			err = os.WriteFile(opts.ReportOutputPath, b, 0o644)
		}
		if err != nil {
			t.Errorf("writing the suite's report: %v", err)
		}
	})
	cSuite.Setup(t, selected)
	if err := cSuite.Run(t, selected); err != nil {
		t.Fatal(err)
	}
}

// applyBaseResources applies the suite's base resources (namespaces, backends, certificates),
// deleted when the test ends, without running any of its tests.
func applyBaseResources(t *testing.T, opts suite.ConformanceOptions) {
	opts.RunTest = ""
	opts.SupportedFeatures = source.SupportedFeatures
	opts.ConformanceProfiles = Profiles
	cSuite, err := suite.NewConformanceTestSuite(opts)
	if err != nil {
		t.Fatal(err)
	}
	cSuite.Setup(t, nil)
}

// experimentalTests are the suite's tests that need one of ExperimentalFeatures.
func experimentalTests() []suite.ConformanceTest {
	var out []suite.ConformanceTest
	for _, c := range tests.ConformanceTests {
		if slices.ContainsFunc(c.Features, func(f features.FeatureName) bool { return slices.Contains(ExperimentalFeatures, f) }) {
			out = append(out, c)
		}
	}
	return out
}

// UsableStaticAddress is inside the conformance tenant's grant (framework.StaticAddressCIDR)
// and UnusableStaticAddress outside it: the suite's GatewayStaticAddresses asks for them.
const (
	UsableStaticAddress   = "10.245.2.1"
	UnusableStaticAddress = "10.245.3.1"
)

// harness starts kubelb for the suite: a hub and a tenant control plane (the tenant with the
// standard channel's Gateway API CRDs), the tenant's controller manager and played kubelets
// and kube-proxy, the manager, the ccm and, once the manager deploys it, the tenant's Envoy.
// It returns a client of the tenant and the suite's options but for the features and
// profiles to claim and the report's path.
func harness(t *testing.T) (client.Client, suite.ConformanceOptions) {
	pair := testenv.StartPair(t)
	framework.StartControllerManager(t, pair.Tenant)
	sys := framework.StartSystem(t, pair.Hub, framework.Options{
		HubLB: framework.HubLBOptions{Address: framework.LoadBalancerAddress, ForwardTo: "127.0.0.1"},
	})
	// The tenant is granted static Gateway addresses (framework.StaticAddressCIDR), which the
	// played hub load balancer gives to a hub Service asking for them.
	tenant := sys.AddTenantWith("conformance", pair.Tenant, framework.TenantOptions{Nodes: 2, Args: []string{"--enable-gateway-api"},
		StaticAddresses: []string{framework.StaticAddressCIDR}})
	nodes := map[string]string{}
	for i, ip := range tenant.NodeIPs {
		nodes[fmt.Sprintf("%s-node-%d", tenant.Name, i)] = ip
	}
	echo := testsupport.BuildBinary(t, "sigs.k8s.io/gateway-api/conformance/echo-basic")
	coredns := testsupport.BuildBinary(t, "kubelb.dev/kubelb/e2e/images/coredns")
	framework.PlayKubelet(t, pair.Tenant.Config, pair.Tenant.Client, framework.KubeletOptions{
		Nodes:  nodes,
		Images: map[string]string{"registry.k8s.io/gateway-api/echo-basic": echo, framework.CoreDNSImage: coredns},
		Ports:  map[string]func([]string) []framework.StandInPort{framework.CoreDNSImage: framework.CoreDNSPorts},
	})
	framework.PlayKubeProxy(t, pair.Tenant.Client, tenant.NodeIPs)
	// The manager deploys the tenant's Envoy fleet once the tenant has something to serve (the
	// suite's first Gateway); the harness plays the hub's kubelet and starts Envoy then.
	startEnvoyWhenDeployed(t, sys, tenant)

	c, err := client.New(pair.Tenant.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, install := range []func(*runtime.Scheme) error{v1alpha3.Install, v1alpha2.Install, xv1alpha1.Install, gatewayv1.Install, apiextensionsv1.AddToScheme} {
		if err := install(c.Scheme()); err != nil {
			t.Fatal(err)
		}
	}
	opts := suite.ConformanceOptions{
		ConfigurableOptions: suite.ConfigurableOptions{
			GatewayClassName:     "kubelb",
			CleanupBaseResources: true,
			CleanupTestResources: true,
			TimeoutConfig:        conformanceconfig.DefaultTimeoutConfig(),
			Mode:                 "default",
			RunTest:              os.Getenv(RunTestEnv),
			Implementation: confv1.Implementation{
				Organization: "kubelb",
				Project:      "kubelb",
				URL:          "https://kubelb.dev",
				Version:      version(),
				Contact:      []string{"https://kubelb.dev"},
			},
			// GatewayStaticAddresses: an address inside the tenant's grant, and one outside it.
			UsableNetworkAddresses:   []gatewayv1.GatewaySpecAddress{{Type: ptr.To(gatewayv1.IPAddressType), Value: UsableStaticAddress}},
			UnusableNetworkAddresses: []gatewayv1.GatewaySpecAddress{{Type: ptr.To(gatewayv1.IPAddressType), Value: UnusableStaticAddress}},
		},
		Client:     c,
		Clientset:  kubernetes.NewForConfigOrDie(pair.Tenant.Config),
		RestConfig: pair.Tenant.Config,
		ManifestFS: []fs.FS{&conformance.Manifests},
	}
	opts.Hook = func(t *testing.T, test suite.ConformanceTest, _ *suite.ConformanceTestSuite) {
		if t.Failed() {
			dumpStatuses(t, c)
			dumpEnvoyClusters(t, tenant.Envoy)
		}
	}
	return c, opts
}

// keepReport writes the suite's report (at written) to env's file, or, when the whole run
// ran (not one test of it), to file (relative to the repository root) when it differs from
// that file in more than its date and implementation version.
func keepReport(t *testing.T, written, file, env string) {
	got, err := os.ReadFile(written)
	if err != nil {
		t.Logf("no conformance report to keep: %v", err)
		return
	}
	target, always := os.Getenv(env), true
	if target == "" && os.Getenv(RunTestEnv) != "" {
		return // one test's report is not the suite's
	}
	if target == "" {
		target, always = filepath.Join(testsupport.RepoRoot(), file), false
	}
	if !always {
		if before, err := os.ReadFile(target); err == nil && sameReport(t, before, got) {
			return
		}
	}
	if err := os.WriteFile(target, got, 0o644); err != nil {
		t.Errorf("writing the conformance report: %v", err)
		return
	}
	t.Logf("wrote the conformance report %s", target)
}

// sameReport tells whether two reports say the same but for their date and the version of
// the implementation (the commit).
func sameReport(t *testing.T, a, b []byte) bool {
	substance := func(doc []byte) string {
		var r confv1.ConformanceReport
		if err := yaml.Unmarshal(doc, &r); err != nil {
			t.Logf("reading a conformance report: %v", err)
			return string(doc)
		}
		r.Date, r.Implementation.Version = "", ""
		out, _ := yaml.Marshal(r)
		return string(out)
	}
	return substance(a) == substance(b)
}

// dumpStatuses logs the status kubelb wrote on every Gateway and route of the tenant, so a
// failed conformance test shows what kubelb reported.
// dumpEnvoyClusters logs what the tenant's Envoy counted per cluster (requests, connection
// failures, hosts), and the clusters still warming: where a request that should have reached
// a backend (a mirrored one, say) went.
func dumpEnvoyClusters(t *testing.T, e *framework.Envoy) {
	if e == nil {
		return
	}
	stats, err := e.Get(`/stats?filter=^cluster\..*\.(upstream_rq_total|upstream_rq_completed|upstream_cx_total|upstream_cx_connect_fail|upstream_rq_pending_failure_eject|membership_healthy|membership_total)$|^cluster_manager\.warming_clusters$`)
	if err != nil {
		t.Logf("Envoy's cluster stats: %v", err)
		return
	}
	t.Logf("Envoy's cluster stats:\n%s", stats)
}

func dumpStatuses(t *testing.T, c client.Client) {
	lists := []client.ObjectList{&gatewayv1.GatewayList{}, &gatewayv1.HTTPRouteList{}, &gatewayv1.GRPCRouteList{}, &gatewayv1.TLSRouteList{}, &gatewayv1.TCPRouteList{}, &gatewayv1.UDPRouteList{}}
	for _, l := range lists {
		if err := c.List(context.Background(), l); err != nil {
			t.Logf("listing %T: %v", l, err)
			continue
		}
		b, _ := yaml.Marshal(l)
		t.Logf("%T:\n%s", l, statusOnly(b))
	}
}

// statusOnly keeps the names and statuses of a YAML list.
func statusOnly(b []byte) string {
	var doc struct {
		Items []struct {
			Metadata struct{ Name, Namespace string } `json:"metadata"`
			Status   any                              `json:"status"`
		} `json:"items"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return string(b)
	}
	out, _ := yaml.Marshal(doc.Items)
	return string(out)
}

// version names the commit under test.
func version() string {
	out, err := exec.Command("git", "-C", testsupport.RepoRoot(), "describe", "--tags", "--always", "--dirty").Output()
	if err != nil || len(out) == 0 {
		return "v0.0.0-dev"
	}
	return strings.TrimSpace(string(out))
}

// startEnvoyWhenDeployed starts the tenant's Envoy as soon as the manager has written its
// bootstrap, in the background; it gives up when the test ends.
func startEnvoyWhenDeployed(t *testing.T, sys *framework.System, tenant *framework.Tenant) {
	framework.Every(t, framework.PlayInterval, func(ctx context.Context) bool {
		if _, err := framework.EnvoyBootstrap(ctx, sys.Hub.Client, tenant.Namespace); err != nil {
			return false
		}
		tenant.StartEnvoy(framework.EnvoyBootstrap)
		return true
	})
}
