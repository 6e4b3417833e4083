package secrets

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	ccmsource "kubelb.dev/kubelb/internal/ccm/source"
)

// TestOIDCClientSecretMirrored: the Secret a SecurityPolicy's oidc.clientSecret names reaches
// the hub with its client-secret key only (the Secret's other keys stay in the tenant
// cluster); a Secret a basicAuth of another policy names too is mirrored with both keys.
func TestOIDCClientSecretMirrored(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "shop")
	e.startSync(t, Options{Gateway: true, UseGatewayClass: true})

	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "shop-oidc"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"client-secret": []byte("shop-client-secret"), "admin-password": []byte("not-for-the-hub")}}
	shared := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "shared"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"client-secret": []byte("other-secret"), ".htpasswd": []byte("alice:{SHA}x"), "extra": []byte("no")}}
	e.create(t, e.Tenant.Client, s)
	e.create(t, e.Tenant.Client, shared)
	policy := func(name, secret string) {
		p := ccmsource.SecurityPolicyKind.New()
		p.SetNamespace("shop")
		p.SetName(name)
		p.Object["spec"] = map[string]any{
			"targetRefs": []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "web"}},
			"oidc": map[string]any{
				"provider": map[string]any{
					"issuer": "https://id.example.com", "authorizationEndpoint": "https://id.example.com/authorize",
					"tokenEndpoint": "https://id.example.com/token", "backendRefs": []any{map[string]any{"name": "idp", "port": int64(8080)}},
				},
				"clientID": "shop", "clientSecret": map[string]any{"name": secret},
			},
		}
		e.create(t, e.Tenant.Client, p)
	}
	policy("login", "shop-oidc")
	policy("other-login", "shared")
	e.create(t, e.Tenant.Client, securityPolicy("shop", "staff-only", "shared", ""))

	e.syncSecretOf(t, s, func(ss *v1alpha1.SyncSecret) error {
		if len(ss.Data) != 1 || string(ss.Data["client-secret"]) != "shop-client-secret" {
			return fmt.Errorf("data has %d keys, want client-secret alone", len(ss.Data))
		}
		return nil
	})
	e.syncSecretOf(t, shared, func(ss *v1alpha1.SyncSecret) error {
		if len(ss.Data) != 2 || ss.Data["client-secret"] == nil || ss.Data[".htpasswd"] == nil {
			return fmt.Errorf("data has %d keys, want client-secret and .htpasswd", len(ss.Data))
		}
		return nil
	})
}
