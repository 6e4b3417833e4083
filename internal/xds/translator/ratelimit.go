package translator

import (
	"fmt"
	"math"
	"net/netip"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	localratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"kubelb.dev/kubelb/internal/ir"
)

// Local rate limits (ir.Route.RateLimit) run in Envoy's local rate-limit HTTP filter, in the
// connection managers of the listeners with RateLimit, after the RBAC filter (a refused
// client spends no tokens). The filter does nothing by itself; a route with a rate limit
// gives it a per-route configuration: one descriptor per rule, whose entries the rule's
// actions produce from the request —
//   - "rule": the rule's number (a generic key), so that every rule is a descriptor of its
//     own, even one without conditions;
//   - "masked_remote_address": the client address masked to the rule's range, equal to the
//     range when the client is in it; "remote_address": the client address, each its own
//     bucket (an empty value: Envoy keeps a bucket per value, the least recently used
//     dropped past MaxRateLimitBuckets). The address is the connection's peer (the
//     connection manager uses the remote address and trusts no X-Forwarded-For hop), or
//     what PROXY protocol said it was;
//   - "header-N": a header's exact or regular-expression match (header_value_match), or its
//     value, each value its own bucket (request_headers).
//
// A request that fails a condition produces no descriptor for that rule, which then does not
// count it. A request counts against every rule whose descriptor it produces and is answered
// 429 when one of their buckets is spent (the strictest limit wins, as Envoy Gateway says).
// The default bucket never limits. Buckets belong to the route and to each Envoy: a fleet of
// n Envoys allows n times the limit.

// FilterLocalRateLimit is Envoy's local rate-limit HTTP filter.
const FilterLocalRateLimit = "envoy.filters.http.local_ratelimit"

// localRateLimitStatPrefix prefixes the filter's stats (http_local_rate_limit.rate_limited).
const localRateLimitStatPrefix = "http_local_rate_limit"

// localRateLimitFilter is the filter of a connection manager: disabled (no per-route
// configuration, no limit).
func localRateLimitFilter() *localratelimitv3.LocalRateLimit {
	return &localratelimitv3.LocalRateLimit{StatPrefix: localRateLimitStatPrefix}
}

// localRateLimitPerRoute is a route's rate limit as the filter's per-route configuration.
func localRateLimitPerRoute(rl *ir.RateLimit, errs *[]error) *anypb.Any {
	all := &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED}}
	out := &localratelimitv3.LocalRateLimit{
		StatPrefix: localRateLimitStatPrefix,
		// The default bucket: never spent, and only used when no rule counts the request.
		TokenBucket: &typev3.TokenBucket{
			MaxTokens:     math.MaxUint32,
			TokensPerFill: wrapperspb.UInt32(math.MaxUint32),
			FillInterval:  durationpb.New(time.Second),
		},
		FilterEnabled:                   all,
		FilterEnforced:                  all,
		AlwaysConsumeDefaultTokenBucket: wrapperspb.Bool(false),
	}
	if rl.Status != 0 {
		out.Status = &typev3.HttpStatus{Code: typev3.StatusCode(rl.Status)}
	}
	wildcard := false
	for i, r := range rl.Rules {
		actions, entries := ruleDescriptor(i, r)
		for _, e := range entries {
			wildcard = wildcard || e.Value == ""
		}
		burst := r.Burst
		if burst == 0 {
			burst = r.Requests
		}
		out.RateLimits = append(out.RateLimits, &routev3.RateLimit{Actions: actions})
		out.Descriptors = append(out.Descriptors, &ratelimitv3.LocalRateLimitDescriptor{Entries: entries, TokenBucket: &typev3.TokenBucket{
			MaxTokens:     burst,
			TokensPerFill: wrapperspb.UInt32(r.Requests),
			FillInterval:  durationpb.New(r.Interval.D()),
		}})
	}
	if wildcard {
		out.MaxDynamicDescriptors = wrapperspb.UInt32(ir.MaxRateLimitBuckets)
	}
	return mustPack(errs, out)
}

// ruleDescriptor is what local and global limits share: the actions that make rule i's
// descriptor from a request, and the entries of that descriptor (an entry without a value
// takes any value, each value counted apart).
func ruleDescriptor(i int, r ir.RateLimitRule) ([]*routev3.RateLimit_Action, []*ratelimitv3.RateLimitDescriptor_Entry) {
	actions := []*routev3.RateLimit_Action{{ActionSpecifier: &routev3.RateLimit_Action_GenericKey_{GenericKey: &routev3.RateLimit_Action_GenericKey{
		DescriptorKey: "rule", DescriptorValue: fmt.Sprint(i),
	}}}}
	entries := []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "rule", Value: fmt.Sprint(i)}}
	if r.ClientCIDR != "" {
		p := netip.MustParsePrefix(r.ClientCIDR)
		v4, v6 := uint32(32), uint32(128)
		if p.Addr().Is4() {
			v4 = uint32(p.Bits())
		} else {
			v6 = uint32(p.Bits())
		}
		actions = append(actions, &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_MaskedRemoteAddress_{MaskedRemoteAddress: &routev3.RateLimit_Action_MaskedRemoteAddress{
			V4PrefixMaskLen: wrapperspb.UInt32(v4), V6PrefixMaskLen: wrapperspb.UInt32(v6),
		}}})
		entries = append(entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: "masked_remote_address", Value: r.ClientCIDR})
	}
	if r.PerClient {
		actions = append(actions, &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_RemoteAddress_{RemoteAddress: &routev3.RateLimit_Action_RemoteAddress{}}})
		entries = append(entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: "remote_address"})
	}
	for j, h := range r.Headers {
		key := fmt.Sprintf("header-%d", j)
		if h.Distinct {
			actions = append(actions, &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_RequestHeaders_{RequestHeaders: &routev3.RateLimit_Action_RequestHeaders{
				HeaderName: h.Name, DescriptorKey: key,
			}}})
			entries = append(entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: key})
			continue
		}
		sm := &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: h.Exact}}
		if h.Regex != "" {
			sm.MatchPattern = &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: h.Regex}}
		}
		actions = append(actions, &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_HeaderValueMatch_{HeaderValueMatch: &routev3.RateLimit_Action_HeaderValueMatch{
			DescriptorKey: key, DescriptorValue: "match", ExpectMatch: wrapperspb.Bool(true),
			Headers: []*routev3.HeaderMatcher{{Name: h.Name, HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: sm}}},
		}}})
		entries = append(entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: key, Value: "match"})
	}
	return actions, entries
}
