package source

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// A Gateway's client certificate validation (spec.tls.frontend) in the ccm: the ConfigMaps
// holding its CA certificates are read here (the hub cannot see them) and carried in the
// Route's context (context.frontendCACertificates, the PEM bundles once each in
// context.backendCACertificates, as BackendTLSPolicies' are). The manager decides the
// listeners' conditions from the Gateway itself and checks the certificates again.

// maxFrontendCACertificates bounds the ConfigMaps a Route carries for a Gateway (the CRD's).
const maxFrontendCACertificates = 16

// FrontendCARefs are the ConfigMaps (core group) a Gateway (unstructured content u, namespace
// ns) names in spec.tls.frontend's default and perPort validations, in the order of first
// appearance, without duplicates. References of other kinds are left out: the hub refuses
// them (InvalidCACertificateKind).
func FrontendCARefs(u map[string]any, ns string) []types.NamespacedName {
	var out []types.NamespacedName
	add := func(validation map[string]any) {
		for _, r := range list(validation, "caCertificateRefs") {
			ref, _ := r.(map[string]any)
			if g := group(ref, "", "group"); (g != "" && g != "core") || str(ref, "", "kind") != "ConfigMap" {
				continue
			}
			key := types.NamespacedName{Namespace: str(ref, ns, "namespace"), Name: str(ref, "", "name")}
			if key.Name != "" && !slices.Contains(out, key) {
				out = append(out, key)
			}
		}
	}
	eachFrontendValidation(u, add)
	return out
}

// eachFrontendValidation calls f with each client certificate validation of a Gateway
// (unstructured content u): spec.tls.frontend's default, then each perPort entry's.
func eachFrontendValidation(u map[string]any, f func(validation map[string]any)) {
	if v, ok := nestedMap(u, "spec", "tls", "frontend", "default", "validation"); ok {
		f(v)
	}
	for _, p := range list(u, "spec", "tls", "frontend", "perPort") {
		port, _ := p.(map[string]any)
		if v, ok := nestedMap(port, "tls", "validation"); ok {
			f(v)
		}
	}
}

// nestedMap is the map at path in u.
func nestedMap(u map[string]any, path ...string) (map[string]any, bool) {
	cur := u
	for _, p := range path {
		next, ok := cur[p].(map[string]any)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

// DesiredFrontendCA is what a Gateway's Route carries of the ConfigMaps its client
// certificate validation names (refs, those it may use; configMaps as the tenant cache has
// them, missing: absent): for each of the first 16, the index of its CA certificates among
// bundles (the Route's backendCACertificates, extended and returned), or why it cannot be
// used. A ConfigMap whose certificates find no room among the eight bundles is reported
// as a problem: the hub then refuses it, never serves without validation.
func DesiredFrontendCA(refs []types.NamespacedName, configMaps map[types.NamespacedName]*corev1.ConfigMap, bundles []string) ([]v1alpha1.FrontendCACertificate, []string) {
	var out []v1alpha1.FrontendCACertificate
	for _, ref := range refs {
		if len(out) == maxFrontendCACertificates {
			break
		}
		e := v1alpha1.FrontendCACertificate{Namespace: ref.Namespace, Name: ref.Name}
		cm := configMaps[ref]
		switch {
		case cm == nil:
			e.Problem = "does not exist"
		case cm.Data[caCertKey] == "":
			e.Problem = "has no key " + caCertKey
		default:
			e.Problem = caProblem(cm.Data[caCertKey])
		}
		if e.Problem == "" {
			pem := cm.Data[caCertKey]
			i := slices.Index(bundles, pem)
			if i < 0 && len(bundles) < maxBackendCACertificates {
				bundles = append(bundles, pem)
				i = len(bundles) - 1
			}
			if i < 0 {
				e.Problem = "cannot be carried to the hub: the Gateway names more than 8 different CA bundles"
			} else {
				idx := int32(i)
				e.CACertificates = &idx
			}
		}
		out = append(out, e)
	}
	return out, bundles
}
