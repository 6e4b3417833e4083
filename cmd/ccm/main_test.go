package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ccm"
	"kubelb.dev/kubelb/internal/manager/tenant"
	"kubelb.dev/kubelb/internal/process"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
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
		o.DisableHTTPRouteController || o.DisableGRPCRouteController || o.DisableTLSRouteController ||
		o.DisableTCPRouteController || o.DisableUDPRouteController || o.NodeAddressType != "ExternalIP" ||
		o.LeaderElectionNamespace != "kube-system" || o.HubKubeconfigSecret.String() != "" || o.HubKubeconfigSecretKey != "kubelb" {
		t.Fatalf("unexpected defaults: %+v", o)
	}
	o, _, err = parse([]string{"--cluster-name=tenant-a", "--kubelb-kubeconfig-secret=kubelb/kubelb-cluster", "--kubelb-kubeconfig-secret-key=hub"})
	if err != nil || o.HubKubeconfigSecret.Namespace != "kubelb" || o.HubKubeconfigSecret.Name != "kubelb-cluster" || o.HubKubeconfigSecretKey != "hub" {
		t.Fatalf("--kubelb-kubeconfig-secret: %+v, %v", o.HubKubeconfigSecret, err)
	}
}

// TestNoFlagIsNotYet: every flag of the ccm is implemented, so no combination of them yields
// a not-yet warning (the mechanism stays for flags added before their feature).
func TestNoFlagIsNotYet(t *testing.T) {
	if len(notYetFlags) != 0 {
		t.Fatalf("not-yet flags %v: implement them or document them", notYetFlags)
	}
	o, _, err := parse([]string{"--cluster-name=a", "--enable-gateway-api", "--disable-ingress-controller=false",
		"--use-ingress-class=false", "--gateway-api-crds-channel=experimental", "--enable-secret-synchronizer"})
	if err != nil {
		t.Fatal(err)
	}
	if o.notYetWarning != "" {
		t.Errorf("warning %q, want none", o.notYetWarning)
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
		"--cluster-name=a --kubelb-kubeconfig-secret=x":    "invalid value \"x\" for flag --kubelb-kubeconfig-secret: \"x\" is not namespace/name",
	} {
		_, _, err := parse(strings.Fields(args))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %q, want one line containing %q", args, err, want)
		}
	}
}

