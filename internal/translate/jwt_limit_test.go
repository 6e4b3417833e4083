package translate_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/jwttest"
	"kubelb.dev/kubelb/internal/trafficpolicy"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
)

// TestJWTPoliciesPerTenantBounded: a tenant whose HTTPRoutes are under more SecurityPolicies
// with jwt than a listener can hold the providers of (ir.MaxListenerJWTProviders ÷
// trafficpolicy.MaxJWTProviders = 16) gets the first 16 policies served, each route under
// them requiring a token of its own policy's providers; the routes of the 17th answer 500
// (never served without authentication), and that policy's Route is told (JWTUnusable,
// naming the policy). Every listener stays within its bound of providers.
func TestJWTPoliciesPerTenantBounded(t *testing.T) {
	t.Parallel()
	const served = ir.MaxListenerJWTProviders / trafficpolicy.MaxJWTProviders
	in := translatetest.HTTPRoutesTenant(t, served+1)
	key := jwttest.NewKey(t, "corp-1")
	jwks := jwttest.JWKS(key)
	for i := range served + 1 { // the Gateway's Route is the first; the HTTPRoutes follow
		r := &in.Routes[i+1]
		// Created one after the other, the 17th last (the names alone would order route-16
		// before route-2).
		r.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 30, 0, i, 0, 0, time.UTC))
		if r.Spec.Source.Kubernetes.Context == nil {
			r.Spec.Source.Kubernetes.Context = &v1alpha1.SourceContext{}
		}
		r.Spec.Source.Kubernetes.Context.Security = &v1alpha1.Security{Namespace: "apps", Name: fmt.Sprintf("policy-%02d", i), JWT: &v1alpha1.SecurityJWT{
			Providers: []v1alpha1.SecurityJWTProvider{{Name: "corp", Issuer: "https://idp.example.com",
				LocalJWKS: &v1alpha1.SecurityLocalJWKS{Type: "Inline", Inline: &jwks}}},
		}}
	}
	r, err := translate.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	var told []ir.Problem
	for _, p := range r.Problems {
		if p.Reason == translate.ReasonJWTUnusable {
			told = append(told, p)
		}
	}
	if len(told) != 3 || told[0].Object.Name != in.Routes[served+1].Name || told[2].Object.Name != in.Routes[served+1].Name {
		t.Fatalf("JWTUnusable on %v, want on each of the 3 rules of Route %s (the 17th policy's)", told, in.Routes[served+1].Name)
	}
	// By hostname (app-<i>.example.com): the routes' JWT requirements and 500s.
	requires, refused := appHostRoutes(t, r.Config, "requiring a token", func(rt *ir.Route) (string, bool) {
		if rt.JWT == nil || len(rt.JWT.Providers) != 1 {
			return "", false
		}
		return rt.JWT.Providers[0], true
	})
	for i := range served + 1 {
		host := fmt.Sprintf("app-%d.example.com", i)
		if i < served {
			if want := fmt.Sprintf("apps/policy-%02d/corp", i); requires[host] != want || refused[host] != 0 {
				t.Errorf("%s: requires %q (%d routes answer 500), want %q", host, requires[host], refused[host], want)
			}
			continue
		}
		if requires[host] != "" || refused[host] == 0 {
			t.Errorf("%s (the 17th policy): requires %q, %d routes answer 500; want every route answering 500", host, requires[host], refused[host])
		}
	}
	for _, l := range r.Config.Listeners {
		if n := len(l.JWT.Providers); n > ir.MaxListenerJWTProviders {
			t.Errorf("listener %s holds %d JWT providers, over %d", l.Name, n, ir.MaxListenerJWTProviders)
		}
	}
	t.Logf("%d policies served, %d routes of the 17th answer 500", len(requires), refused[fmt.Sprintf("app-%d.example.com", served)])
}

// appHostRoutes sorts the routes of cfg's virtual hosts app-<i>.example.com
// (translatetest.HTTPRoutesTenant) by host: what asked says of each route that is not a 500
// answer, and the number of 500 answers. A route that is neither (asked false) is an error
// naming what it should have been.
func appHostRoutes(t *testing.T, cfg *ir.Config, what string, asked func(*ir.Route) (string, bool)) (map[string]string, map[string]int) {
	t.Helper()
	asks, refused := map[string]string{}, map[string]int{}
	for _, rc := range cfg.RouteConfigs {
		for _, vh := range rc.VirtualHosts {
			if !strings.HasPrefix(vh.Domains[0], "app-") {
				continue // the HTTPS listener's misdirected-request answer
			}
			for _, rt := range vh.Routes {
				if rt.DirectResponse != nil && rt.DirectResponse.Status == 500 {
					refused[vh.Domains[0]]++
				} else if v, ok := asked(rt); ok {
					asks[vh.Domains[0]] = v
				} else {
					t.Errorf("route configuration %s, host %s: a route neither %s nor answering 500: %+v", rc.Name, vh.Domains[0], what, rt)
				}
			}
		}
	}
	return asks, refused
}

