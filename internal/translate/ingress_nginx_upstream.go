package translate

import (
	"net"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"kubelb.dev/kubelb/internal/ir"
)

// The ingress-nginx annotations of the upstream kubelb honours (without the prefix).
const (
	nginxUpstreamVhost  = "upstream-vhost"
	nginxUpstreamHashBy = "upstream-hash-by"
	nginxLoadBalance    = "load-balance"
)

// nginxUpstream is what upstream-vhost, upstream-hash-by and load-balance ask for, checked.
type nginxUpstream struct {
	// host is the Host header the backends get (upstream-vhost); "" keeps the client's.
	host string
	// hash is what a request is hashed on to choose its endpoint (upstream-hash-by); the
	// Ingress's clusters then balance by Maglev (consistent hashing).
	hash *ir.HashPolicy
	// lb is the clusters' load balancer (load-balance), when no hash is asked for.
	lb string
}

// nginxUpstreamAnnotations reads upstream-vhost, upstream-hash-by and load-balance. A value
// kubelb does not understand is reported (bad) and ignored.
func nginxUpstreamAnnotations(value func(string) (string, bool), bad func(key, v, want string)) nginxUpstream {
	var out nginxUpstream
	if v, ok := value(nginxUpstreamVhost); ok {
		if nginxHostHeader(v) {
			out.host = strings.ToLower(v)
		} else {
			bad(nginxUpstreamVhost, v, "a host name, optionally with :port (no nginx variables)")
		}
	}
	if v, ok := value(nginxUpstreamHashBy); ok {
		if out.hash = nginxHashBy(v); out.hash == nil {
			bad(nginxUpstreamHashBy, v, "kubelb hashes on one of $remote_addr, $binary_remote_addr, $http_<header> and $cookie_<name>")
		}
	}
	if v, ok := value(nginxLoadBalance); ok {
		switch v {
		case "round_robin":
			out.lb = ir.LBRoundRobin
		case "ewma":
			out.lb = ir.LBLeastRequest
		default:
			bad(nginxLoadBalance, v, `use "round_robin" or "ewma"`)
		}
	}
	return out
}

// nginxHostHeader reports whether v is a Host header kubelb sends: a DNS name, optionally
// with a port from 1 to 65535.
func nginxHostHeader(v string) bool {
	host, port := v, ""
	if h, p, err := net.SplitHostPort(v); err == nil {
		host, port = h, p
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return false
		}
	}
	return host != "" && len(validation.IsDNS1123Subdomain(strings.ToLower(host))) == 0
}

// nginxHashBy reads upstream-hash-by's one nginx variable: the client's address
// ($remote_addr, $binary_remote_addr), a request header ($http_<name>, underscores standing
// for dashes as in nginx) or a cookie ($cookie_<name>); nil for anything else (several
// variables, $request_uri, text).
func nginxHashBy(v string) *ir.HashPolicy {
	var h *ir.HashPolicy
	switch {
	case v == "$remote_addr" || v == "$binary_remote_addr":
		h = &ir.HashPolicy{SourceIP: true}
	case strings.HasPrefix(v, "$http_"):
		h = &ir.HashPolicy{Header: strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(v, "$http_")), "_", "-")}
	case strings.HasPrefix(v, "$cookie_"):
		h = &ir.HashPolicy{Cookie: strings.TrimPrefix(v, "$cookie_")}
	default:
		return nil
	}
	if h.Validate() != nil {
		return nil
	}
	return h
}

// cluster applies load-balance and upstream-hash-by to one of the Ingress's clusters. A
// cluster that already hashes on the client's address (the Service's sessionAffinity
// ClientIP) keeps that, with a Warning on owner.
func (u *nginxUpstream) cluster(t *l7, owner ir.ObjectRef, c *ir.Cluster) {
	lb := u.lb
	if u.hash != nil {
		lb = ir.LBMaglev
	}
	if lb == "" {
		return
	}
	if c.HashSourceIP {
		t.problems.Add(owner, ir.SeverityWarning, ReasonInvalidAnnotation,
			"annotations %s%s and %s%s: the backend Service keeps each client on one endpoint (sessionAffinity: ClientIP), which wins; they are ignored",
			NginxAnnotationPrefix, nginxLoadBalance, NginxAnnotationPrefix, nginxUpstreamHashBy)
		return
	}
	if c.Traffic == nil {
		c.Traffic = &ir.ClusterTraffic{}
	}
	c.Traffic.LB = lb
}

// route applies upstream-vhost and upstream-hash-by to a route to the Ingress's backends.
func (u *nginxUpstream) route(route *ir.Route) {
	if u.host != "" {
		if route.Rewrite == nil {
			route.Rewrite = &ir.URLRewrite{}
		}
		route.Rewrite.Hostname = u.host
	}
	if u.hash != nil && len(route.Backends) > 0 {
		h := *u.hash
		route.Hash = &h
	}
}
