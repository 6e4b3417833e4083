package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"kubelb.dev/kubelb/internal/testenv"
)

func TestParseDefaults(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	o, _, err := parse([]string{"--cluster-name=tenant-a"})
	if err != nil {
		t.Fatal(err)
	}
	if o.MetricsAddr.Value != ":9445" || o.HealthProbeAddr.Value != ":8081" || o.HubKubeconfig != "~/.kube/kubelb" ||
		!o.EnableLeaderElection || !o.EnableCloudProvider || o.EnableGatewayAPI || o.EnableSecretSynchronizer ||
		o.InstallGatewayAPICRDs || o.GatewayAPICRDsChannel != "standard" || o.UseLoadBalancerClass ||
		!o.UseIngressClass || !o.UseGatewayClass || o.DisableIngressController || o.DisableGatewayController ||
		o.DisableHTTPRouteController || o.DisableGRPCRouteController || o.NodeAddressType != "ExternalIP" ||
		o.LeaderElectionNamespace != "kube-system" {
		t.Fatalf("unexpected defaults: %+v", o)
	}
}

func TestParseRejectsBadValuesInOneLine(t *testing.T) {
	for args, want := range map[string]string{
		"": "flag --cluster-name is required",
		"--cluster-name=a --node-address-type=PodIP":       "invalid value \"PodIP\" for flag --node-address-type: must be one of ExternalIP, InternalIP, Hostname",
		"--cluster-name=a --gateway-api-crds-channel=beta": "for flag --gateway-api-crds-channel",
		"--cluster-name=a --metrics-addr=9445":             "for flag --metrics-addr",
		"--cluster-name=a --use-loadbalancer-class=maybe":  "for --use-loadbalancer-class",
		"--cluster-name=a --unknown":                       "flag provided but not defined: --unknown",
	} {
		_, _, err := parse(strings.Fields(args))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %q, want one line containing %q", args, err, want)
		}
	}
}

func TestHelpListsEveryFlag(t *testing.T) {
	bin := testenv.BuildBinary(t, "./cmd/ccm")
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	for _, f := range []string{"--metrics-addr", "--health-probe-bind-address", "--cluster-name", "--kubelb-kubeconfig",
		"--kubeconfig", "--leader-election-namespace", "--enable-leader-election", "--enable-cloud-provider",
		"--enable-gateway-api", "--enable-secret-synchronizer", "--install-gateway-api-crds",
		"--gateway-api-crds-channel", "--use-loadbalancer-class", "--use-ingress-class", "--use-gateway-class",
		"--disable-ingress-controller", "--disable-gateway-controller", "--disable-httproute-controller",
		"--disable-grpcroute-controller", "--node-address-type"} {
		if !strings.Contains(string(out), "  "+f+" ") && !strings.Contains(string(out), "  "+f+"\n") {
			t.Errorf("--help does not list %s", f)
		}
	}
	out, err = exec.Command(bin, "--cluster-name=a", "--node-address-type=x").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("bad flag: err %v, want non-zero exit", err)
	}
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "--node-address-type") {
		t.Fatalf("bad flag output %q, want one line naming the flag", out)
	}
}

// TestCCMLifecycle runs the real binary against a real tenant and hub API server: it becomes
// ready, serves metrics, wins the leader election in the tenant cluster, and exits 0 on
// SIGTERM, releasing its lease.
func TestCCMLifecycle(t *testing.T) {
	pair := testenv.StartPair(t)
	bin := testenv.BuildBinary(t, "./cmd/ccm")
	metricsPort, probePort := testenv.FreePort(t), testenv.FreePort(t)
	proc := testenv.StartProcess(t, "ccm", bin,
		"--kubeconfig", pair.Tenant.Kubeconfig, "--kubelb-kubeconfig", pair.Hub.Kubeconfig,
		"--cluster-name", "default", "--leader-election-namespace", "kube-system",
		"--metrics-addr", testenv.Loopback(metricsPort), "--health-probe-bind-address", testenv.Loopback(probePort))

	testenv.WaitHTTP200(t, proc, "http://"+testenv.Loopback(probePort)+"/healthz", time.Minute)
	testenv.WaitHTTP200(t, proc, "http://"+testenv.Loopback(probePort)+"/readyz", time.Minute)
	t.Logf("leader: %s", pair.Tenant.WaitLeaseHolder(t, "kube-system", leaderElectionID, time.Minute))
	body := testenv.WaitHTTP200(t, proc, "http://"+testenv.Loopback(metricsPort)+"/metrics", time.Minute)
	for _, m := range []string{"kubelb_ccm_nodes_total", "leader_election_master_status"} {
		if !strings.Contains(body, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	code, err := proc.Stop(30 * time.Second)
	if err != nil || code != 0 {
		t.Fatalf("exit code %d, err %v, want 0 on SIGTERM", code, err)
	}
	if h := pair.Tenant.LeaseHolder(t, "kube-system", leaderElectionID); h != "" {
		t.Errorf("lease still held by %q after a clean stop", h)
	}
}

func TestEveryFlagIsDocumented(t *testing.T) {
	_, fs, err := parse([]string{"--cluster-name=x"})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if missing := fs.Undocumented(string(doc)); len(missing) > 0 {
		t.Fatalf("docs/configuration.md lacks: %v", missing)
	}
}
