package translate_test

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
)

// TestOIDCLoginsPerTenantBounded: a tenant whose HTTPRoutes are under more SecurityPolicies
// with oidc than a listener runs oauth2 filters for (ir.MaxListenerOIDCs = 8) gets the first 8
// served, each route running its own policy's login (a cluster of the token endpoint's Service
// its Route carries, its own secrets: one client secret, a cookie key of each login's own); the routes of the 9th answer 500 (never served without
// a login), and that policy's Route is told (OIDCUnusable, naming the policy).
func TestOIDCLoginsPerTenantBounded(t *testing.T) {
	t.Parallel()
	const served = ir.MaxListenerOIDCs
	in := oidcTenant(t, served+1, false)
	r, err := translate.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	var told []ir.Problem
	for _, p := range r.Problems {
		if p.Reason == translate.ReasonOIDCUnusable {
			told = append(told, p)
		}
	}
	last := in.Routes[served+1].Name
	if len(told) == 0 || told[0].Object.Name != last || !strings.Contains(told[0].Message, "apps/policy-08") {
		t.Fatalf("OIDCUnusable on %v, want on the rules of Route %s (the 9th policy's)", told, last)
	}
	runs, refused := appHostRoutes(t, r.Config, "running a login", func(rt *ir.Route) (string, bool) {
		return rt.OIDC, rt.OIDC != ""
	})
	for i := range served + 1 {
		host := fmt.Sprintf("app-%d.example.com", i)
		if i < served {
			if want := fmt.Sprintf("%s/apps/policy-%02d", in.Routes[i+1].Name, i); runs[host] != want || refused[host] != 0 {
				t.Errorf("%s: runs %q (%d routes answer 500), want %q", host, runs[host], refused[host], want)
			}
			continue
		}
		if runs[host] != "" || refused[host] == 0 {
			t.Errorf("%s (the 9th policy): runs %q, %d routes answer 500; want every route answering 500", host, runs[host], refused[host])
		}
	}
	secrets, keys := map[string]bool{}, map[string]bool{}
	for _, s := range r.Config.Secrets {
		secrets[s.Name] = len(s.Generic) > 0
		if strings.HasSuffix(s.Name, "/hmac") {
			keys[string(s.Generic)] = true
		}
	}
	if len(keys) != served { // one client secret, but a cookie key of each login's own
		t.Errorf("%d different cookie keys, want %d", len(keys), served)
	}
	for _, l := range r.Config.Listeners {
		if n := len(l.OIDC); n > ir.MaxListenerOIDCs {
			t.Errorf("listener %s runs %d oauth2 filters, over %d", l.Name, n, ir.MaxListenerOIDCs)
		}
		for _, o := range l.OIDC {
			if !secrets[o.ClientSecret] || !secrets[o.HMACSecret] {
				t.Errorf("listener %s: login %s's secrets %s, %s missing", l.Name, o.Name, o.ClientSecret, o.HMACSecret)
			}
		}
	}
}

