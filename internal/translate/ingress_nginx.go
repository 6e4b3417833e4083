package translate

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/re2"
	"kubelb.dev/kubelb/internal/sourcerange"
)

// NginxAnnotationPrefix is the prefix of ingress-nginx's annotations. kubelb honours the
// ones docs/ingress-nginx.md lists on Ingresses of its class, so that Ingresses written for
// ingress-nginx keep working; the others are named in one Warning.
const NginxAnnotationPrefix = "nginx.ingress.kubernetes.io/"

// ReasonUnsupportedAnnotation: an Ingress carries ingress-nginx annotations kubelb does not
// honour (snippets, never; the others not yet); one Warning names them all.
const ReasonUnsupportedAnnotation = "UnsupportedAnnotation"

// The ingress-nginx annotations kubelb honours (without the prefix).
const (
	nginxSSLRedirect         = "ssl-redirect"
	nginxForceSSLRedirect    = "force-ssl-redirect"
	nginxRewriteTarget       = "rewrite-target"
	nginxUseRegex            = "use-regex"
	nginxAppRoot             = "app-root"
	nginxPermanentRedirect   = "permanent-redirect"
	nginxPermanentCode       = "permanent-redirect-code"
	nginxTemporalRedirect    = "temporal-redirect"
	nginxTemporalCode        = "temporal-redirect-code"
	nginxConnectTimeout      = "proxy-connect-timeout"
	nginxReadTimeout         = "proxy-read-timeout"
	nginxSendTimeout         = "proxy-send-timeout"
	nginxBackendProtocol     = "backend-protocol"
	nginxEnableCORS          = "enable-cors"
	nginxCORSOrigin          = "cors-allow-origin"
	nginxCORSMethods         = "cors-allow-methods"
	nginxCORSHeaders         = "cors-allow-headers"
	nginxCORSExpose          = "cors-expose-headers"
	nginxCORSCredentials     = "cors-allow-credentials"
	nginxCORSMaxAge          = "cors-max-age"
	nginxAffinity            = "affinity"
	nginxSessionCookieName   = "session-cookie-name"
	nginxSessionCookiePath   = "session-cookie-path"
	nginxSessionCookieMaxAge = "session-cookie-max-age"
	nginxProxyBodySize       = "proxy-body-size"
	nginxAllowlist           = "allowlist-source-range"
	nginxWhitelist           = "whitelist-source-range" // ingress-nginx's older name
	nginxDenylist            = "denylist-source-range"
	nginxAuthType            = "auth-type"
	nginxAuthSecret          = "auth-secret"
	nginxAuthSecretType      = "auth-secret-type"
)

// honouredNginx are the annotations nginxAnnotations reads.
var honouredNginx = []string{
	nginxSSLRedirect, nginxForceSSLRedirect, nginxRewriteTarget, nginxUseRegex, nginxAppRoot,
	nginxPermanentRedirect, nginxPermanentCode, nginxTemporalRedirect, nginxTemporalCode,
	nginxConnectTimeout, nginxReadTimeout, nginxSendTimeout, nginxBackendProtocol,
	nginxEnableCORS, nginxCORSOrigin, nginxCORSMethods, nginxCORSHeaders, nginxCORSExpose,
	nginxCORSCredentials, nginxCORSMaxAge,
	nginxAffinity, nginxSessionCookieName, nginxSessionCookiePath, nginxSessionCookieMaxAge,
	nginxCanary, nginxCanaryWeight, nginxCanaryWeightTotal, nginxCanaryByHeader, nginxCanaryByHeaderVal, nginxCanaryByHeaderPat, nginxCanaryByCookie,
	nginxAllowlist, nginxWhitelist, nginxDenylist, nginxProxyBodySize,
	nginxAuthType, nginxAuthSecret, nginxAuthSecretType,
	nginxLimitRPS, nginxLimitRPM, nginxLimitBurst,
	nginxUpstreamVhost, nginxUpstreamHashBy, nginxLoadBalance,
	nginxMirrorTarget, nginxMirrorHost, nginxMirrorBody,
	nginxAuthURL, nginxAuthResponseHeaders,
}

// ingress-nginx's defaults for CORS (docs: "Enable CORS").
const (
	nginxDefaultCORSMethods = "GET, PUT, POST, DELETE, PATCH, OPTIONS"
	nginxDefaultCORSHeaders = "DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,Range,Authorization"
	nginxDefaultCORSMaxAge  = 1728000
	// nginxDefaultSessionCookie is ingress-nginx's session-cookie-name default.
	nginxDefaultSessionCookie = "INGRESSCOOKIE"
)

// Bounds on what the ingress-nginx annotations of one Ingress may ask for.
const (
	// maxNginxAnnotations: the annotations beyond it (by key) are not read.
	maxNginxAnnotations = 64
	// maxNginxValue bounds a value: a longer one is not understood.
	maxNginxValue = 1024
	// maxNginxList bounds the entries of a comma-separated list (CORS origins, methods,
	// headers).
	maxNginxList = 32
	// maxNginxNamed bounds the annotations named in the Warning of the not honoured ones.
	maxNginxNamed = 10
)

