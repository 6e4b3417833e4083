package bootstrap

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/pki"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds"
)

var update = flag.Bool("update", false, "rewrite testdata/*.yaml")

func ptr[T any](v T) *T { return &v }

func TestBootstrapEnvoyValidates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts Options
		want []string // substrings of the YAML
	}{
		{
			name: "manager default",
			opts: Options{Tenant: "tenant-a", XDSAddress: "kubelb.kubelb.svc:8001"},
			want: []string{"cluster: tenant-a", "address: kubelb.kubelb.svc", "port_value: 8001", "port_value: 9901", "ads: {}", "STRICT_DNS",
				"api_type: DELTA_GRPC", "resource_api_version: V3"},
		},
		{
			name: "state of the world",
			opts: Options{Tenant: "tenant-f", XDSAddress: "kubelb.kubelb.svc:8001", Protocol: ProtocolSotW},
			want: []string{"api_type: GRPC", "ads: {}"},
		},
		{
			name: "loopback with node id",
			opts: Options{Tenant: "tenant-b", NodeID: "envoy-0", XDSAddress: "127.0.0.1:18001", AdminAddress: "0.0.0.0:19000"},
			want: []string{"id: envoy-0", "address: 127.0.0.1", "port_value: 19000"},
		},
		{
			name: "overload manager",
			opts: Options{Tenant: "tenant-c", XDSAddress: "kubelb.kubelb.svc:8001", EnvoyProxy: &v1alpha1.EnvoyProxy{
				OverloadManager: &v1alpha1.OverloadManager{Enabled: true, MaxActiveDownstreamConnections: ptr(uint64(50000)), MaxHeapSizeBytes: ptr(uint64(1 << 30))},
			}},
			want: []string{"global_downstream_max_connections", "max_active_downstream_connections: \"50000\"", "fixed_heap", "shrink_heap"},
		},
		{
			name: "ready listener",
			opts: Options{Tenant: "tenant-e", XDSAddress: "kubelb.kubelb.svc:8001", ReadyAddress: "0.0.0.0:9903"},
			want: []string{"port_value: 9903", "/ready"},
		},
		{
			name: "stats listener",
			opts: Options{Tenant: "tenant-g", XDSAddress: "kubelb.kubelb.svc:8001", ReadyAddress: "0.0.0.0:9903", StatsAddress: "0.0.0.0:9904"},
			want: []string{"port_value: 9903", "/ready", "port_value: 9904", "path: /stats/prometheus", "envoy-stats"},
		},
		{
			name: "overload manager disabled",
			opts: Options{Tenant: "tenant-d", XDSAddress: "kubelb.kubelb.svc:8001", EnvoyProxy: &v1alpha1.EnvoyProxy{
				OverloadManager: &v1alpha1.OverloadManager{MaxHeapSizeBytes: ptr(uint64(1 << 30))},
			}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := Generate(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := yaml.Unmarshal(b, &doc); err != nil {
				t.Fatalf("not YAML: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("bootstrap lacks %q:\n%s", w, b)
				}
			}
			if strings.Contains(tc.name, "disabled") && strings.Contains(string(b), "overload_manager") {
				t.Errorf("overload manager present although disabled:\n%s", b)
			}
			if err := testsupport.ValidateEnvoy(t, mountTLS(t, b, tc.opts.Tenant), "--service-node", "validate-proxy"); err != nil {
				t.Fatalf("Envoy rejects the bootstrap:\n%s\n%v", b, err)
			}
			translatetest.Golden(t, filepath.Join("testdata", strings.ReplaceAll(tc.name, " ", "-")+".yaml"), b, *update)
			again, _ := Generate(tc.opts)
			if string(again) != string(b) {
				t.Error("Bootstrap is not deterministic")
			}
		})
	}
}