func TestHelpListsEveryFlag(t *testing.T) {
	bin := testsupport.BuildBinary(t, "./cmd/ccm")
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	for _, f := range []string{"--metrics-addr", "--health-probe-bind-address", "--cluster-name", "--kubelb-kubeconfig",
		"--kubeconfig", "--leader-election-namespace", "--enable-leader-election", "--enable-cloud-provider",
		"--enable-gateway-api", "--enable-secret-synchronizer", "--install-gateway-api-crds",
		"--gateway-api-crds-channel", "--use-loadbalancer-class", "--use-ingress-class", "--use-gateway-class",
		"--disable-ingress-controller", "--disable-gateway-controller", "--disable-httproute-controller",
		"--disable-grpcroute-controller", "--node-address-type", "--kubelb-kubeconfig-secret", "--kubelb-kubeconfig-secret-key",
		"--mode", "--reserved-ports"} {
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
	bin := testsupport.BuildBinary(t, "./cmd/ccm")
	metricsPort, probePort := testsupport.FreePort(t), testsupport.FreePort(t)
	proc := testsupport.StartProcess(t, "ccm", bin,
		"--kubeconfig", pair.Tenant.Kubeconfig, "--kubelb-kubeconfig", pair.Hub.Kubeconfig,
		"--cluster-name", "default", "--leader-election-namespace", "kube-system",
		"--metrics-addr", testsupport.Loopback(metricsPort), "--health-probe-bind-address", testsupport.Loopback(probePort),
		"--enable-secret-synchronizer", "--disable-grpcroute-controller")

	testsupport.WaitHTTP200(t, proc, "http://"+testsupport.Loopback(probePort)+"/healthz", time.Minute)
	testsupport.WaitHTTP200(t, proc, "http://"+testsupport.Loopback(probePort)+"/readyz", time.Minute)
	t.Logf("leader: %s", pair.Tenant.WaitLeaseHolder(t, "kube-system", leaderElectionID, time.Minute))
	body := testsupport.WaitHTTP200(t, proc, "http://"+testsupport.Loopback(metricsPort)+"/metrics", time.Minute)
	for _, m := range []string{"kubelb_ccm_nodes_total", "leader_election_master_status"} {
		if !strings.Contains(body, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	// Every flag is implemented: no start-up warning about not-yet flags.
	warning := "not implemented yet"
	if n := strings.Count(proc.Output(), warning); n != 0 {
		t.Errorf("%d start-up warnings about not-yet flags, want none:\n%s", n, proc.Output())
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
	for _, name := range notYetFlags {
		if fs.Lookup(name) == nil {
			t.Errorf("not-yet flag --%s is not a flag", name)
		}
	}
	if missing := process.NotYetUndocumented(process.DocSection(string(doc), "## `ccm`"), notYetFlags); len(missing) > 0 {
		t.Errorf("docs/configuration.md does not say \"not yet\" in the rows of: %v", missing)
	}
}

// TestCCMWithTenantKubeconfig runs the real binary with a kubeconfig as the manager makes it
// for a tenant (a TokenRequest token, the Tenant's Role) and the chart's
// --kubelb-kubeconfig-secret: the hub token renewal is armed for that Secret, the hub answers
// through the renewing client, and the ccm stops cleanly.
func TestCCMWithTenantKubeconfig(t *testing.T) {
	pair := testenv.StartPair(t)
	ctx := context.Background()
	ns := "tenant-x"
	hub := kubernetes.NewForConfigOrDie(pair.Hub.Config)
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenant.ServiceAccountName}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenant.RoleName}, Rules: tenant.CCMRules()},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenant.RoleBindingName},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: tenant.RoleName},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: tenant.ServiceAccountName}}},
	} {
		if err := pair.Hub.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := hub.CoreV1().ServiceAccounts(ns).CreateToken(ctx, tenant.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(tenant.MinTokenTTL / time.Second))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := tenant.RenderKubeconfig(tenant.HubEndpoint{Server: pair.Hub.Config.Host, CAData: pair.Hub.Config.CAData}, ns, tr.Status.Token)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubelb"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kubelb", Name: "kubelb-cluster"}, Data: map[string][]byte{"kubelb": kubeconfig}},
	} {
		if err := pair.Tenant.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "kubelb")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}

	bin := testsupport.BuildBinary(t, "./cmd/ccm")
	metricsPort, probePort := testsupport.FreePort(t), testsupport.FreePort(t)
	proc := testsupport.StartProcess(t, "ccm", bin,
		"--kubeconfig", pair.Tenant.Kubeconfig, "--kubelb-kubeconfig", path, "--kubelb-kubeconfig-secret", "kubelb/kubelb-cluster",
		"--cluster-name", ns, "--leader-election-namespace", "kube-system",
		"--metrics-addr", testsupport.Loopback(metricsPort), "--health-probe-bind-address", testsupport.Loopback(probePort))
	testsupport.WaitHTTP200(t, proc, "http://"+testsupport.Loopback(probePort)+"/readyz", time.Minute)
	testsupport.Eventually(t, time.Minute, "the hub to answer the ccm's token", func() error {
		_, body, err := testsupport.HTTPGet(ctx, "http://"+testsupport.Loopback(metricsPort)+"/metrics")
		if err != nil {
			return err
		}
		if !strings.Contains(body, "\nkubelb_ccm_kubelb_cluster_connected 1\n") {
			return fmt.Errorf("kubelb_ccm_kubelb_cluster_connected is not 1")
		}
		return nil
	})
	out := proc.Output()
	if !strings.Contains(out, `"msg":"renewing the hub token"`) || !strings.Contains(out, `"serviceAccount":"tenant-x/kubelb-ccm"`) ||
		!strings.Contains(out, `"secret":"kubelb/kubelb-cluster"`) {
		t.Errorf("no log line arming the renewal for the Secret:\n%s", out)
	}
	if code, err := proc.Stop(30 * time.Second); err != nil || code != 0 {
		t.Fatalf("exit code %d, err %v, want 0 on SIGTERM", code, err)
	}
}

// TestClusterNameWithOrWithoutPrefix: as in KubeLB CE, --cluster-name takes the tenant's name
// with or without tenant-; both mean the hub namespace tenant-<name>.
func TestClusterNameWithOrWithoutPrefix(t *testing.T) {
	for _, arg := range []string{"--cluster-name=shroud", "--cluster-name=tenant-shroud"} {
		o, _, err := parse([]string{arg})
		if err != nil || o.ClusterName != "tenant-shroud" {
			t.Errorf("%s: cluster name %q, err %v; want tenant-shroud", arg, o.ClusterName, err)
		}
	}
}

