package source

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// A SecurityPolicy's extAuth names its authorization service, its oidc the Service its token
// endpoint is reached through, and each of its jwt providers with remoteJWKS the Service its
// key server is reached through: Services of the policy's namespace. The Route of each object
// the policy applies to embeds those Services as it embeds backends (ClusterIP Services
// through their NodePort twins, loadScope), so the hub reaches them as any backend; the object
// is reconciled again when one changes (indexExtAuthService), and the policy's status says
// when one is missing (extAuthProblem).

// indexExtAuthService indexes SecurityPolicies by the name of their extAuth's Service (the
// policy's namespace).
const indexExtAuthService = "ccm.kubelb.k8c.io/security-policy-ext-auth"

// ExtAuthServiceName is the name of the Service of the policy's namespace a SecurityPolicy's
// spec.extAuth (http or grpc) names in its first backendRefs entry, "" when it names none (or
// something else: such a policy is Invalid).
func ExtAuthServiceName(p *unstructured.Unstructured) string {
	return firstServiceRef(p, []string{"extAuth", "http"}, []string{"extAuth", "grpc"})
}

// OIDCServiceName is the name of the Service of the policy's namespace a SecurityPolicy's
// spec.oidc.provider.backendRefs names first (the Service its token endpoint is reached
// through), "" when none.
func OIDCServiceName(p *unstructured.Unstructured) string {
	return firstServiceRef(p, []string{"oidc", "provider"})
}

