package routekind

import (
	"testing"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// TestDecidesByClientAddress: an authorization or a rate limit by client address needs the
// clients' addresses, whether the object's policy or one of its sections' asks; basic
// authentication and a rate limit by header do not.
func TestDecidesByClientAddress(t *testing.T) {
	route := func(ctx *v1alpha1.SourceContext) *v1alpha1.Route {
		r := &v1alpha1.Route{}
		r.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Context: ctx}
		return r
	}
	limit := func(sel v1alpha1.TrafficRateLimitSelector) *v1alpha1.SourceContext {
		return &v1alpha1.SourceContext{BackendTraffic: &v1alpha1.BackendTraffic{RateLimit: &v1alpha1.TrafficRateLimit{
			Local: &v1alpha1.TrafficLocalRateLimit{Rules: []v1alpha1.TrafficRateLimitRule{{ClientSelectors: []v1alpha1.TrafficRateLimitSelector{sel}}}}}}}
	}
	for _, c := range []struct {
		name string
		ctx  *v1alpha1.SourceContext
		want bool
	}{
		{"no context", nil, false},
		{"authorization", &v1alpha1.SourceContext{Security: &v1alpha1.Security{Authorization: &v1alpha1.SecurityAuthorization{}}}, true},
		{"basic auth only", &v1alpha1.SourceContext{Security: &v1alpha1.Security{BasicAuth: &v1alpha1.SecurityBasicAuth{}}}, false},
		{"rate limit per client", limit(v1alpha1.TrafficRateLimitSelector{SourceCIDR: &v1alpha1.TrafficRateLimitSourceCIDR{Type: "Distinct", Value: "0.0.0.0/0"}}), true},
		{"global rate limit per client", &v1alpha1.SourceContext{BackendTraffic: &v1alpha1.BackendTraffic{RateLimit: &v1alpha1.TrafficRateLimit{
			Global: &v1alpha1.TrafficGlobalRateLimit{Rules: []v1alpha1.TrafficRateLimitRule{{ClientSelectors: []v1alpha1.TrafficRateLimitSelector{
				{SourceCIDR: &v1alpha1.TrafficRateLimitSourceCIDR{Type: "Distinct", Value: "0.0.0.0/0"}}}}}}}}}, true},
		{"rate limit per header", limit(v1alpha1.TrafficRateLimitSelector{Headers: []v1alpha1.TrafficRateLimitHeader{{Name: "x-user"}}}), false},
		{"authorization of one rule", &v1alpha1.SourceContext{PolicySections: []v1alpha1.PolicySection{
			{Name: "a", Security: &v1alpha1.Security{BasicAuth: &v1alpha1.SecurityBasicAuth{}}},
			{Name: "b", Security: &v1alpha1.Security{Authorization: &v1alpha1.SecurityAuthorization{}}}}}, true},
		{"rate limit per client of one listener", &v1alpha1.SourceContext{PolicySections: []v1alpha1.PolicySection{{Name: "http",
			BackendTraffic: limit(v1alpha1.TrafficRateLimitSelector{SourceCIDR: &v1alpha1.TrafficRateLimitSourceCIDR{Type: "Distinct", Value: "0.0.0.0/0"}}).BackendTraffic}}}, true},
	} {
		if got := DecidesByClientAddress(route(c.ctx)); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if DecidesByClientAddress(&v1alpha1.Route{}) {
		t.Error("a Route without a source decides by client address")
	}
}
