package ir

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"kubelb.dev/kubelb/internal/sourcerange"
)

// RateLimit is a route's local rate limit: each rule a token bucket (or one per client
// address, per header value) that every Envoy of the fleet keeps for itself; a request that
// one of its rules finds spent is answered 429. The listeners serving the route set
// RateLimit.
type RateLimit struct {
	Rules []RateLimitRule `json:"rules"`
	// Status answers the requests over a limit (0: 429; ingress-nginx's 503).
	Status uint32 `json:"status,omitempty"`
}

// RateLimitRule allows Requests per Interval (1s, 1m or 1h), Burst at once (Requests when
// 0), to the requests it selects: every condition must hold; with none, every request of
// the route.
type RateLimitRule struct {
	Requests uint32   `json:"requests"`
	Burst    uint32   `json:"burst,omitempty"`
	Interval Duration `json:"interval"`
	// ClientCIDR (canonical, sourcerange.Parse) selects clients whose address, the peer of
	// the connection, is in the range; "" any client. PerClient gives each client address
	// its own bucket.
	ClientCIDR string `json:"clientCIDR,omitempty"`
	PerClient  bool   `json:"perClient,omitempty"`
	// Headers select requests by header; a request without one of them is not selected.
	Headers []RateLimitHeader `json:"headers,omitempty"`
}

// RateLimitHeader selects requests by a header (lower case): exactly one of Exact (the value
// equal), Regex (the whole value matching, RE2) and Distinct (any value, each value with its
// own bucket).
type RateLimitHeader struct {
	Name     string `json:"name"`
	Exact    string `json:"exact,omitempty"`
	Regex    string `json:"regex,omitempty"`
	Distinct bool   `json:"distinct,omitempty"`
}

// Bounds of a route's rate limit.
const (
	MaxRateLimitRules      = 16
	MaxRateLimitConditions = 32
	// MaxRateLimitBuckets bounds the buckets Envoy keeps for each rule counting per client
	// address or per header value: the least recently used are dropped beyond it.
	MaxRateLimitBuckets = 4096
)

// HasRateLimit reports whether a route of the configuration has a rate limit.
func (rc *RouteConfig) HasRateLimit() bool {
	return rc.anyRoute(func(r *Route) bool { return r.RateLimit != nil })
}

// validate checks a rate limit: 1 to MaxRateLimitRules rules, each with requests, a burst
// not below them, an interval of a second, a minute or an hour, valid conditions.
func (rl *RateLimit) validate() error {
	if rl == nil {
		return nil
	}
	if len(rl.Rules) == 0 || len(rl.Rules) > MaxRateLimitRules {
		return fmt.Errorf("rate limit has %d rules, want 1-%d", len(rl.Rules), MaxRateLimitRules)
	}
	if rl.Status != 0 && (rl.Status < 400 || rl.Status > 599) {
		return fmt.Errorf("rate limit status %d, want 400-599", rl.Status)
	}
	conditions := 0
	for i, r := range rl.Rules {
		switch {
		case r.Requests == 0:
			return fmt.Errorf("rate limit rule %d allows no requests", i)
		case r.Burst != 0 && r.Burst < r.Requests:
			return fmt.Errorf("rate limit rule %d: burst %d below requests %d", i, r.Burst, r.Requests)
		case r.Interval.D() != time.Second && r.Interval.D() != time.Minute && r.Interval.D() != time.Hour:
			return fmt.Errorf("rate limit rule %d: interval %s, want 1s, 1m or 1h", i, r.Interval.D())
		}
		if r.ClientCIDR != "" {
			conditions++
			if err := sourcerange.Valid([]string{r.ClientCIDR}); err != nil {
				return fmt.Errorf("rate limit rule %d: %w", i, err)
			}
		}
		conditions += len(r.Headers)
		for _, h := range r.Headers {
			if err := h.validate(); err != nil {
				return fmt.Errorf("rate limit rule %d: %w", i, err)
			}
		}
	}
	if conditions > MaxRateLimitConditions {
		return fmt.Errorf("rate limit has %d conditions, at most %d", conditions, MaxRateLimitConditions)
	}
	return nil
}

func (h RateLimitHeader) validate() error {
	if !headerNameRE.MatchString(h.Name) {
		return fmt.Errorf("rate limit header %q is not a lower-case header name", h.Name)
	}
	n := 0
	if h.Exact != "" {
		n++
	}
	if h.Regex != "" {
		n++
		if _, err := regexp.Compile(h.Regex); err != nil {
			return fmt.Errorf("rate limit header %q: %w", h.Name, err)
		}
	}
	if h.Distinct {
		n++
	}
	if n > 1 || len(h.Exact) > 1024 || len(h.Regex) > 1024 {
		return errors.New("rate limit header: at most one of exact, regex and distinct, values of at most 1024 characters")
	}
	return nil
}
