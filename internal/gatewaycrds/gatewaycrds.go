// Package gatewaycrds carries the Gateway API CRDs of the gateway-api release kubelb is built
// against, so the ccm can install them (--install-gateway-api-crds) and tests can apply them.
// The YAML files are copied from the gateway-api module by `make generate`; never edit them.
package gatewaycrds

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

//go:embed standard/*.yaml experimental/*.yaml
var files embed.FS

// Channels are the release channels that can be installed.
var Channels = []string{"standard", "experimental"}

// CRDs returns the CustomResourceDefinitions of a channel, sorted by name.
func CRDs(channel string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := files.ReadDir(channel)
	if err != nil {
		return nil, fmt.Errorf("unknown Gateway API channel %q (want standard or experimental)", channel)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, e := range entries {
		raw, err := files.ReadFile(path.Join(channel, e.Name()))
		if err != nil {
			return nil, err
		}
		reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
		for {
			doc, err := reader.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", e.Name(), err)
			}
			var meta struct {
				Kind string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				return nil, fmt.Errorf("reading %s: %w", e.Name(), err)
			}
			if meta.Kind != "CustomResourceDefinition" {
				continue
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.UnmarshalStrict(doc, crd); err != nil {
				return nil, fmt.Errorf("decoding CRD in %s: %w", e.Name(), err)
			}
			crds = append(crds, crd)
		}
	}
	sort.Slice(crds, func(i, j int) bool { return crds[i].Name < crds[j].Name })
	return crds, nil
}
