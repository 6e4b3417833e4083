package oidckeys_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/hubcache"
	"kubelb.dev/kubelb/internal/manager/oidckeys"
	"kubelb.dev/kubelb/internal/manager/tenant"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
)

// TestOIDCCookieKeysOnTheHub, against a real API server: a Route carrying a SecurityPolicy
// with oidc gets a random cookie key in the tenant's Secret kubelb-oidc-keys, which the
// tenant's ccm, with its real credentials (a token of its ServiceAccount under tenant.CCMRules),
// can neither get nor list; a second manager (a restart) keeps that key and makes another,
// different one for a second login; a Route deleted takes its login's key with it; 18 logins
// get 16 keys; a new tenant without logins is planned once; no login left, no Secret.
func TestOIDCCookieKeysOnTheHub(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	ctx := context.Background()
	const ns = "tenant-a"
	c := hub.Client
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: hubnames.TenantLabels("a")}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenant.ServiceAccountName}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenant.RoleName}, Rules: tenant.CCMRules()},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenant.RoleBindingName},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: tenant.RoleName},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: tenant.ServiceAccountName}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	ccm := ccmClient(t, hub, ns)

	start := func(what string) func() {
		mgr := testenv.NewManager(t, hub.Config, func(o *ctrl.Options) { o.Cache.ByObject = hubcache.CacheByObject() })
		if err := oidckeys.SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
		return testenv.RunManager(t, mgr, what, 30*time.Second)
	}
	login := func(route, policy string) string { return translate.OIDCCookieKeyName(route + "/app/" + policy) }
	waitKeys := func(what string, want func(map[string][]byte) error) map[string][]byte {
		t.Helper()
		var got map[string][]byte
		testsupport.Eventually(t, 30*time.Second, what, func() error {
			s := &corev1.Secret{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: hubnames.OIDCCookieKeysSecret}, s); err != nil {
				if apierrors.IsNotFound(err) {
					got = nil
					return want(nil)
				}
				return err
			}
			if !hubnames.IsOIDCCookieKeys(s) {
				return fmt.Errorf("Secret labels %v: not kubelb's cookie keys", s.Labels)
			}
			got = s.Data
			return want(s.Data)
		})
		return got
	}
	count := func(n int) func(map[string][]byte) error {
		return func(keys map[string][]byte) error {
			if len(keys) != n {
				return fmt.Errorf("%d keys, want %d", len(keys), n)
			}
			for name, k := range keys {
				if len(k) != translate.OIDCCookieKeySize {
					return fmt.Errorf("key %s of %d bytes", name, len(k))
				}
			}
			return nil
		}
	}

	stop := start("the first manager")
	mustCreate(t, c, oidcRoute(ns, "r01", "login"))
	first := waitKeys("a key for r01's login", count(1))[login("r01", "login")]
	if first == nil {
		t.Fatalf("no key named for r01's login")
	}

	// The ccm's own credentials cannot read it, nor list Secrets.
	err := ccm.Get(ctx, types.NamespacedName{Namespace: ns, Name: hubnames.OIDCCookieKeysSecret}, &corev1.Secret{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("the ccm getting Secret %s: %v, want Forbidden", hubnames.OIDCCookieKeysSecret, err)
	}
	if err := ccm.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
		t.Errorf("the ccm listing Secrets: %v, want Forbidden", err)
	}
	// What it may do, it can (the credentials work): list its Routes.
	if err := ccm.List(ctx, &v1alpha1.RouteList{}, client.InNamespace(ns)); err != nil {
		t.Errorf("the ccm listing Routes: %v", err)
	}

	// A restart: the new manager keeps the key, and makes another for a second login.
	stop()
	start("the second manager")
	mustCreate(t, c, oidcRoute(ns, "r02", "other"))
	keys := waitKeys("keys for both logins", count(2))
	if !bytes.Equal(keys[login("r01", "login")], first) {
		t.Errorf("r01's key changed across the restart")
	}
	if second := keys[login("r02", "other")]; second == nil || bytes.Equal(second, first) {
		t.Errorf("r02's key %x, want one of its own", second)
	}

	// r01 deleted: its key goes, r02's stays.
	mustDelete(t, c, oidcRoute(ns, "r01", "login"))
	after := waitKeys("r01's key removed", count(1))
	if !bytes.Equal(after[login("r02", "other")], keys[login("r02", "other")]) {
		t.Errorf("r02's key changed when r01 went")
	}

	// Bounded: 17 more logins (18 in all) get 16 keys; r02's is kept.
	for i := range 17 {
		mustCreate(t, c, oidcRoute(ns, fmt.Sprintf("r%02d", i+10), "login"))
	}
	bounded := waitKeys("16 keys for 18 logins", count(translate.MaxOIDCCookieKeys))
	if !bytes.Equal(bounded[login("r02", "other")], keys[login("r02", "other")]) {
		t.Errorf("r02's key changed when others came")
	}

	// A Secret of that name kubelb did not make (an admin's, unlabelled) is never taken over.
	// A new tenant namespace is planned once though it has no login yet (its reconcile series
	// exists before its first login, which the dashboards need).
	const other = "tenant-b"
	idle := testenv.WaitControllerIdle(t, "oidckeys", 0)
	mustCreate(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other, Labels: hubnames.TenantLabels("b")}})
	testenv.WaitControllerIdle(t, "oidckeys", idle+1)
	mustCreate(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: hubnames.OIDCCookieKeysSecret}, Data: map[string][]byte{"admin": []byte("mine")}})
	before := testenv.WaitControllerIdle(t, "oidckeys", 0)
	mustCreate(t, c, oidcRoute(other, "rb", "login"))
	testenv.WaitControllerIdle(t, "oidckeys", before+1) // it heard of tenant-b's login
	foreign := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: other, Name: hubnames.OIDCCookieKeysSecret}, foreign); err != nil {
		t.Fatal(err)
	}
	if len(foreign.Data) != 1 || string(foreign.Data["admin"]) != "mine" || hubnames.IsManaged(foreign) {
		t.Errorf("the admin's Secret was changed: labels %v, %d keys", foreign.Labels, len(foreign.Data))
	}

	// No login left: no Secret.
	if err := c.DeleteAllOf(ctx, &v1alpha1.Route{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	waitKeys("the Secret removed", func(keys map[string][]byte) error {
		if keys != nil {
			return fmt.Errorf("%d keys left", len(keys))
		}
		return nil
	})
}

// oidcRoute is a Route carrying SecurityPolicy app/<policy> with oidc for its HTTPRoute.
func oidcRoute(ns, name, policy string) *v1alpha1.Route {
	r := &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	r.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{
		Route: unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
			"metadata": map[string]any{"name": name, "namespace": "app"},
		}},
		Context: &v1alpha1.SourceContext{Security: &v1alpha1.Security{Namespace: "app", Name: policy, OIDC: &v1alpha1.SecurityOIDC{
			Provider: v1alpha1.SecurityOIDCProvider{
				Issuer: "https://id.example.com", AuthorizationEndpoint: ptr.To("https://id.example.com/authorize"),
				TokenEndpoint: ptr.To("https://id.example.com/token"),
				BackendRefs:   []v1alpha1.SecurityBackendRef{{Name: "idp", Port: ptr.To[int32](8080)}},
			},
			ClientID: "app", ClientSecret: v1alpha1.SecurityBasicAuthUsers{Name: "oidc"},
		}}},
	}
	return r
}

// ccmClient is a client with the tenant's ccm credentials as the manager makes them: a
// TokenRequest token of its ServiceAccount in a kubeconfig for the tenant namespace.
func ccmClient(t *testing.T, hub *testenv.Cluster, ns string) client.Client {
	t.Helper()
	tr, err := kubernetes.NewForConfigOrDie(hub.Config).CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), tenant.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(tenant.MinTokenTTL / time.Second))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := tenant.RenderKubeconfig(tenant.HubEndpoint{Server: hub.Config.Host, CAData: hub.Config.CAData}, ns, tr.Status.Token)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustCreate(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

func mustDelete(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	if err := c.Delete(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}
