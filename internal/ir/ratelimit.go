package ir

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
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

// GlobalRateLimit is a route's global rate limit: its rules are counted once for the whole
// fleet of the tenant by the tenant's rate-limit service (Config.RateLimitService), which
// Envoy asks about every request of the route; a request that one of its rules finds spent
// is answered 429. A service that cannot be reached lets requests through (fail open). The
// listeners serving the route set GlobalRateLimit.
type GlobalRateLimit struct {
	// Key names the route's counters in the rate-limit service (a descriptor value): unique
	// to the route in the Config ("<route config>/<virtual host>/<route>"), so that each
	// route under one policy counts apart. Routes with one Key have the same Rules.
	Key string `json:"key"`
	// Rules as a local limit's, without Burst, with intervals of a second, a minute, an hour
	// or a day.
	Rules []RateLimitRule `json:"rules"`
}

// MaxGlobalRateLimitKey bounds GlobalRateLimit.Key: a route configuration, a virtual host
// (a hostname) and a route name.
const MaxGlobalRateLimitKey = 1024

// RateLimitService is the tenant's rate-limit service (Envoy's ratelimit, its counters in a
// store shared by the fleet) that the listeners with GlobalRateLimit ask.
type RateLimitService struct {
	// Domain separates the tenant's limits from every other tenant's in the service and its
	// store: the tenant's namespace, never a value the tenant writes.
	Domain string `json:"domain"`
	// Cluster is the cluster of the service (HTTP/2, gRPC).
	Cluster string `json:"cluster"`
}

// GlobalRateLimits are the global rate limits of the Config's routes by Key, and an error
// when two routes of one Key have different rules.
func (c *Config) GlobalRateLimits() (map[string]*GlobalRateLimit, error) {
	out := map[string]*GlobalRateLimit{}
	for _, rc := range c.RouteConfigs {
		for _, vh := range rc.VirtualHosts {
			for _, r := range vh.Routes {
				g := r.GlobalRateLimit
				if g == nil {
					continue
				}
				if other, ok := out[g.Key]; ok && other != g && !reflect.DeepEqual(other.Rules, g.Rules) {
					return nil, fmt.Errorf("two global rate limits of key %q with different rules", g.Key)
				}
				out[g.Key] = g
			}
		}
	}
	return out, nil
}

// HasGlobalRateLimit reports whether a route of the configuration has a global rate limit.
func (rc *RouteConfig) HasGlobalRateLimit() bool {
	return rc.anyRoute(func(r *Route) bool { return r.GlobalRateLimit != nil })
}

// validate checks a global rate limit: 1 to MaxRateLimitRules rules, each with requests, no
// burst, an interval of a second, a minute, an hour or a day, valid conditions.
func (g *GlobalRateLimit) validate() error {
	if g == nil {
		return nil
	}
	if g.Key == "" || len(g.Key) > MaxGlobalRateLimitKey || strings.ContainsFunc(g.Key, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return fmt.Errorf("global rate limit key %q is empty, too long or not printable", g.Key)
	}
	if len(g.Rules) == 0 || len(g.Rules) > MaxRateLimitRules {
		return fmt.Errorf("global rate limit has %d rules, want 1-%d", len(g.Rules), MaxRateLimitRules)
	}
	for i, r := range g.Rules {
		switch d := r.Interval.D(); {
		case r.Burst != 0:
			return fmt.Errorf("global rate limit rule %d has a burst", i)
		case d != time.Second && d != time.Minute && d != time.Hour && d != 24*time.Hour:
			return fmt.Errorf("global rate limit rule %d: interval %s, want 1s, 1m, 1h or 24h", i, d)
		}
	}
	return validateRules("global rate limit", g.Rules)
}

// validate checks the tenant's rate-limit service: a domain of printable characters, an
// existing cluster.
func (s *RateLimitService) validate(clusters map[string]bool) error {
	switch {
	case s.Domain == "" || len(s.Domain) > 253 || strings.ContainsFunc(s.Domain, func(r rune) bool { return r <= ' ' || r > '~' }):
		return fmt.Errorf("rate-limit service domain %q is empty, too long or not printable", s.Domain)
	case !clusters[s.Cluster]:
		return fmt.Errorf("rate-limit service cluster %q does not exist", s.Cluster)
	}
	return nil
}

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
	for i, r := range rl.Rules {
		switch {
		case r.Burst != 0 && r.Burst < r.Requests:
			return fmt.Errorf("rate limit rule %d: burst %d below requests %d", i, r.Burst, r.Requests)
		case r.Interval.D() != time.Second && r.Interval.D() != time.Minute && r.Interval.D() != time.Hour:
			return fmt.Errorf("rate limit rule %d: interval %s, want 1s, 1m or 1h", i, r.Interval.D())
		}
	}
	return validateRules("rate limit", rl.Rules)
}

// validateRules checks what local and global rules share: requests, valid conditions, at
// most MaxRateLimitConditions in all.
func validateRules(what string, rules []RateLimitRule) error {
	conditions := 0
	for i, r := range rules {
		if r.Requests == 0 {
			return fmt.Errorf("%s rule %d allows no requests", what, i)
		}
		if r.ClientCIDR != "" {
			conditions++
			if err := sourcerange.Valid([]string{r.ClientCIDR}); err != nil {
				return fmt.Errorf("%s rule %d: %w", what, i, err)
			}
		}
		conditions += len(r.Headers)
		for _, h := range r.Headers {
			if err := h.validate(); err != nil {
				return fmt.Errorf("%s rule %d: %w", what, i, err)
			}
		}
	}
	if conditions > MaxRateLimitConditions {
		return fmt.Errorf("%s has %d conditions, at most %d", what, conditions, MaxRateLimitConditions)
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
