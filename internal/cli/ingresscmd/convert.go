// Package ingresscmd is `kubectl kubelb ingress convert`: it turns Ingresses (written for
// kubelb or for ingress-nginx) into Gateway API objects, and says per Ingress what cannot be
// expressed. See docs/ingress-nginx.md.
package ingresscmd

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/nginxurl"
)

const nginx = "nginx.ingress.kubernetes.io/"

// Options of a conversion.
type Options struct {
	// GatewayClass of the Gateways written (kubelb).
	GatewayClass string
	// GatewayName is the name of the Gateway written in each namespace.
	GatewayName string
}

// Result is a conversion: Gateways and HTTPRoutes, sorted by namespace and name, and per
// Ingress ("namespace/name") what could not be expressed.
type Result struct {
	Gateways   []*gwv1.Gateway
	HTTPRoutes []*gwv1.HTTPRoute
	// Policies are Envoy Gateway's SecurityPolicies and BackendTrafficPolicies (which kubelb
	// reads) for what Gateway API cannot say: client address lists, connect timeouts.
	Policies []*unstructured.Unstructured
	Notes    map[string][]string
}

// converted are the annotations the conversion reads; the others are reported.
var converted = []string{
	"ssl-redirect", "force-ssl-redirect", "rewrite-target", "use-regex", "app-root",
	"permanent-redirect", "permanent-redirect-code", "temporal-redirect", "temporal-redirect-code",
	"proxy-read-timeout", "proxy-send-timeout", "enable-cors", "cors-allow-origin",
	"cors-allow-methods", "cors-allow-headers", "cors-expose-headers", "cors-allow-credentials",
	"cors-max-age", "affinity", "session-cookie-name", "session-cookie-max-age",
	"canary", "canary-weight", "canary-by-header", "canary-by-header-value", "canary-by-header-pattern",
	"upstream-vhost", "mirror-target", "mirror-host", "mirror-request-body",
}

// Convert converts ings. It is pure: the same Ingresses give the same objects, in the same
// order, whatever their order.
func Convert(ings []networkingv1.Ingress, o Options) Result {
	o.GatewayClass, o.GatewayName = cmp.Or(o.GatewayClass, v1alpha1.DefaultClass), cmp.Or(o.GatewayName, "ingress")
	ings = slices.Clone(ings)
	slices.SortFunc(ings, func(a, b networkingv1.Ingress) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	res := Result{Notes: map[string][]string{}}
	gws := map[string]*gwv1.Gateway{}
	// Canary Ingresses are not converted on their own: their backend joins the rules of the
	// Ingress serving the same host and path.
	var canaries []*networkingv1.Ingress
	for i := range ings {
		if ings[i].Annotations[nginx+"canary"] == "true" {
			canaries = append(canaries, &ings[i])
		}
	}
	used := map[*networkingv1.Ingress]bool{}
	for i := range ings {
		ing := &ings[i]
		if ing.Annotations[nginx+"canary"] == "true" {
			continue
		}
		c := &conversion{ing: ing, o: o, key: ing.Namespace + "/" + ing.Name}
		gw := gws[ing.Namespace]
		if gw == nil {
			gw = &gwv1.Gateway{TypeMeta: metav1.TypeMeta{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway"},
				ObjectMeta: metav1.ObjectMeta{Name: o.GatewayName, Namespace: ing.Namespace},
				Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(o.GatewayClass),
					Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}}}
			gws[ing.Namespace] = gw
		}
		c.listeners(gw)
		routes := c.routes(canaries, used)
		res.HTTPRoutes = append(res.HTTPRoutes, routes...)
		res.Policies = append(res.Policies, c.policies(routes)...)
		if len(c.notes) > 0 {
			res.Notes[c.key] = c.notes
		}
	}
	for _, cn := range canaries {
		if !used[cn] {
			k := cn.Namespace + "/" + cn.Name
			res.Notes[k] = append(res.Notes[k], "a canary Ingress whose host and path no other Ingress serves: not converted")
		}
	}
	for _, ns := range slices.Sorted(func(yield func(string) bool) {
		for k := range gws {
			if !yield(k) {
				return
			}
		}
	}) {
		res.Gateways = append(res.Gateways, gws[ns])
	}
	return res
}

type conversion struct {
	ing   *networkingv1.Ingress
	o     Options
	key   string
	notes []string
	// tls: the hosts of the Ingress with a certificate, the HTTPS listener's name of each.
	tls map[string]string
}

func (c *conversion) note(format string, args ...any) {
	c.notes = append(c.notes, fmt.Sprintf(format, args...))
}

