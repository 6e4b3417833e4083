package translator

import (
	"regexp"
	"strconv"
	"strings"

	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"kubelb.dev/kubelb/internal/ir"
)

// FilterCORS is Envoy's CORS filter: in the HTTP connection managers of listeners with
// ir.Listener.CORS, it applies the policy of the matched route (typed_per_filter_config).
const FilterCORS = "envoy.filters.http.cors"

// corsPolicy is a route's CORS policy for Envoy's CORS filter. Envoy answers every preflight
// itself: from an allowed origin with 200, the origin echoed, methods and headers as
// configured (or those the preflight asks for when they are "*"); from another origin with 200
// and no CORS headers (not forwarded: Gateway API's "preflight request is denied").
func corsPolicy(c *ir.CORSPolicy) *corsv3.CorsPolicy {
	out := &corsv3.CorsPolicy{
		AllowMethods:                 strings.Join(c.AllowMethods, ", "),
		AllowHeaders:                 strings.Join(c.AllowHeaders, ", "),
		ExposeHeaders:                strings.Join(c.ExposeHeaders, ", "),
		MaxAge:                       strconv.FormatUint(uint64(c.MaxAge), 10),
		ForwardNotMatchingPreflights: wrapperspb.Bool(false),
	}
	if c.AllowCredentials {
		out.AllowCredentials = wrapperspb.Bool(true)
	}
	for _, o := range c.AllowOrigins {
		out.AllowOriginStringMatch = append(out.AllowOriginStringMatch, &matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: originRegex(o)}},
		})
	}
	return out
}

// originRegex matches the Origin headers an IR origin allows, in any case: "*" any; a host
// "*" any host, "*." any number of labels to the left; an origin without a port also with
// its scheme's port written out.
func originRegex(o string) string {
	if o == "*" {
		return ".*"
	}
	scheme, rest, _ := strings.Cut(o, "://")
	host, port, hasPort := strings.Cut(rest, ":")
	var h string
	switch {
	case host == "*":
		h = `[^/:]+`
	case strings.HasPrefix(host, "*."):
		h = `[^/:]+\.` + regexp.QuoteMeta(host[2:])
	default:
		h = regexp.QuoteMeta(host)
	}
	p := ":" + port
	if !hasPort {
		p = "(:80)?"
		if scheme == "https" {
			p = "(:443)?"
		}
	}
	return "(?i)^" + scheme + "://" + h + p + "$"
}
