package helm

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ccm/hubtoken"
	"kubelb.dev/kubelb/internal/manager/tenant"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// tokenPolicyMessage starts what the chart's tenant-token policy answers.
const tokenPolicyMessage = "a tenant may"

// TestTenantTokensLimitedByTheChart: with the manager chart's admission policy, tenant b,
// hostile, asks the hub for tokens of its own ServiceAccount that the ccm never needs — for
// another audience (a cloud's workload identity trusting the hub's issuer), for a year, bound
// to an object — and is refused each time (the API server alone issues them all), while the
// renewal the ccm makes (internal/ccm/hubtoken: the audiences and the lifetime of the token
// the manager gave it) works for b and for tenant a, the victim, whose renewal is not
// affected by b's attempts. The manager's side (the namespace annotation with its token's
// audiences) is played with the exported names the manager uses.
func TestTenantTokensLimitedByTheChart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hub := testenv.Start(t, "hub", testenv.Options{})
	admin := kubernetes.NewForConfigOrDie(hub.Config)
	tokenOf := map[string]string{}
	for _, name := range []string{"a", "b"} {
		tns := kubelbv1alpha1.TenantNamespacePrefix + name
		must(t, "creating namespace "+tns, hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tns,
			Labels: map[string]string{kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue}}}))
		must(t, "creating the ccm ServiceAccount", hub.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tns, Name: tenant.ServiceAccountName}}))
		must(t, "creating the ccm Role", hub.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: tns, Name: tenant.ServiceAccountName}, Rules: tenant.CCMRules()}))
		must(t, "creating the ccm RoleBinding", hub.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tns, Name: tenant.ServiceAccountName},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: tenant.ServiceAccountName},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: tenant.ServiceAccountName, Namespace: tns}}}))
		// The manager mints the ccm's token (no audience: the API server's own) and records
		// the token's audiences on the namespace.
		tr, err := admin.CoreV1().ServiceAccounts(tns).CreateToken(ctx, tenant.ServiceAccountName, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(tenant.DefaultTokenTTL / time.Second))}}, metav1.CreateOptions{})
		must(t, "minting the ccm token as the manager", err)
		claims, err := hubtoken.ParseToken(tr.Status.Token)
		must(t, "parsing the ccm token", err)
		ns := &corev1.Namespace{}
		must(t, "getting "+tns, hub.Client.Get(ctx, client.ObjectKey{Name: tns}, ns))
		ns.Annotations = map[string]string{tenant.AnnotationTokenAudiences: strings.Join(claims.Audiences, " ")}
		must(t, "annotating "+tns, hub.Client.Update(ctx, ns))
		tokenOf[name] = tr.Status.Token
	}
	out := Install(t, hub, ManagerChart, "kubelb-manager", ns, "--set", "serviceMonitor.enabled=false", "--set", "prometheusRule.enabled=false")
	if !strings.Contains(out, "STATUS: deployed") {
		t.Fatalf("helm install:\n%s", out)
	}

	// Each tenant asks with its own token, as its ccm does.
	as := func(name string) *kubernetes.Clientset {
		cfg := rest.AnonymousClientConfig(hub.Config)
		cfg.BearerToken = tokenOf[name]
		return kubernetes.NewForConfigOrDie(cfg)
	}
	request := func(name string, spec authenticationv1.TokenRequestSpec) error {
		_, err := as(name).CoreV1().ServiceAccounts(kubelbv1alpha1.TenantNamespacePrefix+name).CreateToken(ctx, tenant.ServiceAccountName,
			&authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
		return err
	}
	// The ccm's renewal: the audiences and lifetime of its current token.
	renew := func(name string) authenticationv1.TokenRequestSpec {
		c, err := hubtoken.ParseToken(tokenOf[name])
		must(t, "parsing "+name+"'s token", err)
		return authenticationv1.TokenRequestSpec{Audiences: c.Audiences, ExpirationSeconds: ptr.To(int64(c.Lifetime() / time.Second))}
	}
	year := int64(365 * 24 * 3600)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-b", Name: "anchor"}}
	must(t, "creating a Secret to bind to", hub.Client.Create(ctx, secret))
	attacks := map[string]authenticationv1.TokenRequestSpec{
		"another audience":                {Audiences: []string{"sts.amazonaws.com"}, ExpirationSeconds: ptr.To(int64(3600))},
		"the hub's audiences and another": {Audiences: append(renew("b").Audiences, "vault"), ExpirationSeconds: ptr.To(int64(3600))},
		"a year":                          {Audiences: renew("b").Audiences, ExpirationSeconds: ptr.To(year)},
		"a year, default audiences":       {ExpirationSeconds: ptr.To(year)},
		"bound to a Secret": {Audiences: renew("b").Audiences, ExpirationSeconds: ptr.To(int64(3600)),
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: secret.Name, UID: secret.UID}},
	}
	// The policy takes a moment to be enforced after the install.
	testsupport.Eventually(t, time.Minute, "the tenant-token policy is enforced", func() error {
		if err := request("b", attacks["a year"]); !apierrors.IsForbidden(err) {
			return fmt.Errorf("a year-long token: %v", err)
		}
		return nil
	})
	refused := 0
	for what, spec := range attacks {
		err := request("b", spec)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tokenPolicyMessage) {
			t.Errorf("b asked for a token (%s): err %v, want Forbidden by the chart's policy", what, err)
			continue
		}
		refused++
	}
	t.Logf("b's %d token requests beyond the ccm's: %d refused", len(attacks), refused)

	// What the ccm does still works, for the attacker and the victim.
	for _, name := range []string{"a", "b"} {
		if err := request(name, renew(name)); err != nil {
			t.Errorf("%s's ccm renewal (audiences %v, %ds) refused: %v", name, renew(name).Audiences, *renew(name).ExpirationSeconds, err)
		}
	}
	// A namespace without the manager's record of the audiences refuses every request: the
	// policy never guesses the hub's audiences.
	ns := &corev1.Namespace{}
	must(t, "getting tenant-b", hub.Client.Get(ctx, client.ObjectKey{Name: "tenant-b"}, ns))
	delete(ns.Annotations, tenant.AnnotationTokenAudiences)
	must(t, "removing the audiences of tenant-b", hub.Client.Update(ctx, ns))
	testsupport.Eventually(t, 30*time.Second, "b's renewal refused without the audiences on its namespace", func() error {
		if err := request("b", renew("b")); !apierrors.IsForbidden(err) {
			return fmt.Errorf("renewal: %v", err)
		}
		return nil
	})
	if err := request("a", renew("a")); err != nil {
		t.Errorf("a's ccm renewal refused: %v", err)
	}
}
