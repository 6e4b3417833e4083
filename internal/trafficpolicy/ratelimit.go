package trafficpolicy

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/sourcerange"
)

// servedRateLimit is the tree of rateLimit fields kubelb serves: local and global rate
// limits. The fields of each rule are rateLimitRuleFields (rules is a list).
var servedRateLimit = map[string]any{
	"type":   nil,
	"local":  map[string]any{"rules": nil},
	"global": map[string]any{"rules": nil},
}

// rateLimitRuleFields, rateLimitSelectorFields and rateLimitHeaderFields are the fields of a
// rule (local or global), of one of its clientSelectors and of a header selector kubelb
// serves.
var (
	rateLimitRuleFields     = map[string]any{"clientSelectors": nil, "limit": map[string]any{"requests": nil, "unit": nil}}
	rateLimitSelectorFields = map[string]any{"headers": nil, "sourceCIDR": map[string]any{"type": nil, "value": nil, "invert": nil}}
	rateLimitHeaderFields   = map[string]any{"name": nil, "type": nil, "value": nil, "invert": nil}
)

// Bounds of a policy's rate limit, local or global (tenants are untrusted).
const (
	// MaxRateLimitRules is Envoy Gateway's own bound on the rules of a policy.
	MaxRateLimitRules = 16
	// MaxRateLimitRuleSelectors (Envoy Gateway's) bounds the clientSelectors of a rule,
	// MaxRateLimitHeaders the headers of one selector.
	MaxRateLimitRuleSelectors = 8
	MaxRateLimitHeaders       = 16
	// MaxRateLimitSelectors bounds the header and address conditions of one policy (all its
	// rules together).
	MaxRateLimitSelectors = 32
	// MaxRateLimitRequests bounds the requests of a limit (Envoy's token buckets and the
	// rate-limit service's limits count in 32 bits).
	MaxRateLimitRequests = 1<<32 - 1
	// MaxHeaderValueLength bounds an exact header value or a regular expression.
	MaxHeaderValueLength = 1024
)

// RateLimit units (Envoy Gateway's Second, Minute, Hour and Day).
var rateLimitUnits = map[string]time.Duration{"Second": time.Second, "Minute": time.Minute, "Hour": time.Hour, "Day": 24 * time.Hour}

// rateLimitKind is what differs between local and global rate limits: the field of their
// rules and the units they serve (Envoy's local buckets refill every second, minute or hour;
// the rate-limit service also counts per day). Everything else is read and bounded alike.
type rateLimitKind struct {
	field string
	units []string
}

var (
	localRateLimit  = rateLimitKind{field: "rateLimit.local", units: []string{"Second", "Minute", "Hour"}}
	globalRateLimit = rateLimitKind{field: "rateLimit.global", units: []string{"Second", "Minute", "Hour", "Day"}}
)

// RateLimitRule is a checked rate-limit rule (local or global): Requests per Interval for the requests
// it selects (all of the route's when it has no condition). Every condition must hold.
type RateLimitRule struct {
	Requests uint32
	Interval time.Duration
	// ClientCIDR (canonical, sourcerange.Parse) selects clients whose address (the peer of
	// the connection) is in the range; "" any client. PerClient gives each client address its
	// own limit.
	ClientCIDR string
	PerClient  bool
	Headers    []RateLimitHeader
}

// RateLimitHeader selects requests by a header (lower case): its value equal to Exact,
// matching Regex, or, Distinct, any value, each value with its own limit. A request without
// the header is not selected.
type RateLimitHeader struct {
	Name     string
	Exact    string
	Regex    string
	Distinct bool
}

