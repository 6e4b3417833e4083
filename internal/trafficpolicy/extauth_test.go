package trafficpolicy

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// TestReadAndResolveExtAuth: extAuth comes through as Envoy Gateway means it: the Service and
// port of the policy's namespace, its protocol, the path, the header lists (lower case,
// sorted, unique) and failOpen (default false).
func TestReadAndResolveExtAuth(t *testing.T) {
	e := resolvedSecurity(t, `
targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}]
extAuth:
  http:
    backendRefs: [{group: "", kind: Service, name: auth, namespace: ns, port: 8080, weight: 1}]
    path: /check
    headersToBackend: [X-User, x-user, X-Groups]
  headersToExtAuth: [Authorization, X-Tenant]
`).ExtAuth
	if e.Service != "auth" || e.Port != 8080 || e.GRPC || e.Path != "/check" || e.FailOpen ||
		!slices.Equal(e.HeadersToBackend, []string{"x-groups", "x-user"}) || !slices.Equal(e.HeadersToExtAuth, []string{"authorization", "x-tenant"}) {
		t.Errorf("http extAuth %+v", e)
	}

	if e := resolvedSecurity(t, `extAuth: {grpc: {backendRefs: [{name: authz, port: 9000}]}, failOpen: true}`).ExtAuth; e.Service != "authz" || e.Port != 9000 || !e.GRPC || !e.FailOpen || e.Path != "" {
		t.Errorf("grpc extAuth %+v", e)
	}
}

// TestResolveExtAuthRefuses: what kubelb does not serve is Invalid naming the field; what a
// tenant must not reach (another namespace's Service, a header Envoy owns) is refused.
func TestResolveExtAuthRefuses(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{`extAuth: {http: {backendRefs: [{name: a, port: 80}]}, bodyToExtAuth: {maxRequestBytes: 100}}`, "spec.extAuth.bodyToExtAuth not yet supported"},
		{`extAuth: {http: {backendRefs: [{name: a, port: 80}]}, recomputeRoute: true}`, "spec.extAuth.recomputeRoute not yet supported"},
		{`extAuth: {http: {backendRefs: [{name: a, port: 80}]}, timeout: 1s}`, "spec.extAuth.timeout not yet supported"},
		{`extAuth: {grpc: {backendRefs: [{name: a, port: 80}]}, contextExtensions: [{name: k, value: v}]}`, "spec.extAuth.contextExtensions not yet supported"},
		{`extAuth: {http: {backendRefs: [{name: a, port: 80}], backendSettings: {retry: {numRetries: 1}}}}`, "spec.extAuth.http.backendSettings not yet supported"},
		{`extAuth: {http: {backendRef: {name: a, port: 80}}}`, "spec.extAuth.http.backendRef not yet supported"},
		{`extAuth: {grpc: {backendRefs: [{name: a, port: 80, filters: []}]}}`, "spec.extAuth.grpc.backendRefs[0].filters not yet supported"},
		{`extAuth: {grpc: {backendRefs: [{name: a, port: 80, weight: 0}]}}`, "weight 0 sends no request"},
		{`extAuth: {http: {backendRefs: [{name: a, port: 80}]}, grpc: {backendRefs: [{name: a, port: 80}]}}`, "exactly one of http and grpc"},
		{`extAuth: {headersToExtAuth: [x]}`, "exactly one of http and grpc"},
		{`extAuth: {http: {backendRefs: [{name: a, port: 80}, {name: b, port: 80}]}}`, "kubelb serves exactly one Service"},
		{`extAuth: {http: {backendRefs: [{name: a, namespace: other, port: 80}]}}`, "a Service of another namespace is not yet supported"},
		{`extAuth: {http: {backendRefs: [{name: a, kind: Backend, group: gateway.envoyproxy.io, port: 80}]}}`, "the authorization service is a core Service"},
		{`extAuth: {http: {backendRefs: [{name: a}]}}`, "needs a port from 1 to 65535"},
		{`extAuth: {http: {backendRefs: [{name: A_b, port: 80}]}}`, "is not a Service name"},
		{`extAuth: {http: {backendRefs: [{name: a, port: 80}], path: check}}`, "a path starting with /"},
		{`extAuth: {http: {backendRefs: [{name: a, port: 80}], path: "/a?b"}}`, "without spaces, ? or #"},
		{`extAuth: {http: {backendRefs: [{name: a, port: 80}], headersToBackend: [Host]}}`, "is a connection's header, Host or Envoy's own"},
		{`extAuth: {http: {backendRefs: [{name: a, port: 80}], headersToBackend: [x-envoy-original-path]}}`, "Envoy's own"},
		{`extAuth: {http: {backendRefs: [{name: a, port: 80}]}, headersToExtAuth: ["bad header"]}`, "is not an HTTP header name"},
		{`extAuth: {http: {backendRefs: [{name: a, port: 80}]}, headersToExtAuth: [h1, h2, h3, h4, h5, h6, h7, h8, h9, h10, h11, h12, h13, h14, h15, h16, h17]}`, "17 headers, at most 16"},
	} {
		if err := securityErr(t, c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.spec, err, c.want)
		}
	}
}

// TestExtAuthBounds: extAuth is served only where the platform team allows ExtAuth.
func TestExtAuthBounds(t *testing.T) {
	s := resolvedSecurity(t, `extAuth: {grpc: {backendRefs: [{name: authz, port: 9000}]}}`)
	if err := CheckSecurityBounds(&Bounds{Features: []v1alpha1.TrafficPolicyFeature{"ExtAuth"}}, s); err != nil {
		t.Errorf("extAuth allowed: %v", err)
	}
	err := CheckSecurityBounds(&Bounds{Features: []v1alpha1.TrafficPolicyFeature{"JWT"}}, s)
	if want := "the policy uses extAuth (ExtAuth)"; !errors.Is(err, ErrOverBound) || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want one with %q", err, want)
	}
}
