package trafficpolicy

import (
	"slices"
	"strings"
	"testing"
)

// TestReadAndResolveAPIKeyAuth: apiKeyAuth comes through as Envoy Gateway means it: the
// Secrets' names, where the key is read (headers lower case), the client ID header, sanitize.
func TestReadAndResolveAPIKeyAuth(t *testing.T) {
	a := resolvedSecurity(t, `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]
apiKeyAuth:
  credentialRefs: [{name: team-a}, {group: "", kind: Secret, name: team-b}, {name: team-a}]
  extractFrom: [{headers: [X-API-Key]}, {params: [api_key]}, {cookies: [key]}]
  forwardClientIDHeader: X-Client-ID
  sanitize: true
`).APIKeyAuth
	if !slices.Equal(a.Secrets, []string{"team-a", "team-b"}) || a.ForwardClientIDHeader != "x-client-id" || !a.Sanitize ||
		!slices.Equal(a.Sources, []APIKeySource{{Header: "x-api-key"}, {Param: "api_key"}, {Cookie: "key"}}) {
		t.Errorf("apiKeyAuth %+v", a)
	}
}

// TestResolveAPIKeyAuthRefuses: what Envoy could not serve, or a tenant must not reach, is
// refused, naming the field.
func TestResolveAPIKeyAuthRefuses(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{`apiKeyAuth: {credentialRefs: [{name: a, namespace: other}], extractFrom: [{headers: [k]}]}`, "a Secret of another namespace is not yet supported"},
		{`apiKeyAuth: {credentialRefs: [{name: a, kind: ConfigMap}], extractFrom: [{headers: [k]}]}`, `kind "ConfigMap": a Secret is needed`},
		{`apiKeyAuth: {credentialRefs: [{name: a}], extractFrom: [{headers: [k], params: [p]}]}`, "exactly one of headers, params or cookies"},
		{`apiKeyAuth: {credentialRefs: [{name: a}], extractFrom: [{headers: ["bad header"]}]}`, `headers "bad header" is not a name`},
		{`apiKeyAuth: {credentialRefs: [{name: a}], extractFrom: [{headers: [k]}], forwardClientIDHeader: Connection}`, "cannot be set by a policy"},
		{`apiKeyAuth: {credentialRefs: [{name: a}], extractFrom: [{headers: [k]}], forwardClientIDHeader: x-envoy-client}`, "cannot be set by a policy"},
		{`apiKeyAuth: {credentialRefs: [{name: a}, {name: b}, {name: c}, {name: d}, {name: e}], extractFrom: [{headers: [k]}]}`, "at most 4"},
		{`apiKeyAuth: {credentialRefs: [{name: a}], extractFrom: []}`, "say where requests carry the key"},
	} {
		if err := securityErr(t, c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.spec, err, c.want)
		}
	}
}

// TestParseAPIKeys: a Secret's keys are client IDs and its values their keys, sorted by
// client; what cannot travel in a header is refused, naming the client, never the key.
func TestParseAPIKeys(t *testing.T) {
	keys, err := ParseAPIKeys(map[string][]byte{"bob": []byte("k2"), "alice": []byte("k1")})
	if err != nil || !slices.Equal(keys, []APIKey{{"alice", "k1"}, {"bob", "k2"}}) {
		t.Fatalf("%v, %v", keys, err)
	}
	_, err = ParseAPIKeys(map[string][]byte{"alice": []byte("has a space secret"), "bob": nil})
	if err == nil || !strings.Contains(err.Error(), "the key of client alice") || !strings.Contains(err.Error(), "the key of client bob") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("got %v", err)
	}
	if _, err := ParseAPIKeys(nil); err == nil {
		t.Fatal("an empty Secret was accepted")
	}
}
