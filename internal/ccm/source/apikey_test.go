package source

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// TestSecurityPolicyAPIKeyAuth: an HTTPRoute's SecurityPolicy with apiKeyAuth travels in the
// route's Route with its Secrets' names only, never the keys. While a Secret does not exist
// the policy is Invalid naming it (Warning Event); when two clients share a key it is
// Invalid naming the clients, never the key; fixed, it is Accepted.
func TestSecurityPolicyAPIKeyAuth(t *testing.T) {
	e := newEnv(t)
	const ns = "api-keys"
	_, web, _ := e.policyTargets(t, ns)
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-a"},
		Data: map[string][]byte{"alice": []byte("key-of-alice-0123"), "bob": []byte("key-of-bob-4567")}})
	e.create(t, egPolicy(t, SecurityPolicyKind, ns, "keys", `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}]
apiKeyAuth:
  credentialRefs: [{name: team-a}, {name: team-b}]
  extractFrom: [{headers: [x-api-key]}]
  forwardClientIDHeader: x-client-id
`))
	e.routeOf(t, tenantNS, web.UID, func(rt *v1alpha1.Route) error {
		sec := rt.Spec.Source.Kubernetes.Context.Security
		if sec == nil || sec.APIKeyAuth == nil || len(sec.APIKeyAuth.CredentialRefs) != 2 || sec.APIKeyAuth.CredentialRefs[1].Name != "team-b" {
			return fmt.Errorf("security %+v", sec)
		}
		return nil
	})
	msg := e.policyAncestor(t, SecurityPolicyKind, ns, "keys", "Gateway", ns, "edge", "False", "Invalid")
	if !strings.Contains(msg, "Secret "+ns+"/team-b named by apiKeyAuth.credentialRefs does not exist") {
		t.Errorf("message %q does not name the missing Secret", msg)
	}
	objects.WaitEvent(t, e.Tenant.Client, timeout, objects.EventFilter{Namespace: ns, Kind: "SecurityPolicy", Name: "keys", Reason: "Invalid", Type: "Warning"})

	// team-b appears with bob's key for mallory: Invalid, naming the clients, not the key.
	teamB := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-b"},
		Data: map[string][]byte{"mallory": []byte("key-of-bob-4567")}}
	e.create(t, teamB)
	objects.WaitFor(t, e.Tenant.Client, timeout, client.ObjectKey{Namespace: ns, Name: "keys"}, SecurityPolicyKind.New(), func(p *unstructured.Unstructured) error {
		for _, a := range ReadPolicyStatus(p).Ancestors {
			for _, c := range a.Conditions {
				if strings.Contains(c.Message, "clients bob and mallory have the same key") {
					if strings.Contains(c.Message, "key-of-bob") {
						t.Errorf("the condition shows the key: %q", c.Message)
					}
					return nil
				}
			}
		}
		return fmt.Errorf("status %v", p.Object["status"])
	})

	// Fixed: Accepted; the Route holds the Secrets' names, never the keys.
	objects.Update(t, e.Tenant.Client, teamB, func(s *corev1.Secret) {
		s.Data = map[string][]byte{"carol": []byte("key-of-carol-89ab")}
	})
	e.policyAncestor(t, SecurityPolicyKind, ns, "keys", "Gateway", ns, "edge", "True", "Accepted")
	rt := e.routeOf(t, tenantNS, web.UID, nil)
	raw, err := json.Marshal(rt)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "key-of-") {
		t.Errorf("the Route holds the keys: %s", raw)
	}
}
