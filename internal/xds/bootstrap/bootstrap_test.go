package bootstrap

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/api/v1alpha1"
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
			want: []string{"cluster: tenant-a", "address: kubelb.kubelb.svc", "port_value: 8001", "port_value: 9901", "ads: {}", "STRICT_DNS"},
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
			opts: Options{Tenant: "tenant-e", XDSAddress: "kubelb.kubelb.svc:8001", ReadyAddress: "0.0.0.0:19003"},
			want: []string{"port_value: 19003", "/ready"},
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
			if err := testsupport.ValidateEnvoy(t, b, "--service-node", "validate-proxy"); err != nil {
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

func TestBootstrapRejectsBadOptions(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]Options{
		"no tenant":        {XDSAddress: "127.0.0.1:1"},
		"no xds address":   {Tenant: "t"},
		"xds without port": {Tenant: "t", XDSAddress: "kubelb"},
		"xds port zero":    {Tenant: "t", XDSAddress: "kubelb:0"},
		"admin not an ip":  {Tenant: "t", XDSAddress: "kubelb:1", AdminAddress: "localhost:9901"},
		"zero connections": {Tenant: "t", XDSAddress: "kubelb:1", EnvoyProxy: &v1alpha1.EnvoyProxy{OverloadManager: &v1alpha1.OverloadManager{Enabled: true, MaxActiveDownstreamConnections: ptr(uint64(0))}}},
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