// TestOIDCCookieKeyIsTheHubs: the key that signs a login's session cookies is the one the
// manager made for that login (Input.OIDCCookieKeys), whatever the client secret (which the
// tenant knows); a login without one, or with one of another size, is not served (its routes
// answer 500, OIDCUnusable saying the hub has not made it yet) rather than served with a key
// the tenant could compute.
func TestOIDCCookieKeyIsTheHubs(t *testing.T) {
	t.Parallel()
	in := oidcTenant(t, 2, false)
	logins := translate.OIDCLogins(in.Routes)
	if want := []string{in.Routes[1].Name + "/apps/policy-00", in.Routes[2].Name + "/apps/policy-01"}; !slices.Equal(logins, want) {
		t.Fatalf("OIDCLogins %v, want %v", logins, want)
	}
	hmacOf := func(in translate.Input) (map[string][]byte, []ir.Problem) {
		r, err := translate.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		keys := map[string][]byte{}
		for _, l := range r.Config.Listeners {
			for _, o := range l.OIDC {
				for _, s := range r.Config.Secrets {
					if s.Name == o.HMACSecret {
						keys[o.Name] = s.Generic
					}
				}
			}
		}
		var told []ir.Problem
		for _, p := range r.Problems {
			if p.Reason == translate.ReasonOIDCUnusable {
				told = append(told, p)
			}
		}
		return keys, told
	}
	made := map[string][]byte{
		translate.OIDCCookieKeyName(logins[0]): bytes.Repeat([]byte{1}, translate.OIDCCookieKeySize),
		translate.OIDCCookieKeyName(logins[1]): bytes.Repeat([]byte{2}, translate.OIDCCookieKeySize),
	}
	in.OIDCCookieKeys = made
	keys, told := hmacOf(in)
	if len(told) != 0 || !bytes.Equal(keys[logins[0]], made[translate.OIDCCookieKeyName(logins[0])]) || !bytes.Equal(keys[logins[1]], made[translate.OIDCCookieKeyName(logins[1])]) {
		t.Fatalf("cookie keys %x (problems %v), want the manager's for each login", keys, told)
	}
	// Another client secret: the same cookie keys (they owe nothing to what the tenant knows).
	in.Secrets[len(in.Secrets)-1].Data = map[string][]byte{"client-secret": []byte("another-secret")}
	if again, _ := hmacOf(in); !bytes.Equal(again[logins[0]], keys[logins[0]]) {
		t.Errorf("the cookie key changed with the client secret")
	}
	// The second login's key not made yet, then of another size: its routes answer 500.
	for _, key := range [][]byte{nil, []byte("short")} {
		in.OIDCCookieKeys = map[string][]byte{translate.OIDCCookieKeyName(logins[0]): made[translate.OIDCCookieKeyName(logins[0])]}
		if key != nil {
			in.OIDCCookieKeys[translate.OIDCCookieKeyName(logins[1])] = key
		}
		keys, told := hmacOf(in)
		if _, ok := keys[logins[1]]; ok || keys[logins[0]] == nil {
			t.Errorf("key %q: logins served %v, want only the first", key, slices.Collect(maps.Keys(keys)))
		}
		if len(told) == 0 {
			t.Errorf("key %q: no OIDCUnusable, want one on each rule of Route %s", key, in.Routes[2].Name)
		}
		for _, p := range told {
			if p.Object.Name != in.Routes[2].Name || !strings.Contains(p.Message, "has not been made by the hub yet") {
				t.Errorf("key %q: %v, want OIDCUnusable only on Route %s saying its cookie key is not made yet", key, p, in.Routes[2].Name)
			}
		}
		r, err := translate.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		runs, refused := appHostRoutes(t, r.Config, "running a login", func(rt *ir.Route) (string, bool) { return rt.OIDC, rt.OIDC != "" })
		if runs["app-1.example.com"] != "" || refused["app-1.example.com"] == 0 || runs["app-0.example.com"] != logins[0] {
			t.Errorf("key %q: routes running logins %v, answering 500 %v; want app-1's answering 500", key, runs, refused)
		}
	}
}

