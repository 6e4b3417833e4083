package translate

import (
	"net/http"
	"strconv"
	"time"

	"kubelb.dev/kubelb/internal/ir"
)

// The ingress-nginx rate-limit annotations kubelb honours (without the prefix).
const (
	nginxLimitRPS   = "limit-rps"
	nginxLimitRPM   = "limit-rpm"
	nginxLimitBurst = "limit-burst-multiplier"
)

// Bounds and defaults of the rate-limit annotations.
const (
	// nginxDefaultBurstMultiplier is ingress-nginx's limit-burst-multiplier default.
	nginxDefaultBurstMultiplier = 5
	// maxNginxLimit bounds limit-rps and limit-rpm, maxNginxBurstMultiplier the multiplier
	// (the burst, limit × multiplier + 1, stays within Envoy's 32-bit buckets).
	maxNginxLimit           = 1_000_000
	maxNginxBurstMultiplier = 1000
	// nginxLimitStatus is ingress-nginx's limit-req-status-code default: 503.
	nginxLimitStatus = http.StatusServiceUnavailable
)

// nginxRateLimit reads limit-rps and limit-rpm: requests a second and a minute per client
// address (the connection's peer), each with a burst of the limit × limit-burst-multiplier
// (default 5) on top of the first request, as nginx's limit_req with burst and nodelay
// serves them; over a limit, 503 (ingress-nginx's limit-req-status-code default). nil when
// neither is set (or neither is understood).
func nginxRateLimit(value func(string) (string, bool), bad func(key, v, want string)) *ir.RateLimit {
	whole := func(key string, hi int) (int, bool) {
		v, ok := value(key)
		if !ok {
			return 0, false
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > hi {
			bad(key, v, "use a whole number from 1 to "+strconv.Itoa(hi))
			return 0, false
		}
		return n, true
	}
	multiplier := nginxDefaultBurstMultiplier
	if m, ok := whole(nginxLimitBurst, maxNginxBurstMultiplier); ok {
		multiplier = m
	}
	out := &ir.RateLimit{Status: nginxLimitStatus}
	for _, l := range []struct {
		key      string
		interval time.Duration
	}{{nginxLimitRPS, time.Second}, {nginxLimitRPM, time.Minute}} {
		if n, ok := whole(l.key, maxNginxLimit); ok {
			out.Rules = append(out.Rules, ir.RateLimitRule{
				Requests: uint32(n), Burst: uint32(n*multiplier + 1), Interval: ir.Duration(l.interval), PerClient: true,
			})
		}
	}
	if len(out.Rules) == 0 {
		return nil
	}
	return out
}