// nginxIngress is what the ingress-nginx annotations of one Ingress ask for, validated.
type nginxIngress struct {
	// sslRedirect is ssl-redirect when set and understood.
	sslRedirect *bool
	// forceSSLRedirect redirects every host of the Ingress served over HTTPS, whether or
	// not the Ingress lists it in spec.tls.
	forceSSLRedirect bool
	// regex: the Ingress's Prefix and ImplementationSpecific paths are regular expressions
	// (use-regex, or rewrite-target), matched case-insensitively from the path's start.
	regex bool
	// rewrite is rewrite-target in Envoy's form (\1 for $1); "" for none.
	rewrite string
	// redirect answers every path of the Ingress (permanent- or temporal-redirect).
	redirect *ir.Redirect
	// appRoot redirects / of the Ingress's hosts there (302).
	appRoot string
	// connectTimeout, idle: 0 keeps the tenant's.
	connectTimeout, idle time.Duration
	// http2: backends speak HTTP/2 (GRPC, GRPCS, H2C); tls: over TLS (HTTPS, GRPCS), which
	// the hub does only with a BackendTLSPolicy.
	http2, tls bool
	cors       *ir.CORSPolicy
	// session is cookie affinity (affinity: cookie); its cookie's Path is set per route.
	session *ir.SessionCookie
	// canary: the Ingress is a canary (canary: "true") of the Ingresses serving its hosts
	// and paths (applyCanaries).
	canary *nginxCanaryRule
	// sourceRanges (allowlist-source-range) are the only client addresses the Ingress's
	// paths serve (ir.Route.SourceRanges); refuseAll: the list could not be read, and the
	// paths answer 403 to everyone until it is fixed (a restriction is never dropped).
	sourceRanges []string
	refuseAll    bool
	// denyRanges (denylist-source-range) are client addresses the Ingress's paths refuse,
	// before the allow list (as ingress-nginx writes its deny rules first): the routes then
	// carry an ir.Authorization instead of source ranges.
	denyRanges []string
	// maxBody (proxy-body-size) answers 413 to requests whose Content-Length is larger (0:
	// none, ingress-nginx's "0").
	maxBody int64
	// basicAuth (auth-type basic, auth-secret) asks the paths' clients for a user name and
	// password; authClosed: the authentication asked for cannot be served, and the paths
	// answer 500 until it is fixed (never served without it).
	basicAuth  *ir.BasicAuth
	authClosed bool
	// authService (auth-url) is asked about each request of the paths; nil for none.
	authService *nginxExtAuth
	// rateLimit (limit-rps, limit-rpm) limits each client address; nil for none.
	rateLimit *ir.RateLimit
	// upstream: the Host the backends get, the hash or load balancer choosing the endpoint
	// (upstream-vhost, upstream-hash-by, load-balance).
	upstream nginxUpstream
	// mirrorCopies copies every request of the routes to backends to a Service of the
	// Ingress's namespace (mirror-target); nil for none.
	mirrorCopies *nginxMirror
}

// NginxRestrictsClients reports whether an Ingress's annotations limit its clients by address
// (allowlist-source-range, its older name whitelist-source-range, denylist-source-range, or
// the per-client rate limits limit-rps and limit-rpm):
// the hub must then keep the clients' addresses up to Envoy (the planner gives the tenant's
// Ingress Service externalTrafficPolicy Local).
func NginxRestrictsClients(annotations map[string]string) bool {
	for _, k := range []string{nginxAllowlist, nginxWhitelist, nginxDenylist, nginxLimitRPS, nginxLimitRPM} {
		if _, ok := annotations[NginxAnnotationPrefix+k]; ok {
			return true
		}
	}
	return false
}

// nginxAnnotations reads the ingress-nginx annotations of Ingress Route r (annotations: its
// annotations). A value that is not understood or out of range is reported
// (InvalidAnnotation, a Warning) and the annotation is ignored; annotations that are not
// honoured are named in one Warning (UnsupportedAnnotation).
func (t *l7) nginxAnnotations(r *v1alpha1.Route, annotations map[string]string) nginxIngress {
	return t.nginxAnnotationsIn(r, r.Spec.Source.Kubernetes.Route.GetNamespace(), annotations)
}

