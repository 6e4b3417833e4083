package translate

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden testdata/*.out.yaml files")

// goldenInput is the YAML form of an Input: Addresses as a list, durations as strings.
type goldenInput struct {
	Tenant        string                  `json:"tenant"`
	Options       goldenOptions           `json:"options,omitempty"`
	Addresses     []v1alpha1.Addresses    `json:"addresses,omitempty"`
	LoadBalancers []v1alpha1.LoadBalancer `json:"loadBalancers,omitempty"`
}

type goldenOptions struct {
	ListenerAddress          string            `json:"listenerAddress,omitempty"`
	ConnectTimeout           metav1.Duration   `json:"connectTimeout,omitempty"`
	MaxConnectionsPerCluster uint32            `json:"maxConnectionsPerCluster,omitempty"`
	UDPSessionIdleTimeout    metav1.Duration   `json:"udpSessionIdleTimeout,omitempty"`
	HealthCheck              goldenHealthCheck `json:"healthCheck,omitempty"`
}

type goldenHealthCheck struct {
	Disabled           bool            `json:"disabled,omitempty"`
	Interval           metav1.Duration `json:"interval,omitempty"`
	Timeout            metav1.Duration `json:"timeout,omitempty"`
	UnhealthyThreshold uint32          `json:"unhealthyThreshold,omitempty"`
	HealthyThreshold   uint32          `json:"healthyThreshold,omitempty"`
	NoTrafficInterval  metav1.Duration `json:"noTrafficInterval,omitempty"`
}

func (g goldenInput) input() Input {
	in := Input{
		Tenant:        g.Tenant,
		LoadBalancers: g.LoadBalancers,
		Addresses:     map[string]v1alpha1.Addresses{},
		Options: Options{
			ListenerAddress:          g.Options.ListenerAddress,
			ConnectTimeout:           g.Options.ConnectTimeout.Duration,
			MaxConnectionsPerCluster: g.Options.MaxConnectionsPerCluster,
			UDPSessionIdleTimeout:    g.Options.UDPSessionIdleTimeout.Duration,
			HealthCheck: HealthCheck{
				Disabled:           g.Options.HealthCheck.Disabled,
				Interval:           g.Options.HealthCheck.Interval.Duration,
				Timeout:            g.Options.HealthCheck.Timeout.Duration,
				UnhealthyThreshold: g.Options.HealthCheck.UnhealthyThreshold,
				HealthyThreshold:   g.Options.HealthCheck.HealthyThreshold,
				NoTrafficInterval:  g.Options.HealthCheck.NoTrafficInterval.Duration,
			},
		},
	}
	for _, a := range g.Addresses {
		in.Addresses[a.Name] = a
	}
	return in
}

// renderOutput renders an Output as YAML: every resource through protojson (snake_case field
// names, as in Envoy's docs) and then through a generic map, so key order is sorted and the
// result is byte-stable (protojson's own output deliberately is not).
func renderOutput(out Output) ([]byte, error) {
	conv := func(rs []types.Resource) ([]any, error) {
		list := make([]any, 0, len(rs))
		for _, r := range rs {
			b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(r.(proto.Message))
			if err != nil {
				return nil, err
			}
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		return list, nil
	}
	doc := map[string]any{}
	for key, rs := range map[string][]types.Resource{"listeners": out.Listeners, "clusters": out.Clusters, "endpoints": out.Endpoints} {
		list, err := conv(rs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		doc[key] = list
	}
	if len(out.Problems) > 0 {
		doc["problems"] = out.Problems
	}
	return yaml.Marshal(doc)
}

func TestGolden(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata/*.in.yaml")
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var g goldenInput
			if err := yaml.UnmarshalStrict(raw, &g); err != nil {
				t.Fatalf("parse %s: %v", file, err)
			}
			out, err := Translate(g.input())
			if err != nil {
				t.Fatalf("Translate: %v", err)
			}
			checkOutput(t, out)
			got, err := renderOutput(out)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			// Translating twice gives the same bytes: versions derived from the output are stable.
			again, err := Translate(g.input())
			if err != nil {
				t.Fatal(err)
			}
			if got2, _ := renderOutput(again); string(got2) != string(got) {
				t.Fatalf("Translate is not deterministic:\n%s", cmp.Diff(string(got), string(got2)))
			}

			golden := filepath.Join("testdata", name+".out.yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/translate -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s differs from the golden file (-want +got); run with -update if intended:\n%s", golden, diff)
			}
		})
	}
}
