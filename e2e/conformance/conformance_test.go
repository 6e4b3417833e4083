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
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/apis/v1alpha2"
	"sigs.k8s.io/gateway-api/apis/v1alpha3"
	xv1alpha1 "sigs.k8s.io/gateway-api/apisx/v1alpha1"
	"sigs.k8s.io/gateway-api/conformance"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	conformanceconfig "sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
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

func TestGatewayAPIConformance(t *testing.T) {
	pair := testenv.StartPair(t)
	framework.StartControllerManager(t, pair.Tenant)
	sys := framework.StartSystem(t, pair.Hub, framework.Options{
		HubLB: framework.HubLBOptions{Address: framework.LoadBalancerAddress, ForwardTo: "127.0.0.1"},
	})
	tenant := sys.AddTenant("conformance", pair.Tenant, 2, "--enable-gateway-api")
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
	report := filepath.Join(t.TempDir(), "report.yaml")
	opts := suite.ConformanceOptions{
		ConfigurableOptions: suite.ConfigurableOptions{
			GatewayClassName:     "kubelb",
			CleanupBaseResources: true,
			CleanupTestResources: true,
			SupportedFeatures:    source.SupportedFeatures,
			ConformanceProfiles:  Profiles,
			TimeoutConfig:        conformanceconfig.DefaultTimeoutConfig(),
			Mode:                 "default",
			ReportOutputPath:     report,
			RunTest:              os.Getenv(RunTestEnv),
			Implementation: confv1.Implementation{
				Organization: "kubelb",
				Project:      "kubelb",
				URL:          "https://kubelb.dev",
				Version:      version(),
				Contact:      []string{"https://kubelb.dev"},
			},
		},
		Client:     c,
		Clientset:  kubernetes.NewForConfigOrDie(pair.Tenant.Config),
		RestConfig: pair.Tenant.Config,
		ManifestFS: []fs.FS{&conformance.Manifests},
	}
	opts.Hook = func(t *testing.T, test suite.ConformanceTest, _ *suite.ConformanceTestSuite) {
		if t.Failed() {
			dumpStatuses(t, c)
		}
	}
	// The suite writes its report in a cleanup, once its parallel tests are done; this one
	// runs after it (cleanups run last registered first).
	t.Cleanup(func() { keepReport(t, report) })
	conformance.RunConformanceWithOptions(t, opts)
}

// keepReport writes the suite's report (at written) to ReportEnv's file, or, when the whole
// suite ran, to ReportFile when it differs from that file in more than its date and
// implementation version.
func keepReport(t *testing.T, written string) {
	got, err := os.ReadFile(written)
	if err != nil {
		t.Logf("no conformance report to keep: %v", err)
		return
	}
	target, always := os.Getenv(ReportEnv), true
	if target == "" && os.Getenv(RunTestEnv) != "" {
		return // one test's report is not the suite's
	}
	if target == "" {
		target, always = filepath.Join(testsupport.RepoRoot(), ReportFile), false
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