// nginxAnnotationsIn is nginxAnnotations for an Ingress of namespace ns.
func (t *l7) nginxAnnotationsIn(r *v1alpha1.Route, ns string, annotations map[string]string) nginxIngress {
	var out nginxIngress
	a := map[string]string{}
	var keys []string
	for k := range annotations {
		if name, ok := strings.CutPrefix(k, NginxAnnotationPrefix); ok {
			keys = append(keys, name)
		}
	}
	if len(keys) == 0 {
		return out
	}
	slices.Sort(keys)
	if len(keys) > maxNginxAnnotations {
		t.problems.Add(t.ref(r, ""), ir.SeverityWarning, ReasonTooMany, "the Ingress has %d ingress-nginx annotations; kubelb reads at most %d, those after the first %d (by name) are ignored",
			len(keys), maxNginxAnnotations, maxNginxAnnotations)
		keys = keys[:maxNginxAnnotations]
	}
	var snippets, others []string
	for _, k := range keys {
		switch {
		case slices.Contains(honouredNginx, k):
			a[k] = annotations[NginxAnnotationPrefix+k]
		case strings.HasSuffix(k, "snippet"):
			snippets = append(snippets, truncate(k))
		default:
			others = append(others, truncate(k))
		}
	}
	t.unsupportedNginx(r, snippets, others)

	bad := func(key, v, want string) {
		t.problems.Add(t.ref(r, ""), ir.SeverityWarning, ReasonInvalidAnnotation, "annotation %s%s=%q is not understood (%s); it is ignored",
			NginxAnnotationPrefix, key, truncate(v), want)
	}
	value := func(key string) (string, bool) {
		v, ok := a[key]
		if ok && len(v) > maxNginxValue {
			bad(key, v, fmt.Sprintf("at most %d bytes", maxNginxValue))
			return "", false
		}
		return strings.TrimSpace(v), ok
	}
	boolean := func(key string) (b, ok bool) {
		v, set := value(key)
		if !set {
			return false, false
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad(key, v, `use "true" or "false"`)
			return false, false
		}
		return b, true
	}
	seconds := func(key string, lo, hi time.Duration) time.Duration {
		v, set := value(key)
		if !set {
			return 0
		}
		d, ok := nginxSeconds(v)
		if !ok || !DurationInRange(d, lo, hi) {
			bad(key, v, fmt.Sprintf("use whole seconds from %d to %d", int(lo.Seconds()), int(hi.Seconds())))
			return 0
		}
		return d
	}

	if b, ok := boolean(nginxSSLRedirect); ok {
		out.sslRedirect = &b
	}
	out.forceSSLRedirect, _ = boolean(nginxForceSSLRedirect)
	out.regex, _ = boolean(nginxUseRegex)
	if v, ok := value(nginxRewriteTarget); ok {
		if sub, msg := nginxRewrite(v); msg != "" {
			bad(nginxRewriteTarget, v, msg)
		} else {
			out.rewrite, out.regex = sub, true
		}
	}
	if v, ok := value(nginxAppRoot); ok {
		if msg := nginxPathProblem(v); msg != "" {
			bad(nginxAppRoot, v, msg)
		} else {
			out.appRoot = v
		}
	}
	out.redirect = t.nginxRedirect(value, bad)

	if out.rateLimit = nginxRateLimit(value, bad); out.rateLimit != nil && !keepsClientAddress(t.routeService("")) {
		t.problems.Add(t.ref(r, ""), ir.SeverityWarning, ReasonClientAddressUnknown,
			"annotations %slimit-rps and limit-rpm limit each client address, but the Ingress is served through the tenant's Ingress Service %s, which does not keep the clients' addresses (externalTrafficPolicy Local on a Service of type LoadBalancer or NodePort): clients behind one hub node may share one limit",
			NginxAnnotationPrefix, v1alpha1.IngressServiceName)
	}
	out.connectTimeout = seconds(nginxConnectTimeout, time.Second, MaxConnectTimeout)
	if v, ok := value(nginxProxyBodySize); ok {
		if n, err := nginxSize(v); err != nil {
			bad(nginxProxyBodySize, v, err.Error())
		} else {
			out.maxBody = n
		}
	}
	// Envoy's stream idle timeout bounds the time without traffic either way: the longer of
	// the two nginx timeouts, only ever shorter than the tenant's.
	tenant := t.opts.StreamIdleTimeout
	idle := max(seconds(nginxReadTimeout, time.Second, MaxRequestTimeout), seconds(nginxSendTimeout, time.Second, MaxRequestTimeout))
	if idle > 0 && (tenant == 0 || idle < tenant) {
		out.idle = max(idle, MinStreamIdleTimeout)
	}

	if v, ok := value(nginxBackendProtocol); ok {
		switch strings.ToUpper(v) {
		case "HTTP":
		case "H2C", "GRPC":
			out.http2 = true
		case "HTTPS":
			out.tls = true
		case "GRPCS":
			out.http2, out.tls = true, true
		default:
			bad(nginxBackendProtocol, v, "kubelb serves HTTP, HTTPS, GRPC, GRPCS and H2C; AUTO_HTTP and FCGI are not supported")
		}
	}
	if on, _ := boolean(nginxEnableCORS); on {
		out.cors = nginxCORS(value, boolean, bad)
	}
	if on, _ := boolean(nginxCanary); on {
		out.canary = nginxCanaryAnnotations(value, bad)
	}
	if v, ok := value(nginxAffinity); ok {
		if v != "cookie" {
			bad(nginxAffinity, v, `kubelb supports "cookie"`)
		} else {
			out.session = nginxSession(value, bad)
		}
	}
	key := nginxAllowlist
	v, ok := a[key]
	if !ok {
		key = nginxWhitelist
		v, ok = a[key]
	}
	if ok {
		out.sourceRanges, out.refuseAll = t.nginxSourceRanges(r, key, v)
		if len(out.sourceRanges) > 0 && !keepsClientAddress(t.routeService("")) {
			t.problems.Add(t.ref(r, ""), ir.SeverityWarning, ReasonClientAddressUnknown,
				"annotation %s%s: the Ingress is served through the tenant's Ingress Service %s, which does not keep the clients' addresses (externalTrafficPolicy Local on a Service of type LoadBalancer or NodePort): the hub's nodes may replace them by their own, so allowed clients may be refused",
				NginxAnnotationPrefix, key, v1alpha1.IngressServiceName)
		}
	}
	if v, ok := a[nginxDenylist]; ok && !out.refuseAll {
		var refuse bool
		out.denyRanges, refuse = t.nginxSourceRanges(r, nginxDenylist, v)
		switch {
		case refuse:
			out.refuseAll, out.sourceRanges, out.denyRanges = true, nil, nil
		case len(out.denyRanges)+len(out.sourceRanges) > sourcerange.Max:
			t.problems.Add(t.ref(r, ""), ir.SeverityError, ReasonInvalidAnnotation, "annotations %s%s and %s%s: %d entries in all, at most %d; the Ingress's paths answer 403 to every client until it is fixed",
				NginxAnnotationPrefix, key, NginxAnnotationPrefix, nginxDenylist, len(out.denyRanges)+len(out.sourceRanges), sourcerange.Max)
			out.refuseAll, out.sourceRanges, out.denyRanges = true, nil, nil
		case len(out.denyRanges) > 0 && !keepsClientAddress(t.routeService("")):
			t.problems.Add(t.ref(r, ""), ir.SeverityWarning, ReasonClientAddressUnknown,
				"annotation %s%s: the Ingress is served through the tenant's Ingress Service %s, which does not keep the clients' addresses (externalTrafficPolicy Local on a Service of type LoadBalancer or NodePort): the hub's nodes may replace them by their own, so refused clients may be let in",
				NginxAnnotationPrefix, nginxDenylist, v1alpha1.IngressServiceName)
		}
	}
	out.basicAuth, out.authClosed = t.nginxBasicAuth(r, ns, value)
	var extClosed bool
	out.authService, extClosed = t.nginxExtAuthAnnotations(r, ns, value, bad)
	out.authClosed = out.authClosed || extClosed
	out.upstream = nginxUpstreamAnnotations(value, bad)
	out.mirrorCopies = nginxMirrorAnnotations(ns, value, bad)
	return out
}

