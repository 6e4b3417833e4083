package ingresscmd

import (
	"net/netip"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/internal/sourcerange"
)

// The policies a conversion writes are Envoy Gateway's kinds, which kubelb reads
// (docs/l7.md#traffic-policies): a SecurityPolicy for the client address lists and basic
// authentication, a BackendTrafficPolicy for the connect timeout and rate limits, each targeting the HTTPRoutes that serve the
// Ingress's paths (not the routes that only redirect to HTTPS, which answer every client, as
// ingress-nginx does).
const policyAPIVersion = "gateway.envoyproxy.io/v1alpha1"

// expressedByPolicies are the annotations policies express (when their values can be read).
var expressedByPolicies = []string{"allowlist-source-range", "whitelist-source-range", "denylist-source-range", "proxy-connect-timeout",
	"auth-type", "auth-secret", "auth-secret-type", "limit-rps", "limit-rpm", "limit-burst-multiplier",
	"upstream-hash-by", "load-balance"}

// policies are the policies of the Ingress for its serving routes.
func (c *conversion) policies(routes []*gwv1.HTTPRoute) []*unstructured.Unstructured {
	var targets []any
	for _, r := range routes {
		if !strings.HasSuffix(r.Name, "-to-https") {
			targets = append(targets, map[string]any{"group": gwv1.GroupName, "kind": "HTTPRoute", "name": r.Name})
		}
	}
	if len(targets) == 0 {
		return nil
	}
	var out []*unstructured.Unstructured
	policy := func(kind string, spec map[string]any) {
		spec["targetRefs"] = targets
		out = append(out, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": policyAPIVersion, "kind": kind,
			"metadata": map[string]any{"name": c.ing.Name, "namespace": c.ing.Namespace},
			"spec":     spec,
		}})
	}
	key := "allowlist-source-range"
	allowV, allowSet := c.ann(key)
	if !allowSet {
		key = "whitelist-source-range"
		allowV, allowSet = c.ann(key)
	}
	security := map[string]any{} // one SecurityPolicy: authorization, basicAuth
	denyV, denySet := c.ann("denylist-source-range")
	allow, allowOK := c.cidrs(key, allowV, allowSet)
	deny, denyOK := c.cidrs("denylist-source-range", denyV, denySet)
	if (allowSet || denySet) && allowOK && denyOK {
		// Denials first, then the allow list, as ingress-nginx writes its rules; with an
		// allow list, the rest is denied.
		var rules []any
		if len(deny) > 0 {
			rules = append(rules, map[string]any{"name": "denylist", "action": "Deny", "principal": map[string]any{"clientCIDRs": deny}})
		}
		if len(allow) > 0 {
			rules = append(rules, map[string]any{"name": "allowlist", "action": "Allow", "principal": map[string]any{"clientCIDRs": allow}})
		}
		def := "Allow"
		if allowSet {
			def = "Deny"
		}
		security["authorization"] = map[string]any{"defaultAction": def, "rules": rules}
	}
	if users := c.basicAuthUsers(); users != "" {
		security["basicAuth"] = map[string]any{"users": map[string]any{"name": users}}
	}
	if len(security) > 0 {
		policy("SecurityPolicy", security)
	}
	traffic := map[string]any{}
	if v, ok := c.ann("proxy-connect-timeout"); ok {
		if n, err := strconv.Atoi(strings.TrimSuffix(v, "s")); err == nil && n > 0 {
			traffic["timeout"] = map[string]any{"tcp": map[string]any{"connectTimeout": (time.Duration(n) * time.Second).String()}}
		} else {
			c.note("proxy-connect-timeout: %q is no number of seconds; not expressed", v)
		}
	}
	if lb := c.loadBalancer(); lb != nil {
		traffic["loadBalancer"] = lb
	}
	if rules := c.rateLimitRules(); len(rules) > 0 {
		traffic["rateLimit"] = map[string]any{"type": "Local", "local": map[string]any{"rules": rules}}
	}
	if len(traffic) > 0 {
		policy("BackendTrafficPolicy", traffic)
	}
	return out
}

// rateLimitRules are the local rate-limit rules of limit-rps and limit-rpm: per client
// address (sourceCIDR Distinct, one rule for IPv4 and one for IPv6 clients), the requests a
// second or a minute. Envoy Gateway's limits have no burst: limit-burst-multiplier is noted.
func (c *conversion) rateLimitRules() []any {
	var rules []any
	for _, l := range []struct{ key, unit string }{{"limit-rps", "Second"}, {"limit-rpm", "Minute"}} {
		v, ok := c.ann(l.key)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			c.note("%s: %q is no number of requests; not expressed", l.key, v)
			continue
		}
		for _, all := range []string{"0.0.0.0/0", "::/0"} {
			rules = append(rules, map[string]any{
				"clientSelectors": []any{map[string]any{"sourceCIDR": map[string]any{"type": "Distinct", "value": all}}},
				"limit":           map[string]any{"requests": int64(n), "unit": l.unit},
			})
		}
	}
	if len(rules) > 0 {
		c.note("limit-rps, limit-rpm: a BackendTrafficPolicy rateLimit allows the requests a second or a minute per client address without ingress-nginx's burst (the limit × limit-burst-multiplier, default 5) and answers 429, not 503; kubelb honours the annotations with the burst on the Ingress")
	}
	return rules
}

