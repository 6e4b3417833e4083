package translator

import (
	"fmt"
	"net/netip"
	"strings"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	matcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacconfigv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	networkinputsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/common_inputs/network/v3"
	ipmatcherv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/input_matchers/ip/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"kubelb.dev/kubelb/internal/ir"
)

// Source ranges (ir.Listener.SourceRanges, ir.Route.SourceRanges) are enforced against the
// address of the connection's peer, three ways:
//   - TCP listeners: the filter chain matches source_prefix_ranges. A connection from any
//     other address matches no filter chain, and Envoy closes it as soon as it is accepted,
//     before any upstream connection is made (the listener's no_filter_chain_match stat
//     counts them). Chosen over the RBAC network filter: no extra filter on every
//     connection, and a refused connection never reaches the TCP proxy.
//   - UDP listeners: the udp_proxy's matcher looks the datagram's source address
//     (envoy.matching.inputs.source_ip) up in an IP matcher whose ranges route to the
//     cluster; with no on_no_match, a datagram from any other address matches no route and is
//     dropped (the udp_proxy's no_route stat counts them).
//   - HTTP routes: Envoy's RBAC HTTP filter, in the connection managers of the listeners
//     with RouteSourceRanges, does nothing by itself; a route with source ranges gives it a
//     per-route policy allowing only those direct peers (direct_remote_ip: the connection's
//     peer, never an X-Forwarded-For value a client could write), and every other request is
//     answered 403. A route with an authorization (ordered allow and deny rules, a default)
//     gives it a per-route matcher instead (rbacAuthorizationPerRoute), on the same peer
//     address.

// FilterRBAC is Envoy's RBAC HTTP filter.
const FilterRBAC = "envoy.filters.http.rbac"

// InputSourceIP is the name of the source-IP matching input of UDP listeners and of route
// authorizations (in HTTP, the client's address as the connection manager determined it).
const InputSourceIP = "envoy.matching.inputs.source_ip"

// cidrRanges are the Envoy CIDR ranges of canonical IR source ranges (sourcerange.Valid;
// the IR is validated before it gets here, so an unparsable one cannot occur and is left out).
func cidrRanges(ranges []string) []*corev3.CidrRange {
	out := make([]*corev3.CidrRange, 0, len(ranges))
	for _, r := range ranges {
		p, err := netip.ParsePrefix(r)
		if err != nil {
			continue
		}
		out = append(out, &corev3.CidrRange{AddressPrefix: p.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(p.Bits()))})
	}
	return out
}

// xdsCIDRRanges is cidrRanges in the xds matcher API's own type.
func xdsCIDRRanges(ranges []string) []*xdscorev3.CidrRange {
	in := cidrRanges(ranges)
	out := make([]*xdscorev3.CidrRange, 0, len(in))
	for _, r := range in {
		out = append(out, &xdscorev3.CidrRange{AddressPrefix: r.AddressPrefix, PrefixLen: r.PrefixLen})
	}
	return out
}

// udpSourceMatcher routes the datagrams whose source address is in ranges to action, and no
// other datagram (no on_no_match).
func udpSourceMatcher(ranges []string, action *matcherv3.Matcher_OnMatch, errs *[]error) *matcherv3.Matcher {
	return &matcherv3.Matcher{MatcherType: &matcherv3.Matcher_MatcherTree_{MatcherTree: &matcherv3.Matcher_MatcherTree{
		Input: &xdscorev3.TypedExtensionConfig{Name: InputSourceIP, TypedConfig: mustPack(errs, &networkinputsv3.SourceIPInput{})},
		TreeType: &matcherv3.Matcher_MatcherTree_CustomMatch{CustomMatch: &xdscorev3.TypedExtensionConfig{
			Name: "envoy.matching.custom_matchers.ip_range_matcher",
			TypedConfig: mustPack(errs, &matcherv3.IPMatcher{RangeMatchers: []*matcherv3.IPMatcher_IPRangeMatcher{{
				Ranges:  xdsCIDRRanges(ranges),
				OnMatch: action,
			}}}),
		}},
	}}}
}