// TestRemoteJWKSPerTenantBounded: a tenant whose HTTPRoutes are under SecurityPolicies with
// more providers fetching their keys (remoteJWKS) than the 16 key servers a tenant's
// translation serves (here 9 policies of 2 such providers each) gets the first 8 policies
// served, each route requiring a token of its own providers, whose key servers are clusters of
// the Service its own Route carries (never the URI's address); the routes of the 9th answer
// 500 (never served without the token check), and that policy's Route is told (JWTUnusable,
// naming the policy and the bound).
func TestRemoteJWKSPerTenantBounded(t *testing.T) {
	t.Parallel()
	const served = 8
	in := translatetest.HTTPRoutesTenant(t, served+1)
	for i := range served + 1 { // the Gateway's Route is the first; the HTTPRoutes follow
		r := &in.Routes[i+1]
		r.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 30, 0, i, 0, 0, time.UTC))
		src := r.Spec.Source.Kubernetes
		src.Services = append(src.Services, v1alpha1.UpstreamService{Service: translatetest.BenchService("apps", "keys", int32(31000+i))})
		if src.Context == nil {
			src.Context = &v1alpha1.SourceContext{}
		}
		remote := &v1alpha1.SecurityRemoteJWKS{URI: "https://203.0.113.9/jwks", BackendRefs: []v1alpha1.SecurityBackendRef{{Name: "keys", Port: ptr.To[int32](80)}}}
		src.Context.Security = &v1alpha1.Security{Namespace: "apps", Name: fmt.Sprintf("policy-%02d", i), JWT: &v1alpha1.SecurityJWT{
			Providers: []v1alpha1.SecurityJWTProvider{{Name: "corp", RemoteJWKS: remote}, {Name: "partner", RemoteJWKS: remote}},
		}}
	}
	r, err := translate.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	last := in.Routes[served+1].Name
	var told []ir.Problem
	for _, p := range r.Problems {
		if p.Reason == translate.ReasonJWTUnusable {
			told = append(told, p)
		}
	}
	if len(told) == 0 || told[0].Object.Name != last || !strings.Contains(told[0].Message, "apps/policy-08") || !strings.Contains(told[0].Message, "more than 16 key sets") {
		t.Fatalf("JWTUnusable %v, want on Route %s naming apps/policy-08 and the bound", told, last)
	}
	clusters := map[string]*ir.Cluster{}
	for _, c := range r.Config.Clusters {
		clusters[c.Name] = c
	}
	requires, refused := appHostRoutes(t, r.Config, "requiring a token", func(rt *ir.Route) (string, bool) {
		if rt.JWT == nil {
			return "", false
		}
		return strings.Join(rt.JWT.Providers, " "), true
	})
	for i := range served + 1 {
		host := fmt.Sprintf("app-%d.example.com", i)
		if i == served {
			if requires[host] != "" || refused[host] == 0 {
				t.Errorf("%s (the 9th policy): requires %q, %d routes answer 500; want every route answering 500", host, requires[host], refused[host])
			}
			continue
		}
		p := fmt.Sprintf("%s/apps/policy-%02d/", in.Routes[i+1].Name, i)
		if want := p + "corp " + p + "partner"; requires[host] != want || refused[host] != 0 {
			t.Errorf("%s: requires %q (%d routes answer 500), want %q", host, requires[host], refused[host], want)
		}
	}
	servers := map[string]bool{}
	for _, l := range r.Config.Listeners {
		for _, p := range l.JWT.Providers {
			c := clusters[p.Remote.Cluster]
			if c == nil || len(c.Endpoints) == 0 || c.Endpoints[0].Address == "203.0.113.9" {
				t.Fatalf("provider %s: key server cluster %q %+v, want the Route's Service on the tenant's nodes", p.Name, p.Remote.Cluster, c)
			}
			servers[p.Name] = true
		}
	}
	if len(servers) != 2*served {
		t.Errorf("%d key servers on the listeners, want %d", len(servers), 2*served)
	}
}
