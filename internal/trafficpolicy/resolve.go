package trafficpolicy

import (
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"time"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// Load-balancing policies of Settings.LoadBalancer.
const (
	RoundRobin   = "RoundRobin"
	LeastRequest = "LeastRequest"
	Random       = "Random"
	// Maglev is Envoy Gateway's ConsistentHash.
	Maglev = "Maglev"
)

// Bounds of what a policy may ask (tenants are untrusted).
const (
	MaxRetries          = 10
	MaxRetryCodes       = 32
	MaxTableSize        = 5000011 // Envoy's largest Maglev table
	MaxConnectTimeout   = 5 * time.Minute
	MaxRequestTimeout   = time.Hour
	MinIdleTimeout      = time.Second
	MaxIdleTimeout      = 24 * time.Hour
	MaxRetryInterval    = time.Hour
	MaxEjectionTime     = 24 * time.Hour
	MaxCookieTTL        = 365 * 24 * time.Hour
	MaxNameLength       = 256
	MaxCircuitThreshold = 1<<32 - 1
)

// Triggers are Envoy Gateway's retry triggers (Envoy's retry_on values).
var Triggers = []string{"5xx", "gateway-error", "reset", "reset-before-request", "connect-failure", "retriable-4xx",
	"refused-stream", "retriable-status-codes", "cancelled", "deadline-exceeded", "internal", "resource-exhausted", "unavailable"}

// DefaultRetryOn and DefaultRetryCodes are what Envoy Gateway retries when a retry does not
// say (retryOn unset).
var (
	DefaultRetryOn    = []string{"connect-failure", "refused-stream", "unavailable", "cancelled", "retriable-status-codes"}
	DefaultRetryCodes = []uint32{503}
)

// DefaultNumRetries is Envoy Gateway's numRetries when unset.
const DefaultNumRetries = 2

// Settings are a checked BackendTraffic, as the hub's translation uses them. Zero fields are
// unset.
type Settings struct {
	// LoadBalancer is RoundRobin, LeastRequest, Random or Maglev ("" : the hub's default);
	// TableSize the Maglev table size (0: Envoy's).
	LoadBalancer string
	TableSize    uint64
	Hash         *Hash

	CircuitBreaker *CircuitBreaker
	Outlier        *Outlier
	Retry          *Retry

	ConnectTimeout time.Duration
	// RequestTimeout: RequestTimeoutSet tells 0 (none) from unset.
	RequestTimeout    time.Duration
	RequestTimeoutSet bool
	IdleTimeout       time.Duration

	// RateLimit are the local rate-limit rules of the routes, counted by each Envoy;
	// GlobalRateLimit the global ones, counted once for the tenant's fleet by its rate-limit
	// service. At most one of them is set.
	RateLimit       []RateLimitRule
	GlobalRateLimit []RateLimitRule

	// Compression lists the compressors of the routes' responses (Gzip, Brotli), in the
	// policy's order.
	Compression []string
}

// Hash is what a consistent hash reads: the client address, a header or a cookie.
type Hash struct {
	SourceIP  bool
	Header    string
	Cookie    string
	CookieTTL time.Duration
}

// CircuitBreaker thresholds (nil: unset).
type CircuitBreaker struct {
	MaxConnections, MaxPendingRequests, MaxRequests, MaxRetries, MaxRequestsPerConnection *uint32
}

// Outlier is Envoy's outlier detection (nil fields: Envoy's defaults).
type Outlier struct {
	SplitExternalLocalOriginErrors, AlwaysEjectOne                           bool
	Interval, BaseEjectionTime                                               time.Duration
	ConsecutiveLocalOriginFailures, ConsecutiveGatewayErrors, Consecutive5xx *uint32
	MaxEjectionPercent                                                       *uint32
}

// Retry is a retry policy.
type Retry struct {
	NumRetries                               uint32
	RetryOn                                  []string
	Codes                                    []uint32
	PerTryTimeout, BaseInterval, MaxInterval time.Duration
}

var (
	// durationRE is Gateway API's duration (GEP-2257), as Envoy Gateway's CRD declares it.
	durationRE = regexp.MustCompile(`^([0-9]{1,5}(h|m|s|ms)){1,4}$`)
	// headerNameRE is an HTTP header name (a token); cookieNameRE a cookie name (a token).
	headerNameRE = regexp.MustCompile("^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$")
)

// Resolve checks a BackendTraffic (from a tenant's policy, or from a Route) and returns its
// settings, or every problem found: what the policy asks must be served as written or not at
// all.
func Resolve(bt *v1alpha1.BackendTraffic) (*Settings, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	dur := func(field, v string, lowest, highest time.Duration, zero bool) time.Duration {
		if v == "" {
			return 0
		}
		if !durationRE.MatchString(v) {
			bad("%s %q is not a duration such as 500ms, 3s or 1h", field, truncate(v))
			return 0
		}
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			bad("%s %q: %v", field, truncate(v), err)
		case d == 0 && zero:
		case d < lowest || d > highest:
			bad("%s %s is out of range; use %s to %s", field, v, lowest, highest)
		}
		return d
	}
	s := &Settings{}
	if lb := bt.LoadBalancer; lb != nil {
		switch lb.Type {
		case RoundRobin, LeastRequest, Random:
			s.LoadBalancer = lb.Type
			if lb.ConsistentHash != nil {
				bad("loadBalancer.consistentHash is set, but type is %s", lb.Type)
			}
		case "ConsistentHash":
			s.LoadBalancer = Maglev
			s.Hash = resolveHash(lb.ConsistentHash, bad, dur)
			if ch := lb.ConsistentHash; ch != nil && ch.TableSize != nil {
				if ts := *ch.TableSize; ts < 2 || ts > MaxTableSize || !big.NewInt(int64(ts)).ProbablyPrime(0) {
					bad("loadBalancer.consistentHash.tableSize %d must be a prime number up to %d", ts, MaxTableSize)
				} else {
					s.TableSize = ts
				}
			}
		default:
			bad("loadBalancer.type %q is not supported; use RoundRobin, LeastRequest, Random or ConsistentHash", truncate(lb.Type))
		}
	}
	if cb := bt.CircuitBreaker; cb != nil {
		count := func(field string, v *int64) *uint32 {
			if v == nil {
				return nil
			}
			if *v < 1 || *v > MaxCircuitThreshold {
				bad("circuitBreaker.%s %d is out of range; use 1 to %d", field, *v, int64(MaxCircuitThreshold))
				return nil
			}
			n := uint32(*v)
			return &n
		}
		s.CircuitBreaker = &CircuitBreaker{
			MaxConnections:           count("maxConnections", cb.MaxConnections),
			MaxPendingRequests:       count("maxPendingRequests", cb.MaxPendingRequests),
			MaxRequests:              count("maxParallelRequests", cb.MaxParallelRequests),
			MaxRetries:               count("maxParallelRetries", cb.MaxParallelRetries),
			MaxRequestsPerConnection: count("maxRequestsPerConnection", cb.MaxRequestsPerConnection),
		}
	}
	if hc := bt.HealthCheck; hc != nil && hc.Passive != nil {
		p := hc.Passive
		o := &Outlier{
			SplitExternalLocalOriginErrors: p.SplitExternalLocalOriginErrors != nil && *p.SplitExternalLocalOriginErrors,
			AlwaysEjectOne:                 p.AlwaysEjectOneEndpoint != nil && *p.AlwaysEjectOneEndpoint,
			Interval:                       dur("healthCheck.passive.interval", p.Interval, time.Millisecond, MaxEjectionTime, false),
			BaseEjectionTime:               dur("healthCheck.passive.baseEjectionTime", p.BaseEjectionTime, time.Millisecond, MaxEjectionTime, false),
			ConsecutiveLocalOriginFailures: p.ConsecutiveLocalOriginFailures,
			ConsecutiveGatewayErrors:       p.ConsecutiveGatewayErrors,
			Consecutive5xx:                 p.Consecutive5xxErrors,
		}
		if m := p.MaxEjectionPercent; m != nil {
			if *m < 0 || *m > 100 {
				bad("healthCheck.passive.maxEjectionPercent %d is out of range; use 0 to 100", *m)
			} else {
				n := uint32(*m)
				o.MaxEjectionPercent = &n
			}
		}
		s.Outlier = o
	}
	if r := bt.Retry; r != nil {
		rt := &Retry{NumRetries: DefaultNumRetries, RetryOn: DefaultRetryOn, Codes: DefaultRetryCodes}
		if n := r.NumRetries; n != nil {
			if *n < 0 || *n > MaxRetries {
				bad("retry.numRetries %d is out of range; use 0 to %d", *n, MaxRetries)
			} else {
				rt.NumRetries = uint32(*n)
			}
		}
		if on := r.RetryOn; on != nil {
			rt.RetryOn, rt.Codes = nil, nil
			for _, tr := range on.Triggers {
				switch {
				case !slices.Contains(Triggers, tr):
					bad("retry.retryOn.triggers %q is not a trigger; use one of %s", truncate(tr), strings.Join(Triggers, ", "))
				case !slices.Contains(rt.RetryOn, tr):
					rt.RetryOn = append(rt.RetryOn, tr)
				}
			}
			if len(on.HTTPStatusCodes) > MaxRetryCodes {
				bad("retry.retryOn.httpStatusCodes has %d codes; at most %d", len(on.HTTPStatusCodes), MaxRetryCodes)
			}
			for _, c := range on.HTTPStatusCodes {
				if c < 400 || c > 599 {
					bad("retry.retryOn.httpStatusCodes %d is out of range; use 400 to 599", c)
				} else if !slices.Contains(rt.Codes, uint32(c)) {
					rt.Codes = append(rt.Codes, uint32(c))
				}
			}
			slices.Sort(rt.Codes)
			if len(rt.Codes) > 0 && !slices.Contains(rt.RetryOn, "retriable-status-codes") {
				// Envoy retries the codes only with this trigger.
				rt.RetryOn = append(rt.RetryOn, "retriable-status-codes")
			}
			if len(rt.RetryOn) == 0 {
				rt.RetryOn = DefaultRetryOn
			}
		}
		if pr := r.PerRetry; pr != nil {
			rt.PerTryTimeout = dur("retry.perRetry.timeout", pr.Timeout, time.Millisecond, MaxRequestTimeout, false)
			if bo := pr.BackOff; bo != nil {
				rt.BaseInterval = dur("retry.perRetry.backOff.baseInterval", bo.BaseInterval, time.Millisecond, MaxRetryInterval, false)
				rt.MaxInterval = dur("retry.perRetry.backOff.maxInterval", bo.MaxInterval, time.Millisecond, MaxRetryInterval, false)
				if rt.MaxInterval > 0 && rt.MaxInterval < rt.BaseInterval {
					bad("retry.perRetry.backOff.maxInterval %s is less than baseInterval %s", bo.MaxInterval, bo.BaseInterval)
				}
				if rt.MaxInterval > 0 && rt.BaseInterval == 0 {
					// Envoy requires a base interval with a max interval: its default.
					rt.BaseInterval = 25 * time.Millisecond
					if rt.MaxInterval < rt.BaseInterval {
						bad("retry.perRetry.backOff.maxInterval %s is less than Envoy's default baseInterval 25ms", bo.MaxInterval)
					}
				}
			}
		}
		s.Retry = rt
	}
	if to := bt.Timeout; to != nil {
		if to.TCP != nil {
			s.ConnectTimeout = dur("timeout.tcp.connectTimeout", to.TCP.ConnectTimeout, time.Millisecond, MaxConnectTimeout, false)
		}
		if h := to.HTTP; h != nil {
			if h.RequestTimeout != "" {
				s.RequestTimeout = dur("timeout.http.requestTimeout", h.RequestTimeout, time.Millisecond, MaxRequestTimeout, true)
				s.RequestTimeoutSet = true
			}
			s.IdleTimeout = dur("timeout.http.connectionIdleTimeout", h.ConnectionIdleTimeout, MinIdleTimeout, MaxIdleTimeout, false)
		}
	}
	if rl := bt.RateLimit; rl != nil {
		s.RateLimit, s.GlobalRateLimit = resolveRateLimit(rl, bad)
	}
	s.Compression = resolveCompression(bt.Compression, bad)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

func resolveHash(ch *v1alpha1.TrafficConsistentHash, bad func(string, ...any), dur func(string, string, time.Duration, time.Duration, bool) time.Duration) *Hash {
	if ch == nil {
		bad("loadBalancer.consistentHash is required with type ConsistentHash")
		return nil
	}
	name := func(field, n string) bool {
		if n == "" || len(n) > MaxNameLength || !headerNameRE.MatchString(n) {
			bad("%s %q is not a valid name (a token of at most %d characters)", field, truncate(n), MaxNameLength)
			return false
		}
		return true
	}
	h := &Hash{}
	switch ch.Type {
	case "SourceIP":
		h.SourceIP = true
	case "Header":
		if ch.Header == nil {
			bad("loadBalancer.consistentHash.header is required with type Header")
		} else if name("loadBalancer.consistentHash.header.name", ch.Header.Name) {
			h.Header = strings.ToLower(ch.Header.Name)
		}
	case "Cookie":
		if ch.Cookie == nil {
			bad("loadBalancer.consistentHash.cookie is required with type Cookie")
		} else {
			if name("loadBalancer.consistentHash.cookie.name", ch.Cookie.Name) {
				h.Cookie = ch.Cookie.Name
			}
			h.CookieTTL = dur("loadBalancer.consistentHash.cookie.ttl", ch.Cookie.TTL, time.Second, MaxCookieTTL, false)
		}
	default:
		bad("loadBalancer.consistentHash.type %q is not supported; use SourceIP, Header or Cookie", truncate(ch.Type))
	}
	return h
}
