package translate

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"kubelb.dev/kubelb/internal/ir"
)

// The canary annotations of ingress-nginx (without the prefix).
const (
	nginxCanary            = "canary"
	nginxCanaryWeight      = "canary-weight"
	nginxCanaryWeightTotal = "canary-weight-total"
	nginxCanaryByHeader    = "canary-by-header"
	nginxCanaryByHeaderVal = "canary-by-header-value"
	nginxCanaryByHeaderPat = "canary-by-header-pattern"
	nginxCanaryByCookie    = "canary-by-cookie"
)

// maxCanaryWeightTotal bounds canary-weight-total.
const maxCanaryWeightTotal = 1000000

// nginxCanaryRule is what a canary Ingress (canary: "true") asks of the paths it shares with
// another Ingress: a share of their requests (weight of total), and the requests whose header
// (lower case) has value (or "always") all — with regex, those whose header value
// matches the RE2 expression value (canary-by-header-pattern) —, then those whose cookie is
// "always"; "never" (of the header or the cookie) keeps a request off the canary.
type nginxCanaryRule struct {
	weight, total uint32
	header, value string
	regex         bool
	cookie        string
}

// canaryPath is a path of a canary Ingress, resolved, waiting for the Ingress serving the
// same host and path (applyCanaries).
type canaryPath struct {
	claim   ingressClaim
	cluster string
	owner   ir.ObjectRef
	rule    nginxCanaryRule
	route   string // the canary's Route name
	by      string // the canary's path, for messages
}

// nginxCanaryAnnotations reads the canary annotations of an Ingress with canary: "true".
// A value not understood is a Warning and ignored; with neither a weight nor a header, the
// canary gets no request (as in ingress-nginx).
func nginxCanaryAnnotations(value func(string) (string, bool), bad func(key, v, want string)) *nginxCanaryRule {
	c := &nginxCanaryRule{total: 100}
	if v, ok := value(nginxCanaryWeightTotal); ok {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n < 1 || n > maxCanaryWeightTotal {
			bad(nginxCanaryWeightTotal, v, fmt.Sprintf("use a whole number from 1 to %d; 100 applies", maxCanaryWeightTotal))
		} else {
			c.total = uint32(n)
		}
	}
	if v, ok := value(nginxCanaryWeight); ok {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n > uint64(c.total) {
			bad(nginxCanaryWeight, v, fmt.Sprintf("use a whole number from 0 to %d (canary-weight-total)", c.total))
		} else {
			c.weight = uint32(n)
		}
	}
	if v, ok := value(nginxCanaryByHeader); ok {
		if !validHeaderName(v) {
			bad(nginxCanaryByHeader, v, "a header name")
		} else {
			c.header = strings.ToLower(v)
			c.value = "always"
			hv, hasValue := value(nginxCanaryByHeaderVal)
			if hasValue {
				if hv == "" || !validValue(hv) {
					bad(nginxCanaryByHeaderVal, hv, "a header value")
				} else {
					c.value = hv
				}
			}
			// canary-by-header-pattern: only without canary-by-header-value (which wins, as in
			// ingress-nginx); nginx searches the value, Envoy matches it whole, hence .* around.
			if pat, ok := value(nginxCanaryByHeaderPat); ok && !hasValue {
				re := "(?s).*(?:" + pat + ").*"
				if msg := regexProblem(re); pat == "" || msg != "" {
					bad(nginxCanaryByHeaderPat, pat, "an RE2 regular expression ("+cmp.Or(msg, "empty")+")")
				} else {
					c.value, c.regex = re, true
				}
			}
		}
	}
	if v, ok := value(nginxCanaryByCookie); ok {
		if (&ir.SessionPersistence{Cookie: &ir.SessionCookie{Name: v, Path: "/"}}).Validate() != nil {
			bad(nginxCanaryByCookie, v, "a cookie name: a token of letters, digits and !#$%&'*+-.^_`|~")
		} else {
			c.cookie = v
		}
	}
	return c
}