// TestEnableTenantMigrationIsDeprecated: KubeLB CE's --enable-tenant-migration is accepted
// (any value), changes nothing, and is warned about as deprecated.
func TestEnableTenantMigrationIsDeprecated(t *testing.T) {
	for _, arg := range []string{"--enable-tenant-migration", "--enable-tenant-migration=false"} {
		o, _, err := parse([]string{"--cluster-name=a", arg})
		if err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		if !strings.Contains(o.deprecatedWarning, "deprecated") || !strings.Contains(o.deprecatedWarning, "--enable-tenant-migration=") {
			t.Errorf("%s: warning %q", arg, o.deprecatedWarning)
		}
		if ref, _, _ := parse([]string{"--cluster-name=a"}); fmt.Sprint(ref.Options) != fmt.Sprint(o.Options) {
			t.Errorf("%s changed the options: %+v", arg, o.Options)
		}
	}
	if o, _, _ := parse([]string{"--cluster-name=a"}); o.deprecatedWarning != "" {
		t.Errorf("no deprecated flag given: warning %q", o.deprecatedWarning)
	}
}

// TestModeFlags: --mode is hub by default and validated; standalone needs no --cluster-name,
// refuses --enable-cloud-provider=false, and warns about the hub flags given; hub mode warns
// about --reserved-ports; --reserved-ports is parsed and validated.
func TestModeFlags(t *testing.T) {
	o, _, err := parse([]string{"--cluster-name=a"})
	if err != nil || o.Mode != ccm.ModeHub || o.modeWarning != "" || len(o.ReservedPorts) != 4 {
		t.Fatalf("defaults: mode %q, warning %q, reserved %v, err %v", o.Mode, o.modeWarning, o.ReservedPorts, err)
	}
	o, _, err = parse([]string{"--mode=standalone", "--reserved-ports=22/TCP,30000-32767"})
	if err != nil || o.Mode != ccm.ModeStandalone || o.modeWarning != "" ||
		fmt.Sprint(o.ReservedPorts) != "[22/TCP 30000-32767]" {
		t.Fatalf("standalone: mode %q, warning %q, reserved %v, err %v", o.Mode, o.modeWarning, o.ReservedPorts, err)
	}
	o, _, err = parse([]string{"--mode=standalone", "--reserved-ports="})
	if err != nil || len(o.ReservedPorts) != 0 {
		t.Fatalf("no reserved ports: %v, %v", o.ReservedPorts, err)
	}
	o, _, err = parse([]string{"--mode=standalone", "--cluster-name=a", "--enable-gateway-api"})
	if err != nil || o.modeWarning != "WARNING: these flags are not used in --mode=standalone, and are ignored: --cluster-name, --enable-gateway-api" {
		t.Fatalf("hub flags in standalone mode: warning %q, err %v", o.modeWarning, err)
	}
	o, _, err = parse([]string{"--cluster-name=a", "--reserved-ports=80"})
	if err != nil || !strings.Contains(o.modeWarning, "--mode=hub") || !strings.Contains(o.modeWarning, "--reserved-ports") {
		t.Fatalf("--reserved-ports in hub mode: warning %q, err %v", o.modeWarning, err)
	}
	for args, want := range map[string]string{
		"--mode=cloud": "invalid value \"cloud\" for flag --mode: must be one of hub, standalone",
		"--mode=standalone --enable-cloud-provider=false": "--enable-cloud-provider=false cannot be used with --mode=standalone",
		"--mode=standalone --reserved-ports=70000":        "for flag --reserved-ports",
		"--mode=standalone --reserved-ports=80/ICMP":      "for flag --reserved-ports",
		"--mode=hub": "flag --cluster-name is required",
	} {
		_, _, err := parse(strings.Fields(args))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %q, want one line containing %q", args, err, want)
		}
	}
}

