package main

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/internal/manager/envoyfleet"
	"kubelb.dev/kubelb/internal/pki"
	"kubelb.dev/kubelb/internal/process"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

func TestParseDefaults(t *testing.T) {
	t.Setenv("NAMESPACE", "")
	o, _, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.XDSListenAddress != ":8001" || o.MetricsAddr.Value != ":9443" || o.HealthProbeAddr.Value != ":8081" ||
		o.Namespace != "kubelb" || !o.EnableLeaderElection || o.EnableGatewayAPI || o.Debug {
		t.Fatalf("unexpected defaults: %+v", o)
	}
	if o.EnvoyXDSAddress != "kubelb.kubelb.svc:8001" || o.PortRangeMin != 10000 || o.PortRangeMax != 19999 ||
		o.EnvoyListenerAddress != "0.0.0.0" || o.EnvoyListenerAddressIPv6 != "::" || o.EnvoyImage != envoyfleet.DefaultEnvoyImage || o.EnvoyXDSProtocol != "delta" ||
		o.EnvoyShutdownManagerImage != "ghcr.io/kubelb/kubelb-manager:v0.0.0-dev" {
		t.Fatalf("unexpected Envoy defaults: %+v", o.Options)
	}
	t.Setenv("NAMESPACE", "lb-system")
	if o, _, _ = parse(nil); o.Namespace != "lb-system" {
		t.Fatalf("namespace from env = %q", o.Namespace)
	}
}

// TestNotYetFlagsWarn: --enable-gateway-api is accepted, not implemented yet, and warned
// about when set; given as its default (as the chart does) it causes no warning.
func TestNotYetFlagsWarn(t *testing.T) {
	o, _, err := parse([]string{"--enable-gateway-api"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "WARNING: these flags are accepted but not implemented yet, and are ignored: --enable-gateway-api=true"; o.notYetWarning != want {
		t.Errorf("warning\n got %q\nwant %q", o.notYetWarning, want)
	}
	if o, _, err = parse([]string{"--enable-gateway-api=false", "--debug"}); err != nil || o.notYetWarning != "" {
		t.Errorf("default given explicitly: warning %q, err %v; want none", o.notYetWarning, err)
	}
}

func TestParseRejectsBadValuesInOneLine(t *testing.T) {
	for args, want := range map[string]string{
		"--listen-address=nope":                  "invalid value \"nope\" for flag --listen-address",
		"--metrics-addr=:99999":                  "for flag --metrics-addr: port \"99999\"",
		"--enable-leader-election=mb":            "for --enable-leader-election",
		"--namespace=":                           "flag --namespace must not be empty",
		"--log-format=xml":                       "for flag --log-format: must be one of json, console",
		"--kube-api-qps=0":                       "flag --kube-api-qps must be positive",
		"--envoy-port-range=20-10":               "for flag --envoy-port-range",
		"--envoy-port-range=9000-9999":           "for flag --envoy-port-range: port range 9000-9999 includes port 9901, which the Envoy pods use themselves",
		"--tenant-token-ttl=5m":                  "for flag --tenant-token-ttl: at least 10m0s",
		"--envoy-xds-address=nohost":             "for flag --envoy-xds-address",
		"--envoy-xds-protocol=rest":              "for flag --envoy-xds-protocol: must be one of delta, sotw",
		"--envoy-egress-cidrs=10.0.0.0/33":       "for flag --envoy-egress-cidrs",
		"--envoy-egress-cidrs=":                  "flag --envoy-egress-cidrs must not be empty",
		"--envoy-dns-pod-labels=a":               "for flag --envoy-dns-pod-labels",
		"--envoy-listener-address-ipv6=10.0.0.1": "for flag --envoy-listener-address-ipv6: want an IPv6 address",
		"--xds-max-streams-per-tenant=0":         "flag --xds-max-streams-per-tenant must be positive",
		"--xds-requests-per-second=-1":           "flag --xds-requests-per-second must be positive",
	} {
		_, _, err := parse(strings.Fields(args))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %q, want one line containing %q", args, err, want)
		}
	}
}

func TestHelpListsEveryFlag(t *testing.T) {
	bin := testsupport.BuildBinary(t, "./cmd/kubelb")
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	for _, f := range []string{"--listen-address", "--metrics-addr", "--health-probe-bind-address", "--namespace",
		"--kubeconfig", "--enable-leader-election", "--enable-gateway-api", "--debug"} {
		if !strings.Contains(string(out), "  "+f+" ") && !strings.Contains(string(out), "  "+f+"\n") {
			t.Errorf("--help does not list %s", f)
		}
	}
	out, err = exec.Command(bin, "--listen-address=bad").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("bad flag: err %v, want non-zero exit", err)
	}
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "--listen-address") {
		t.Fatalf("bad flag output %q, want one line naming the flag", out)
	}
}

