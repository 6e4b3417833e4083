package trafficpolicy

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// Features are the parts of the policies kubelb serves that the platform team may allow a
// tenant (Config/Tenant spec.trafficPolicies.features), in the order messages name them.
var Features = []v1alpha1.TrafficPolicyFeature{
	v1alpha1.TrafficPolicyFeatureLoadBalancer, v1alpha1.TrafficPolicyFeatureCircuitBreaker,
	v1alpha1.TrafficPolicyFeaturePassiveHealthCheck, v1alpha1.TrafficPolicyFeatureRetry,
	v1alpha1.TrafficPolicyFeatureTimeout, v1alpha1.TrafficPolicyFeatureRateLimit,
	v1alpha1.TrafficPolicyFeatureCompression, v1alpha1.TrafficPolicyFeatureBasicAuth, v1alpha1.TrafficPolicyFeatureJWT,
	v1alpha1.TrafficPolicyFeatureAPIKeyAuth, v1alpha1.TrafficPolicyFeatureExtAuth, v1alpha1.TrafficPolicyFeatureOIDC,
	v1alpha1.TrafficPolicyFeatureAuthorization, v1alpha1.TrafficPolicyFeatureClientTraffic,
}

// The field names of the bounds (spec.trafficPolicies.<field>), keys of SetBy.
const (
	BoundFeatures             = "features"
	BoundMaxRequestsPerSecond = "maxRequestsPerSecond"
	BoundMaxRetries           = "maxRetries"
	BoundMaxRequestTimeout    = "maxRequestTimeout"
)

// Bounds are what the platform team allows a tenant's policies: Config and Tenant
// spec.trafficPolicies resolved (the Tenant's fields over the Config's). A nil *Bounds, and
// each unset field, bounds nothing.
type Bounds struct {
	// Features the policies may use; nil: every feature kubelb serves, empty: none.
	Features []v1alpha1.TrafficPolicyFeature
	// MaxRequestsPerSecond bounds each rate-limit rule's rate, local or global (0: unset).
	MaxRequestsPerSecond int64
	// MaxRetries bounds a retry's numRetries (nil: unset).
	MaxRetries *int32
	// MaxRequestTimeout bounds timeout.http.requestTimeout (0: unset).
	MaxRequestTimeout time.Duration
	// SetBy names where each bound is set ("Tenant t", "Config default"), by its field name
	// (BoundFeatures...).
	SetBy map[string]string
}

// BoundsOf reads the bounds that apply to a tenant (nil when none is set).
func BoundsOf(b *v1alpha1.TenantTrafficPolicyBounds) *Bounds {
	if b == nil {
		return nil
	}
	out := &Bounds{SetBy: b.SetBy}
	if f := b.Features; f != nil {
		out.Features = append([]v1alpha1.TrafficPolicyFeature{}, (*f)...)
	}
	if v := b.MaxRequestsPerSecond; v != nil && *v > 0 {
		out.MaxRequestsPerSecond = *v
	}
	if v := b.MaxRetries; v != nil && *v >= 0 {
		n := *v
		out.MaxRetries = &n
	}
	if v := b.MaxRequestTimeout; v != nil && v.Duration > 0 {
		out.MaxRequestTimeout = v.Duration
	}
	if out.Features == nil && out.MaxRequestsPerSecond == 0 && out.MaxRetries == nil && out.MaxRequestTimeout == 0 {
		return nil
	}
	return out
}

// ReasonOverPlatformBound is the reason of a policy over a bound: on the hub, of the
// Warning on its Route; in the tenant cluster, of the policy's Accepted False condition.
const ReasonOverPlatformBound = "OverPlatformBound"

// ErrOverBound wraps the error of a policy over a bound (CheckBounds, CheckSecurityBounds).
var ErrOverBound = errors.New("over the platform team's bounds")

// bound names a bound in a message: "spec.trafficPolicies.maxRetries of Tenant t".
func (b *Bounds) bound(field string) string {
	s := "spec.trafficPolicies." + field
	if where := b.SetBy[field]; where != "" {
		s += " of " + truncate(where)
	}
	return s
}

// allows tells whether the bounds allow a feature.
func (b *Bounds) allows(f v1alpha1.TrafficPolicyFeature) bool {
	return b.Features == nil || slices.Contains(b.Features, f)
}

// checkFeatures names each feature a policy uses that the bounds do not allow (used: the
// features, each with the policy field that uses it).
func (b *Bounds) checkFeatures(used []featureUse, bad func(string, ...any)) {
	var refused []string
	for _, u := range used {
		if !b.allows(u.feature) {
			refused = append(refused, fmt.Sprintf("%s (%s)", u.field, u.feature))
		}
	}
	if len(refused) == 0 {
		return
	}
	allowed := "none"
	if len(b.Features) > 0 {
		names := make([]string, 0, len(b.Features))
		for _, f := range b.Features {
			names = append(names, string(f))
		}
		allowed = strings.Join(names, ", ")
	}
	bad("the policy uses %s; %s allows %s", strings.Join(refused, ", "), b.bound(BoundFeatures), allowed)
}

// featureUse is a feature a policy uses and the field that uses it.
type featureUse struct {
	feature v1alpha1.TrafficPolicyFeature
	field   string
}