// TestOIDCDiscoveredEndpoints: a login that gives neither endpoint takes them from its
// issuer's discovery document as the manager read it (Input.OIDCProviders, listed by
// OIDCIssuers); until it is read, when reading it failed, or when its endpoints cannot be
// used, the login's routes answer 500 with OIDCUnusable saying which.
func TestOIDCDiscoveredEndpoints(t *testing.T) {
	t.Parallel()
	in := oidcTenant(t, 1, true)
	const issuer = "https://id.example.com/realms/apps"
	if got := translate.OIDCIssuers(&in); !slices.Equal(got, []string{issuer}) {
		t.Fatalf("OIDCIssuers %v, want [%s]", got, issuer)
	}
	login := func(providers map[string]translate.OIDCProvider) (*ir.OIDC, string) {
		in.OIDCProviders = providers
		r, err := translate.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range r.Problems {
			if p.Reason == translate.ReasonOIDCUnusable {
				return nil, p.Message
			}
		}
		for _, l := range r.Config.Listeners {
			for i := range l.OIDC {
				return &l.OIDC[i], ""
			}
		}
		return nil, "no login and no problem"
	}
	if o, msg := login(map[string]translate.OIDCProvider{issuer: {AuthorizationEndpoint: "https://id.example.com/auth", TokenEndpoint: "https://id.example.com/token"}}); o == nil ||
		o.AuthorizationEndpoint != "https://id.example.com/auth" || o.TokenEndpoint != "https://id.example.com/token" {
		t.Errorf("discovered: login %+v (%s), want the document's endpoints", o, msg)
	}
	for _, c := range []struct {
		providers map[string]translate.OIDCProvider
		want      string
	}{
		{nil, "the discovery document of its issuer " + issuer + " has not been read by the hub yet"},
		{map[string]translate.OIDCProvider{issuer: {Error: "its host could not be resolved"}}, "the hub could not read the discovery document of its issuer " + issuer + ": its host could not be resolved"},
		{map[string]translate.OIDCProvider{issuer: {AuthorizationEndpoint: "http://id.example.com/auth", TokenEndpoint: "https://id.example.com/token"}}, "gives endpoints kubelb cannot use"},
	} {
		if o, msg := login(c.providers); o != nil || !strings.Contains(msg, c.want) {
			t.Errorf("%v: login %+v, problem %q; want none and %q", c.providers, o, msg, c.want)
		}
	}
}

// oidcTenant is a tenant of n HTTPRoutes (translatetest.HTTPRoutesTenant), the i-th made i
// minutes after the first and under SecurityPolicy apps/policy-<i> with oidc (its token
// endpoint through Service idp of the Route, client secret apps/oidc mirrored); without
// endpoints (discover) the provider gives none.
func oidcTenant(t *testing.T, n int, discover bool) translate.Input {
	t.Helper()
	in := translatetest.HTTPRoutesTenant(t, n)
	in.Secrets = append(in.Secrets, corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hub-oidc", Namespace: in.Tenant, Labels: map[string]string{v1alpha1.LabelOriginNamespace: "apps", v1alpha1.LabelOriginName: "oidc"}},
		Data:       map[string][]byte{"client-secret": []byte("client-secret")},
	})
	for i := range n { // the Gateway's Route is the first; the HTTPRoutes follow
		r := &in.Routes[i+1]
		r.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 30, 0, i, 0, 0, time.UTC))
		src := r.Spec.Source.Kubernetes
		src.Services = append(src.Services, v1alpha1.UpstreamService{Service: translatetest.BenchService("apps", "idp", int32(31000+i))})
		if src.Context == nil {
			src.Context = &v1alpha1.SourceContext{}
		}
		provider := v1alpha1.SecurityOIDCProvider{
			Issuer: "https://id.example.com", AuthorizationEndpoint: ptr.To("https://id.example.com/authorize"),
			TokenEndpoint: ptr.To("https://id.example.com/token"),
			BackendRefs:   []v1alpha1.SecurityBackendRef{{Name: "idp", Port: ptr.To[int32](80)}},
		}
		if discover {
			provider.Issuer, provider.AuthorizationEndpoint, provider.TokenEndpoint = "https://id.example.com/realms/apps", nil, nil
		}
		src.Context.Security = &v1alpha1.Security{Namespace: "apps", Name: fmt.Sprintf("policy-%02d", i), OIDC: &v1alpha1.SecurityOIDC{
			Provider: provider, ClientID: "app", ClientSecret: v1alpha1.SecurityBasicAuthUsers{Name: "oidc"},
		}}
	}
	in.OIDCCookieKeys = translatetest.OIDCCookieKeys(in.Routes)
	return in
}