// TestManagerLifecycle runs the real binary against a real API server: it becomes ready,
// serves metrics, makes its xDS CA and serves xDS with mutual TLS only, wins the leader
// election, and exits 0 on SIGTERM, releasing its lease.
func TestManagerLifecycle(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	ctx := context.Background()
	if err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubelb"}}); err != nil {
		t.Fatal(err)
	}
	bin := testsupport.BuildBinary(t, "./cmd/kubelb")
	metricsPort, probePort, xdsPort := testsupport.FreePort(t), testsupport.FreePort(t), testsupport.FreePort(t)
	proc := testsupport.StartProcess(t, "kubelb", bin,
		"--kubeconfig", hub.Kubeconfig, "--namespace", "kubelb",
		"--metrics-addr", testsupport.Loopback(metricsPort), "--health-probe-bind-address", testsupport.Loopback(probePort),
		"--listen-address", testsupport.Loopback(xdsPort), "--enable-gateway-api")

	testsupport.WaitHTTP200(t, proc, "http://"+testsupport.Loopback(probePort)+"/healthz", time.Minute)
	testsupport.WaitHTTP200(t, proc, "http://"+testsupport.Loopback(probePort)+"/readyz", time.Minute)
	holder := hub.WaitLeaseHolder(t, "kubelb", leaderElectionID, time.Minute)
	t.Logf("leader: %s", holder)
	body := testsupport.WaitHTTP200(t, proc, "http://"+testsupport.Loopback(metricsPort)+"/metrics", time.Minute)
	for _, m := range []string{"kubelb_manager_tenants_total", "leader_election_master_status"} {
		if !strings.Contains(body, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	checkXDSServesOnlyMutualTLS(t, hub.Client, testsupport.Loopback(xdsPort))
	if n := strings.Count(proc.Output(), "not implemented yet, and are ignored: --enable-gateway-api=true"); n != 1 {
		t.Errorf("%d start-up warnings about --enable-gateway-api, want 1:\n%s", n, proc.Output())
	}
	code, err := proc.Stop(30 * time.Second)
	if err != nil || code != 0 {
		t.Fatalf("exit code %d, err %v, want 0 on SIGTERM", code, err)
	}
	if h := hub.LeaseHolder(t, "kubelb", leaderElectionID); h != "" {
		t.Errorf("lease still held by %q after a clean stop", h)
	}
}

func TestEveryFlagIsDocumented(t *testing.T) {
	_, fs, err := parse(nil)
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
	if missing := process.NotYetUndocumented(process.DocSection(string(doc), "## `kubelb`"), notYetFlags); len(missing) > 0 {
		t.Errorf("docs/configuration.md does not say \"not yet\" in the rows of: %v", missing)
	}
}

// checkXDSServesOnlyMutualTLS: the manager made the xDS CA Secret; its xDS port presents a
// certificate of that CA for the default xDS host, takes a tenant's client certificate, and
// refuses plaintext gRPC and TLS without a client certificate.
func checkXDSServesOnlyMutualTLS(t *testing.T, c client.Client, addr string) {
	t.Helper()
	sec := &corev1.Secret{}
	testsupport.Eventually(t, time.Minute, "the xDS CA Secret", func() error {
		return c.Get(context.Background(), types.NamespacedName{Namespace: "kubelb", Name: pki.CASecretName}, sec)
	})
	ca, err := pki.ParseCA(sec.Data[pki.KeyCert], sec.Data[pki.KeyKey])
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueClient("tenant-a", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	dial := func(certs []tls.Certificate) error {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{
			ServerName: "kubelb.kubelb.svc", RootCAs: ca.Pool(), Certificates: certs, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12,
		})
		if err != nil {
			return err
		}
		defer conn.Close()
		// TLS 1.3: the server's verdict on the client certificate comes with the first read.
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := conn.Read(make([]byte, 1)); err != nil {
			if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
				return err
			}
		}
		return nil
	}
	testsupport.Eventually(t, time.Minute, "a mutual TLS handshake with the xDS server", func() error { return dial([]tls.Certificate{cert}) })
	if err := dial(nil); err == nil {
		t.Error("the xDS server accepted TLS without a client certificate")
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx); err == nil {
		if err := s.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "x", Cluster: "tenant-a"}}); err == nil {
			if _, err := s.Recv(); err == nil {
				t.Error("the xDS server answered plaintext gRPC")
			}
		}
	}
}

