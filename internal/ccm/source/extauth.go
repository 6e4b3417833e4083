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

// A SecurityPolicy's extAuth names its authorization service, a Service of the policy's
// namespace. The Route of each object the policy applies to embeds that Service as it embeds
// backends (ClusterIP Services through their NodePort twins, loadScope), so the hub reaches
// it as any backend; the object is reconciled again when the Service changes
// (indexExtAuthService), and the policy's status says when the Service is missing
// (extAuthProblem).

// indexExtAuthService indexes SecurityPolicies by the name of their extAuth's Service (the
// policy's namespace).
const indexExtAuthService = "ccm.kubelb.k8c.io/security-policy-ext-auth"

// ExtAuthServiceName is the name of the Service of the policy's namespace a SecurityPolicy's
// spec.extAuth (http or grpc) names in its first backendRefs entry, "" when it names none (or
// something else: such a policy is Invalid).
func ExtAuthServiceName(p *unstructured.Unstructured) string {
	for _, proto := range []string{"http", "grpc"} {
		refs, _, _ := unstructured.NestedSlice(p.Object, "spec", "extAuth", proto, "backendRefs")
		if len(refs) == 0 {
			continue
		}
		m, ok := refs[0].(map[string]any)
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
	return ""
}

// indexExtAuthServices registers indexExtAuthService (tenant cache).
func indexExtAuthServices(ctx context.Context, idx client.FieldIndexer) error {
	if err := idx.IndexField(ctx, SecurityPolicyKind.New(), indexExtAuthService, func(o client.Object) []string {
		if u, ok := o.(*unstructured.Unstructured); ok {
			if name := ExtAuthServiceName(u); name != "" {
				return []string{name}
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing SecurityPolicies by extAuth Service: %w", err)
	}
	return nil
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

// extAuthBackendOf adds to backends the Service of sec's extAuth (nil: none).
func extAuthBackendOf(backends []types.NamespacedName, sec *v1alpha1.Security, ns string) []types.NamespacedName {
	if sec == nil || sec.ExtAuth == nil || sec.Namespace != ns {
		return backends
	}
	var refs []v1alpha1.SecurityBackendRef
	if e := sec.ExtAuth; e.HTTP != nil {
		refs = e.HTTP.BackendRefs
	} else if e.GRPC != nil {
		refs = e.GRPC.BackendRefs
	}
	if len(refs) == 0 || (refs[0].Namespace != nil && *refs[0].Namespace != "" && *refs[0].Namespace != ns) {
		return backends
	}
	key := types.NamespacedName{Namespace: ns, Name: refs[0].Name}
	if slices.Contains(backends, key) {
		return backends
	}
	return append(backends, key)
}

// extAuthProblem checks the Service a SecurityPolicy's extAuth names (settings read from the
// policy; services read from the tenant cache): it exists, is not an ExternalName Service, and
// has the TCP port named. "" when it can be used or the policy has no extAuth.
func extAuthProblem(ctx context.Context, services client.Reader, v any) (string, error) {
	sec, ok := v.(*v1alpha1.Security)
	if !ok || sec.ExtAuth == nil || services == nil {
		return "", nil
	}
	field, refs := "extAuth.http.backendRefs", []v1alpha1.SecurityBackendRef(nil)
	if sec.ExtAuth.HTTP != nil {
		refs = sec.ExtAuth.HTTP.BackendRefs
	} else if sec.ExtAuth.GRPC != nil {
		field, refs = "extAuth.grpc.backendRefs", sec.ExtAuth.GRPC.BackendRefs
	}
	if len(refs) == 0 || refs[0].Port == nil {
		return "", nil // Invalid already
	}
	key := client.ObjectKey{Namespace: sec.Namespace, Name: refs[0].Name}
	svc := &corev1.Service{}
	if err := services.Get(ctx, key, svc); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return fmt.Sprintf("Service %s named by %s does not exist", key, field), nil
		}
		return "", fmt.Errorf("getting Service %s: %w", key, err)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return fmt.Sprintf("Service %s named by %s is of type ExternalName; the authorization service must be a ClusterIP, NodePort or LoadBalancer Service", key, field), nil
	}
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
		return p.Port == *refs[0].Port && v1alpha1.ProtocolOrTCP(p.Protocol) == corev1.ProtocolTCP
	}) {
		return fmt.Sprintf("Service %s named by %s has no TCP port %d", key, field, *refs[0].Port), nil
	}
	return "", nil
}
