package trafficpolicy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"kubelb.dev/kubelb/internal/jwttest"
)

// jwtSpec is a SecurityPolicy spec with one JWT provider whose key set is jwks.
func jwtSpec(jwks string, provider string) string {
	b, _ := json.Marshal(jwks)
	return fmt.Sprintf(`
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]
jwt:
  providers:
  - name: corp
    localJWKS: {type: Inline, inline: %s}
    %s
`, b, provider)
}

// TestReadAndResolveJWT: a provider with its keys inline, issuer, audiences, claims to
// headers and token locations is served as written (header names lower case, repeated
// audiences once).
func TestReadAndResolveJWT(t *testing.T) {
	jwks := jwttest.JWKS(jwttest.NewKey(t, "a"), jwttest.NewKey(t, "b"))
	sec, err := ReadSecurity("ns", "p", spec(t, jwtSpec(jwks, `issuer: https://idp.example.com
    audiences: [shop, shop, admin]
    claimToHeaders: [{claim: sub, header: X-User}, {claim: org.team, header: x-team}]
    extractFrom: {headers: [{name: X-Token, valuePrefix: "Token "}], cookies: [session], params: [access_token]}`)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ResolveSecurity(sec)
	if err != nil {
		t.Fatal(err)
	}
	j := s.JWT
	if j == nil || j.Optional || len(j.Providers) != 1 {
		t.Fatalf("got %+v", j)
	}
	p := j.Providers[0]
	if p.Name != "corp" || p.Issuer != "https://idp.example.com" || strings.Join(p.Audiences, ",") != "shop,admin" || p.JWKS != jwks {
		t.Errorf("provider %+v", p)
	}
	if fmt.Sprint(p.ClaimToHeaders) != "[{sub x-user} {org.team x-team}]" {
		t.Errorf("claimToHeaders %v", p.ClaimToHeaders)
	}
	if fmt.Sprint(p.FromHeaders, p.FromCookies, p.FromParams) != "[{x-token Token }] [session] [access_token]" {
		t.Errorf("extractFrom %v %v %v", p.FromHeaders, p.FromCookies, p.FromParams)
	}
	sec, err = ReadSecurity("ns", "p", spec(t, strings.Replace(jwtSpec(jwks, ""), "jwt:\n", "jwt:\n  optional: true\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := ResolveSecurity(sec); err != nil || !s.JWT.Optional {
		t.Errorf("optional: %+v, %v", s, err)
	}
}

// TestReadJWTNamesUnsupportedFields: a remoteJWKS's backendSettings, its deprecated
// backendRef and its backendRefs' filters, failOpen, recomputeRoute and key sets in ConfigMaps
// are named, not yet supported.
func TestReadJWTNamesUnsupportedFields(t *testing.T) {
	_, err := ReadSecurity("ns", "p", spec(t, `
jwt:
  failOpen: false
  providers:
  - {name: a, remoteJWKS: {uri: "https://idp.example.com/jwks", backendSettings: {retry: {numRetries: 3}}, backendRef: {name: keys}, backendRefs: [{name: keys, port: 80, filters: []}]}}
  - {name: b, localJWKS: {type: ValueRef, valueRef: {group: "", kind: ConfigMap, name: keys}}, extractFrom: {params: [token]}, recomputeRoute: true}
`))
	if err == nil {
		t.Fatal("read")
	}
	for _, want := range []string{"spec.jwt.providers[0].remoteJWKS.backendSettings", "spec.jwt.providers[0].remoteJWKS.backendRef,",
		"spec.jwt.providers[0].remoteJWKS.backendRefs[0].filters", "spec.jwt.providers[1].recomputeRoute",
		"spec.jwt.providers[1].localJWKS.valueRef", "spec.jwt.providers[1].localJWKS.type ValueRef", "not yet supported by kubelb"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v does not name %s", err, want)
		}
	}
	if _, err := ReadSecurity("ns", "p", spec(t, `jwt: {failOpen: true, providers: [{name: a, localJWKS: {inline: "{}"}}]}`)); err == nil || !strings.Contains(err.Error(), "spec.jwt.failOpen not yet supported") {
		t.Errorf("failOpen: %v", err)
	}
}

// TestResolveJWTRefuses: each bound and each key that Envoy could not use, or that should
// not travel in a policy, is named with its provider and key index.
func TestResolveJWTRefuses(t *testing.T) {
	good := jwttest.NewKey(t, "good").JWK()
	set := func(keys ...map[string]any) string {
		b, _ := json.Marshal(map[string]any{"keys": keys})
		return string(b)
	}
	with := func(k map[string]any, kv ...string) map[string]any {
		out := map[string]any{}
		for a, b := range k {
			out[a] = b
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(out, kv[i])
			} else {
				out[kv[i]] = kv[i+1]
			}
		}
		return out
	}
	many := make([]map[string]any, MaxJWKSKeys+1)
	for i := range many {
		many[i] = good
	}
	jwk := func(k map[string]any) string { return set(good, k) }
	for _, tc := range []struct{ jwks, provider, want string }{
		{`not json`, "", `jwt.providers[0] (corp) localJWKS.inline: not a JSON Web Key Set`},
		{`{"keys": []}`, "", `the key set has no keys`},
		{set(many...), "", `the key set has 17 keys, at most 16`},
		{`{"keys":[{"kty":"RSA"}],"x":"` + strings.Repeat("a", MaxJWKSBytes) + `"}`, "", `bytes, at most 16384`},
		{jwk(with(good, "n", "AQAB")), "", `key 1: an RSA modulus of 17 bits`},
		{jwk(with(good, "n", "not base64!")), "", `key 1: n is not base64url`},
		{jwk(with(good, "e", "Ag")), "", `key 1: the RSA exponent`},
		{jwk(with(good, "alg", "ES256")), "", `key 1: alg "ES256" is not one of RS256`},
		{jwk(with(good, "use", "enc")), "", `key 1: use "enc"`},
		{jwk(with(good, "d", "AQAB")), "", `key 1: a private or symmetric key is a secret`},
		{jwk(map[string]any{"kty": "oct", "k": "c2VjcmV0"}), "", `key 1: a private or symmetric key`},
		{jwk(map[string]any{"kty": "EC", "crv": "P-256", "x": strings.Repeat("A", 43), "y": strings.Repeat("A", 43)}), "", `key 1: the point (x, y) is not on curve P-256`},
		{jwk(map[string]any{"kty": "EC", "crv": "secp256k1"}), "", `key 1: crv "secp256k1"`},
		{jwk(map[string]any{"kty": "OKP", "crv": "Ed25519", "x": "AQAB"}), "", `key 1: x of an Ed25519 key is 32 bytes`},
		{jwk(map[string]any{"kty": "DSA"}), "", `key 1: kty "DSA"`},
		{set(good), `issuer: "https://idp example"`, `issuer: at most 253 printable characters`},
		{set(good), `audiences: [a, b, c, d, e, f, g, h, i]`, `9 audiences, at most 8`},
		{set(good), `claimToHeaders: [{claim: sub, header: "x user"}]`, `claimToHeaders[0].header "x user" is not an HTTP header name`},
		{set(good), `claimToHeaders: [{claim: sub, header: Connection}]`, `claimToHeaders[0].header "Connection" cannot be set`},
		{set(good), `claimToHeaders: [{claim: sub, header: ":path"}]`, `claimToHeaders[0].header ":path" is not an HTTP header name`},
		{set(good), `claimToHeaders: [{claim: sub, header: x-envoy-original-path}]`, `cannot be set by a policy`},
		{set(good), `claimToHeaders: [{claim: sub, header: x-a}, {claim: org, header: X-A}]`, `claimToHeaders[1].header "X-A" is repeated`},
		{set(good), `claimToHeaders: [{claim: "", header: x-a}]`, `claimToHeaders[0].claim`},
		{set(good), `extractFrom: {headers: [{name: "x token"}]}`, `extractFrom.headers[0].name "x token" is not an HTTP header name`},
		{set(good), `extractFrom: {headers: [{name: Host}]}`, `extractFrom.headers[0].name "Host" is a connection's header`},
		{set(good), `extractFrom: {params: ["a=b"]}`, `extractFrom.params[0] "a=b" is not a name`},
		{set(good), `extractFrom: {cookies: [a, b, c, d, e]}`, `extractFrom: at most 4 headers`},
		{set(good), `claimToHeaders: [{claim: a, header: x-1}, {claim: a, header: x-2}, {claim: a, header: x-3}, {claim: a, header: x-4}, {claim: a, header: x-5}, {claim: a, header: x-6}, {claim: a, header: x-7}, {claim: a, header: x-8}, {claim: a, header: x-9}]`, `9 claimToHeaders, at most 8`},
	} {
		sec, err := ReadSecurity("ns", "p", spec(t, jwtSpec(tc.jwks, tc.provider)))
		if err == nil {
			_, err = ResolveSecurity(sec)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.80s %s: got %v, want %q", tc.jwks, tc.provider, err, tc.want)
		}
	}
	for _, tc := range []struct{ spec, want string }{
		{`jwt: {providers: [{name: a, localJWKS: {inline: '` + set(good) + `'}}, {name: a, localJWKS: {inline: '` + set(good) + `'}}]}`, `jwt.providers[1].name "a" is repeated`},
		{`jwt: {providers: [{name: A_b, localJWKS: {inline: '` + set(good) + `'}}]}`, `jwt.providers[0].name "A_b" is not a DNS subdomain`},
		{`jwt: {providers: [{name: a}]}`, `jwt.providers[0] (a) has neither localJWKS nor remoteJWKS`},
		{`jwt: {providers: [{name: a, localJWKS: {inline: '` + set(good) + `'}, remoteJWKS: {uri: "https://k/jwks", backendRefs: [{name: keys, port: 80}]}}]}`, `(a) has both localJWKS and remoteJWKS`},
		{`jwt: {providers: [{name: a, localJWKS: {type: Inline}}]}`, `localJWKS.inline is not set`},
		{`jwt: {providers: [{name: a, localJWKS: {inline: x}}, {name: b, localJWKS: {inline: x}}, {name: c, localJWKS: {inline: x}}, {name: d, localJWKS: {inline: x}}, {name: e, localJWKS: {inline: x}}]}`, `jwt has 5 providers, at most 4`},
		{`jwt: {providers: []}`, `jwt.providers is empty`},
	} {
		sec, err := ReadSecurity("ns", "p", spec(t, tc.spec))
		if err == nil {
			_, err = ResolveSecurity(sec)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.100s: got %v, want %q", tc.spec, err, tc.want)
		}
	}
}

// TestCheckJWKSAcceptsEnvoysKeyTypes: RSA, EC P-256 and Ed25519 public keys are accepted.
func TestCheckJWKSAcceptsEnvoysKeyTypes(t *testing.T) {
	ec := `{"kty":"EC","crv":"P-256","alg":"ES256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}`
	ed := `{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`
	if err := CheckJWKS(`{"keys":[` + ec + `,` + ed + `]}`); err != nil {
		t.Error(err)
	}
	if err := CheckJWKS(jwttest.JWKS(jwttest.NewKey(t, "k"))); err != nil {
		t.Error(err)
	}
}

// remoteSpec is a SecurityPolicy spec with one provider, corp, whose keys are fetched as
// remote (the remoteJWKS object's fields) says.
func remoteSpec(remote string) string {
	return `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]
jwt:
  providers:
  - name: corp
    issuer: https://idp.example.com
    remoteJWKS: {` + remote + `}
`
}

// TestReadAndResolveRemoteJWKS: a remoteJWKS through one Service of the policy's namespace is
// served with its URI (http or https), or without one at its https URI's host (a DNS name,
// lower case) and port; with its cache duration (default 5 minutes, Envoy Gateway's
// 300s) and the wait after a failed fetch (default 1 s).
func TestReadAndResolveRemoteJWKS(t *testing.T) {
	for _, tc := range []struct {
		remote, want string
	}{
		{`uri: "https://keys.example.com/.well-known/jwks.json", backendRefs: [{name: keys, port: 8443}]`,
			"&{keys 8443 https://keys.example.com/.well-known/jwks.json  0 5m0s 1s}"},
		{`uri: "http://keys.example.com/jwks", backendRefs: [{group: "", kind: Service, name: keys, namespace: ns, port: 80, weight: 1}], cacheDuration: 24h, failedRefetchDuration: 30s`,
			"&{keys 80 http://keys.example.com/jwks  0 24h0m0s 30s}"},
		{`uri: "https://keys.example.com/jwks", backendRefs: [{name: keys, port: 80}], cacheDuration: 1m, failedRefetchDuration: 1h`,
			"&{keys 80 https://keys.example.com/jwks  0 1m0s 1h0m0s}"},
		// Without backendRefs: at the URL itself, its host and port (443 by default).
		{`uri: "https://Keys.Example.com./.well-known/jwks.json"`,
			"&{ 0 https://Keys.Example.com./.well-known/jwks.json keys.example.com 443 5m0s 1s}"},
		{`uri: "https://keys.example.com:8443/jwks", cacheDuration: 10m`,
			"&{ 0 https://keys.example.com:8443/jwks keys.example.com 8443 10m0s 1s}"},
	} {
		sec, err := ReadSecurity("ns", "p", spec(t, remoteSpec(tc.remote)))
		if err != nil {
			t.Fatalf("%s: %v", tc.remote, err)
		}
		s, err := ResolveSecurity(sec)
		if err != nil {
			t.Fatalf("%s: %v", tc.remote, err)
		}
		if p := s.JWT.Providers[0]; p.JWKS != "" || fmt.Sprint(p.Remote) != tc.want {
			t.Errorf("%s: got %q %v, want %s", tc.remote, p.JWKS, p.Remote, tc.want)
		}
	}
}

// TestResolveRemoteJWKSRefuses: a remoteJWKS without backendRefs at an http URL, an IP
// address, a name without a domain or a bad port is refused, as are several Services, one of another namespace or
// without a port, a URI that is not an absolute http(s) URL with a host (or has a user, a
// fragment or %), and durations out of their bounds.
func TestResolveRemoteJWKSRefuses(t *testing.T) {
	const svc = `backendRefs: [{name: keys, port: 80}]`
	for _, tc := range []struct{ remote, want string }{
		{`uri: "http://keys.example.com/jwks"`, `jwt.providers[0] (corp) remoteJWKS.uri "http://keys.example.com/jwks": an absolute https URL`},
		{`uri: "https://192.0.2.10/jwks"`, `remoteJWKS.uri "https://192.0.2.10/jwks": without backendRefs the key server is named by a DNS name, not an IP address`},
		{`uri: "https://[2001:db8::1]/jwks"`, `not an IP address`},
		{`uri: "https://keys/jwks"`, `remoteJWKS.uri "https://keys/jwks": the host is not a DNS name with a domain`},
		{`uri: "https://keys_1.example.com/jwks"`, `the host is not a DNS name`},
		{`uri: "https://keys.example.com:0/jwks"`, `the port is not 1 to 65535`},
		{`uri: "https://keys.example.com:70000/jwks"`, `the port is not 1 to 65535`},
		{`uri: "https://k/jwks", backendRefs: [{name: a, port: 80}, {name: b, port: 80}]`, `remoteJWKS.backendRefs has 2 entries`},
		{`uri: "https://k/jwks", backendRefs: [{name: keys, namespace: other, port: 80}]`, `remoteJWKS.backendRefs[0] namespace "other": a Service of another namespace is not yet supported`},
		{`uri: "https://k/jwks", backendRefs: [{name: keys}]`, `remoteJWKS.backendRefs[0] needs a port`},
		{`uri: "https://k/jwks", backendRefs: [{name: keys, kind: Backend, group: gateway.envoyproxy.io, port: 80}]`, `remoteJWKS.backendRefs[0] group "gateway.envoyproxy.io"`},
		{`uri: "/jwks", ` + svc, `remoteJWKS.uri "/jwks": an absolute http or https URL with a host`},
		{`uri: "ftp://k/jwks", ` + svc, `remoteJWKS.uri "ftp://k/jwks"`},
		{`uri: "https://user@k/jwks", ` + svc, `remoteJWKS.uri`},
		{`uri: "https://k/jwks#x", ` + svc, `remoteJWKS.uri`},
		{`uri: "https://k/%REQ(:authority)%", ` + svc, `remoteJWKS.uri`},
		{`uri: "https://k/` + strings.Repeat("a", 260) + `", ` + svc, `remoteJWKS.uri is over 253 characters`},
		{`uri: "https://k/jwks", cacheDuration: 30s, ` + svc, `remoteJWKS.cacheDuration 30s is out of range; use 1m to 24h`},
		{`uri: "https://k/jwks", cacheDuration: 25h, ` + svc, `remoteJWKS.cacheDuration 25h is out of range`},
		{`uri: "https://k/jwks", cacheDuration: "1 day", ` + svc, `remoteJWKS.cacheDuration "1 day" is not a duration`},
		{`uri: "https://k/jwks", failedRefetchDuration: 500ms, ` + svc, `remoteJWKS.failedRefetchDuration 500ms is out of range; use 1s to 1h`},
	} {
		sec, err := ReadSecurity("ns", "p", spec(t, remoteSpec(tc.remote)))
		if err == nil {
			_, err = ResolveSecurity(sec)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.100s: got %v, want %q", tc.remote, err, tc.want)
		}
	}
}