// TestEnableTenantMigrationIsDeprecated: KubeLB CE's manager flag --enable-tenant-migration is
// accepted (any value), changes nothing, and is warned about as deprecated.
func TestEnableTenantMigrationIsDeprecated(t *testing.T) {
	for _, arg := range []string{"--enable-tenant-migration", "--enable-tenant-migration=false"} {
		o, _, err := parse([]string{arg})
		if err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		if !strings.Contains(o.deprecatedWarning, "deprecated") || !strings.Contains(o.deprecatedWarning, "--enable-tenant-migration=") {
			t.Errorf("%s: warning %q", arg, o.deprecatedWarning)
		}
	}
	if o, _, _ := parse(nil); o.deprecatedWarning != "" {
		t.Errorf("no deprecated flag given: warning %q", o.deprecatedWarning)
	}
}

// TestAddressProviderFlags: --address-provider is none by default, node-ip (with
// --reserved-ports and --node-ip-nat, which are warned about with another provider) and ipam are
// accepted, other
// values and an --address-provider-class that is no loadBalancerClass are refused in one line.
func TestAddressProviderFlags(t *testing.T) {
	o, _, err := parse(nil)
	if err != nil || o.addressProvider.Value != addressProviderNone || o.addressProviderClass != "" {
		t.Fatalf("defaults: provider %q, class %q, err %v", o.addressProvider.Value, o.addressProviderClass, err)
	}
	o, _, err = parse([]string{"--address-provider=ipam", "--address-provider-class=kubelb.k8c.io/pools"})
	if err != nil || o.addressProvider.Value != addressProviderIPAM || o.addressProviderClass != "kubelb.k8c.io/pools" {
		t.Fatalf("ipam: provider %q, class %q, err %v", o.addressProvider.Value, o.addressProviderClass, err)
	}
	o, _, err = parse([]string{"--address-provider=node-ip", "--reserved-ports=22,8000-8100/UDP", "--node-ip-nat"})
	if err != nil || o.addressProvider.Value != addressProviderNodeIP || len(o.reservedPorts.Ranges) != 2 || !o.nodeIPNAT || o.providerWarning != "" {
		t.Fatalf("node-ip: provider %q, reserved %v, nat %v, warning %q, err %v", o.addressProvider.Value, o.reservedPorts.Ranges, o.nodeIPNAT, o.providerWarning, err)
	}
	if o, _, _ := parse(nil); len(o.reservedPorts.Ranges) != 4 {
		t.Errorf("default --reserved-ports: %v", o.reservedPorts.Ranges)
	}
	o, _, err = parse([]string{"--address-provider=ipam", "--node-ip-nat"})
	if err != nil || o.providerWarning != "WARNING: these flags are not used with --address-provider=ipam, and are ignored: --node-ip-nat" {
		t.Errorf("node-IP flags with ipam: warning %q, err %v", o.providerWarning, err)
	}
	for args, want := range map[string]string{
		"--address-provider=metallb":           `invalid value "metallb" for flag --address-provider: must be one of none, node-ip, ipam`,
		"--reserved-ports=70000":               `invalid value "70000" for flag --reserved-ports`,
		"--address-provider-class=not/a/class": `invalid value "not/a/class" for flag --address-provider-class`,
	} {
		_, _, err := parse(strings.Fields(args))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %q, want one line containing %q", args, err, want)
		}
	}
}

// TestVersion: --version prints the build information and exits 0, before the checks of the
// other flags (nothing else is required with it); parse reports it as process.ErrVersion.
func TestVersion(t *testing.T) {
	if _, _, err := parse([]string{"--version"}); !errors.Is(err, process.ErrVersion) {
		t.Fatalf("parse(--version) = %v, want process.ErrVersion", err)
	}
	bin := testsupport.BuildBinary(t, "./cmd/kubelb")
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	// testsupport.BuildBinary stamps nothing: the defaults of internal/version.
	if want := process.VersionLine("kubelb") + "\n"; string(out) != want || !strings.HasPrefix(want, "kubelb v0.0.0-dev (commit unknown, built unknown)") {
		t.Errorf("--version printed %q, want %q", out, want)
	}
}
