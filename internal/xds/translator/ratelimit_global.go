package translator

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitconfigv3 "github.com/envoyproxy/go-control-plane/envoy/config/ratelimit/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"kubelb.dev/kubelb/internal/ir"
)

// Global rate limits (ir.Route.GlobalRateLimit) run in Envoy's rate-limit HTTP filter, in the
// connection managers of the listeners with GlobalRateLimit, after the local rate-limit
// filter and before the compressors and the router. The filter asks the tenant's rate-limit
// service (ir.RateLimitService: Envoy's ratelimit, over gRPC, in the tenant's domain) about
// each request of a route with a global limit; the route's per-route configuration lists the
// descriptors the request makes: one per rule, whose entries are
//   - "route": the route's key (GlobalRateLimit.Key), so that each route counts apart even
//     under one policy;
//   - then the rule's, as for a local limit (ruleDescriptor): "rule" (its number),
//     "masked_remote_address", "remote_address", "header-N".
//
// A request that fails a condition makes no descriptor for that rule. The service answers
// OVER_LIMIT (Envoy answers 429) when one of the descriptors' counters is spent; its
// configuration (RateLimitConfig, made here from the same IR) has, per route key, the rules'
// descriptors nested in entry order, the last holding the limit; an entry without a value
// matches any value and counts each apart. A service that cannot be reached in
// GlobalRateLimitTimeout lets the request through (failure_mode_deny false): a broken store
// must not take the tenant's routes down.

// FilterRateLimit is Envoy's rate-limit HTTP filter (global rate limits).
const FilterRateLimit = "envoy.filters.http.ratelimit"

// GlobalRateLimitTimeout bounds each question to the rate-limit service; past it the request
// goes on (fail open).
const GlobalRateLimitTimeout = 500 * time.Millisecond

// globalRateLimitStatPrefix prefixes the filter's stats.
const globalRateLimitStatPrefix = "http_global_rate_limit"

// globalRateLimitFilter is the rate-limit filter of a connection manager: it asks svc about
// the requests of the routes that list descriptors (the others are not asked about).
func globalRateLimitFilter(svc *ir.RateLimitService, errs *[]error) *hcmv3.HttpFilter {
	cfg := &ratelimitfilterv3.RateLimit{
		Domain:          svc.Domain,
		Timeout:         durationpb.New(GlobalRateLimitTimeout),
		FailureModeDeny: false,
		StatPrefix:      globalRateLimitStatPrefix,
		RateLimitService: &ratelimitconfigv3.RateLimitServiceConfig{
			TransportApiVersion: corev3.ApiVersion_V3,
			GrpcService: &corev3.GrpcService{
				TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: svc.Cluster}},
			},
		},
	}
	return &hcmv3.HttpFilter{Name: FilterRateLimit, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustPack(errs, cfg)}}
}

// globalRateLimitPerRoute is a route's global rate limit as the filter's per-route
// configuration: the actions of its descriptors.
func globalRateLimitPerRoute(g *ir.GlobalRateLimit, errs *[]error) *anypb.Any {
	out := &ratelimitfilterv3.RateLimitPerRoute{}
	for i, r := range g.Rules {
		actions, _ := ruleDescriptor(i, r)
		route := &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_GenericKey_{GenericKey: &routev3.RateLimit_Action_GenericKey{
			DescriptorKey: "route", DescriptorValue: g.Key,
		}}}
		out.RateLimits = append(out.RateLimits, &routev3.RateLimit{Actions: append([]*routev3.RateLimit_Action{route}, actions...)})
	}
	return mustPack(errs, out)
}

// rateLimitUnits are the rate-limit service's units of the IR's intervals.
var rateLimitUnits = map[time.Duration]rlsconfv3.RateLimitUnit{
	time.Second: rlsconfv3.RateLimitUnit_SECOND, time.Minute: rlsconfv3.RateLimitUnit_MINUTE,
	time.Hour: rlsconfv3.RateLimitUnit_HOUR, 24 * time.Hour: rlsconfv3.RateLimitUnit_DAY,
}

// RateLimitConfig is the configuration of the tenant's rate-limit service for cfg: its
// domain, and the descriptors of every route's global rate limit, sorted by route key; nil
// when cfg has no rate-limit service. It is deterministic: equal Configs give equal
// configurations.
func RateLimitConfig(cfg *ir.Config) (*rlsconfv3.RateLimitConfig, error) {
	if cfg == nil || cfg.RateLimitService == nil {
		return nil, nil
	}
	limits, err := cfg.GlobalRateLimits()
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(limits))
	for k := range limits {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := &rlsconfv3.RateLimitConfig{Name: cfg.RateLimitService.Domain, Domain: cfg.RateLimitService.Domain}
	for _, k := range keys {
		route := &rlsconfv3.RateLimitDescriptor{Key: "route", Value: k}
		for i, r := range limits[k].Rules {
			unit, ok := rateLimitUnits[r.Interval.D()]
			if !ok {
				return nil, fmt.Errorf("global rate limit %q rule %d: interval %s", k, i, r.Interval.D())
			}
			_, entries := ruleDescriptor(i, r)
			// The entries nested in order, the last one holding the limit.
			var inner *rlsconfv3.RateLimitDescriptor
			for j := len(entries) - 1; j >= 0; j-- {
				d := &rlsconfv3.RateLimitDescriptor{Key: entries[j].Key, Value: entries[j].Value}
				if inner == nil {
					d.RateLimit = &rlsconfv3.RateLimitPolicy{Unit: unit, RequestsPerUnit: r.Requests}
				} else {
					d.Descriptors = []*rlsconfv3.RateLimitDescriptor{inner}
				}
				inner = d
			}
			route.Descriptors = append(route.Descriptors, inner)
		}
		out.Descriptors = append(out.Descriptors, route)
	}
	return out, nil
}

// RateLimitConfigYAML writes a RateLimitConfig in the file format of Envoy's ratelimit
// service (its FILE configuration: domain, descriptors with key, value, rate_limit and
// descriptors), for a service that reads its configuration from files. Values are quoted:
// a route key or a header value is never read as another YAML type.
func RateLimitConfigYAML(c *rlsconfv3.RateLimitConfig) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "domain: %s\n", quote(c.Domain))
	if len(c.Descriptors) == 0 {
		b.WriteString("descriptors: []\n")
		return []byte(b.String())
	}
	b.WriteString("descriptors:\n")
	var write func(ds []*rlsconfv3.RateLimitDescriptor, indent string)
	write = func(ds []*rlsconfv3.RateLimitDescriptor, indent string) {
		for _, d := range ds {
			fmt.Fprintf(&b, "%s- key: %s\n", indent, quote(d.Key))
			if d.Value != "" {
				fmt.Fprintf(&b, "%s  value: %s\n", indent, quote(d.Value))
			}
			if rl := d.RateLimit; rl != nil {
				fmt.Fprintf(&b, "%s  rate_limit:\n%s    unit: %s\n%s    requests_per_unit: %d\n", indent, indent, strings.ToLower(rl.Unit.String()), indent, rl.RequestsPerUnit)
			}
			if len(d.Descriptors) > 0 {
				fmt.Fprintf(&b, "%s  descriptors:\n", indent)
				write(d.Descriptors, indent+"  ")
			}
		}
	}
	write(c.Descriptors, "")
	return []byte(b.String())
}

// quote writes s as a double-quoted YAML scalar: printable strings (route keys are; header
// values hold no line break) with Go's escapes, which are YAML's for these.
func quote(s string) string {
	return fmt.Sprintf("%q", s)
}
