package translatetest

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds/translator"
)

// Pipeline runs the whole translation: the front ends (translate.Run), then the back end.
// Problems of both steps are returned together, in order.
func Pipeline(in translate.Input) (*ir.Config, ir.Problems, translator.Resources, error) {
	r, err := translate.Run(in)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, problems := r.Config, r.Problems
	res, more, err := translator.Translate(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	problems = append(problems, more...)
	problems.Sort()
	return cfg, problems, res, nil
}

// IRFile is the YAML form of a front end's result (and of a back end's golden input).
type IRFile struct {
	IR       *ir.Config   `json:"ir"`
	Problems []ir.Problem `json:"problems,omitempty"`
}

// RenderStatuses renders the Route statuses of a Run as YAML, by Route name; nil when there
// are none.
func RenderStatuses(routes map[string]translate.RouteStatus) ([]byte, error) {
	if len(routes) == 0 {
		return nil, nil
	}
	type entry struct {
		Kind       string `json:"kind"`
		Generation int64  `json:"generation"`
		Status     any    `json:"status"`
	}
	out := map[string]entry{}
	for name, st := range routes {
		var v any
		if err := json.Unmarshal(st.Status, &v); err != nil {
			return nil, err
		}
		out[name] = entry{Kind: st.Kind, Generation: st.Generation, Status: v}
	}
	return yaml.Marshal(out)
}

// RenderIR renders a Config and its problems as YAML.
func RenderIR(cfg *ir.Config, problems ir.Problems) ([]byte, error) {
	return yaml.Marshal(IRFile{IR: cfg, Problems: problems})
}

// LoadIR reads a Config from a YAML file in the form RenderIR writes.
func LoadIR(path string) (*ir.Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f IRFile
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	if f.IR == nil {
		f.IR = &ir.Config{}
	}
	return f.IR, nil
}

// TypeFiles names the golden file suffix of each xDS type, in the order files are listed.
var TypeFiles = []struct {
	Suffix  string
	TypeURL string
}{
	{"listeners", resource.ListenerType},
	{"routes", resource.RouteType},
	{"clusters", resource.ClusterType},
	{"endpoints", resource.EndpointType},
	{"secrets", resource.SecretType},
}

// RenderResources renders resources as one YAML document mapping each given key to the list
// of resources of its type URL (keys as in TypeFiles), e.g. the listeners, clusters and
// endpoints of a Layer 4 pipeline.
func RenderResources(res translator.Resources, keys ...string) ([]byte, error) {
	doc := map[string]any{}
	for _, tf := range TypeFiles {
		for _, k := range keys {
			if k != tf.Suffix {
				continue
			}
			list, err := translator.Plain(res[tf.TypeURL])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			doc[k] = list
		}
	}
	return yaml.Marshal(doc)
}

// RenderType renders the resources of one type URL as a YAML list.
func RenderType(res translator.Resources, typeURL string) ([]byte, error) {
	list, err := translator.Plain(res[typeURL])
	if err != nil {
		return nil, err
	}
	return yaml.Marshal(list)
}

// Golden compares got with the golden file at path, or rewrites the file when update is set.
// A nil got means the case produces nothing for that file: the file must not exist (and is
// removed on update).
func Golden(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if got == nil {
			_ = os.Remove(path)
			return
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if got == nil {
		if err == nil {
			t.Errorf("%s exists but the case produced nothing for it", path)
		}
		return
	}
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs from the golden file (-want +got); run with -update if intended:\n%s", path, diff)
	}
}