// JWKSServiceNames are the names of the Services of the policy's namespace a SecurityPolicy's
// spec.jwt.providers[].remoteJWKS.backendRefs name first (the Services its key servers are
// reached through), unique.
func JWKSServiceNames(p *unstructured.Unstructured) []string {
	providers, _, _ := unstructured.NestedSlice(p.Object, "spec", "jwt", "providers")
	var out []string
	for _, prov := range providers {
		m, ok := prov.(map[string]any)
		if !ok {
			continue
		}
		if name := serviceRefOf(p, m, "remoteJWKS"); name != "" && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// firstServiceRef is the Service of the policy's namespace the first backendRefs entry of the
// first of the spec's fields at paths names, "" when none.
func firstServiceRef(p *unstructured.Unstructured, paths ...[]string) string {
	for _, path := range paths {
		refs, _, _ := unstructured.NestedSlice(p.Object, append(append([]string{"spec"}, path...), "backendRefs")...)
		if len(refs) == 0 {
			continue
		}
		return serviceRef(p, refs[0])
	}
	return ""
}

// serviceRefOf is the Service of the policy's namespace the first backendRefs entry of
// m[field] names, "" when none.
func serviceRefOf(p *unstructured.Unstructured, m map[string]any, field string) string {
	refs, _, _ := unstructured.NestedSlice(m, field, "backendRefs")
	if len(refs) == 0 {
		return ""
	}
	return serviceRef(p, refs[0])
}

// serviceRef is the Service of the policy's namespace a backendRefs entry names, "" when it
// names something else.
func serviceRef(p *unstructured.Unstructured, ref any) string {
	m, ok := ref.(map[string]any)
	if !ok {
		return ""
	}
	s := func(k string) string { v, _ := m[k].(string); return v }
	if (s("group") != "" && s("group") != "core") || (s("kind") != "" && s("kind") != kindService) ||
		(s("namespace") != "" && s("namespace") != p.GetNamespace()) {
		return ""
	}
	return s("name")
}

// extAuthBackend adds to backends the Service of the extAuth of the SecurityPolicy a Route
// context carries (a Service of the object's namespace ns), once.
func extAuthBackend(backends []types.NamespacedName, c *v1alpha1.SourceContext, ns string) []types.NamespacedName {
	if c == nil {
		return backends
	}
	backends = extAuthBackendOf(backends, c.Security, ns)
	for i := range c.PolicySections { // the SecurityPolicies of its sections' too
		backends = extAuthBackendOf(backends, c.PolicySections[i].Security, ns)
	}
	return backends
}

// extAuthBackendOf adds to backends the Service of sec's extAuth, that of its oidc's token
// endpoint and those of its jwt providers' key servers (nil: none).
func extAuthBackendOf(backends []types.NamespacedName, sec *v1alpha1.Security, ns string) []types.NamespacedName {
	if sec == nil || sec.Namespace != ns {
		return backends
	}
	add := func(refs []v1alpha1.SecurityBackendRef) {
		if len(refs) == 0 || (refs[0].Namespace != nil && *refs[0].Namespace != "" && *refs[0].Namespace != ns) {
			return
		}
		if key := (types.NamespacedName{Namespace: ns, Name: refs[0].Name}); !slices.Contains(backends, key) {
			backends = append(backends, key)
		}
	}
	if e := sec.ExtAuth; e != nil && e.HTTP != nil {
		add(e.HTTP.BackendRefs)
	} else if e != nil && e.GRPC != nil {
		add(e.GRPC.BackendRefs)
	}
	if sec.OIDC != nil { // the Service the token endpoint is reached through
		add(sec.OIDC.Provider.BackendRefs)
	}
	if sec.JWT != nil { // the Services the key servers are reached through
		for _, p := range sec.JWT.Providers {
			if p.RemoteJWKS != nil {
				add(p.RemoteJWKS.BackendRefs)
			}
		}
	}
	return backends
}

// extAuthProblem checks the Service a SecurityPolicy's extAuth names (settings read from the
// policy; services read from the tenant cache): it exists, is not an ExternalName Service, and
// has the TCP port named; and the same of the Service of its oidc's token endpoint and of those
// of its jwt providers' key servers. "" when they can be used or the policy has none.
func extAuthProblem(ctx context.Context, services client.Reader, v any) (string, error) {
	sec, ok := v.(*v1alpha1.Security)
	if !ok || services == nil {
		return "", nil
	}
	if e := sec.ExtAuth; e != nil {
		field, refs := "extAuth.http.backendRefs", []v1alpha1.SecurityBackendRef(nil)
		if e.HTTP != nil {
			refs = e.HTTP.BackendRefs
		} else if e.GRPC != nil {
			field, refs = "extAuth.grpc.backendRefs", e.GRPC.BackendRefs
		}
		if msg, err := serviceRefProblem(ctx, services, sec.Namespace, field, refs, "the authorization service"); msg != "" || err != nil {
			return msg, err
		}
	}
	if o := sec.OIDC; o != nil {
		if msg, err := serviceRefProblem(ctx, services, sec.Namespace, "oidc.provider.backendRefs", o.Provider.BackendRefs, "the Service of the token endpoint"); msg != "" || err != nil {
			return msg, err
		}
	}
	if j := sec.JWT; j != nil {
		for i, p := range j.Providers {
			if p.RemoteJWKS == nil {
				continue
			}
			field := fmt.Sprintf("jwt.providers[%d].remoteJWKS.backendRefs", i)
			if msg, err := serviceRefProblem(ctx, services, sec.Namespace, field, p.RemoteJWKS.BackendRefs, "the Service of the key server"); msg != "" || err != nil {
				return msg, err
			}
		}
	}
	return "", nil
}

// serviceRefProblem checks the Service of namespace ns the first of refs (field) names: it
// exists, is not an ExternalName Service (what names it), and has the TCP port named.
func serviceRefProblem(ctx context.Context, services client.Reader, ns, field string, refs []v1alpha1.SecurityBackendRef, what string) (string, error) {
	if len(refs) == 0 || refs[0].Port == nil {
		return "", nil // Invalid already
	}
	key := client.ObjectKey{Namespace: ns, Name: refs[0].Name}
	svc := &corev1.Service{}
	if err := services.Get(ctx, key, svc); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return fmt.Sprintf("Service %s named by %s does not exist", key, field), nil
		}
		return "", fmt.Errorf("getting Service %s: %w", key, err)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return fmt.Sprintf("Service %s named by %s is of type ExternalName; %s must be a ClusterIP, NodePort or LoadBalancer Service", key, field, what), nil
	}
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
		return p.Port == *refs[0].Port && v1alpha1.ProtocolOrTCP(p.Protocol) == corev1.ProtocolTCP
	}) {
		return fmt.Sprintf("Service %s named by %s has no TCP port %d", key, field, *refs[0].Port), nil
	}
	return "", nil
}