// rbacFilterConfig is the RBAC filter of a connection manager: no rules of its own (every
// request passes), the routes' policies (rbacPerRoute) replace them.
func rbacFilterConfig() *rbacv3.RBAC { return &rbacv3.RBAC{} }

// rbacPerRoute allows the requests of direct peers in ranges; others are answered 403.
func rbacPerRoute(ranges []string, errs *[]error) *anypb.Any {
	ids := make([]*rbacconfigv3.Principal, 0, len(ranges))
	for _, r := range cidrRanges(ranges) {
		ids = append(ids, &rbacconfigv3.Principal{Identifier: &rbacconfigv3.Principal_DirectRemoteIp{DirectRemoteIp: r}})
	}
	return mustPack(errs, &rbacv3.RBACPerRoute{Rbac: &rbacv3.RBAC{Rules: &rbacconfigv3.RBAC{
		Action: rbacconfigv3.RBAC_ALLOW,
		Policies: map[string]*rbacconfigv3.Policy{"source-ranges": {
			Permissions: []*rbacconfigv3.Permission{{Rule: &rbacconfigv3.Permission_Any{Any: true}}},
			Principals:  []*rbacconfigv3.Principal{{Identifier: &rbacconfigv3.Principal_OrIds{OrIds: &rbacconfigv3.Principal_Set{Ids: ids}}}},
		}},
	}}})
}

// rbacAuthorizationPerRoute is a route's authorization (ir.Authorization) as the RBAC
// filter's matcher: a matcher list tried in the rules' order, each rule matching the client's
// address (envoy.matching.inputs.source_ip: the direct peer's, unless the Gateway's
// ClientTrafficPolicy reads it from X-Forwarded-For or a header, as Envoy Gateway) against its ranges
// and allowing or denying; on no match, the default action. Denied requests are answered 403.
func rbacAuthorizationPerRoute(a *ir.Authorization, errs *[]error) *anypb.Any {
	action := func(i int, allow bool) *matcherv3.Matcher_OnMatch {
		act, name := rbacconfigv3.RBAC_DENY, fmt.Sprintf("deny-%d", i)
		if allow {
			act, name = rbacconfigv3.RBAC_ALLOW, fmt.Sprintf("allow-%d", i)
		}
		if i < 0 {
			name = "default-" + strings.ToLower(act.String())
		}
		return &matcherv3.Matcher_OnMatch{OnMatch: &matcherv3.Matcher_OnMatch_Action{Action: &xdscorev3.TypedExtensionConfig{
			Name: "envoy.filters.rbac.action", TypedConfig: mustPack(errs, &rbacconfigv3.Action{Name: name, Action: act}),
		}}}
	}
	list := &matcherv3.Matcher_MatcherList{}
	for i, r := range a.Rules {
		list.Matchers = append(list.Matchers, &matcherv3.Matcher_MatcherList_FieldMatcher{
			Predicate: &matcherv3.Matcher_MatcherList_Predicate{MatchType: &matcherv3.Matcher_MatcherList_Predicate_SinglePredicate_{
				SinglePredicate: &matcherv3.Matcher_MatcherList_Predicate_SinglePredicate{
					Input: &xdscorev3.TypedExtensionConfig{Name: InputSourceIP, TypedConfig: mustPack(errs, &networkinputsv3.SourceIPInput{})},
					Matcher: &matcherv3.Matcher_MatcherList_Predicate_SinglePredicate_CustomMatch{CustomMatch: &xdscorev3.TypedExtensionConfig{
						Name:        "envoy.matching.matchers.ip",
						TypedConfig: mustPack(errs, &ipmatcherv3.Ip{CidrRanges: cidrRanges(r.SourceRanges), StatPrefix: "authorization"}),
					}},
				},
			}},
			OnMatch: action(i, r.Allow),
		})
	}
	m := &matcherv3.Matcher{OnNoMatch: action(-1, a.DefaultAllow)}
	if len(list.Matchers) > 0 {
		m.MatcherType = &matcherv3.Matcher_MatcherList_{MatcherList: list}
	}
	return mustPack(errs, &rbacv3.RBACPerRoute{Rbac: &rbacv3.RBAC{Matcher: m}})
}
