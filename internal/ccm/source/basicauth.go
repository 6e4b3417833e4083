package source

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// A SecurityPolicy's basicAuth names a Secret of the policy's namespace (key .htpasswd). The
// Route carries only its name; the Secret synchronizer (internal/ccm/secrets) mirrors the
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
	s := func(k string) string { v, _ := users[k].(string); return v }
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