// noteOnce is note for what every rule of the Ingress would say again.
func (c *conversion) noteOnce(format string, args ...any) {
	if n := fmt.Sprintf(format, args...); !slices.Contains(c.notes, n) {
		c.notes = append(c.notes, n)
	}
}

func (c *conversion) ann(k string) (string, bool) {
	v, ok := c.ing.Annotations[nginx+k]
	return strings.TrimSpace(v), ok
}

// listeners adds to gw an HTTPS listener per host of the Ingress's TLS entries.
func (c *conversion) listeners(gw *gwv1.Gateway) {
	c.tls = map[string]string{}
	for _, t := range c.ing.Spec.TLS {
		if t.SecretName == "" {
			c.note("a TLS entry without secretName (the default certificate): a Gateway listener needs a certificate; not converted")
			continue
		}
		if len(t.Hosts) == 0 {
			c.note("a TLS entry without hosts: written as an HTTPS listener without hostname")
		}
		hosts := t.Hosts
		if len(hosts) == 0 {
			hosts = []string{""}
		}
		for _, h := range hosts {
			name := "https-" + listenerName(h)
			c.tls[h] = name
			if slices.ContainsFunc(gw.Spec.Listeners, func(l gwv1.Listener) bool { return string(l.Name) == name }) {
				continue
			}
			l := gwv1.Listener{Name: gwv1.SectionName(name), Port: 443, Protocol: gwv1.HTTPSProtocolType,
				TLS: &gwv1.ListenerTLSConfig{Mode: ptr.To(gwv1.TLSModeTerminate),
					CertificateRefs: []gwv1.SecretObjectReference{{Name: gwv1.ObjectName(t.SecretName)}}}}
			if h != "" {
				l.Hostname = ptr.To(gwv1.Hostname(h))
			}
			gw.Spec.Listeners = append(gw.Spec.Listeners, l)
		}
	}
	slices.SortStableFunc(gw.Spec.Listeners[1:], func(a, b gwv1.Listener) int { return cmp.Compare(a.Name, b.Name) })
}

// listenerName is a listener name for host h: its labels joined with "-" ("*" as "wildcard").
func listenerName(h string) string {
	if h == "" {
		return "default"
	}
	return strings.ReplaceAll(strings.ReplaceAll(h, "*", "wildcard"), ".", "-")
}

// captureIdiom is ingress-nginx's prefix-stripping idiom: path "/p(/|$)(.*)" with target "/$2".
var captureIdiom = regexp.MustCompile(`^(/.*?)\(/\|\$\)\(\.\*\)$`)

