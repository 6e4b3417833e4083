package ingresscmd

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// redirectFilter is the RequestRedirect of URL v with status code, or why there is none.
func redirectFilter(v string, code int) (*gwv1.HTTPRequestRedirectFilter, string) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return nil, fmt.Sprintf("%q is not an absolute http or https URL", v)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Sprintf("%q has a query or fragment, which a RequestRedirect cannot set", v)
	}
	switch code {
	case 301, 302, 303, 307, 308:
	default:
		return nil, fmt.Sprintf("status code %d is not one Gateway API redirects with", code)
	}
	rd := &gwv1.HTTPRequestRedirectFilter{Scheme: ptr.To(u.Scheme), Hostname: ptr.To(gwv1.PreciseHostname(u.Hostname())), StatusCode: ptr.To(code),
		Path: &gwv1.HTTPPathModifier{Type: gwv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr.To(cmpOr(u.EscapedPath(), "/"))}}
	if p := u.Port(); p != "" {
		n, _ := strconv.Atoi(p)
		rd.Port = ptr.To(gwv1.PortNumber(n))
	}
	return rd, ""
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// list splits a comma-separated annotation.
func list(v string) []string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// cors is the CORS filter of enable-cors, with ingress-nginx's defaults.
func (c *conversion) cors() *gwv1.HTTPCORSFilter {
	f := &gwv1.HTTPCORSFilter{AllowCredentials: ptr.To(true), MaxAge: 1728000}
	origins := []string{"*"}
	if v, ok := c.ann("cors-allow-origin"); ok {
		origins = list(v)
	}
	for _, o := range origins {
		f.AllowOrigins = append(f.AllowOrigins, gwv1.CORSOrigin(o))
	}
	methods := "GET, PUT, POST, DELETE, PATCH, OPTIONS"
	if v, ok := c.ann("cors-allow-methods"); ok {
		methods = v
	}
	for _, m := range list(methods) {
		f.AllowMethods = append(f.AllowMethods, gwv1.HTTPMethodWithWildcard(m))
	}
	headers := "DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,Range,Authorization"
	if v, ok := c.ann("cors-allow-headers"); ok {
		headers = v
	}
	for _, h := range list(headers) {
		f.AllowHeaders = append(f.AllowHeaders, gwv1.HTTPHeaderName(h))
	}
	if v, ok := c.ann("cors-expose-headers"); ok {
		for _, h := range list(v) {
			f.ExposeHeaders = append(f.ExposeHeaders, gwv1.HTTPHeaderName(h))
		}
	}
	if v, ok := c.ann("cors-allow-credentials"); ok {
		f.AllowCredentials = ptr.To(v == "true")
	}
	if v, ok := c.ann("cors-max-age"); ok {
		if n, err := strconv.Atoi(v); err == nil {
			f.MaxAge = int32(n)
		}
	}
	return f
}

// pathMatch is the match of an Ingress path, and the rewrite filter rewrite-target makes of
// it. Regex paths (use-regex, rewrite-target) become RegularExpression matches, except
// ingress-nginx's prefix-stripping idiom "/p(/|$)(.*)" with "/$2", which becomes PathPrefix /p
// with ReplacePrefixMatch /.
func (c *conversion) pathMatch(p networkingv1.HTTPIngressPath, rewrite string, regex bool) (gwv1.HTTPRouteMatch, []gwv1.HTTPRouteFilter) {
	path := cmpOr(p.Path, "/")
	typ := gwv1.PathMatchPathPrefix
	if p.PathType != nil && *p.PathType == networkingv1.PathTypeExact {
		typ = gwv1.PathMatchExact
	} else if regex {
		if m := captureIdiom.FindStringSubmatch(path); m != nil && rewrite == "/$2" {
			return gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To(m[1])}},
				[]gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterURLRewrite, URLRewrite: &gwv1.HTTPURLRewriteFilter{
					Path: &gwv1.HTTPPathModifier{Type: gwv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr.To("/")}}}}
		}
		typ = gwv1.PathMatchRegularExpression
		path = "(?i)" + path + ".*"
	}
	match := gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: ptr.To(typ), Value: ptr.To(path)}}
	if rewrite == "" {
		return match, nil
	}
	if strings.Contains(rewrite, "$") {
		c.note("rewrite-target %q on path %q: Gateway API rewrites cannot use the path's groups; the path is converted without the rewrite", rewrite, p.Path)
		return match, nil
	}
	// nginx replaces the whole path with the target.
	return match, []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterURLRewrite, URLRewrite: &gwv1.HTTPURLRewriteFilter{
		Path: &gwv1.HTTPPathModifier{Type: gwv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr.To(rewrite)}}}}
}