// CheckBounds tells whether a checked BackendTrafficPolicy (Resolve) is within the bounds;
// the error (wrapping ErrOverBound) names each bound it is over, where the bound is set and
// what the policy asks. Nil bounds allow everything.
func CheckBounds(b *Bounds, s *Settings) error {
	if b == nil || s == nil {
		return nil
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	var used []featureUse
	use := func(on bool, f v1alpha1.TrafficPolicyFeature, field string) {
		if on {
			used = append(used, featureUse{f, field})
		}
	}
	use(s.LoadBalancer != "", v1alpha1.TrafficPolicyFeatureLoadBalancer, "loadBalancer")
	use(s.CircuitBreaker != nil, v1alpha1.TrafficPolicyFeatureCircuitBreaker, "circuitBreaker")
	use(s.Outlier != nil, v1alpha1.TrafficPolicyFeaturePassiveHealthCheck, "healthCheck.passive")
	use(s.Retry != nil, v1alpha1.TrafficPolicyFeatureRetry, "retry")
	use(s.ConnectTimeout > 0 || s.RequestTimeoutSet || s.IdleTimeout > 0, v1alpha1.TrafficPolicyFeatureTimeout, "timeout")
	use(len(s.RateLimit) > 0 || len(s.GlobalRateLimit) > 0, v1alpha1.TrafficPolicyFeatureRateLimit, "rateLimit")
	use(len(s.Compression) > 0, v1alpha1.TrafficPolicyFeatureCompression, "compressor")
	b.checkFeatures(used, bad)
	// A bound above what a rule can ask bounds nothing (and max*seconds cannot overflow).
	if max := b.MaxRequestsPerSecond; max > 0 && max < MaxRateLimitRequests {
		for _, kind := range []struct {
			field string
			rules []RateLimitRule
		}{{localRateLimit.field, s.RateLimit}, {globalRateLimit.field, s.GlobalRateLimit}} {
			for i, r := range kind.rules {
				seconds := int64(r.Interval / time.Second)
				if seconds < 1 || int64(r.Requests) <= max*seconds {
					continue
				}
				asks := perSecond(int64(r.Requests), seconds) + " requests per second"
				if seconds > 1 {
					asks += fmt.Sprintf(" (%d per %s)", r.Requests, unitName(r.Interval))
				}
				bad("%s.rules[%d] asks %s; %s is %d", kind.field, i, asks, b.bound(BoundMaxRequestsPerSecond), max)
			}
		}
	}
	if max := b.MaxRetries; max != nil && s.Retry != nil && int64(s.Retry.NumRetries) > int64(*max) {
		bad("retry.numRetries asks %d retries; %s is %d", s.Retry.NumRetries, b.bound(BoundMaxRetries), *max)
	}
	if max := b.MaxRequestTimeout; max > 0 && s.RequestTimeoutSet && (s.RequestTimeout == 0 || s.RequestTimeout > max) {
		asks := shortDuration(s.RequestTimeout)
		if s.RequestTimeout == 0 {
			asks = "no timeout (0s)"
		}
		bad("timeout.http.requestTimeout asks %s; %s is %s", asks, b.bound(BoundMaxRequestTimeout), shortDuration(max))
	}
	return overBound(errs)
}

// CheckSecurityBounds tells whether a checked SecurityPolicy (ResolveSecurity) is within the
// bounds (its features); the error wraps ErrOverBound.
func CheckSecurityBounds(b *Bounds, s *SecuritySettings) error {
	if b == nil || s == nil {
		return nil
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	var used []featureUse
	if s.Authorization != nil {
		used = append(used, featureUse{v1alpha1.TrafficPolicyFeatureAuthorization, "authorization"})
	}
	if s.BasicAuthSecret != "" {
		used = append(used, featureUse{v1alpha1.TrafficPolicyFeatureBasicAuth, "basicAuth"})
	}
	if s.JWT != nil {
		used = append(used, featureUse{v1alpha1.TrafficPolicyFeatureJWT, "jwt"})
	}
	if s.APIKeyAuth != nil {
		used = append(used, featureUse{v1alpha1.TrafficPolicyFeatureAPIKeyAuth, "apiKeyAuth"})
	}
	if s.ExtAuth != nil {
		used = append(used, featureUse{v1alpha1.TrafficPolicyFeatureExtAuth, "extAuth"})
	}
	if s.OIDC != nil {
		used = append(used, featureUse{v1alpha1.TrafficPolicyFeatureOIDC, "oidc"})
	}
	b.checkFeatures(used, bad)
	return overBound(errs)
}

// CheckClientBounds checks a checked ClientTrafficPolicy against the platform team's bounds:
// the feature ClientTraffic (the policy as a whole) must be allowed. A nil b bounds nothing.
func CheckClientBounds(b *Bounds, s *ClientSettings) error {
	if b == nil || s == nil {
		return nil
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	b.checkFeatures([]featureUse{{v1alpha1.TrafficPolicyFeatureClientTraffic, "ClientTrafficPolicy"}}, bad)
	return overBound(errs)
}

// overBound joins the problems found, wrapping ErrOverBound (nil for none).
func overBound(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrOverBound, errors.Join(errs...))
}

// perSecond is requests per seconds as a short decimal: 500, 16.67.
func perSecond(requests, seconds int64) string {
	if requests%seconds == 0 {
		return strconv.FormatInt(requests/seconds, 10)
	}
	return strconv.FormatFloat(float64(requests)/float64(seconds), 'f', 2, 64)
}

// unitName is a rate-limit interval as Envoy Gateway's unit.
func unitName(d time.Duration) string {
	for name, u := range rateLimitUnits {
		if u == d {
			return name
		}
	}
	return d.String()
}

// shortDuration writes a duration without its zero minutes and seconds: 1m, 1h, 1m30s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
