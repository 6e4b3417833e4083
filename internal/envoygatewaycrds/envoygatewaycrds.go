// Package envoygatewaycrds carries Envoy Gateway's BackendTrafficPolicy, SecurityPolicy and
// ClientTrafficPolicy CRDs (gateway.envoyproxy.io/v1alpha1) of the release kubelb reads policies of, so tests can
// serve the kind on tenant API servers. The YAML files are copied from Envoy Gateway's module
// (github.com/envoyproxy/gateway, Version, charts/gateway-helm/charts/crds/crds/generated)
// by `make generate`; never edit it. kubelb does not depend on Envoy Gateway's Go module: the
// ccm reads the policies as unstructured objects into kubelb's own types (docs/l7.md,
// "Traffic policies").
package envoygatewaycrds

import (
	_ "embed"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// Version is the Envoy Gateway release the CRD is copied from (the Makefile's
// ENVOY_GATEWAY_VERSION).
const Version = "v1.9.1"

//go:embed gateway.envoyproxy.io_backendtrafficpolicies.yaml
var backendTrafficPolicies []byte

//go:embed gateway.envoyproxy.io_securitypolicies.yaml
var securityPolicies []byte

//go:embed gateway.envoyproxy.io_clienttrafficpolicies.yaml
var clientTrafficPolicies []byte

// BackendTrafficPolicy returns the CustomResourceDefinition of Envoy Gateway's
// BackendTrafficPolicy.
func BackendTrafficPolicy() (*apiextensionsv1.CustomResourceDefinition, error) {
	return decode(backendTrafficPolicies, "BackendTrafficPolicy")
}

// SecurityPolicy returns the CustomResourceDefinition of Envoy Gateway's SecurityPolicy.
func SecurityPolicy() (*apiextensionsv1.CustomResourceDefinition, error) {
	return decode(securityPolicies, "SecurityPolicy")
}

// ClientTrafficPolicy returns the CustomResourceDefinition of Envoy Gateway's
// ClientTrafficPolicy.
func ClientTrafficPolicy() (*apiextensionsv1.CustomResourceDefinition, error) {
	return decode(clientTrafficPolicies, "ClientTrafficPolicy")
}

// All returns the CustomResourceDefinitions of the kinds kubelb reads.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range []func() (*apiextensionsv1.CustomResourceDefinition, error){BackendTrafficPolicy, SecurityPolicy, ClientTrafficPolicy} {
		crd, err := f()
		if err != nil {
			return nil, err
		}
		out = append(out, crd)
	}
	return out, nil
}

func decode(raw []byte, kind string) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, crd); err != nil {
		return nil, fmt.Errorf("decoding Envoy Gateway's %s CRD: %w", kind, err)
	}
	return crd, nil
}