// TestStandaloneBinary runs the real binary with --mode=standalone against one API server and
// no hub (the hub kubeconfig it is given does not exist and is not read): it becomes ready,
// wins the leader election, gives a LoadBalancer Service the address of the labelled Ready
// node, warns about the hub flag it ignores, and exits 0 on SIGTERM.
func TestStandaloneBinary(t *testing.T) {
	c := testenv.Start(t, "cluster", testenv.Options{})
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{ccm.LabelUseAsLoadBalancer: "true"}}}
	if err := c.Client.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	n.Status = corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.21"}},
	}
	if err := c.Client.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 8080, Protocol: corev1.ProtocolTCP}}}}
	if err := c.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}

	bin := testsupport.BuildBinary(t, "./cmd/ccm")
	metricsPort, probePort := testsupport.FreePort(t), testsupport.FreePort(t)
	proc := testsupport.StartProcess(t, "ccm", bin, "--mode=standalone",
		"--kubeconfig", c.Kubeconfig, "--kubelb-kubeconfig", filepath.Join(t.TempDir(), "absent"),
		"--leader-election-namespace", "kube-system",
		"--metrics-addr", testsupport.Loopback(metricsPort), "--health-probe-bind-address", testsupport.Loopback(probePort))
	testsupport.WaitHTTP200(t, proc, "http://"+testsupport.Loopback(probePort)+"/readyz", time.Minute)
	t.Logf("leader: %s", c.WaitLeaseHolder(t, "kube-system", leaderElectionID, time.Minute))
	testsupport.Eventually(t, time.Minute, "the Service to get the node's address", func() error {
		cur := &corev1.Service{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(svc), cur); err != nil {
			return err
		}
		if in := cur.Status.LoadBalancer.Ingress; len(in) != 1 || in[0].IP != "127.0.0.21" {
			return fmt.Errorf("ingress %v", in)
		}
		return nil
	})
	if out := proc.Output(); !strings.Contains(out, "not used in --mode=standalone, and are ignored: --kubelb-kubeconfig") {
		t.Errorf("no warning about the ignored hub flag:\n%s", out)
	}
	if code, err := proc.Stop(30 * time.Second); err != nil || code != 0 {
		t.Fatalf("exit code %d, err %v, want 0 on SIGTERM", code, err)
	}
}

// TestAddressProviderFlag: --address-provider is node-ip by default; ipam is accepted in
// standalone mode (where --reserved-ports is then warned about as unused) and refused in
// hub mode; node-ip given in hub mode is warned about like the other standalone flags.
func TestAddressProviderFlag(t *testing.T) {
	o, _, err := parse([]string{"--mode=standalone"})
	if err != nil || o.addressProvider.Value != addressProviderNodeIP || o.providerWarning != "" {
		t.Fatalf("default: provider %q, warning %q, err %v", o.addressProvider.Value, o.providerWarning, err)
	}
	o, _, err = parse([]string{"--mode=standalone", "--address-provider=ipam"})
	if err != nil || o.addressProvider.Value != addressProviderIPAM || o.providerWarning != "" || o.modeWarning != "" {
		t.Fatalf("ipam: provider %q, warnings %q %q, err %v", o.addressProvider.Value, o.modeWarning, o.providerWarning, err)
	}
	o, _, err = parse([]string{"--mode=standalone", "--address-provider=ipam", "--reserved-ports=22"})
	if err != nil || o.providerWarning != "WARNING: these flags are not used with --address-provider=ipam, and are ignored: --reserved-ports" {
		t.Fatalf("--reserved-ports with ipam: warning %q, err %v", o.providerWarning, err)
	}
	o, _, err = parse([]string{"--cluster-name=a", "--address-provider=node-ip"})
	if err != nil || !strings.Contains(o.modeWarning, "--address-provider") {
		t.Fatalf("node-ip in hub mode: warning %q, err %v", o.modeWarning, err)
	}
	for args, want := range map[string]string{
		"--cluster-name=a --address-provider=ipam":   "flag --address-provider=ipam needs --mode=standalone",
		"--mode=standalone --address-provider=cloud": `invalid value "cloud" for flag --address-provider: must be one of node-ip, ipam`,
	} {
		_, _, err := parse(strings.Fields(args))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %q, want one line containing %q", args, err, want)
		}
	}
}