// routes writes the HTTPRoutes of the Ingress: one per host (and one for the rules without
// a host and the default backend), plus one redirecting HTTP to HTTPS for hosts with TLS
// when the Ingress redirects.
func (c *conversion) routes(canaries []*networkingv1.Ingress, used map[*networkingv1.Ingress]bool) []*gwv1.HTTPRoute {
	c.unsupported()
	filters, rewrite, regex := c.filters()
	ssl := len(c.tls) > 0
	if v, ok := c.ann("ssl-redirect"); ok && v == "false" {
		ssl = false
	}
	force, _ := c.ann("force-ssl-redirect")

	byHost := map[string][]gwv1.HTTPRouteRule{}
	var hosts []string
	add := func(h string, r gwv1.HTTPRouteRule) {
		if _, ok := byHost[h]; !ok {
			hosts = append(hosts, h)
		}
		byHost[h] = append(byHost[h], r)
	}
	for _, rule := range c.ing.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		if _, ok := byHost[rule.Host]; !ok {
			if root, ok := c.ann("app-root"); ok {
				add(rule.Host, gwv1.HTTPRouteRule{
					Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchExact), Value: ptr.To("/")}}},
					Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gwv1.HTTPRequestRedirectFilter{
						Path: &gwv1.HTTPPathModifier{Type: gwv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr.To(root)}, StatusCode: ptr.To(302)}}}})
			}
		}
		for _, p := range rule.HTTP.Paths {
			match, f := c.pathMatch(p, rewrite, regex)
			backends, ok := c.backendRefs(p.Backend)
			if !ok {
				continue
			}
			r := gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{match}, Filters: append(slices.Clone(filters), f...), BackendRefs: backends}
			if redirects(r.Filters) {
				r.BackendRefs = nil // the redirect answers
			} else {
				c.session(&r)
				c.upstreamHost(&r)
				c.mirror(&r)
			}
			for _, hr := range c.canary(&r, rule.Host, p, canaries, used) {
				add(rule.Host, hr)
			}
			add(rule.Host, r)
		}
	}
	if db := c.ing.Spec.DefaultBackend; db != nil {
		if backends, ok := c.backendRefs(*db); ok {
			r := gwv1.HTTPRouteRule{Filters: slices.Clone(filters), BackendRefs: backends}
			if redirects(r.Filters) {
				r.BackendRefs = nil
			} else {
				c.session(&r)
				c.upstreamHost(&r)
				c.mirror(&r)
			}
			add("", r)
			if len(c.ing.Spec.Rules) > 0 {
				c.note("defaultBackend: written as a route for any host; ingress-nginx also uses it for the paths of this Ingress's hosts that match no rule, which the HTTPRoutes of those hosts do not")
			}
		}
	}
	var out []*gwv1.HTTPRoute
	for i, h := range hosts {
		name := c.ing.Name
		if len(hosts) > 1 {
			name = fmt.Sprintf("%s-%d", c.ing.Name, i)
		}
		hr := c.route(name, h, byHost[h])
		_, hasTLS := c.tls[h]
		if !hasTLS && h != "" {
			_, hasTLS = c.tls["*."+strings.SplitN(h, ".", 2)[len(strings.SplitN(h, ".", 2))-1]]
		}
		if (ssl && hasTLS) || force == "true" {
			// The rules on HTTPS; on HTTP, one rule redirecting to HTTPS.
			if listener, ok := c.tls[h]; ok {
				hr.Spec.ParentRefs = []gwv1.ParentReference{{Name: gwv1.ObjectName(c.o.GatewayName), SectionName: ptr.To(gwv1.SectionName(listener))}}
			} else {
				c.note("host %q redirects to HTTPS (force-ssl-redirect) but the Ingress has no certificate for it: the Gateway serves it over HTTPS only if a listener of another Ingress does", h)
			}
			redirect := c.route(name+"-to-https", h, []gwv1.HTTPRouteRule{{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestRedirect,
				RequestRedirect: &gwv1.HTTPRequestRedirectFilter{Scheme: ptr.To("https"), StatusCode: ptr.To(301)}}}}})
			redirect.Spec.ParentRefs = []gwv1.ParentReference{{Name: gwv1.ObjectName(c.o.GatewayName), SectionName: ptr.To(gwv1.SectionName("http"))}}
			out = append(out, hr, redirect)
			continue
		}
		out = append(out, hr)
	}
	return out
}

func (c *conversion) route(name, host string, rules []gwv1.HTTPRouteRule) *gwv1.HTTPRoute {
	hr := &gwv1.HTTPRoute{TypeMeta: metav1.TypeMeta{APIVersion: gwv1.GroupVersion.String(), Kind: "HTTPRoute"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ing.Namespace},
		Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: gwv1.ObjectName(c.o.GatewayName)}}},
			Rules: rules}}
	if host != "" {
		hr.Spec.Hostnames = []gwv1.Hostname{gwv1.Hostname(host)}
	}
	// The stream idle timeout has no Gateway API field; kubelb reads its annotation on an
	// HTTPRoute too.
	idle := 0
	for _, k := range []string{"proxy-read-timeout", "proxy-send-timeout"} {
		if v, ok := c.ann(k); ok {
			if n, err := strconv.Atoi(strings.TrimSuffix(v, "s")); err == nil {
				idle = max(idle, n)
			}
		}
	}
	if idle > 0 {
		hr.Annotations = map[string]string{v1alpha1.AnnotationStreamIdleTimeout: fmt.Sprintf("%ds", idle)}
	}
	return hr
}

// unsupported notes the annotations the conversion does not read.
func (c *conversion) unsupported() {
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range c.ing.Annotations {
			if !yield(k) {
				return
			}
		}
	}) {
		name, ok := strings.CutPrefix(k, nginx)
		if !ok || slices.Contains(converted, name) {
			continue
		}
		switch {
		case strings.HasSuffix(name, "snippet"):
			c.note("%s: a snippet of nginx configuration; it has no equivalent and kubelb never honours one", name)
		case slices.Contains(expressedByPolicies, name):
			// A policy (policies), or a note of why not.
		case name == "backend-protocol":
			c.note("%s: set appProtocol kubernetes.io/h2c (or a BackendTLSPolicy for HTTPS) on the backend Service's port instead", name)
		case name == "proxy-body-size":
			c.note("%s: Gateway API has no request body limit; not expressed", name)
		case name == nginxurl.AuthURL:
			c.note("%s: Gateway API has no external authentication, and an Envoy Gateway SecurityPolicy's extAuth asks the service at its path followed by the request's (nginx asks the URL as written); not expressed (kubelb honours auth-url on the Ingress)", name)
		default:
			c.note("%s: not expressed", name)
		}
	}
}

