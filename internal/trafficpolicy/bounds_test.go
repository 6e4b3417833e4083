package trafficpolicy

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// resolved reads and checks a BackendTrafficPolicy spec written in YAML.
func resolved(t *testing.T, y string) *Settings {
	t.Helper()
	bt, err := Read("ns", "p", spec(t, y))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Resolve(bt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCheckBounds: each bound refuses a policy over it, naming the field, what the policy
// asks, the bound and where it is set; a policy at the bound, or with bounds unset, passes.
func TestCheckBounds(t *testing.T) {
	t.Parallel()
	tenant := map[string]string{BoundFeatures: "Tenant t", BoundMaxRequestsPerSecond: "Tenant t", BoundMaxRetries: "Config default", BoundMaxRequestTimeout: "Tenant t"}
	for _, tc := range []struct {
		name   string
		bounds *Bounds
		policy string
		want   []string // "" for within the bounds
	}{
		{"no bounds", nil, `rateLimit: {local: {rules: [{limit: {requests: 1000000, unit: Second}}]}}`, nil},
		{"unset fields bound nothing", &Bounds{SetBy: tenant}, `{retry: {numRetries: 10}, timeout: {http: {requestTimeout: 0s}}, rateLimit: {local: {rules: [{limit: {requests: 4294967295, unit: Second}}]}}}`, nil},
		{"a rate bound above any rule", &Bounds{MaxRequestsPerSecond: 1 << 62}, `rateLimit: {local: {rules: [{limit: {requests: 4294967295, unit: Hour}}]}}`, nil},
		{"rate within, normalised to per second", &Bounds{MaxRequestsPerSecond: 100, SetBy: tenant},
			`rateLimit: {local: {rules: [{limit: {requests: 6000, unit: Minute}}, {limit: {requests: 360000, unit: Hour}}, {limit: {requests: 100, unit: Second}}]}}`, nil},
		{"rate over", &Bounds{MaxRequestsPerSecond: 100, SetBy: tenant},
			`rateLimit: {local: {rules: [{limit: {requests: 50, unit: Second}}, {limit: {requests: 30000, unit: Minute}}, {limit: {requests: 6001, unit: Minute}}, {limit: {requests: 101, unit: Second}}]}}`,
			[]string{"rateLimit.local.rules[1] asks 500 requests per second (30000 per Minute); spec.trafficPolicies.maxRequestsPerSecond of Tenant t is 100",
				"rateLimit.local.rules[2] asks 100.02 requests per second (6001 per Minute); spec.trafficPolicies.maxRequestsPerSecond of Tenant t is 100",
				"rateLimit.local.rules[3] asks 101 requests per second; spec.trafficPolicies.maxRequestsPerSecond of Tenant t is 100"}},
		{"retries over", &Bounds{MaxRetries: ptr.To[int32](3), SetBy: tenant}, `retry: {numRetries: 5}`,
			[]string{"retry.numRetries asks 5 retries; spec.trafficPolicies.maxRetries of Config default is 3"}},
		{"retries by default over", &Bounds{MaxRetries: ptr.To[int32](1), SetBy: tenant}, `retry: {retryOn: {triggers: [5xx]}}`,
			[]string{"retry.numRetries asks 2 retries; spec.trafficPolicies.maxRetries of Config default is 1"}},
		{"no retries allowed, none asked", &Bounds{MaxRetries: ptr.To[int32](0), SetBy: tenant}, `retry: {numRetries: 0}`, nil},
		{"timeout within", &Bounds{MaxRequestTimeout: time.Minute, SetBy: tenant}, `timeout: {http: {requestTimeout: 60s}}`, nil},
		{"timeout over by a little", &Bounds{MaxRequestTimeout: 90 * time.Second, SetBy: tenant}, `timeout: {http: {requestTimeout: 91s}}`,
			[]string{"timeout.http.requestTimeout asks 1m31s; spec.trafficPolicies.maxRequestTimeout of Tenant t is 1m30s"}},
		{"timeout over", &Bounds{MaxRequestTimeout: time.Minute, SetBy: tenant}, `timeout: {http: {requestTimeout: 5m}}`,
			[]string{"timeout.http.requestTimeout asks 5m; spec.trafficPolicies.maxRequestTimeout of Tenant t is 1m"}},
		{"no timeout is over any bound", &Bounds{MaxRequestTimeout: time.Hour, SetBy: tenant}, `timeout: {http: {requestTimeout: 0s}}`,
			[]string{"timeout.http.requestTimeout asks no timeout (0s); spec.trafficPolicies.maxRequestTimeout of Tenant t is 1h"}},
		{"features allowed", &Bounds{Features: []v1alpha1.TrafficPolicyFeature{"Retry", "Timeout"}, SetBy: tenant}, `{retry: {numRetries: 1}, timeout: {tcp: {connectTimeout: 1s}}}`, nil},
		{"features refused", &Bounds{Features: []v1alpha1.TrafficPolicyFeature{"Retry", "Timeout"}, SetBy: tenant},
			`{loadBalancer: {type: Random}, retry: {numRetries: 1}, circuitBreaker: {maxConnections: 5}, healthCheck: {passive: {consecutive5XxErrors: 3}}, rateLimit: {local: {rules: [{limit: {requests: 1, unit: Second}}]}}}`,
			[]string{"the policy uses loadBalancer (LoadBalancer), circuitBreaker (CircuitBreaker), healthCheck.passive (PassiveHealthCheck), rateLimit (RateLimit); spec.trafficPolicies.features of Tenant t allows Retry, Timeout"}},
		{"compression refused", &Bounds{Features: []v1alpha1.TrafficPolicyFeature{"RateLimit"}, SetBy: tenant}, `compressor: [{type: Gzip}]`,
			[]string{"the policy uses compressor (Compression); spec.trafficPolicies.features of Tenant t allows RateLimit"}},
		{"compression allowed", &Bounds{Features: []v1alpha1.TrafficPolicyFeature{"Compression"}, SetBy: tenant}, `compressor: [{type: Brotli}, {type: Gzip}]`, nil},
		{"no feature allowed", &Bounds{Features: []v1alpha1.TrafficPolicyFeature{}}, `timeout: {http: {connectionIdleTimeout: 1m}}`,
			[]string{"the policy uses timeout (Timeout); spec.trafficPolicies.features allows none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := CheckBounds(tc.bounds, resolved(t, tc.policy))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrOverBound) {
				t.Fatalf("got %v, want an ErrOverBound", err)
			}
			got := strings.Split(err.Error(), "\n")
			if len(got) != len(tc.want) || !strings.HasPrefix(got[0], "over the platform team's bounds: ") {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			got[0] = strings.TrimPrefix(got[0], "over the platform team's bounds: ")
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("problem %d:\n got %s\nwant %s", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestCheckSecurityBounds: a SecurityPolicy is refused for each part the features do not
// allow.
func TestCheckSecurityBounds(t *testing.T) {
	t.Parallel()
	s := resolvedSecurity(t, `
authorization: {defaultAction: Deny, rules: [{action: Allow, principal: {clientCIDRs: [10.0.0.0/8]}}]}
basicAuth: {users: {name: users}}
`)
	if err := CheckSecurityBounds(nil, s); err != nil {
		t.Errorf("no bounds: %v", err)
	}
	if err := CheckSecurityBounds(&Bounds{Features: []v1alpha1.TrafficPolicyFeature{"Authorization", "BasicAuth"}}, s); err != nil {
		t.Errorf("both allowed: %v", err)
	}
	err := CheckSecurityBounds(&Bounds{Features: []v1alpha1.TrafficPolicyFeature{"Authorization", "JWT"}, SetBy: map[string]string{BoundFeatures: "Config default"}}, s)
	want := "over the platform team's bounds: the policy uses basicAuth (BasicAuth); spec.trafficPolicies.features of Config default allows Authorization, JWT"
	if !errors.Is(err, ErrOverBound) || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	ks := resolvedSecurity(t, `apiKeyAuth: {credentialRefs: [{name: keys}], extractFrom: [{headers: [x-api-key]}]}`)
	if err := CheckSecurityBounds(&Bounds{Features: []v1alpha1.TrafficPolicyFeature{"APIKeyAuth"}}, ks); err != nil {
		t.Errorf("API keys allowed: %v", err)
	}
	err = CheckSecurityBounds(&Bounds{Features: []v1alpha1.TrafficPolicyFeature{"BasicAuth"}}, ks)
	if want := "the policy uses apiKeyAuth (APIKeyAuth)"; !errors.Is(err, ErrOverBound) || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want one with %q", err, want)
	}
}

// TestBoundsOf: the bounds the manager publishes are read back as they were set; a features
// list that is empty allows none, an unset one all; no bound set is no bounds.
func TestBoundsOf(t *testing.T) {
	t.Parallel()
	if b := BoundsOf(nil); b != nil {
		t.Errorf("nil: %+v", b)
	}
	if b := BoundsOf(&v1alpha1.TenantTrafficPolicyBounds{}); b != nil {
		t.Errorf("nothing set: %+v", b)
	}
	b := BoundsOf(&v1alpha1.TenantTrafficPolicyBounds{TrafficPolicyBounds: v1alpha1.TrafficPolicyBounds{
		Features: &[]v1alpha1.TrafficPolicyFeature{}, MaxRequestsPerSecond: ptr.To[int64](100), MaxRetries: ptr.To[int32](0),
		MaxRequestTimeout: &metav1.Duration{Duration: time.Minute}}})
	if b == nil || b.Features == nil || len(b.Features) != 0 || b.MaxRequestsPerSecond != 100 || b.MaxRetries == nil || *b.MaxRetries != 0 || b.MaxRequestTimeout != time.Minute {
		t.Errorf("got %+v", b)
	}
	if b.allows(v1alpha1.TrafficPolicyFeatureRetry) {
		t.Error("an empty features list allows Retry")
	}
	if all := BoundsOf(&v1alpha1.TenantTrafficPolicyBounds{TrafficPolicyBounds: v1alpha1.TrafficPolicyBounds{MaxRetries: ptr.To[int32](2)}}); !all.allows(v1alpha1.TrafficPolicyFeatureJWT) {
		t.Error("unset features do not allow JWT")
	}
}

// TestCheckClientBounds: a ClientTrafficPolicy is one feature, ClientTraffic: allowed when
// listed (or features unset), refused naming it otherwise.
func TestCheckClientBounds(t *testing.T) {
	t.Parallel()
	s := &ClientSettings{IdleTimeout: time.Minute}
	if err := CheckClientBounds(nil, s); err != nil {
		t.Errorf("no bounds: %v", err)
	}
	if err := CheckClientBounds(&Bounds{MaxRetries: nil}, s); err != nil {
		t.Errorf("features unset: %v", err)
	}
	if err := CheckClientBounds(&Bounds{Features: []v1alpha1.TrafficPolicyFeature{"ClientTraffic"}}, s); err != nil {
		t.Errorf("allowed: %v", err)
	}
	err := CheckClientBounds(&Bounds{Features: []v1alpha1.TrafficPolicyFeature{"Retry"}}, s)
	if want := "the policy uses ClientTrafficPolicy (ClientTraffic)"; !errors.Is(err, ErrOverBound) || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want one with %q", err, want)
	}
}
