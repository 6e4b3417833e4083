package source

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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
		cm := configMaps[ref]
		var data *string
		if cm != nil {
			v := cm.Data[caCertKey]
			data = &v
		}
		out, bundles = appendFrontendCA(out, bundles, v1alpha1.FrontendCACertificate{Namespace: ref.Namespace, Name: ref.Name}, data)
	}
	return out, bundles
}

// appendFrontendCA appends entry e of a ConfigMap or Secret whose key ca.crt holds data (nil:
// the object does not exist): the index of its CA certificates among bundles (extended and
// returned), or why it cannot be used.
func appendFrontendCA(out []v1alpha1.FrontendCACertificate, bundles []string, e v1alpha1.FrontendCACertificate, data *string) ([]v1alpha1.FrontendCACertificate, []string) {
	switch {
	case data == nil:
		e.Problem = "does not exist"
	case *data == "":
		e.Problem = "has no key " + caCertKey
	default:
		e.Problem = caProblem(*data)
	}
	if e.Problem == "" {
		pem := *data
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
	return append(out, e), bundles
}

// PolicyCARef is a ConfigMap or Secret (Kind) a ClientTrafficPolicy's tls.clientValidation
// names.
type PolicyCARef struct {
	Kind string
	types.NamespacedName
}

// ClientTrafficCARefs are the ConfigMaps and Secrets the ClientTrafficPolicies a Gateway's
// context carries name in tls.clientValidation (the Gateway's policy, then its listeners'),
// all of the policy's namespace, in the order of first appearance, without duplicates.
// References the policy's check refuses (another kind, group or namespace) are left out.
func ClientTrafficCARefs(sc *v1alpha1.SourceContext) []PolicyCARef {
	if sc == nil {
		return nil
	}
	var out []PolicyCARef
	add := func(ct *v1alpha1.ClientTraffic) {
		if ct == nil || ct.TLS == nil || ct.TLS.ClientValidation == nil {
			return
		}
		for _, r := range ct.TLS.ClientValidation.CACertificateRefs {
			ref := PolicyCARef{Kind: policyCAKind(r), NamespacedName: types.NamespacedName{Namespace: ct.Namespace, Name: r.Name}}
			if ref.Kind == "" || r.Name == "" || (r.Namespace != "" && r.Namespace != ct.Namespace) || slices.Contains(out, ref) {
				continue
			}
			out = append(out, ref)
		}
	}
	add(sc.ClientTraffic)
	for i := range sc.PolicySections {
		add(sc.PolicySections[i].ClientTraffic)
	}
	return out
}

// policyCAKind is the kind of a caCertificateRefs entry the ccm reads: ConfigMap or Secret
// (the CRD's default) of the core group; "" for any other.
func policyCAKind(r v1alpha1.ClientTrafficCARef) string {
	kind := r.Kind
	if kind == "" {
		kind = kindSecret
	}
	if (r.Group != "" && r.Group != "core") || (kind != "ConfigMap" && kind != kindSecret) {
		return ""
	}
	return kind
}

// DesiredPolicyCA appends to a Gateway's context.frontendCACertificates (out, with the bundles
// of backendCACertificates) the ConfigMaps and Secrets its ClientTrafficPolicies' client
// validations name (refs), as the ccm read their key ca.crt (cas; missing: absent), within
// the 16 entries the Route carries; entries already there (the Gateway's own ConfigMaps)
// are not repeated.
func DesiredPolicyCA(out []v1alpha1.FrontendCACertificate, bundles []string, refs []PolicyCARef, cas map[PolicyCARef]string) ([]v1alpha1.FrontendCACertificate, []string) {
	for _, ref := range refs {
		if len(out) == maxFrontendCACertificates {
			break
		}
		kind := ref.Kind
		if kind == "ConfigMap" {
			kind = "" // as the Gateway's own entries
		}
		if slices.ContainsFunc(out, func(e v1alpha1.FrontendCACertificate) bool {
			return e.Namespace == ref.Namespace && e.Name == ref.Name && e.Kind == kind
		}) {
			continue
		}
		var data *string
		if v, ok := cas[ref]; ok {
			data = &v
		}
		out, bundles = appendFrontendCA(out, bundles, v1alpha1.FrontendCACertificate{Namespace: ref.Namespace, Name: ref.Name, Kind: kind}, data)
	}
	return out, bundles
}

// indexClientTrafficCA: "Kind/namespace/name" of every ConfigMap and Secret a
// ClientTrafficPolicy's tls.clientValidation names.
const indexClientTrafficCA = "ccm.kubelb.k8c.io/client-traffic-ca"

// indexClientTrafficCAs registers on the tenant cache the index of ClientTrafficPolicies by
// the ConfigMaps and Secrets their client validation names.
func indexClientTrafficCAs(ctx context.Context, idx client.FieldIndexer) error {
	if err := idx.IndexField(ctx, ClientTrafficPolicyKind.New(), indexClientTrafficCA, func(o client.Object) []string {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			return nil
		}
		var out []string
		for _, r := range list(u.Object, "spec", "tls", "clientValidation", "caCertificateRefs") {
			ref, _ := r.(map[string]any)
			kind := policyCAKind(v1alpha1.ClientTrafficCARef{Group: str(ref, "", "group"), Kind: str(ref, "", "kind")})
			if name := str(ref, "", "name"); kind != "" && name != "" {
				out = append(out, kind+"/"+str(ref, o.GetNamespace(), "namespace")+"/"+name)
			}
		}
		return out
	}); err != nil {
		return fmt.Errorf("indexing ClientTrafficPolicies by CA certificates: %w", err)
	}
	return nil
}

// clientTrafficCATargets are requests for the objects of kind k (Gateways) whose
// ClientTrafficPolicies' client validation names the ConfigMap or Secret (kind) key.
func clientTrafficCATargets(ctx context.Context, c client.Reader, k Kind, kind string, key types.NamespacedName) []reconcile.Request {
	policies := ClientTrafficPolicyKind.NewList()
	if err := c.List(ctx, policies, client.InNamespace(key.Namespace), client.MatchingFields{indexClientTrafficCA: kind + "/" + key.String()}); err != nil {
		// Without ClientTrafficPolicies served the index is not registered: nothing to do.
		return nil
	}
	var out []reconcile.Request
	for i := range policies.Items {
		out = append(out, trafficTargetsOfKind(ctx, c, k, &policies.Items[i])...)
	}
	return out
}
