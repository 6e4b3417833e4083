package source

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/jwttest"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// TestSecurityPolicyJWT: an HTTPRoute's SecurityPolicy with jwt, its public keys inline,
// travels in the route's Route with its key set, issuer, audiences and claims to headers, and
// is Accepted; one whose key set holds a private key is Invalid naming the provider and the
// key (Warning Event), and its route carries nothing.
func TestSecurityPolicyJWT(t *testing.T) {
	e := newEnv(t)
	const ns = "jwt"
	_, web, other := e.policyTargets(t, ns)
	jwks := jwttest.JWKS(jwttest.NewKey(t, "corp-1"))
	quoted, _ := json.Marshal(jwks)
	e.create(t, egPolicy(t, SecurityPolicyKind, ns, "corp", fmt.Sprintf(`
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}]
jwt:
  providers:
  - name: corp
    issuer: https://idp.example.com
    audiences: [shop]
    localJWKS: {type: Inline, inline: %s}
    claimToHeaders: [{claim: sub, header: X-User}]
`, quoted)))
	e.create(t, egPolicy(t, SecurityPolicyKind, ns, "leaky", `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: other}]
jwt:
  providers:
  - name: corp
    localJWKS:
      type: Inline
      inline: '{"keys":[{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0","d":"jpsQnnGQmL-YBIffH1136cspYG6-0iY7X1fCE9-E9LI"}]}'
`))

	e.routeOf(t, tenantNS, web.UID, func(rt *v1alpha1.Route) error {
		sec := rt.Spec.Source.Kubernetes.Context.Security
		if sec == nil || sec.Name != "corp" || sec.JWT == nil || len(sec.JWT.Providers) != 1 {
			return fmt.Errorf("security %+v", sec)
		}
		p := sec.JWT.Providers[0]
		if p.Name != "corp" || p.Issuer != "https://idp.example.com" || len(p.Audiences) != 1 || p.LocalJWKS == nil || p.LocalJWKS.Inline == nil ||
			*p.LocalJWKS.Inline != jwks || len(p.ClaimToHeaders) != 1 || p.ClaimToHeaders[0].Header != "X-User" {
			return fmt.Errorf("provider %+v", p)
		}
		return nil
	})
	e.policyAncestor(t, SecurityPolicyKind, ns, "corp", "Gateway", ns, "edge", "True", "Accepted")
	msg := e.policyAncestor(t, SecurityPolicyKind, ns, "leaky", "Gateway", ns, "edge", "False", "Invalid")
	if !strings.Contains(msg, "jwt.providers[0] (corp) localJWKS.inline: key 0: a private or symmetric key is a secret") {
		t.Errorf("message %q does not name the provider and the key", msg)
	}
	objects.WaitEvent(t, e.Tenant.Client, timeout, objects.EventFilter{Namespace: ns, Kind: "SecurityPolicy", Name: "leaky", Reason: "Invalid", Type: "Warning"})
	e.routeOf(t, tenantNS, other.UID, func(rt *v1alpha1.Route) error {
		if sec := rt.Spec.Source.Kubernetes.Context.Security; sec != nil {
			return fmt.Errorf("an invalid policy travels: %+v", sec)
		}
		return nil
	})
}

