package translate_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
)

// TestExtAuthServicesPerTenantBounded: a tenant whose HTTPRoutes are under more SecurityPolicies
// with extAuth than a listener runs ext_authz filters for (ir.MaxListenerExtAuths = 8) gets the
// first 8 served, each route asking its own policy's service (a cluster of the Service its
// Route carries); the routes of the 9th answer 500 (never served unchecked), and that
// policy's Route is told (ExtAuthUnusable, naming the policy). No listener runs more than 8.
func TestExtAuthServicesPerTenantBounded(t *testing.T) {
	t.Parallel()
	const served = ir.MaxListenerExtAuths
	in := translatetest.HTTPRoutesTenant(t, served+1)
	for i := range served + 1 { // the Gateway's Route is the first; the HTTPRoutes follow
		r := &in.Routes[i+1]
		r.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 30, 0, i, 0, 0, time.UTC))
		src := r.Spec.Source.Kubernetes
		src.Services = append(src.Services, v1alpha1.UpstreamService{Service: translatetest.BenchService("apps", "auth", int32(31000+i))})
		if src.Context == nil {
			src.Context = &v1alpha1.SourceContext{}
		}
		src.Context.Security = &v1alpha1.Security{Namespace: "apps", Name: fmt.Sprintf("policy-%02d", i), ExtAuth: &v1alpha1.SecurityExtAuth{
			HTTP: &v1alpha1.SecurityExtAuthHTTP{BackendRefs: []v1alpha1.SecurityBackendRef{{Name: "auth", Port: ptr.To[int32](80)}}},
		}}
	}
	r, err := translate.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	var told []ir.Problem
	for _, p := range r.Problems {
		if p.Reason == translate.ReasonExtAuthUnusable {
			told = append(told, p)
		}
	}
	last := in.Routes[served+1].Name
	if len(told) != 3 || told[0].Object.Name != last || told[2].Object.Name != last || !strings.Contains(told[0].Message, "apps/policy-08") {
		t.Fatalf("ExtAuthUnusable on %v, want on each of the 3 rules of Route %s (the 9th policy's)", told, last)
	}
	asks, refused := appHostRoutes(t, r.Config, "asking an authorization service", func(rt *ir.Route) (string, bool) {
		return rt.ExtAuth, rt.ExtAuth != ""
	})
	for i := range served + 1 {
		host := fmt.Sprintf("app-%d.example.com", i)
		if i < served {
			if want := fmt.Sprintf("%s/apps/policy-%02d", in.Routes[i+1].Name, i); asks[host] != want || refused[host] != 0 {
				t.Errorf("%s: asks %q (%d routes answer 500), want %q", host, asks[host], refused[host], want)
			}
			continue
		}
		if asks[host] != "" || refused[host] == 0 {
			t.Errorf("%s (the 9th policy): asks %q, %d routes answer 500; want every route answering 500", host, asks[host], refused[host])
		}
	}
	clusters := map[string]*ir.Cluster{}
	for _, c := range r.Config.Clusters {
		clusters[c.Name] = c
	}
	for _, l := range r.Config.Listeners {
		if n := len(l.ExtAuth); n > ir.MaxListenerExtAuths {
			t.Errorf("listener %s runs %d ext_authz filters, over %d", l.Name, n, ir.MaxListenerExtAuths)
		}
		for _, s := range l.ExtAuth {
			if c := clusters[s.Cluster]; c == nil || len(c.Endpoints) == 0 || c.Endpoints[0].Port < 31000 || c.Endpoints[0].Port > 31007 {
				t.Errorf("listener %s: service %s's cluster %+v, want the tenant's nodes on the auth Service's NodePort", l.Name, s.Name, c)
			}
		}
	}
}

// TestExtAuthUnderEndpointPolicy: the authorization service is reached as a backend is, so
// the hub's endpoint policy governs its addresses: with the tenant's nodes 127.0.0.1-3 and
// only 127.0.0.2 allowed, its cluster holds 127.0.0.2 alone (on the Service's NodePort); with
// none allowed it holds none, and the route is told (NoEndpoints, naming the Service port).
func TestExtAuthUnderEndpointPolicy(t *testing.T) {
	t.Parallel()
	e := &v1alpha1.SecurityExtAuth{HTTP: &v1alpha1.SecurityExtAuthHTTP{BackendRefs: []v1alpha1.SecurityBackendRef{{Name: "auth", Port: ptr.To[int32](8080)}}}}
	for _, c := range []struct {
		name  string
		allow []string
		want  []string
	}{
		{name: "one node allowed", allow: []string{"127.0.0.2/32"}, want: []string{"127.0.0.2"}},
		{name: "none allowed", allow: nil, want: nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, _ := extAuthInput(t, "tenant-ext-auth-policy", 30080, 30090, e)
			in.Policy.Allow = nil
			for _, a := range c.allow {
				in.Policy.Allow = append(in.Policy.Allow, translate.PolicyRule{Prefix: netip.MustParsePrefix(a), Source: translate.SourceConfigAllow})
			}
			r, err := translate.Run(in)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Config.Listeners) != 1 || len(r.Config.Listeners[0].ExtAuth) != 1 {
				t.Fatalf("listeners %+v, want one with one ext_authz service", r.Config.Listeners)
			}
			var auth *ir.Cluster
			for _, cl := range r.Config.Clusters {
				if cl.Name == r.Config.Listeners[0].ExtAuth[0].Cluster {
					auth = cl
				}
			}
			var got []string
			for _, ep := range auth.Endpoints {
				if ep.Port != 30090 {
					t.Errorf("endpoint %s:%d, want the auth Service's NodePort 30090", ep.Address, ep.Port)
				}
				got = append(got, ep.Address)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("the authorization service's endpoints %v, want %v", got, c.want)
			}
			told := slices.ContainsFunc(r.Problems, func(p ir.Problem) bool {
				return p.Reason == translate.ReasonNoEndpoints && strings.Contains(p.Message, "shop/auth:8080")
			})
			if told != (len(c.want) == 0) {
				t.Errorf("NoEndpoints naming shop/auth:8080 reported: %v; problems %v", told, r.Problems)
			}
		})
	}
}