// rateLimitUnsupported names the fields of a policy's local and global rate-limit rules
// kubelb does not serve (spec.rateLimit.local.rules[0].clientSelectors[1].methods ...).
func rateLimitUnsupported(spec map[string]any) []string {
	rl, _ := spec["rateLimit"].(map[string]any)
	var out []string
	under := func(prefix string, m any, tree map[string]any) {
		if mm, ok := m.(map[string]any); ok {
			for _, f := range unsupported(mm, tree) {
				out = append(out, prefix+f[len("spec"):])
			}
		}
	}
	for _, kind := range []string{"local", "global"} {
		limits, _ := rl[kind].(map[string]any)
		rules, _ := limits["rules"].([]any)
		for i, r := range rules {
			rp := fmt.Sprintf("spec.rateLimit.%s.rules[%d]", kind, i)
			under(rp, r, rateLimitRuleFields)
			rm, _ := r.(map[string]any)
			sels, _ := rm["clientSelectors"].([]any)
			for j, s := range sels {
				sp := fmt.Sprintf("%s.clientSelectors[%d]", rp, j)
				under(sp, s, rateLimitSelectorFields)
				sm, _ := s.(map[string]any)
				hs, _ := sm["headers"].([]any)
				for k, h := range hs {
					under(fmt.Sprintf("%s.headers[%d]", sp, k), h, rateLimitHeaderFields)
				}
			}
			if len(out) > maxUnsupported {
				return out
			}
		}
	}
	return out
}

// resolveRateLimit checks a policy's rateLimit: the rules of its local or its global limit
// (one of them, as type says or, without type, as set), bounded. It returns the local rules
// or the global ones.
func resolveRateLimit(rl *v1alpha1.TrafficRateLimit, bad func(string, ...any)) (local, global []RateLimitRule) {
	switch {
	case rl.Local != nil && rl.Global != nil:
		bad("rateLimit.local and rateLimit.global are both set; give one")
		return nil, nil
	case rl.Type == "" && rl.Global != nil, rl.Type == "Global":
		if rl.Local != nil {
			bad("rateLimit.type is Global, but rateLimit.local is set; use rateLimit.global")
			return nil, nil
		}
		var rules []v1alpha1.TrafficRateLimitRule
		if rl.Global != nil {
			rules = rl.Global.Rules
		}
		return nil, resolveRateLimitRules(globalRateLimit, rules, bad)
	case rl.Type == "", rl.Type == "Local":
		if rl.Global != nil {
			bad("rateLimit.type is Local, but rateLimit.global is set; use rateLimit.local")
			return nil, nil
		}
		var rules []v1alpha1.TrafficRateLimitRule
		if rl.Local != nil {
			rules = rl.Local.Rules
		}
		return resolveRateLimitRules(localRateLimit, rules, bad), nil
	default:
		bad("rateLimit.type %q is not supported; use Local or Global", truncate(rl.Type))
		return nil, nil
	}
}