// nginxBasicAuth reads auth-type, auth-secret and auth-secret-type: the users of an Ingress of
// namespace ns that asks for basic authentication (nil when it does not), from the hub Secret
// made from its auth-secret (a Secret of the Ingress's namespace; key auth, htpasswd lines, or
// with auth-secret-type auth-map one key per user holding its hash). An authentication that
// cannot be served (digest, a Secret of another namespace, users that cannot be used) closes
// the paths (500) with an Error: an Ingress asking for authentication is never served without.
func (t *l7) nginxBasicAuth(r *v1alpha1.Route, ns string, value func(string) (string, bool)) (*ir.BasicAuth, bool) {
	typ, ok := value(nginxAuthType)
	if !ok {
		return nil, false
	}
	closed := func(format string, args ...any) (*ir.BasicAuth, bool) {
		t.problems.Add(t.ref(r, ""), ir.SeverityError, ReasonInvalidAnnotation, "%s; the Ingress's paths answer 500 until it is fixed", fmt.Sprintf(format, args...))
		return nil, true
	}
	if typ != "basic" {
		return closed("annotation %s%s=%q: kubelb serves basic authentication only (Envoy has no digest authentication)", NginxAnnotationPrefix, nginxAuthType, truncate(typ))
	}
	ref, _ := value(nginxAuthSecret)
	secretNS, name, cross := strings.Cut(ref, "/")
	if !cross {
		secretNS, name = ns, ref
	}
	switch {
	case name == "":
		return closed("annotation %s%s=basic without %s%s naming the Secret of the users", NginxAnnotationPrefix, nginxAuthType, NginxAnnotationPrefix, nginxAuthSecret)
	case secretNS != ns:
		return closed("annotation %s%s=%q: a Secret of another namespace is not yet supported by kubelb; use one of the Ingress's namespace", NginxAnnotationPrefix, nginxAuthSecret, truncate(ref))
	}
	key := nginxAuthFileKey
	switch st, _ := value(nginxAuthSecretType); st {
	case "", "auth-file":
	case "auth-map":
		key = ""
	default:
		return closed("annotation %s%s=%q: use auth-file or auth-map", NginxAnnotationPrefix, nginxAuthSecretType, truncate(st))
	}
	users := t.basicAuth(t.ref(r, ""), "annotation "+NginxAnnotationPrefix+nginxAuthSecret, secretNS, name, key)
	return users, users == nil
}

// nginxAuthFileKey is the key of an auth-file Secret holding the users (ingress-nginx's).
const nginxAuthFileKey = "auth"