// TestStandaloneIPAMBinary runs the real binary with --mode=standalone
// --address-provider=ipam against one API server: a LoadBalancer Service gets the first
// address of the default AddressPool (no node is labelled), the pool's status counts it, and
// the ignored --reserved-ports is warned about.
func TestStandaloneIPAMBinary(t *testing.T) {
	c := testenv.Start(t, "cluster", testenv.Options{})
	ctx := context.Background()
	pool := &kubelbv1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: kubelbv1alpha1.AddressPoolSpec{Default: true, Addresses: []string{"192.0.2.8/29"}}}
	if err := c.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 8080, Protocol: corev1.ProtocolTCP}}}}
	if err := c.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	bin := testsupport.BuildBinary(t, "./cmd/ccm")
	metricsPort, probePort := testsupport.FreePort(t), testsupport.FreePort(t)
	proc := testsupport.StartProcess(t, "ccm", bin, "--mode=standalone", "--address-provider=ipam", "--reserved-ports=22",
		"--kubeconfig", c.Kubeconfig, "--leader-election-namespace", "kube-system",
		"--metrics-addr", testsupport.Loopback(metricsPort), "--health-probe-bind-address", testsupport.Loopback(probePort))
	testsupport.WaitHTTP200(t, proc, "http://"+testsupport.Loopback(probePort)+"/readyz", time.Minute)
	testsupport.Eventually(t, time.Minute, "the Service to get the pool's first address and the pool to count it", func() error {
		cur := &corev1.Service{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(svc), cur); err != nil {
			return err
		}
		if in := cur.Status.LoadBalancer.Ingress; len(in) != 1 || in[0].IP != "192.0.2.8" {
			return fmt.Errorf("ingress %v", in)
		}
		p := &kubelbv1alpha1.AddressPool{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pool), p); err != nil {
			return err
		}
		if p.Status.IPv4 == nil || p.Status.IPv4.Allocated != 1 || p.Status.IPv4.Size != "8" {
			return fmt.Errorf("pool status %+v", p.Status.IPv4)
		}
		return nil
	})
	if out := proc.Output(); !strings.Contains(out, "not used with --address-provider=ipam, and are ignored: --reserved-ports") {
		t.Errorf("no warning about the ignored --reserved-ports:\n%s", out)
	}
	if code, err := proc.Stop(30 * time.Second); err != nil || code != 0 {
		t.Fatalf("exit code %d, err %v, want 0 on SIGTERM", code, err)
	}
}

// TestVersion: --version prints the build information and exits 0, before the checks of the
// other flags (nothing else is required with it); parse reports it as process.ErrVersion.
func TestVersion(t *testing.T) {
	if _, _, err := parse([]string{"--version"}); !errors.Is(err, process.ErrVersion) {
		t.Fatalf("parse(--version) = %v, want process.ErrVersion", err)
	}
	bin := testsupport.BuildBinary(t, "./cmd/ccm")
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	// testsupport.BuildBinary stamps nothing: the defaults of internal/version.
	if want := process.VersionLine("ccm") + "\n"; string(out) != want || !strings.HasPrefix(want, "ccm v0.0.0-dev (commit unknown, built unknown)") {
		t.Errorf("--version printed %q, want %q", out, want)
	}
}

// TestReleaseFlagsAreDocumented: the flags `ccm release` adds to the ccm's are in its
// section of docs/configuration.md.
func TestReleaseFlagsAreDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	section := process.DocSection(string(doc), "## `ccm release`")
	if section == "" {
		t.Fatal("docs/configuration.md has no section ## `ccm release`")
	}
	r, fs, err := parseRelease([]string{"--cluster-name=x", "--stop-deployment=kubelb/kubelb-ccm", "--hub-wait=5s"})
	if err != nil {
		t.Fatal(err)
	}
	if r.hubWait != 5*time.Second || r.stopDeployment.String() != "kubelb/kubelb-ccm" || r.ClusterName != "tenant-x" {
		t.Errorf("parsed %+v", r)
	}
	_, ccmFlags, err := parse([]string{"--cluster-name=x"})
	if err != nil {
		t.Fatal(err)
	}
	var own []string
	fs.VisitAll(func(f *flag.Flag) {
		if ccmFlags.Lookup(f.Name) == nil {
			own = append(own, f.Name)
			if !strings.Contains(section, "`--"+f.Name+"`") {
				t.Errorf("the section of ccm release lacks --%s", f.Name)
			}
		}
	})
	if len(own) != 3 {
		t.Errorf("ccm release's own flags: %v", own)
	}
	for _, args := range [][]string{{"--cluster-name=x", "--hub-wait=0"}, {"--cluster-name=x", "--stop-deployment=nonamespace"}} {
		if _, _, err := parseRelease(args); err == nil {
			t.Errorf("parseRelease(%v) accepted", args)
		}
	}
}