// resolveRateLimitRules checks the rules of a local or global limit (kind): bounded, every
// problem reported.
func resolveRateLimitRules(kind rateLimitKind, rules []v1alpha1.TrafficRateLimitRule, bad func(string, ...any)) []RateLimitRule {
	if len(rules) == 0 {
		bad("%s.rules is empty; give at least one limit", kind.field)
		return nil
	}
	if len(rules) > MaxRateLimitRules {
		bad("%s.rules has %d rules; at most %d", kind.field, len(rules), MaxRateLimitRules)
		return nil
	}
	var out []RateLimitRule
	conditions := 0
	for i, r := range rules {
		field := fmt.Sprintf("%s.rules[%d]", kind.field, i)
		rule := RateLimitRule{}
		if slices.Contains(kind.units, r.Limit.Unit) {
			rule.Interval = rateLimitUnits[r.Limit.Unit]
		} else {
			units := strings.Join(kind.units[:len(kind.units)-1], ", ") + " or " + kind.units[len(kind.units)-1]
			bad("%s.limit.unit %q is not supported; use %s", field, truncate(r.Limit.Unit), units)
		}
		if r.Limit.Requests < 1 || r.Limit.Requests > MaxRateLimitRequests {
			bad("%s.limit.requests %d is out of range; use 1 to %d", field, r.Limit.Requests, int64(MaxRateLimitRequests))
		} else {
			rule.Requests = uint32(r.Limit.Requests)
		}
		if len(r.ClientSelectors) > MaxRateLimitRuleSelectors {
			bad("%s.clientSelectors has %d selectors; at most %d", field, len(r.ClientSelectors), MaxRateLimitRuleSelectors)
			return nil
		}
		cidrs := 0
		for j, sel := range r.ClientSelectors {
			sf := fmt.Sprintf("%s.clientSelectors[%d]", field, j)
			if len(sel.Headers) == 0 && sel.SourceCIDR == nil {
				bad("%s has no headers and no sourceCIDR; give one", sf)
			}
			if len(sel.Headers) > MaxRateLimitHeaders {
				bad("%s.headers has %d headers; at most %d", sf, len(sel.Headers), MaxRateLimitHeaders)
				return nil
			}
			conditions += len(sel.Headers)
			for k, h := range sel.Headers {
				if hd, ok := resolveRateLimitHeader(fmt.Sprintf("%s.headers[%d]", sf, k), h, bad); ok {
					rule.Headers = append(rule.Headers, hd)
				}
			}
			if c := sel.SourceCIDR; c != nil {
				conditions++
				if cidrs++; cidrs > 1 {
					bad("%s.sourceCIDR: kubelb serves one sourceCIDR per rule", sf)
					continue
				}
				if c.Invert != nil && *c.Invert {
					bad("%s.sourceCIDR.invert not yet supported by kubelb", sf)
				}
				switch c.Type {
				case "", "Exact":
				case "Distinct":
					rule.PerClient = true
				default:
					bad("%s.sourceCIDR.type %q is not supported; use Exact or Distinct", sf, truncate(c.Type))
				}
				p, err := sourcerange.Parse(c.Value)
				if err == nil && netip.MustParsePrefix(p).Addr().Is4In6() {
					err = fmt.Errorf("an IPv4-mapped range")
				}
				if err != nil {
					bad("%s.sourceCIDR.value %q is not a CIDR such as 203.0.113.0/24 or 2001:db8::/32", sf, truncate(c.Value))
				}
				rule.ClientCIDR = p
			}
		}
		if conditions > MaxRateLimitSelectors {
			bad("the rate limit has more than %d header and sourceCIDR conditions", MaxRateLimitSelectors)
			return nil
		}
		out = append(out, rule)
	}
	return out
}

// resolveRateLimitHeader checks one header selector.
func resolveRateLimitHeader(field string, h v1alpha1.TrafficRateLimitHeader, bad func(string, ...any)) (RateLimitHeader, bool) {
	ok := true
	if h.Name == "" || len(h.Name) > MaxNameLength || !headerNameRE.MatchString(h.Name) {
		bad("%s.name %q is not a header name (a token of at most %d characters)", field, truncate(h.Name), MaxNameLength)
		ok = false
	}
	if h.Invert != nil && *h.Invert {
		bad("%s.invert not yet supported by kubelb", field)
		ok = false
	}
	out := RateLimitHeader{Name: strings.ToLower(h.Name)}
	value := ""
	if h.Value != nil {
		value = *h.Value
	}
	if len(value) > MaxHeaderValueLength || strings.ContainsAny(value, "\r\n\x00") {
		bad("%s.value is longer than %d characters or holds a line break", field, MaxHeaderValueLength)
		return out, false
	}
	switch h.Type {
	case "", "Exact":
		if h.Value == nil {
			bad("%s.value is required with type Exact", field)
			ok = false
		}
		out.Exact = value
	case "RegularExpression":
		if h.Value == nil || value == "" {
			bad("%s.value is required with type RegularExpression", field)
			ok = false
		} else if _, err := regexp.Compile(value); err != nil {
			bad("%s.value %q is not a regular expression (RE2): %s", field, truncate(value), truncate(err.Error()))
			ok = false
		}
		out.Regex = value
	case "Distinct":
		if h.Value != nil {
			bad("%s.value is set, but type Distinct counts every value apart; remove it", field)
			ok = false
		}
		out.Distinct = true
	default:
		bad("%s.type %q is not supported; use Exact, RegularExpression or Distinct", field, truncate(h.Type))
		ok = false
	}
	return out, ok
}