// authorization is the Ingress's deny list then its allow list, as ingress-nginx writes them
// (deny rules first; with an allow list, every other client denied): nil without a deny
// list (the allow list alone is the route's source ranges).
func (n *nginxIngress) authorization() *ir.Authorization {
	if len(n.denyRanges) == 0 {
		return nil
	}
	a := &ir.Authorization{DefaultAllow: len(n.sourceRanges) == 0, Rules: []ir.AuthorizationRule{{SourceRanges: slices.Clone(n.denyRanges)}}}
	if len(n.sourceRanges) > 0 {
		a.Rules = append(a.Rules, ir.AuthorizationRule{Allow: true, SourceRanges: slices.Clone(n.sourceRanges)})
	}
	return a
}

// nginxSourceRanges reads allowlist-source-range (or whitelist-source-range, key) or
// denylist-source-range: CIDRs or single addresses, comma-separated. A list that cannot be
// read entirely (an entry that is
// not an address or CIDR, too many entries, too long) refuses every client (refuse): reading
// what could be read would widen the restriction the tenant wrote. An empty list restricts
// nothing, as with ingress-nginx.
func (t *l7) nginxSourceRanges(r *v1alpha1.Route, key, v string) (ranges []string, refuse bool) {
	refused := func(why string) ([]string, bool) {
		t.problems.Add(t.ref(r, ""), ir.SeverityError, ReasonInvalidAnnotation, "annotation %s%s=%q: %s; the Ingress's paths answer 403 to every client until it is fixed",
			NginxAnnotationPrefix, key, truncate(v), why)
		return nil, true
	}
	if len(v) > maxNginxValue*4 {
		return refused(fmt.Sprintf("at most %d bytes", maxNginxValue*4))
	}
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if len(ranges) == sourcerange.Max {
			return refused(fmt.Sprintf("at most %d entries", sourcerange.Max))
		}
		if !strings.Contains(e, "/") { // a single address, as ingress-nginx accepts
			if a, err := netip.ParseAddr(e); err == nil {
				e = netip.PrefixFrom(a, a.BitLen()).String()
			}
		}
		c, err := sourcerange.Parse(e)
		if err != nil {
			return refused(err.Error())
		}
		ranges = append(ranges, c)
	}
	return sourcerange.Sort(ranges), false
}

// unsupportedNginx reports, in one Warning, the ingress-nginx annotations of r that kubelb
// does not honour: snippets (never: they are nginx configuration, which a tenant may not give
// the hub) and the others (not yet).
func (t *l7) unsupportedNginx(r *v1alpha1.Route, snippets, others []string) {
	if len(snippets)+len(others) == 0 {
		return
	}
	name := func(ks []string) string {
		if len(ks) > maxNginxNamed {
			return strings.Join(ks[:maxNginxNamed], ", ") + fmt.Sprintf(" and %d more", len(ks)-maxNginxNamed)
		}
		return strings.Join(ks, ", ")
	}
	var parts []string
	if len(snippets) > 0 {
		parts = append(parts, "never honours "+name(snippets)+" (snippets are raw nginx configuration)")
	}
	if len(others) > 0 {
		parts = append(parts, "does not honour "+name(others))
	}
	t.problems.Add(t.ref(r, ""), ir.SeverityWarning, ReasonUnsupportedAnnotation,
		"kubelb %s (ingress-nginx annotations, prefix %s; see docs/ingress-nginx.md); the Ingress is served without them",
		strings.Join(parts, " and "), NginxAnnotationPrefix)
}

