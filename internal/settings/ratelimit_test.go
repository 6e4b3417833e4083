package settings

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

// TestRateLimitStore: a Config's spec.rateLimit reaches a tenant's settings only when its
// image is an image reference and its redisURL host:port with a port of 1 to 65535 (what the
// CRD also checks); otherwise it is left out, with the reason, and global rate limits stay
// OverPlatformBound. A Tenant cannot set one.
func TestRateLimitStore(t *testing.T) {
	t.Parallel()
	const image = "envoyproxy/ratelimit:3fb70258"
	for _, tc := range []struct {
		image, redis string
		bad          string // a part of the reason; "" valid
	}{
		{image, "redis.kubelb.svc:6379", ""},
		{image, "10.0.0.5:6379", ""},
		{image, "[fd00::1]:6379", ""},
		{"registry.example:5000/ratelimit@sha256:0123", "redis:1", ""},
		{image, "redis", "not host:port"},
		{image, "redis://redis:6379", "not host:port"},
		{image, ":6379", "not host:port"},
		{image, "redis:0", "port"},
		{image, "redis:65536", "port"},
		{image, "red_is:6379", "DNS name"},
		{"", "redis:6379", "image"},
		{"ratelimit image", "redis:6379", "image"},
		{strings.Repeat("a", 1025), "redis:6379", "image"},
	} {
		s := &kubelbv1alpha1.RateLimitStore{Image: tc.image, RedisURL: tc.redis}
		cfg := &kubelbv1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: kubelbv1alpha1.ConfigSpec{RateLimit: s}}
		got := Resolve(cfg, &kubelbv1alpha1.Tenant{})
		if tc.bad == "" {
			if got.RateLimit == nil || got.InvalidRateLimit != nil || got.RateLimit.RedisURL != tc.redis {
				t.Errorf("%q %q: RateLimit %v, error %v; want it kept", tc.image, tc.redis, got.RateLimit, got.InvalidRateLimit)
			}
			continue
		}
		if got.RateLimit != nil || got.InvalidRateLimit == nil || !strings.Contains(got.InvalidRateLimit.Error(), tc.bad) {
			t.Errorf("%q %q: RateLimit %v, error %v; want it left out for %q", tc.image, tc.redis, got.RateLimit, got.InvalidRateLimit, tc.bad)
		}
	}
	if got := Resolve(nil, &kubelbv1alpha1.Tenant{}); got.RateLimit != nil || got.InvalidRateLimit != nil {
		t.Errorf("no Config: %v %v", got.RateLimit, got.InvalidRateLimit)
	}
}