// cookieIs is the RE2 expression that matches a Cookie header carrying cookie name with
// value: among other cookies (separated by ";", or "," where Envoy joins several Cookie
// headers), whole name and value only.
func cookieIs(name, value string) string {
	return `(.*[;,]\s*)?` + regexp.QuoteMeta(name) + `=` + regexp.QuoteMeta(value) + `(\s*[;,].*)?`
}

// applyCanaries gives each canary path to the route of the older or newer Ingress serving
// the same host and path: its share of the requests by weight, and a route before it for the
// requests with the canary's header. A canary path no other Ingress serves with backends is
// not served (a Warning).
func (t *l7) applyCanaries(st *ingressState) {
	shadowed := map[*ingressRoute]string{} // the canary of each route, for messages
	for _, cp := range st.canaries {
		main, ok := st.routes[cp.claim]
		if !ok || main.route.Backends == nil {
			t.problems.Add(cp.owner, ir.SeverityWarning, ReasonInvalidAnnotation,
				"annotation %scanary: no other Ingress serves %s with backends; the canary path is not served", NginxAnnotationPrefix, describeMatch(cp.claim))
			continue
		}
		if by, taken := shadowed[main]; taken {
			t.problems.Add(cp.owner, ir.SeverityWarning, ReasonPathConflict,
				"annotation %scanary: %s already has a canary, %s (one per path, as in ingress-nginx); this one is not served", NginxAnnotationPrefix, describeMatch(cp.claim), by)
			continue
		}
		shadowed[main] = cp.by
		r := main.route
		r.Owners = append(r.Owners, cp.owner)
		if cp.rule.weight > 0 {
			// The main backends (an Ingress path has one) share total-weight, the canary weight.
			var out []ir.WeightedCluster
			if rest := cp.rule.total - cp.rule.weight; rest > 0 {
				for _, b := range r.Backends {
					b.Weight = rest
					out = append(out, b)
				}
			}
			r.Backends = append(out, ir.WeightedCluster{Cluster: cp.cluster, Weight: cp.rule.weight})
		}
		if cp.rule.header != "" || cp.rule.cookie != "" {
			vh := st.vhosts[cp.claim.domain]
			i := slices.Index(vh.paths, main)
			var mains []ir.WeightedCluster // "never" keeps the request on the main backends
			for _, b := range r.Backends {
				if b.Cluster != cp.cluster {
					mains = append(mains, b)
				}
			}
			mk := func(suffix string, m ir.StringMatch, canary bool) *ingressRoute {
				c := cloneRoute(r)
				c.Name = cp.route + "/canary-" + suffix + "/" + r.Name
				c.Owners = []ir.ObjectRef{cp.owner}
				c.Match.Headers = append(c.Match.Headers, m)
				c.Backends = mains
				if canary {
					c.Backends = []ir.WeightedCluster{{Cluster: cp.cluster, Weight: 1}}
				}
				return &ingressRoute{exact: main.exact, path: main.path, route: c, sslRedirect: main.sslRedirect}
			}
			// The header first, then the cookie, then the weight (ingress-nginx's order).
			var extra []*ingressRoute
			if cp.rule.header != "" {
				extra = append(extra, mk("header", ir.StringMatch{Name: cp.rule.header, Value: cp.rule.value, Regex: cp.rule.regex}, true))
				if cp.rule.value == "always" && !cp.rule.regex && cp.rule.weight > 0 {
					extra = append(extra, mk("never", ir.StringMatch{Name: cp.rule.header, Value: "never"}, false))
				}
			}
			if cp.rule.cookie != "" {
				extra = append(extra, mk("cookie", ir.StringMatch{Name: "cookie", Value: cookieIs(cp.rule.cookie, "always"), Regex: true}, true))
				if cp.rule.weight > 0 {
					extra = append(extra, mk("cookie-never", ir.StringMatch{Name: "cookie", Value: cookieIs(cp.rule.cookie, "never"), Regex: true}, false))
				}
			}
			vh.paths = slices.Insert(vh.paths, i, extra...)
		}
	}
}