// TestSecurityPolicyRemoteJWKS: a SecurityPolicy whose provider fetches its keys from an http
// URL without naming a Service is Invalid (without a Service only https); at an https URL it
// is Accepted and the Route carries it as written, with no Service embedded. With
// backendRefs, while the Service does not exist the policy says so (Invalid, Warning Event);
// once it exists the HTTPRoute's Route embeds the Service's NodePort twin (as a backend's),
// carries the remoteJWKS as written, and the policy is Accepted.
func TestSecurityPolicyRemoteJWKS(t *testing.T) {
	e := newEnv(t)
	const ns = "jwks"
	_, web, _ := e.policyTargets(t, ns)
	e.create(t, egPolicy(t, SecurityPolicyKind, ns, "remote", `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}]
jwt:
  providers:
  - name: corp
    remoteJWKS: {uri: "http://keys.example.com/jwks", cacheDuration: 10m}
`))
	msg := e.policyAncestor(t, SecurityPolicyKind, ns, "remote", "Gateway", ns, "edge", "False", "Invalid")
	if !strings.Contains(msg, `remoteJWKS.uri "http://keys.example.com/jwks": an absolute https URL`) {
		t.Errorf("message %q does not say a key server without backendRefs needs an https URL", msg)
	}

	// At an https URL without backendRefs: Accepted, carried as written, no Service embedded
	// (the hub resolves the name and checks its addresses).
	objects.Update(t, e.Tenant.Client, egPolicy(t, SecurityPolicyKind, ns, "remote", ""), func(p *unstructured.Unstructured) {
		if err := unstructured.SetNestedSlice(p.Object, []any{map[string]any{"name": "corp", "remoteJWKS": map[string]any{
			"uri": "https://keys.example.com/jwks", "cacheDuration": "10m"}}}, "spec", "jwt", "providers"); err != nil {
			t.Error(err)
		}
	})
	e.policyAncestor(t, SecurityPolicyKind, ns, "remote", "Gateway", ns, "edge", "True", "Accepted")
	e.routeOf(t, tenantNS, web.UID, func(rt *v1alpha1.Route) error {
		sec := rt.Spec.Source.Kubernetes.Context.Security
		if sec == nil || sec.JWT == nil || len(sec.JWT.Providers) != 1 || sec.JWT.Providers[0].RemoteJWKS == nil ||
			sec.JWT.Providers[0].RemoteJWKS.URI != "https://keys.example.com/jwks" || len(sec.JWT.Providers[0].RemoteJWKS.BackendRefs) != 0 {
			return fmt.Errorf("security %+v", sec)
		}
		return nil
	})

	objects.Update(t, e.Tenant.Client, egPolicy(t, SecurityPolicyKind, ns, "remote", ""), func(p *unstructured.Unstructured) {
		refs := []any{map[string]any{"name": "keys", "port": int64(8080)}}
		if err := unstructured.SetNestedSlice(p.Object, []any{map[string]any{"name": "corp", "remoteJWKS": map[string]any{
			"uri": "https://keys.example.com/jwks", "cacheDuration": "10m", "backendRefs": refs}}}, "spec", "jwt", "providers"); err != nil {
			t.Error(err)
		}
	})
	want := "Service " + ns + "/keys named by jwt.providers[0].remoteJWKS.backendRefs does not exist"
	testsupport.Eventually(t, timeout, "the policy to name the missing Service", func() error {
		if msg := e.policyAncestor(t, SecurityPolicyKind, ns, "remote", "Gateway", ns, "edge", "False", "Invalid"); !strings.Contains(msg, want) {
			return fmt.Errorf("message %q", msg)
		}
		return nil
	})
	objects.WaitEvent(t, e.Tenant.Client, timeout, objects.EventFilter{Namespace: ns, Kind: "SecurityPolicy", Name: "remote", Reason: "Invalid", Type: "Warning"})

	e.create(t, clusterIP(ns, "keys", 8080))
	e.policyAncestor(t, SecurityPolicyKind, ns, "remote", "Gateway", ns, "edge", "True", "Accepted")
	e.routeOf(t, tenantNS, web.UID, func(rt *v1alpha1.Route) error {
		sec := rt.Spec.Source.Kubernetes.Context.Security
		if sec == nil || sec.JWT == nil || len(sec.JWT.Providers) != 1 || sec.JWT.Providers[0].RemoteJWKS == nil ||
			sec.JWT.Providers[0].RemoteJWKS.URI != "https://keys.example.com/jwks" || sec.JWT.Providers[0].RemoteJWKS.CacheDuration == nil {
			return fmt.Errorf("security %+v", sec)
		}
		return embedsTwin(rt, "keys", 8080)
	})
}
