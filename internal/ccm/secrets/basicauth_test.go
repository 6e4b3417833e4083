package secrets

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubelb.dev/kubelb/api/v1alpha1"
	ccmsource "kubelb.dev/kubelb/internal/ccm/source"
)

// securityPolicy is a SecurityPolicy of namespace ns whose basicAuth names Secret users
// (usersNS: the reference's namespace, "" for none).
func securityPolicy(ns, name, users, usersNS string) *unstructured.Unstructured {
	p := ccmsource.SecurityPolicyKind.New()
	p.SetNamespace(ns)
	p.SetName(name)
	ref := map[string]any{"name": users}
	if usersNS != "" {
		ref["namespace"] = usersNS
	}
	p.Object["spec"] = map[string]any{
		"targetRefs": []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "web"}},
		"basicAuth":  map[string]any{"users": ref},
	}
	return p
}

// TestBasicAuthSecretMirrored: a Secret a SecurityPolicy's basicAuth names is mirrored to the
// hub as a SyncSecret holding its .htpasswd key only (not its other keys); a Secret the
// policy names in another namespace (not served) is not mirrored; when the policy goes, so
// does the mirror and the finalizer.
func TestBasicAuthSecretMirrored(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "shop")
	e.namespace(t, "other")
	e.startSync(t, Options{Gateway: true, UseGatewayClass: true})

	users := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "staff"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{".htpasswd": []byte("alice:{SHA}tiY7sUhYKUwI5L3866kDY+ENcrQ=\n"), "notes": []byte("not for the hub")}}
	elsewhere := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "staff"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{".htpasswd": []byte("bob:{SHA}9SMYoF5RilWWASry7TjeaKwmpGg=\n")}}
	e.create(t, e.Tenant.Client, users)
	e.create(t, e.Tenant.Client, elsewhere)
	e.create(t, e.Tenant.Client, securityPolicy("shop", "staff-only", "staff", ""))
	e.create(t, e.Tenant.Client, securityPolicy("shop", "cross", "staff", "other"))

	e.syncSecretOf(t, users, func(ss *v1alpha1.SyncSecret) error {
		if len(ss.Data) != 1 || string(ss.Data[".htpasswd"]) != string(users.Data[".htpasswd"]) {
			return fmt.Errorf("data keys %d, want .htpasswd only", len(ss.Data))
		}
		if ss.Labels[v1alpha1.LabelOriginNamespace] != "shop" || ss.Labels[v1alpha1.LabelOriginName] != "staff" {
			return fmt.Errorf("labels %v", ss.Labels)
		}
		return nil
	})
	e.waitFinalizer(t, users, true)
	settle(t)
	e.noSyncSecret(t, elsewhere)

	if err := e.Tenant.Client.Delete(e.ctx, securityPolicy("shop", "staff-only", "", "")); err != nil {
		t.Fatal(err)
	}
	e.waitSyncSecretGone(t, users)
	e.waitFinalizer(t, users, false)
}

// TestIngressSecretsNameBasicAuth: the Secrets an Ingress names include its ingress-nginx
// auth-secret when auth-type is basic (written as name or namespace/name of its namespace),
// not one of another namespace, nor without auth-type basic.
func TestIngressSecretsNameBasicAuth(t *testing.T) {
	for _, c := range []struct {
		annotations map[string]string
		want        []string
	}{
		{map[string]string{nginxAuthType: "basic", nginxAuthSecret: "users"}, []string{"shop/tls", "shop/users"}},
		{map[string]string{nginxAuthType: "basic", nginxAuthSecret: "shop/users"}, []string{"shop/tls", "shop/users"}},
		{map[string]string{nginxAuthType: "basic", nginxAuthSecret: "other/users"}, []string{"shop/tls"}},
		{map[string]string{nginxAuthSecret: "users"}, []string{"shop/tls"}},
		{map[string]string{nginxAuthType: "basic", nginxAuthSecret: "tls"}, []string{"shop/tls"}},
	} {
		ing := tlsIngress("shop", "web", "kubelb", "tls")
		ing.Annotations = c.annotations
		got := keys(IngressSecrets(ing))
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%v: got %v, want %v", c.annotations, got, c.want)
		}
	}
}