// mountTLS writes a client Secret's files (a certificate of tenant from a new CA, and the SDS
// files) into a temporary directory, as the kubelet mounts it, and returns the bootstrap
// reading them from there: Envoy checks that the files exist.
func mountTLS(t *testing.T, b []byte, tenant string) []byte {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.IssueClient(tenant, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	files, err := TLSFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	files[pki.KeyCert], files[pki.KeyKey], files[pki.KeyCA] = cert, key, ca.CertPEM
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return bytes.ReplaceAll(b, []byte(DefaultTLSDir), []byte(dir))
}

// TestBootstrapXDSTLS: the connection to the xDS server is mutual TLS with the mounted
// client certificate and CA (through SDS files in the watched mount, so a renewed
// certificate needs no restart), ALPN h2, SNI and the server's name checked.
func TestBootstrapXDSTLS(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		opts Options
		want []string
	}{
		{Options{Tenant: "tenant-a", XDSAddress: "kubelb.kubelb.svc:8001"}, []string{"sni: kubelb.kubelb.svc", "san_type: DNS", "exact: kubelb.kubelb.svc"}},
		{Options{Tenant: "tenant-a", XDSAddress: "127.0.0.1:8001", XDSServerName: "xds.example"}, []string{"sni: xds.example", "exact: xds.example"}},
		{Options{Tenant: "tenant-a", XDSAddress: "10.0.0.7:8001"}, []string{"san_type: IP_ADDRESS", "exact: 10.0.0.7"}},
		{Options{Tenant: "tenant-a", XDSAddress: "kubelb:8001", TLSDir: "/x"}, []string{"path: /x/" + ClientCertSDSFile, "path: /x/" + CASDSFile}},
	} {
		b, err := Generate(tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range append(tc.want, "envoy.transport_sockets.tls", "- h2", ClientCertSecretName, CASecretName, "watched_directory") {
			if !strings.Contains(string(b), w) {
				t.Errorf("%+v: bootstrap lacks %q:\n%s", tc.opts, w, b)
			}
		}
	}
	files, err := TLSFiles("")
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]string{ClientCertSDSFile: DefaultTLSDir + "/tls.key", CASDSFile: DefaultTLSDir + "/ca.crt"} {
		if !strings.Contains(string(files[name]), w) {
			t.Errorf("%s lacks %q:\n%s", name, w, files[name])
		}
	}
}

func TestBootstrapRejectsBadOptions(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]Options{
		"no tenant":        {XDSAddress: "127.0.0.1:1"},
		"no xds address":   {Tenant: "t"},
		"xds without port": {Tenant: "t", XDSAddress: "kubelb"},
		"xds port zero":    {Tenant: "t", XDSAddress: "kubelb:0"},
		"admin not an ip":  {Tenant: "t", XDSAddress: "kubelb:1", AdminAddress: "localhost:9901"},
		"zero connections": {Tenant: "t", XDSAddress: "kubelb:1", EnvoyProxy: &v1alpha1.EnvoyProxy{OverloadManager: &v1alpha1.OverloadManager{Enabled: true, MaxActiveDownstreamConnections: ptr(uint64(0))}}},
		"unknown protocol": {Tenant: "t", XDSAddress: "kubelb:1", Protocol: "rest"},
		"stats not an ip":  {Tenant: "t", XDSAddress: "kubelb:1", StatsAddress: "envoy:9904"},
		"zero heap":        {Tenant: "t", XDSAddress: "kubelb:1", EnvoyProxy: &v1alpha1.EnvoyProxy{OverloadManager: &v1alpha1.OverloadManager{Enabled: true, MaxHeapSizeBytes: ptr(uint64(0))}}},
	} {
		if _, err := Generate(opts); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestKeepaliveMatchesServer: the server's keepalive enforcement must allow the pings the
// bootstrap asks for.
func TestKeepaliveMatchesServer(t *testing.T) {
	if KeepaliveTime != xds.KeepaliveTime || KeepaliveTimeout != xds.KeepaliveTimeout {
		t.Fatalf("bootstrap keepalive %v/%v, server %v/%v", KeepaliveTime, KeepaliveTimeout, xds.KeepaliveTime, xds.KeepaliveTimeout)
	}
}
