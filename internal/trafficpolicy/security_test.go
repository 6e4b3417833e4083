package trafficpolicy

import (
	"slices"
	"strings"
	"testing"
)

// TestReadSecurityNamesUnsupportedFields: a SecurityPolicy with fields kubelb does not serve
// (other kinds of authentication, principals other than client addresses) is refused as a
// whole, naming each of them.
func TestReadSecurityNamesUnsupportedFields(t *testing.T) {
	_, err := ReadSecurity("ns", "p", spec(t, `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]
basicAuth: {users: {name: s}}
jwt: {providers: []}
authorization:
  defaultAction: Deny
  rules:
  - action: Allow
    principal: {clientCIDRs: [10.0.0.0/8], headers: [{name: x}]}
`))
	if err == nil || !strings.Contains(err.Error(), "spec.authorization.rules[0].principal.headers not yet supported") {
		t.Fatalf("got %v", err)
	}
	_, err = ReadSecurity("ns", "p", spec(t, `
basicAuth: {users: {name: s}, forwardUsernameHeader: x-user}
jwt: {providers: [], failOpen: true}
authorization: {defaultAction: Allow}
`))
	if err == nil || !strings.Contains(err.Error(), "spec.basicAuth.forwardUsernameHeader, spec.jwt.failOpen not yet supported") {
		t.Fatalf("got %v", err)
	}
}

// TestReadAndResolveSecurity: rules keep their order, their ranges come out canonical, and
// an unset default action denies (Envoy Gateway's default).
func TestReadAndResolveSecurity(t *testing.T) {
	sec, err := ReadSecurity("ns", "p", spec(t, `
targetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: g}
authorization:
  rules:
  - {name: office-but-kiosk, action: Deny, principal: {clientCIDRs: ["10.1.2.3/32"]}}
  - {action: Allow, principal: {clientCIDRs: ["10.1.2.3/8", "2001:DB8::1/32", "10.0.0.0/8"]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	settings, err := ResolveSecurity(sec)
	if err != nil {
		t.Fatal(err)
	}
	a := settings.Authorization
	if settings.BasicAuthSecret != "" || a.DefaultAllow || len(a.Rules) != 2 || a.Rules[0].Allow || !a.Rules[1].Allow {
		t.Fatalf("got %+v", a)
	}
	if !slices.Equal(a.Rules[0].Ranges, []string{"10.1.2.3/32"}) || !slices.Equal(a.Rules[1].Ranges, []string{"10.0.0.0/8", "2001:db8::/32"}) {
		t.Errorf("ranges %v", a.Rules)
	}
}

// TestResolveSecurityRefuses: bad actions and CIDRs, empty principals and more than
// MaxClientCIDRs ranges are each named.
func TestResolveSecurityRefuses(t *testing.T) {
	many := "["
	for i := range MaxClientCIDRs + 1 {
		if i > 0 {
			many += ", "
		}
		many += "10.0.0." + string(rune('0'+i%10)) + "/32"
	}
	many += "]"
	for _, tc := range []struct{ spec, want string }{
		{`authorization: {defaultAction: Maybe}`, `authorization.defaultAction "Maybe" is not an action`},
		{`authorization: {rules: [{action: Allow, principal: {clientCIDRs: [10.0.0.0/33]}}]}`, `"10.0.0.0/33" is not a CIDR`},
		{`authorization: {rules: [{action: Allow, principal: {}}]}`, `rules[0].principal.clientCIDRs is empty`},
		{`authorization: {rules: [{action: Allow, principal: {clientCIDRs: ` + many + `}}]}`, `more than 64 clientCIDRs`},
		{`targetRefs: []`, `the policy has no authorization, basicAuth, jwt, apiKeyAuth, extAuth or oidc`},
		{`basicAuth: {users: {name: s, namespace: other}}`, `basicAuth.users namespace "other": a Secret of another namespace is not yet supported`},
		{`basicAuth: {users: {name: s, kind: ConfigMap}}`, `basicAuth.users kind "ConfigMap"`},
		{`basicAuth: {users: {name: S_1}}`, `basicAuth.users name "S_1" is not a Secret name`},
	} {
		if err := securityErr(t, tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.spec, err, tc.want)
		}
	}
}

// TestResolveSecurityBasicAuth: a policy with basic authentication alone is served, naming its
// Secret of the policy's namespace (written with or without that namespace).
func TestResolveSecurityBasicAuth(t *testing.T) {
	for _, users := range []string{`{name: htpasswd}`, `{name: htpasswd, namespace: ns, kind: Secret, group: ""}`} {
		sec, err := ReadSecurity("ns", "p", spec(t, `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]
basicAuth: {users: `+users+`}
`))
		if err != nil {
			t.Fatal(err)
		}
		s, err := ResolveSecurity(sec)
		if err != nil {
			t.Fatal(err)
		}
		if s.BasicAuthSecret != "htpasswd" || s.Authorization != nil {
			t.Errorf("%s: got %+v", users, s)
		}
	}
}

// resolvedSecurity reads and resolves a SecurityPolicy spec (YAML) that must be served.
func resolvedSecurity(t *testing.T, y string) *SecuritySettings {
	t.Helper()
	sec, err := ReadSecurity("ns", "p", spec(t, y))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ResolveSecurity(sec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// securityErr is why a SecurityPolicy spec (YAML) is not served: Read's error, else Resolve's.
func securityErr(t *testing.T, y string) error {
	t.Helper()
	sec, err := ReadSecurity("ns", "p", spec(t, y))
	if err == nil {
		_, err = ResolveSecurity(sec)
	}
	return err
}
