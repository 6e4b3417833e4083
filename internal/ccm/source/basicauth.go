package source

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// A SecurityPolicy's basicAuth names a Secret of the policy's namespace (key .htpasswd), its
// apiKeyAuth Secrets whose keys are client IDs and values their API keys. The Route carries
// only their names; the Secret synchronizer (internal/ccm/secrets) mirrors the
// Secret to the hub (that key only), where the manager reads it. The policy's status says
// when the Secret is missing or its users cannot be used (basicAuthProblem), naming line
// numbers, never their content.

// BasicAuthSecretName is the name of the Secret of the policy's namespace that a
// SecurityPolicy's spec.basicAuth.users names ("" when none, or when the reference is not to
// a core Secret of the policy's namespace: such a policy is Invalid and nothing is mirrored).
func BasicAuthSecretName(p *unstructured.Unstructured) string {
	users, ok, _ := unstructured.NestedMap(p.Object, "spec", "basicAuth", "users")
	if !ok {
		return ""
	}
	return localSecretName(p, users)
}

// APIKeySecretNames are the names of the Secrets of the policy's namespace that a
// SecurityPolicy's spec.apiKeyAuth.credentialRefs names (references to anything else are
// left out: such a policy is Invalid and nothing is mirrored for them).
func APIKeySecretNames(p *unstructured.Unstructured) []string {
	refs, _, _ := unstructured.NestedSlice(p.Object, "spec", "apiKeyAuth", "credentialRefs")
	var out []string
	for _, r := range refs {
		if m, ok := r.(map[string]any); ok {
			if name := localSecretName(p, m); name != "" && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// OIDCClientSecretName is the name of the Secret of the policy's namespace that a
// SecurityPolicy's spec.oidc.clientSecret names ("" when none or not a core Secret of the
// policy's namespace).
func OIDCClientSecretName(p *unstructured.Unstructured) string {
	ref, ok, _ := unstructured.NestedMap(p.Object, "spec", "oidc", "clientSecret")
	if !ok {
		return ""
	}
	return localSecretName(p, ref)
}

// SecurityPolicySecretNames are the names of every Secret of the policy's namespace a
// SecurityPolicy names: its basicAuth's, its apiKeyAuth's and its oidc's client secret.
func SecurityPolicySecretNames(p *unstructured.Unstructured) []string {
	out := APIKeySecretNames(p)
	for _, name := range []string{BasicAuthSecretName(p), OIDCClientSecretName(p)} {
		if name != "" && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// localSecretName is the name of the Secret a reference (unstructured SecretObjectReference)
// of policy p names, "" when it is not a core Secret of p's namespace.
func localSecretName(p *unstructured.Unstructured, ref map[string]any) string {
	s := func(k string) string { v, _ := ref[k].(string); return v }
	if g := s("group"); g != "" && g != "core" {
		return ""
	}
	if k := s("kind"); k != "" && k != "Secret" {
		return ""
	}
	if ns := s("namespace"); ns != "" && ns != p.GetNamespace() {
		return ""
	}
	return s("name")
}

// securitySecretsProblem checks the Secrets a SecurityPolicy names (settings read from the
// policy; read from the tenant API server, secrets): its basicAuth's and its apiKeyAuth's,
// and says why they cannot be used, "" when they can or the policy names none.
func securitySecretsProblem(ctx context.Context, secrets client.Reader, v any) (string, error) {
	msg, err := basicAuthProblem(ctx, secrets, v)
	if msg != "" || err != nil {
		return msg, err
	}
	if msg, err = oidcSecretProblem(ctx, secrets, v); msg != "" || err != nil {
		return msg, err
	}
	return apiKeyProblem(ctx, secrets, v)
}

// oidcSecretProblem checks the Secret a SecurityPolicy's oidc.clientSecret names: it exists
// and its key client-secret holds a secret Envoy can send. The messages never show it.
func oidcSecretProblem(ctx context.Context, secrets client.Reader, v any) (string, error) {
	sec, ok := v.(*v1alpha1.Security)
	if !ok || sec.OIDC == nil || secrets == nil {
		return "", nil
	}
	key := client.ObjectKey{Namespace: sec.Namespace, Name: sec.OIDC.ClientSecret.Name}
	s := &corev1.Secret{}
	if err := secrets.Get(ctx, key, s); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return fmt.Sprintf("Secret %s named by oidc.clientSecret does not exist", key), nil
		}
		return "", fmt.Errorf("getting Secret %s: %w", key, err)
	}
	if _, err := trafficpolicy.CheckOIDCClientSecret(s.Data); err != nil {
		return fmt.Sprintf("Secret %s named by oidc.clientSecret: %s", key, err), nil
	}
	return "", nil
}

// apiKeyProblem checks the Secrets a SecurityPolicy's apiKeyAuth names: each exists and holds
// keys Envoy can use, no two clients sharing a key or a client ID. The messages name Secrets
// and clients, never keys.
func apiKeyProblem(ctx context.Context, secrets client.Reader, v any) (string, error) {
	sec, ok := v.(*v1alpha1.Security)
	if !ok || sec.APIKeyAuth == nil || secrets == nil {
		return "", nil
	}
	clients, keys := map[string]bool{}, map[string]string{}
	for _, ref := range sec.APIKeyAuth.CredentialRefs {
		key := client.ObjectKey{Namespace: sec.Namespace, Name: ref.Name}
		s := &corev1.Secret{}
		if err := secrets.Get(ctx, key, s); err != nil {
			if client.IgnoreNotFound(err) == nil {
				return fmt.Sprintf("Secret %s named by apiKeyAuth.credentialRefs does not exist", key), nil
			}
			return "", fmt.Errorf("getting Secret %s: %w", key, err)
		}
		parsed, err := trafficpolicy.ParseAPIKeys(s.Data)
		if err != nil {
			return fmt.Sprintf("Secret %s named by apiKeyAuth.credentialRefs: %s", key, strings.ReplaceAll(err.Error(), "\n", "; ")), nil
		}
		for _, k := range parsed {
			if other, ok := keys[k.Key]; ok {
				return fmt.Sprintf("apiKeyAuth: clients %s and %s have the same key", other, k.Client), nil
			}
			if clients[k.Client] {
				return fmt.Sprintf("apiKeyAuth: client %s is in more than one Secret", k.Client), nil
			}
			clients[k.Client], keys[k.Key] = true, k.Client
		}
	}
	if len(clients) > trafficpolicy.MaxAPIKeyClients {
		return fmt.Sprintf("apiKeyAuth: %d clients, at most %d", len(clients), trafficpolicy.MaxAPIKeyClients), nil
	}
	return "", nil
}

// basicAuthProblem checks the Secret a SecurityPolicy's basicAuth names (settings read from
// the policy; read from the tenant API server, secrets), and says why it cannot be used, ""
// when it can or the policy has no basicAuth.
func basicAuthProblem(ctx context.Context, secrets client.Reader, v any) (string, error) {
	sec, ok := v.(*v1alpha1.Security)
	if !ok || sec.BasicAuth == nil || secrets == nil {
		return "", nil
	}
	key := client.ObjectKey{Namespace: sec.Namespace, Name: sec.BasicAuth.Users.Name}
	s := &corev1.Secret{}
	if err := secrets.Get(ctx, key, s); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return fmt.Sprintf("Secret %s named by basicAuth.users does not exist", key), nil
		}
		return "", fmt.Errorf("getting Secret %s: %w", key, err)
	}
	data, ok := s.Data[trafficpolicy.HtpasswdKey]
	if !ok {
		return fmt.Sprintf("Secret %s named by basicAuth.users has no key %s", key, trafficpolicy.HtpasswdKey), nil
	}
	if _, err := trafficpolicy.ParseHtpasswd(data); err != nil {
		return fmt.Sprintf("Secret %s named by basicAuth.users, key %s: %s", key, trafficpolicy.HtpasswdKey, strings.ReplaceAll(err.Error(), "\n", "; ")), nil
	}
	return "", nil
}