// cidrs reads a comma-separated list of client addresses (annotation key, value v, set): its
// canonical CIDRs, or false, noted, when an entry is no address or CIDR.
func (c *conversion) cidrs(key, v string, set bool) ([]any, bool) {
	if !set {
		return nil, true
	}
	var out []any
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		if a, err := netip.ParseAddr(e); err == nil { // a single address, as ingress-nginx reads it
			e = netip.PrefixFrom(a, a.BitLen()).String()
		}
		p, err := sourcerange.Parse(e)
		if err != nil {
			c.note("%s: %q is no address or CIDR; the list is not expressed (kubelb refuses every client of the Ingress until it is fixed)", key, e)
			return nil, false
		}
		out = append(out, p)
	}
	return out, true
}

// basicAuthUsers is the Secret of basic authentication users a SecurityPolicy names for
// auth-type basic and auth-secret (a Secret of the Ingress's namespace, auth-file), "" with a
// note when there is none or it cannot be expressed. Envoy Gateway reads the users from the
// key .htpasswd, ingress-nginx from auth: the note says to copy it.
func (c *conversion) basicAuthUsers() string {
	typ, ok := c.ann("auth-type")
	if !ok {
		return ""
	}
	if typ != "basic" {
		c.note("auth-type: %q is not basic; kubelb and Envoy Gateway serve basic authentication only; not expressed", typ)
		return ""
	}
	ref, _ := c.ann("auth-secret")
	ns, name, cross := strings.Cut(ref, "/")
	if !cross {
		ns, name = c.ing.Namespace, ref
	}
	switch st, _ := c.ann("auth-secret-type"); {
	case name == "":
		c.note("auth-type: basic without auth-secret; not expressed")
	case ns != c.ing.Namespace:
		c.note("auth-secret: %q is in another namespace; a SecurityPolicy's users must be a Secret of its namespace; not expressed", ref)
	case st != "" && st != "auth-file":
		c.note("auth-secret-type: %q; only auth-file is expressed (write the users as htpasswd lines under .htpasswd); not expressed", st)
	default:
		c.note("auth-secret: the SecurityPolicy reads the users from Secret %s/%s key .htpasswd (ingress-nginx's key is auth: copy it); kubelb serves only {SHA} lines (htpasswd -s)", ns, name)
		return name
	}
	return ""
}

// loadBalancer is the BackendTrafficPolicy's loadBalancer of upstream-hash-by (a consistent
// hash on the client's address, a header or a cookie; it wins, as in ingress-nginx) or
// load-balance (round_robin; ewma as least request, the nearest Envoy has); nil for none.
func (c *conversion) loadBalancer() map[string]any {
	if v, ok := c.ann("upstream-hash-by"); ok {
		var hash map[string]any
		switch {
		case v == "$remote_addr" || v == "$binary_remote_addr":
			hash = map[string]any{"type": "SourceIP"}
		case strings.HasPrefix(v, "$http_") && len(v) > len("$http_"):
			hash = map[string]any{"type": "Header", "header": map[string]any{"name": strings.ReplaceAll(strings.TrimPrefix(v, "$http_"), "_", "-")}}
		case strings.HasPrefix(v, "$cookie_") && len(v) > len("$cookie_"):
			hash = map[string]any{"type": "Cookie", "cookie": map[string]any{"name": strings.TrimPrefix(v, "$cookie_")}}
		default:
			c.note("upstream-hash-by: %q is not one of $remote_addr, $http_<header>, $cookie_<name>; not expressed", v)
		}
		if hash != nil {
			if _, set := c.ann("load-balance"); set {
				c.note("load-balance: upstream-hash-by wins, as in ingress-nginx; not expressed")
			}
			return map[string]any{"type": "ConsistentHash", "consistentHash": hash}
		}
	}
	switch v, _ := c.ann("load-balance"); v {
	case "":
	case "round_robin":
		return map[string]any{"type": "RoundRobin"}
	case "ewma":
		c.note("load-balance: ewma written as LeastRequest (Envoy has no latency EWMA balancer)")
		return map[string]any{"type": "LeastRequest"}
	default:
		c.note("load-balance: %q is not round_robin or ewma; not expressed", v)
	}
	return nil
}