// filters are the filters every rule of the Ingress gets: a redirect (permanent- or
// temporal-redirect) or CORS; and the rewrite-target and whether paths are regexes.
func (c *conversion) filters() ([]gwv1.HTTPRouteFilter, string, bool) {
	var out []gwv1.HTTPRouteFilter
	for _, r := range []struct {
		key, codeKey string
		code         int
	}{{"temporal-redirect", "temporal-redirect-code", 302}, {"permanent-redirect", "permanent-redirect-code", 301}} {
		v, ok := c.ann(r.key)
		if !ok {
			continue
		}
		if cv, ok := c.ann(r.codeKey); ok {
			if n, err := strconv.Atoi(cv); err == nil {
				r.code = n
			}
		}
		rd, msg := redirectFilter(v, r.code)
		if msg != "" {
			c.note("%s: %s; not expressed", r.key, msg)
		} else {
			out = append(out, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestRedirect, RequestRedirect: rd})
		}
		break
	}
	if v, _ := c.ann("enable-cors"); v == "true" {
		out = append(out, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterCORS, CORS: c.cors()})
	}
	rewrite, hasRewrite := c.ann("rewrite-target")
	regex, _ := c.ann("use-regex")
	if len(out) > 0 && out[0].Type == gwv1.HTTPRouteFilterRequestRedirect && hasRewrite {
		c.note("rewrite-target with a redirect: the redirect answers; the rewrite is left out")
		rewrite = ""
	}
	return out, rewrite, regex == "true" || hasRewrite
}

// redirects tells whether filters hold a RequestRedirect.
func redirects(filters []gwv1.HTTPRouteFilter) bool {
	return slices.ContainsFunc(filters, func(f gwv1.HTTPRouteFilter) bool { return f.Type == gwv1.HTTPRouteFilterRequestRedirect })
}

// upstreamHost writes upstream-vhost as the hostname of the rule's URLRewrite (with its path
// rewrite, when it has one): Gateway API's hostname rewrite is a host name without a port.
func (c *conversion) upstreamHost(r *gwv1.HTTPRouteRule) {
	v, ok := c.ann("upstream-vhost")
	if !ok {
		return
	}
	if len(validation.IsDNS1123Subdomain(strings.ToLower(v))) > 0 {
		c.noteOnce("upstream-vhost: %q is not a host name without a port (Gateway API's hostname rewrite); not expressed", v)
		return
	}
	host := gwv1.PreciseHostname(strings.ToLower(v))
	for i := range r.Filters {
		if f := &r.Filters[i]; f.Type == gwv1.HTTPRouteFilterURLRewrite && f.URLRewrite != nil {
			f.URLRewrite = f.URLRewrite.DeepCopy()
			f.URLRewrite.Hostname = &host
			return
		}
	}
	r.Filters = append(r.Filters, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterURLRewrite, URLRewrite: &gwv1.HTTPURLRewriteFilter{Hostname: &host}})
}

// mirror adds mirror-target to a rule that forwards: a RequestMirror filter to the Service
// the URL names (nginxurl.Mirror, as the hub reads it). Gateway API's mirror keeps the
// request's Host (mirror-host is noted), and copies whole requests (with
// mirror-request-body off nothing is written, as kubelb mirrors nothing then).
func (c *conversion) mirror(r *gwv1.HTTPRouteRule) {
	v, ok := c.ann(nginxurl.MirrorTarget)
	if !ok {
		return
	}
	svc, msg := nginxurl.Mirror(v, c.ing.Namespace)
	if msg == "" && svc.TLS {
		msg = "kubelb copies requests to a Service of the Ingress in plain HTTP: write http://"
	}
	if msg != "" {
		c.noteOnce("%s: %s; not expressed", nginxurl.MirrorTarget, msg)
		return
	}
	if b, ok := c.ann("mirror-request-body"); ok && strings.EqualFold(b, "off") {
		c.noteOnce("mirror-request-body: off: a RequestMirror copies whole requests, bodies included; mirror-target is not expressed")
		return
	}
	if h, ok := c.ann("mirror-host"); ok {
		c.noteOnce("mirror-host: %q: Gateway API's RequestMirror keeps the request's Host; not expressed", h)
	}
	r.Filters = append(r.Filters, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{
		BackendRef: gwv1.BackendObjectReference{Name: gwv1.ObjectName(svc.Name), Port: ptr.To(gwv1.PortNumber(svc.Port))}}})
}
