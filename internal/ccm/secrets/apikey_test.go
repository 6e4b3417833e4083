package secrets

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	ccmsource "kubelb.dev/kubelb/internal/ccm/source"
)

// TestAPIKeySecretsMirrored: the Secrets a SecurityPolicy's apiKeyAuth names are mirrored to
// the hub whole (each key a client), even one a basicAuth of another policy names too; a
// Secret the policy names in another namespace is not mirrored; when the policy goes, so do
// the mirrors.
func TestAPIKeySecretsMirrored(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "shop")
	e.namespace(t, "other")
	e.startSync(t, Options{Gateway: true, UseGatewayClass: true})

	teamA := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "team-a"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"alice": []byte("key-of-alice"), "bob": []byte("key-of-bob")}}
	elsewhere := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "team-b"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"carol": []byte("key-of-carol")}}
	e.create(t, e.Tenant.Client, teamA)
	e.create(t, e.Tenant.Client, elsewhere)
	p := ccmsource.SecurityPolicyKind.New()
	p.SetNamespace("shop")
	p.SetName("keys")
	p.Object["spec"] = map[string]any{
		"targetRefs": []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "web"}},
		"apiKeyAuth": map[string]any{
			"credentialRefs": []any{map[string]any{"name": "team-a"}, map[string]any{"name": "team-b", "namespace": "other"}},
			"extractFrom":    []any{map[string]any{"headers": []any{"x-api-key"}}},
		},
	}
	e.create(t, e.Tenant.Client, p)
	// Another policy names team-a as basic-auth users: the apiKeyAuth still needs it whole.
	e.create(t, e.Tenant.Client, securityPolicy("shop", "staff-only", "team-a", ""))

	e.syncSecretOf(t, teamA, func(ss *v1alpha1.SyncSecret) error {
		if len(ss.Data) != 2 || string(ss.Data["alice"]) != "key-of-alice" || string(ss.Data["bob"]) != "key-of-bob" {
			return fmt.Errorf("data keys %d, want alice and bob", len(ss.Data))
		}
		return nil
	})
	settle(t)
	e.noSyncSecret(t, elsewhere)

	for _, name := range []string{"keys", "staff-only"} {
		gone := ccmsource.SecurityPolicyKind.New()
		gone.SetNamespace("shop")
		gone.SetName(name)
		if err := e.Tenant.Client.Delete(e.ctx, gone); err != nil {
			t.Fatal(err)
		}
	}
	e.waitSyncSecretGone(t, teamA)
}
