// Package certmanagercrds carries cert-manager's Certificate CRD (cert-manager.io/v1) of the
// release kubelb is tested against, so tests can serve cert-manager's API on a test API server
// and play its controller. The YAML file is copied from the cert-manager module
// (github.com/cert-manager/cert-manager, Version, deploy/crds) by `make generate`; never edit
// it. kubelb itself does not depend on cert-manager's Go module: the manager writes
// Certificates as unstructured objects.
package certmanagercrds

import (
	_ "embed"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// Version is the cert-manager release the CRD is copied from (the Makefile's CERT_MANAGER_VERSION).
const Version = "v1.21.2"

//go:embed cert-manager.io_certificates.yaml
var certificates []byte

// Certificate returns the CustomResourceDefinition of cert-manager's Certificate.
func Certificate() (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(certificates, crd); err != nil {
		return nil, fmt.Errorf("decoding cert-manager's Certificate CRD: %w", err)
	}
	return crd, nil
}
