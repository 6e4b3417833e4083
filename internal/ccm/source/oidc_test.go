package source

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// TestSecurityPolicyOIDC: a SecurityPolicy with oidc but no token endpoint is Invalid naming
// it (kubelb does not discover endpoints). Fixed, it travels in the HTTPRoute's Route; while
// its client secret's Secret does not exist the policy says so (Invalid, Warning Event); then
// while the token endpoint's Service does not exist, the same; once both exist the Route
// embeds the Service's NodePort twin (as a backend's), carries the Secret's name only, and the
// policy is Accepted.
func TestSecurityPolicyOIDC(t *testing.T) {
	e := newEnv(t)
	const ns = "oidc"
	_, web, _ := e.policyTargets(t, ns)
	spec := `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}]
oidc:
  provider:
    issuer: https://id.example.com
    authorizationEndpoint: https://id.example.com/authorize
    backendRefs: [{name: idp, port: 8080}]
  clientID: shop
  clientSecret: {name: shop-oidc}
  scopes: [email]
`
	e.create(t, egPolicy(t, SecurityPolicyKind, ns, "login", spec))
	msg := e.policyAncestor(t, SecurityPolicyKind, ns, "login", "Gateway", ns, "edge", "False", "Invalid")
	if !strings.Contains(msg, "oidc.provider.tokenEndpoint is not set: set both provider.authorizationEndpoint and provider.tokenEndpoint, or neither") {
		t.Errorf("message %q does not name the missing token endpoint", msg)
	}

	objects.Update(t, e.Tenant.Client, egPolicy(t, SecurityPolicyKind, ns, "login", ""), func(p *unstructured.Unstructured) {
		if err := unstructured.SetNestedField(p.Object, "https://id.example.com/token", "spec", "oidc", "provider", "tokenEndpoint"); err != nil {
			t.Error(err)
		}
	})
	msg = e.policyAncestor(t, SecurityPolicyKind, ns, "login", "Gateway", ns, "edge", "False", "Invalid")
	if !strings.Contains(msg, "Secret "+ns+"/shop-oidc named by oidc.clientSecret does not exist") {
		t.Errorf("message %q does not name the missing Secret", msg)
	}
	objects.WaitEvent(t, e.Tenant.Client, timeout, objects.EventFilter{Namespace: ns, Kind: "SecurityPolicy", Name: "login", Reason: "Invalid", Type: "Warning"})

	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-oidc"},
		Data: map[string][]byte{"client-secret": []byte("shop-client-secret")}})
	// The Secret appears: the policy is reconciled again, and now names the missing Service.
	want := "Service " + ns + "/idp named by oidc.provider.backendRefs does not exist"
	testsupport.Eventually(t, timeout, "the policy to name the missing Service", func() error {
		if msg := e.policyAncestor(t, SecurityPolicyKind, ns, "login", "Gateway", ns, "edge", "False", "Invalid"); !strings.Contains(msg, want) {
			return fmt.Errorf("message %q", msg)
		}
		return nil
	})

	e.create(t, clusterIP(ns, "idp", 8080))
	e.policyAncestor(t, SecurityPolicyKind, ns, "login", "Gateway", ns, "edge", "True", "Accepted")
	e.routeOf(t, tenantNS, web.UID, func(rt *v1alpha1.Route) error {
		sec := rt.Spec.Source.Kubernetes.Context.Security
		if sec == nil || sec.OIDC == nil || sec.OIDC.ClientSecret.Name != "shop-oidc" || sec.OIDC.ClientID != "shop" {
			return fmt.Errorf("security %+v", sec)
		}
		return embedsTwin(rt, "idp", 8080)
	})
}

// embedsTwin says whether Route rt embeds the NodePort twin of Service name with port port
// (a NodePort allocated), as it embeds a backend's.
func embedsTwin(rt *v1alpha1.Route, name string, port int32) error {
	for _, s := range rt.Spec.Source.Kubernetes.Services {
		if s.Labels[v1alpha1.LabelOriginName] == name && s.Spec.Type == corev1.ServiceTypeNodePort && len(s.Spec.Ports) == 1 &&
			s.Spec.Ports[0].Port == port && s.Spec.Ports[0].NodePort > 0 {
			return nil
		}
	}
	return fmt.Errorf("the Route does not embed the NodePort twin of Service %s: %d Services", name, len(rt.Spec.Source.Kubernetes.Services))
}