// backendRefs is the backend of an Ingress path, or false (noted) when it cannot be one.
func (c *conversion) backendRefs(b networkingv1.IngressBackend) ([]gwv1.HTTPBackendRef, bool) {
	if b.Service == nil {
		c.note("a resource backend: Gateway API routes reach Services; not converted")
		return nil, false
	}
	if b.Service.Port.Number == 0 {
		c.note("backend %s names port %q: a backendRef needs the port's number; not converted", b.Service.Name, b.Service.Port.Name)
		return nil, false
	}
	return []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
		Name: gwv1.ObjectName(b.Service.Name), Port: ptr.To(gwv1.PortNumber(b.Service.Port.Number))}}}}, true
}

// session adds cookie affinity (affinity: cookie) to a rule.
func (c *conversion) session(r *gwv1.HTTPRouteRule) {
	if v, _ := c.ann("affinity"); v != "cookie" {
		return
	}
	sp := &gwv1.SessionPersistence{Type: ptr.To(gwv1.CookieBasedSessionPersistence), SessionName: ptr.To("INGRESSCOOKIE")}
	if v, ok := c.ann("session-cookie-name"); ok {
		sp.SessionName = ptr.To(v)
	}
	if v, ok := c.ann("session-cookie-max-age"); ok {
		sp.AbsoluteTimeout = ptr.To(gwv1.Duration(strings.TrimSuffix(v, "s") + "s"))
		sp.CookieConfig = &gwv1.CookieConfig{LifetimeType: ptr.To(gwv1.PermanentCookieLifetimeType)}
	}
	r.SessionPersistence = sp
}

// canary folds the canary Ingresses serving host and path p into rule r: canary-weight
// shares r's requests by weight; canary-by-header adds a rule before r (returned) sending
// requests with the header to the canary.
func (c *conversion) canary(r *gwv1.HTTPRouteRule, host string, p networkingv1.HTTPIngressPath, canaries []*networkingv1.Ingress, used map[*networkingv1.Ingress]bool) []gwv1.HTTPRouteRule {
	var before []gwv1.HTTPRouteRule
	for _, cn := range canaries {
		if cn.Namespace != c.ing.Namespace {
			continue
		}
		for _, rule := range cn.Spec.Rules {
			if rule.Host != host || rule.HTTP == nil {
				continue
			}
			for _, cp := range rule.HTTP.Paths {
				if cp.Path != p.Path {
					continue
				}
				cc := &conversion{ing: cn}
				refs, ok := cc.backendRefs(cp.Backend)
				if !ok {
					continue
				}
				used[cn] = true
				if h, ok := cc.ann("canary-by-header"); ok {
					match := gwv1.HTTPHeaderMatch{Name: gwv1.HTTPHeaderName(h), Value: "always"}
					if v, ok := cc.ann("canary-by-header-value"); ok {
						match.Value = v
					} else if pat, ok := cc.ann("canary-by-header-pattern"); ok && pat != "" {
						// nginx searches the value; a RegularExpression header match is whole.
						match.Type, match.Value = ptr.To(gwv1.HeaderMatchRegularExpression), "(?s).*(?:"+pat+").*"
					}
					m := *r.Matches[0].DeepCopy()
					m.Headers = []gwv1.HTTPHeaderMatch{match}
					before = append(before, gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{m}, Filters: r.Filters, BackendRefs: refs})
				}
				if w, ok := cc.ann("canary-weight"); ok {
					n, err := strconv.Atoi(w)
					if err != nil || n < 0 || n > 100 {
						c.note("canary %s/%s: canary-weight %q is not from 0 to 100; not converted", cn.Namespace, cn.Name, w)
						continue
					}
					r.BackendRefs[0].Weight = ptr.To(int32(100 - n))
					refs[0].Weight = ptr.To(int32(n))
					r.BackendRefs = append(r.BackendRefs, refs...)
				}
			}
		}
	}
	return before
}