// nginxSeconds reads an ingress-nginx timeout: whole seconds ("60"), or a duration in
// seconds ("60s").
func nginxSeconds(v string) (time.Duration, bool) {
	n, err := strconv.ParseUint(strings.TrimSuffix(v, "s"), 10, 32)
	if err != nil {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// nginxRefRE finds the references of rewrite-target to the path's groups: $1 or ${1}.
var nginxRefRE = regexp.MustCompile(`\$(\d|\{\d\})`)

// nginxRewrite turns rewrite-target into an Envoy substitution (\1 for $1), or says why it
// cannot: it must be a path, whose only variables are the path's groups $1 … $9.
func nginxRewrite(v string) (string, string) {
	if !strings.HasPrefix(v, "/") {
		return "", "use a path starting with /, with $1 … $9 for the path's groups"
	}
	rest := nginxRefRE.ReplaceAllString(v, "")
	if strings.Contains(rest, "$") {
		return "", "the only variables kubelb rewrites are the path's groups $1 … $9"
	}
	if msg := nginxPathProblem(rest); msg != "" {
		return "", msg
	}
	// Envoy's substitution reads \ as an escape: a backslash is written \\.
	sub := strings.ReplaceAll(v, `\`, `\\`)
	return nginxRefRE.ReplaceAllStringFunc(sub, func(ref string) string {
		return `\` + strings.Trim(ref, "${}")
	}), ""
}

// nginxPathProblem says why p is not a path kubelb writes into a request or a redirect.
func nginxPathProblem(p string) string {
	switch {
	case !strings.HasPrefix(p, "/"):
		return "use a path starting with /"
	case len(p) > maxIngressPath:
		return fmt.Sprintf("a path of at most %d bytes", maxIngressPath)
	case strings.ContainsAny(p, "?#"):
		return "a path without ? or #"
	case strings.ContainsFunc(p, func(c rune) bool { return c <= ' ' || c >= 0x7f }):
		return "a path without spaces, control or non-ASCII characters (percent-encode them)"
	}
	return ""
}

// nginxRedirect reads temporal-redirect (302 unless temporal-redirect-code), else
// permanent-redirect (301 unless permanent-redirect-code): the URL every path of the Ingress
// redirects to. nil for none.
func (t *l7) nginxRedirect(value func(string) (string, bool), bad func(key, v, want string)) *ir.Redirect {
	key, codeKey, code := nginxTemporalRedirect, nginxTemporalCode, uint32(http.StatusFound)
	v, ok := value(key)
	if !ok {
		key, codeKey, code = nginxPermanentRedirect, nginxPermanentCode, http.StatusMovedPermanently
		if v, ok = value(key); !ok {
			return nil
		}
	}
	if c, set := value(codeKey); set {
		n, err := strconv.Atoi(c)
		switch {
		case err == nil && slices.Contains([]int{301, 302, 303, 307, 308}, n):
			code = uint32(n)
		default:
			bad(codeKey, c, fmt.Sprintf("kubelb redirects with 301, 302, 303, 307 or 308; %d applies", code))
		}
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		bad(key, v, "use an absolute http or https URL without user, query or fragment")
		return nil
	}
	host, msg := ingressHost(u.Hostname())
	if msg != "" || strings.HasPrefix(host, "*") {
		bad(key, v, "the URL's host must be a DNS name")
		return nil
	}
	rd := &ir.Redirect{Scheme: u.Scheme, Hostname: host, StatusCode: code, Path: u.EscapedPath()}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			bad(key, v, "the URL's port must be from 1 to 65535")
			return nil
		}
		rd.Port = uint32(n)
	}
	if rd.Path == "" {
		rd.Path = "/" // nginx answers with the URL as it is; a browser asks for / then
	}
	if msg := nginxPathProblem(rd.Path); msg != "" {
		bad(key, v, "the URL's path: "+msg)
		return nil
	}
	return rd
}

// nginxCORS reads the CORS annotations of an Ingress with enable-cors: ingress-nginx's
// defaults where unset; an annotation that is not understood keeps its default.
func nginxCORS(value func(string) (string, bool), boolean func(string) (bool, bool), bad func(key, v, want string)) *ir.CORSPolicy {
	p := &ir.CORSPolicy{AllowOrigins: []string{"*"}, AllowCredentials: true, MaxAge: nginxDefaultCORSMaxAge}
	list := func(key, def string, read func(string) (string, string)) []string {
		v, ok := value(key)
		if !ok {
			v = def
		}
		var out []string
		for _, e := range strings.Split(v, ",") {
			e = strings.TrimSpace(e)
			if e == "" {
				continue
			}
			s, msg := read(e)
			if msg == "" && len(out) == maxNginxList {
				msg = fmt.Sprintf("at most %d entries", maxNginxList)
			}
			if msg != "" {
				bad(key, v, msg+"; ingress-nginx's default applies")
				return defaultList(def, read)
			}
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		return out
	}
	// "*" (any) stands alone in a list.
	anyAlone := func(l []string) []string {
		if len(l) > 1 && slices.Contains(l, "*") {
			return []string{"*"}
		}
		return l
	}
	if o := anyAlone(list(nginxCORSOrigin, "*", corsOrigin)); len(o) > 0 {
		p.AllowOrigins = o
	}
	token := func(what string, lower bool) func(string) (string, string) {
		return func(e string) (string, string) {
			if !validHeaderName(e) {
				return "", fmt.Sprintf("%q is not a %s", truncate(e), what)
			}
			if lower {
				e = strings.ToLower(e)
			}
			return e, ""
		}
	}
	method := func(e string) (string, string) {
		if m := strings.ToUpper(e); m == "*" || slices.Contains(httpMethods, m) {
			return m, ""
		}
		return "", fmt.Sprintf("%q is not an HTTP method", truncate(e))
	}
	p.AllowMethods = anyAlone(list(nginxCORSMethods, nginxDefaultCORSMethods, method))
	p.AllowHeaders = anyAlone(list(nginxCORSHeaders, nginxDefaultCORSHeaders, token("header name", true)))
	p.ExposeHeaders = anyAlone(list(nginxCORSExpose, "", token("header name", true)))
	if b, ok := boolean(nginxCORSCredentials); ok {
		p.AllowCredentials = b
	}
	if v, ok := value(nginxCORSMaxAge); ok {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n < 1 || n > nginxDefaultCORSMaxAge*10 {
			bad(nginxCORSMaxAge, v, fmt.Sprintf("use whole seconds from 1 to %d", nginxDefaultCORSMaxAge*10))
		} else {
			p.MaxAge = uint32(n)
		}
	}
	return p
}

// defaultList reads a default list (always valid).
func defaultList(def string, read func(string) (string, string)) []string {
	var out []string
	for _, e := range strings.Split(def, ",") {
		if s, msg := read(strings.TrimSpace(e)); msg == "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// nginxSession reads cookie affinity: session-cookie-name (INGRESSCOOKIE),
// session-cookie-path (the route's path when unset) and session-cookie-max-age (a session
// cookie when unset).
func nginxSession(value func(string) (string, bool), bad func(key, v, want string)) *ir.SessionCookie {
	c := &ir.SessionCookie{Name: nginxDefaultSessionCookie}
	if v, ok := value(nginxSessionCookieName); ok {
		if (&ir.SessionPersistence{Cookie: &ir.SessionCookie{Name: v, Path: "/"}}).Validate() != nil {
			bad(nginxSessionCookieName, v, "a cookie name: a token of letters, digits and !#$%&'*+-.^_`|~")
		} else {
			c.Name = v
		}
	}
	if v, ok := value(nginxSessionCookiePath); ok {
		if (&ir.SessionPersistence{Cookie: &ir.SessionCookie{Name: c.Name, Path: v}}).Validate() != nil {
			bad(nginxSessionCookiePath, v, "a cookie path starting with /")
		} else {
			c.Path = v
		}
	}
	if v, ok := value(nginxSessionCookieMaxAge); ok {
		d, ok := nginxSeconds(v)
		if !ok || d < time.Second || d > ir.MaxSessionTTL.D() {
			bad(nginxSessionCookieMaxAge, v, fmt.Sprintf("use whole seconds from 1 to %d", int(ir.MaxSessionTTL.D().Seconds())))
		} else {
			c.TTL = ir.Duration(d)
		}
	}
	return c
}

// nginxRegexPath checks an Ingress path that is a regular expression (use-regex,
// rewrite-target) and returns the expression matching the whole request path the way nginx
// matches it: case-insensitive, from the path's start, anything after.
func nginxRegexPath(p string) (string, string) {
	switch {
	case p == "":
		p = "/"
	case !strings.HasPrefix(p, "/"):
		return "", fmt.Sprintf("path %q is not absolute (it must start with /)", truncate(p))
	case len(p) > maxIngressPath:
		return "", fmt.Sprintf("path is longer than %d characters", maxIngressPath)
	}
	full := `(?i)(?:` + p + `).*`
	// The rewrite's pattern (nginxRewriteFor) is the larger of the two.
	if err := re2.Check("^" + full + "$"); err != nil {
		return "", fmt.Sprintf("path %q is not a regular expression Envoy accepts: %s", truncate(p), truncate(err.Error()))
	}
	return full, ""
}

// nginxRewriteFor is the rewrite of a route matching regex path full (nginxRegexPath) or
// exact path exact: the whole path replaced by sub, whose references to groups the path does
// not have become empty, as in nginx.
func nginxRewriteFor(full, exact, sub string) *ir.URLRewrite {
	pattern, groups := "^"+full+"$", 0
	if full == "" {
		pattern = "^" + regexp.QuoteMeta(exact) + "$"
	} else if re, err := regexp.Compile(full); err == nil {
		groups = re.NumSubexp()
	}
	sub = regexp.MustCompile(`\\\\|\\(\d)`).ReplaceAllStringFunc(sub, func(ref string) string {
		if ref == `\\` {
			return ref
		}
		if n, _ := strconv.Atoi(ref[1:]); n > groups {
			return ""
		}
		return ref
	})
	return &ir.URLRewrite{PathRegex: &ir.RegexRewrite{Pattern: pattern, Substitution: sub}}
}

// backend applies the annotations that concern the backend of route owner: the connect
// timeout of its cluster (the Ingress's own: cluster names hold the Route's name), and a
// Warning when backend-protocol asks for TLS the hub does not use.
func (n *nginxIngress) backend(t *l7, owner ir.ObjectRef, cluster string) {
	c := t.clusters[cluster]
	if c == nil {
		return
	}
	if n.connectTimeout > 0 {
		c.ConnectTimeout = ir.Duration(n.connectTimeout)
	}
	n.upstream.cluster(t, owner, c)
	if n.tls && c.TLS == nil {
		t.problems.Add(owner, ir.SeverityWarning, ReasonInvalidAnnotation,
			"annotation %sbackend-protocol asks for TLS to the backend, and kubelb connects to a backend over TLS only when a BackendTLSPolicy of the tenant names its Service (kubelb verifies the backend's certificate); requests go to it without TLS",
			NginxAnnotationPrefix)
	}
}

// route applies the annotations that concern what route (forwarding to backends) does: a
// redirect instead (permanent- or temporal-redirect; served to every client, as ingress-nginx
// redirects before it applies its allow list), the allow and deny lists
// (allowlist-source-range, denylist-source-range; 403 to everyone when one could not be
// read), the rewrite, CORS and cookie affinity.
// regex is the route's regular expression (nginxRegexPath), "" for an exact or prefix path.
func (n *nginxIngress) route(route *ir.Route, regex string) *ir.Route {
	if n.redirect != nil {
		rd := *n.redirect
		return &ir.Route{Name: route.Name, Owners: route.Owners, Match: route.Match, Redirect: &rd, CORS: n.corsCopy()}
	}
	if n.refuseAll {
		return &ir.Route{Name: route.Name, Owners: route.Owners, Match: route.Match, DirectResponse: &ir.DirectResponse{Status: http.StatusForbidden}}
	}
	if n.authClosed {
		return &ir.Route{Name: route.Name, Owners: route.Owners, Match: route.Match, DirectResponse: &ir.DirectResponse{Status: http.StatusInternalServerError}}
	}
	if n.basicAuth != nil {
		route.BasicAuth = &ir.BasicAuth{Users: n.basicAuth.Users}
	}
	if n.authService != nil {
		route.ExtAuth = n.authService.name
	}
	if route.Authorization = n.authorization(); route.Authorization == nil {
		route.SourceRanges = slices.Clone(n.sourceRanges)
	}
	route.MaxRequestBytes = n.maxBody
	if n.rateLimit != nil {
		rl := *n.rateLimit
		rl.Rules = slices.Clone(rl.Rules)
		route.RateLimit = &rl
	}
	if n.rewrite != "" && (regex != "" || route.Match.PathExact != "") {
		// The paths of the Ingress; not its default backend, which has no path to rewrite.
		route.Rewrite = nginxRewriteFor(regex, route.Match.PathExact, n.rewrite)
	}
	route.CORS = n.corsCopy()
	n.upstream.route(route)
	route.Mirrors = n.mirrors(route)
	if n.session != nil {
		c := *n.session
		if c.Path == "" {
			c.Path = "/"
			if p := route.Match.PathExact + route.Match.PathPrefix; p != "" &&
				(&ir.SessionPersistence{Cookie: &ir.SessionCookie{Name: c.Name, Path: p}}).Validate() == nil {
				c.Path = p
			}
		}
		route.SessionPersistence = &ir.SessionPersistence{Cookie: &c}
	}
	return route
}

func (n *nginxIngress) corsCopy() *ir.CORSPolicy {
	if n.cors == nil {
		return nil
	}
	c := *n.cors
	c.AllowOrigins, c.AllowMethods = slices.Clone(c.AllowOrigins), slices.Clone(c.AllowMethods)
	c.AllowHeaders, c.ExposeHeaders = slices.Clone(c.AllowHeaders), slices.Clone(c.ExposeHeaders)
	return &c
}

// nginxAppRoot serves app-root on the Ingress's domains (in the order of its rules): the
// exact path / answers 302 with the application root, on the same scheme and host. An older
// Ingress (or a path of this one) serving exact / keeps it (PathConflict). It tells whether a
// domain got the redirect.
func (t *l7) nginxAppRoot(st *ingressState, r *v1alpha1.Route, ngx nginxIngress, domains []string, mine map[string][]*ingressRoute) bool {
	owner := t.ref(r, "app-root")
	served := false
	for i, domain := range domains {
		claim := ingressClaim{domain: domain, exact: true, path: "/"}
		if c, taken := st.claims[claim]; taken {
			t.problems.Add(owner, ir.SeverityWarning, ReasonPathConflict, "annotation %s%s: %s is already served by %s; it does not redirect there",
				NginxAnnotationPrefix, nginxAppRoot, describeMatch(claim), c.by)
			continue
		}
		st.claims[claim] = claimant{route: r.Name, by: t.describe(r, "app-root")}
		route := &ir.Route{
			Name:     fmt.Sprintf("%s/app-root-%d", r.Name, i),
			Owners:   []ir.ObjectRef{owner},
			Match:    ir.RouteMatch{PathExact: "/"},
			Redirect: &ir.Redirect{Path: ngx.appRoot, StatusCode: http.StatusFound},
		}
		p := &ingressRoute{exact: true, path: "/", route: route}
		st.vhost(domain).paths = append(st.vhost(domain).paths, p)
		mine[domain] = append(mine[domain], p)
		served = true
	}
	return served
}

// nginxSize reads an nginx size (proxy-body-size, nginx's client_max_body_size): a whole
// number of bytes, or of kibibytes, mebibytes or gibibytes with k, m or g (either case); "0"
// is no limit. At most ir.MaxRequestBodyLimit.
func nginxSize(v string) (int64, error) {
	unit := int64(1)
	digits := v
	if n := len(v); n > 0 {
		switch v[n-1] {
		case 'k', 'K':
			unit, digits = 1<<10, v[:n-1]
		case 'm', 'M':
			unit, digits = 1<<20, v[:n-1]
		case 'g', 'G':
			unit, digits = 1<<30, v[:n-1]
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 0 || n > ir.MaxRequestBodyLimit/unit {
		return 0, fmt.Errorf("a size such as 8m: bytes, or k, m, g; 0 for no limit; at most %d GiB", ir.MaxRequestBodyLimit>>30)
	}
	return n * unit, nil
}
