package translate

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/re2"
	"kubelb.dev/kubelb/internal/routekind"
)

// Names of the shared Ingress listeners and route configurations of a tenant.
const (
	// IngressHTTPListener is the listener (and route configuration) serving every Ingress of
	// the tenant over HTTP: port 80 of the kubelb-ingress hub Service.
	IngressHTTPListener = "ingress-http"
	// IngressHTTPSListener is the listener serving the tenant's Ingress TLS hosts and
	// LoadBalancer hostnames over HTTPS: port 443 of the kubelb-ingress hub Service. Each
	// certificate is one SNI filter chain with a route configuration of its own
	// ("ingress-https-<secret>").
	IngressHTTPSListener = "ingress-https"
)

// Reasons of the Ingress front end's problems (beside the shared ones in l7.go).
const (
	// ReasonInvalidHost: a rule's or TLS entry's host is neither a DNS name nor a wildcard
	// "*.<DNS name>" (the rule or host is skipped).
	ReasonInvalidHost = "InvalidHost"
	// ReasonInvalidPath: a path is not absolute, or holds characters a path cannot (skipped).
	ReasonInvalidPath = "InvalidPath"
	// ReasonPathConflict: an older Ingress (or an earlier path of the same one) already
	// serves the same host and path (skipped).
	ReasonPathConflict = "PathConflict"
	// ReasonCertificateConflict: an older Ingress already serves the host over HTTPS with
	// another certificate (the host keeps the older certificate).
	ReasonCertificateConflict = "CertificateConflict"
	// ReasonUnsupportedBackend: a backend is not a Service (e.g. a resource backend).
	ReasonUnsupportedBackend = "UnsupportedBackend"
	// ReasonInvalidTLS: a TLS entry cannot be served (no secretName and no default certificate;
	// no hosts and nothing the Ingress serves without a host).
	ReasonInvalidTLS = "InvalidTLS"
)

// maxIngressPath bounds the length of a path; longer paths are refused.
const maxIngressPath = 1024

// Bounds on the lists of one Ingress (TooMany, an Error, beyond them): generous for real
// use — a large Ingress has tens of rules, each with a few paths — while one tenant object
// cannot grow its Envoy configuration without limit.
const (
	// maxIngressRules bounds spec.rules: the rules beyond it are not served.
	maxIngressRules = 100
	// maxIngressPaths bounds the paths of one rule: the paths beyond it are not served.
	maxIngressPaths = 100
	// maxIngressTLS bounds spec.tls: the entries beyond it are not used.
	maxIngressTLS = 100
	// maxIngressTLSHosts bounds the hosts of one TLS entry: those beyond it are not served
	// over HTTPS.
	maxIngressTLSHosts = 100
)

// bounded returns the first max elements of list, the what (plural) of one per (the Ingress, a
// rule, a TLS entry); when list is longer it reports TooMany (an Error) on owner, saying how
// many there are and the bound.
func bounded[T any](t *l7, owner ir.ObjectRef, list []T, max int, what, per string) []T {
	if len(list) <= max {
		return list
	}
	t.problems.Add(owner, ir.SeverityError, ReasonTooMany, "the %s has %d %s; kubelb serves at most %d %s per %s, those after the first %d are not served",
		per, len(list), what, max, what, per, max)
	return list[:max]
}

// ingressState collects the tenant's Ingress routing while the Ingress Routes are read,
// oldest first; emit turns it into listeners and route configurations.
type ingressState struct {
	// vhosts by domain ("*" for rules without a host).
	vhosts map[string]*ingressVHost
	// claims are the (domain, exact, path) matches already served, with who serves them:
	// the first (oldest) claim wins.
	claims map[ingressClaim]claimant
	// sni: the IR secret serving each TLS host, and the section that set it.
	sni map[string]sniClaim // by host
	// chains by IR secret name.
	chains map[string]*ingressChain
	// owners of the shared listeners: every Ingress Route served.
	httpOwners, httpsOwners []ir.ObjectRef
	// routes are the paths served, by claim; canaries the paths of canary Ingresses
	// (ingress-nginx's canary), given to those routes once every Ingress is read.
	routes   map[ingressClaim]*ingressRoute
	canaries []canaryPath
}

type ingressClaim struct {
	domain string
	exact  bool
	regex  bool // path is a regular expression (ingress-nginx's use-regex, rewrite-target)
	path   string
}

type claimant struct {
	route string // the Route's name
	by    string // the section serving the match, for messages
}

type sniClaim struct {
	secret string // "Secret <ns>/<name>" of an Ingress, "LoadBalancer <name>" of a hostname
	by     string // the section serving the host, for messages
}

// ingressVHost is one virtual host under construction.
type ingressVHost struct {
	domain string
	paths  []*ingressRoute
	// fallback is the default backend of the oldest Ingress with a rule for this host that
	// has one: the route of last resort when no path matches.
	fallback *ir.Route
	// fallbackSSLRedirect: that Ingress redirects this host to HTTPS (see
	// ingressRoute.sslRedirect).
	fallbackSSLRedirect bool
}

type ingressRoute struct {
	exact bool
	path  string
	route *ir.Route
	// sslRedirect: on the HTTP listener, the route answers with a redirect to HTTPS when its
	// host is served over HTTPS (its Ingress redirects and lists the host in spec.tls).
	sslRedirect bool
}

// ingressChain is one HTTPS filter chain: a certificate and the hosts it serves, with the
// Ingress virtual hosts of those hosts or, for a LoadBalancer hostname, a virtual host of its
// own.
type ingressChain struct {
	secret string
	hosts  []string
	vhost  *ir.VirtualHost
}

// ingresses is the Ingress front end: the tenant's Ingress Routes on the shared Ingress
// listeners (ports 80 and 443 of the kubelb-ingress hub Service), then the LoadBalancer
// hostnames on the same HTTPS listener. See docs/l7.md.
func (t *l7) ingresses() {
	svc := t.routeService("")
	httpPort := listenerPort(svc, 80, corev1.ProtocolTCP)
	httpsPort := listenerPort(svc, 443, corev1.ProtocolTCP)
	st := &ingressState{
		vhosts: map[string]*ingressVHost{},
		claims: map[ingressClaim]claimant{},
		sni:    map[string]sniClaim{},
		chains: map[string]*ingressChain{},
		routes: map[ingressClaim]*ingressRoute{},
	}
	status := ingressStatus(svc)
	for _, r := range t.byKind[routekind.Ingress] {
		var ing networkingv1.Ingress
		if !t.decode(r, &ing) {
			continue
		}
		t.setStatus(r, routekind.Ingress.String(), status)
		if httpPort == 0 {
			if exhaustedPort(svc, 80, corev1.ProtocolTCP) {
				t.problems.Add(t.ref(r, ""), ir.SeverityError, ReasonListenerPortNotAllocated,
					"the hub's listener port range has no port left for port 80 of the tenant's Ingress Service %s; the Ingress is not served", v1alpha1.IngressServiceName)
			} else {
				t.problems.Add(t.ref(r, ""), ir.SeverityWarning, ReasonPortPending,
					"the tenant's Ingress Service %s has no listener port for port 80 yet; the Ingress is served once the manager allocates it", v1alpha1.IngressServiceName)
			}
			continue
		}
		t.ingress(st, r, &ing, httpsPort)
	}
	t.applyCanaries(st)
	t.loadBalancerHostnames(st, httpsPort)
	t.emitIngress(st, httpPort, httpsPort)
}

// ingressStatus is the status every Ingress shows: the addresses of the kubelb-ingress hub
// Service, sorted, without ports.
func ingressStatus(svc *corev1.Service) networkingv1.IngressStatus {
	var out networkingv1.IngressStatus
	if svc == nil {
		return out
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP == "" && in.Hostname == "" {
			continue
		}
		out.LoadBalancer.Ingress = append(out.LoadBalancer.Ingress, networkingv1.IngressLoadBalancerIngress{IP: in.IP, Hostname: in.Hostname})
	}
	slices.SortFunc(out.LoadBalancer.Ingress, func(a, b networkingv1.IngressLoadBalancerIngress) int {
		return cmp.Or(cmp.Compare(a.IP, b.IP), cmp.Compare(a.Hostname, b.Hostname))
	})
	out.LoadBalancer.Ingress = slices.CompactFunc(out.LoadBalancer.Ingress, func(a, b networkingv1.IngressLoadBalancerIngress) bool {
		return a.IP == b.IP && a.Hostname == b.Hostname
	})
	return out
}

// ingress reads one Ingress into the state.
func (t *l7) ingress(st *ingressState, r *v1alpha1.Route, ing *networkingv1.Ingress, httpsPort uint32) {
	ns := r.Spec.Source.Kubernetes.Route.GetNamespace()
	served := false
	timeouts := t.routeTimeouts(r, ing.Annotations)
	redirect := t.sslRedirect(r, ing.Annotations)
	ngx := t.nginxAnnotations(r, ing.Annotations)
	if _, own := ing.Annotations[v1alpha1.AnnotationSSLRedirect]; !own && ngx.sslRedirect != nil {
		redirect = *ngx.sslRedirect
	}
	if _, own := ing.Annotations[v1alpha1.AnnotationStreamIdleTimeout]; !own && ngx.idle > 0 {
		timeouts.idle = ngx.idle
	}
	var domains []string                 // this Ingress's domains, in the order of its rules
	mine := map[string][]*ingressRoute{} // this Ingress's paths by domain

	var ruleHosts []string
	for i, rule := range bounded(t, t.ref(r, ""), ing.Spec.Rules, maxIngressRules, "rules", "Ingress") {
		domain := "*"
		if rule.Host != "" {
			h, msg := ingressHost(rule.Host)
			if msg != "" {
				t.problems.Add(t.ref(r, fmt.Sprintf("rule %d", i)), ir.SeverityError, ReasonInvalidHost, "host %q %s; the rule is not served", truncate(rule.Host), msg)
				continue
			}
			domain = h
			ruleHosts = append(ruleHosts, h)
		}
		if !slices.Contains(domains, domain) {
			domains = append(domains, domain)
		}
		vh := st.vhost(domain)
		if rule.HTTP == nil {
			continue
		}
		for j, p := range bounded(t, t.ref(r, fmt.Sprintf("rule %d", i)), rule.HTTP.Paths, maxIngressPaths, "paths", "rule") {
			section := fmt.Sprintf("rule %d path %s", i, truncate(p.Path))
			if p.Path == "" {
				section = fmt.Sprintf("rule %d path %d", i, j)
			}
			owner := t.ref(r, section)
			var exact bool
			var path, regex, msg string
			if ngx.regex && (p.PathType == nil || *p.PathType != networkingv1.PathTypeExact) {
				path = cmp.Or(p.Path, "/")
				regex, msg = nginxRegexPath(p.Path)
			} else {
				exact, path, msg = ingressPath(p)
			}
			if msg != "" {
				t.problems.Add(owner, ir.SeverityError, ReasonInvalidPath, "%s; the path is not served", msg)
				continue
			}
			claim := ingressClaim{domain: domain, exact: exact, regex: regex != "", path: path}
			if ngx.canary != nil {
				// A canary serves its paths through the routes of the Ingress it shadows.
				if cluster, ok := t.ingressBackend(r, owner, ns, &p.Backend, ngx.http2); ok {
					st.canaries = append(st.canaries, canaryPath{claim: claim, cluster: cluster, owner: owner, rule: *ngx.canary, route: r.Name, by: t.describe(r, section)})
					served = true
				}
				continue
			}
			if c, taken := st.claims[claim]; taken {
				t.problems.Add(owner, ir.SeverityError, ReasonPathConflict, "%s is already served by %s", describeMatch(claim), c.by)
				continue
			}
			cluster, ok := t.ingressBackend(r, owner, ns, &p.Backend, ngx.http2)
			if !ok {
				continue
			}
			ngx.backend(t, owner, cluster)
			st.claims[claim] = claimant{route: r.Name, by: t.describe(r, section)}
			m := ir.RouteMatch{PathPrefix: path}
			switch {
			case exact:
				m = ir.RouteMatch{PathExact: path}
			case regex != "":
				m = ir.RouteMatch{PathRegex: regex}
			}
			route := &ir.Route{
				Name:     fmt.Sprintf("%s/rule-%d/path-%d", r.Name, i, j),
				Owners:   []ir.ObjectRef{owner},
				Match:    m,
				Backends: []ir.WeightedCluster{{Cluster: cluster, Weight: 1}},
			}
			timeouts.set(route)
			ngx.mirror(t, r, ns)
			ngx.extAuth(t, r, ns)
			route = ngx.route(route, regex)
			p := &ingressRoute{exact: exact, path: path, route: route}
			st.routes[claim] = p
			vh.paths = append(vh.paths, p)
			mine[domain] = append(mine[domain], p)
			served = true
		}
	}
	// The default backend, after the rules: a rule of the Ingress matching / on any host
	// comes before it, as in Kubernetes.
	var fallback *ir.Route
	if db := ing.Spec.DefaultBackend; db != nil {
		if fallback = t.ingressDefaultBackend(st, r, db, len(ruleHosts) > 0, &ngx); fallback != nil {
			timeouts.set(fallback)
			ngx.mirror(t, r, r.Spec.Source.Kubernetes.Route.GetNamespace())
			ngx.extAuth(t, r, r.Spec.Source.Kubernetes.Route.GetNamespace())
			*fallback = *ngx.route(fallback, "")
			for _, h := range ruleHosts {
				if vh := st.vhosts[h]; vh.fallback == nil {
					vh.fallback = fallback
				}
			}
			served = true
		}
	}
	if ngx.appRoot != "" && t.nginxAppRoot(st, r, ngx, domains, mine) {
		served = true
	}
	if served {
		st.httpOwners = append(st.httpOwners, t.ref(r, ""))
	}

	for k, tls := range bounded(t, t.ref(r, ""), ing.Spec.TLS, maxIngressTLS, "TLS entries", "Ingress") {
		owner := t.ref(r, fmt.Sprintf("tls %d", k))
		hosts := bounded(t, owner, tls.Hosts, maxIngressTLSHosts, "hosts", "TLS entry")
		if len(hosts) == 0 {
			hosts = ruleHosts
		}
		if len(hosts) == 0 {
			// No hosts anywhere: the entry serves what the Ingress serves without a host (its
			// host-less rules, its default backend) to connections without a matching server
			// name (anyServerName).
			if len(mine["*"]) == 0 && fallback == nil {
				t.problems.Add(owner, ir.SeverityError, ReasonInvalidTLS, "the TLS entry lists no hosts and the Ingress serves nothing (no rule, no default backend); nothing is served over HTTPS")
				continue
			}
			hosts = []string{anyServerName}
		}
		if redirect {
			st.redirectToHTTPS(hosts, mine, fallback)
		}
		ref := "Secret " + ns + "/" + tls.SecretName
		certificate := func() (string, string, string) { return t.certificate(owner, ns, tls.SecretName) }
		if tls.SecretName == "" {
			if t.in.DefaultCertificate == nil {
				msg := "the TLS entry names no Secret and the tenant has no default certificate (spec.ingress.defaultCertificate of the Tenant or Config)"
				if p := t.in.DefaultCertificateProblem; p != "" {
					msg = "the TLS entry names no Secret, and the tenant's default certificate cannot be used: " + p
				}
				t.problems.Add(owner, ir.SeverityError, ReasonInvalidTLS, "%s; its hosts are not served over HTTPS", msg)
				continue
			}
			ref, certificate = "the default certificate", func() (string, string, string) { return t.defaultCertificate(owner) }
		}
		if httpsPort == 0 {
			if exhaustedPort(t.routeService(""), 443, corev1.ProtocolTCP) {
				t.problems.Add(owner, ir.SeverityError, ReasonListenerPortNotAllocated,
					"the hub's listener port range has no port left for port 443 of the tenant's Ingress Service %s; the hosts are not served over HTTPS", v1alpha1.IngressServiceName)
			} else {
				t.problems.Add(owner, ir.SeverityWarning, ReasonPortPending,
					"the tenant's Ingress Service %s has no listener port for port 443 yet; the hosts are served over HTTPS once the manager allocates it", v1alpha1.IngressServiceName)
			}
			continue
		}
		// The hosts this entry can serve: valid, and not served with another certificate.
		var serve []string
		for _, host := range hosts {
			h, msg := host, ""
			if host != anyServerName {
				h, msg = ingressHost(host)
			}
			if msg != "" {
				t.problems.Add(owner, ir.SeverityError, ReasonInvalidHost, "host %q %s; it is not served over HTTPS", truncate(host), msg)
				continue
			}
			if c, taken := st.sni[h]; taken {
				if c.secret != ref {
					if h == anyServerName {
						t.problems.Add(owner, ir.SeverityError, ReasonCertificateConflict, "connections without a matching server name are already served over HTTPS with the certificate of %s (a TLS entry without hosts); this certificate is not used for them", c.by)
					} else {
						t.problems.Add(owner, ir.SeverityError, ReasonCertificateConflict, "host %s is already served over HTTPS with the certificate of %s; this certificate is not used for it", h, c.by)
					}
				}
				continue
			}
			serve = append(serve, h)
		}
		if len(serve) == 0 {
			continue
		}
		secret, reason, msg := certificate()
		if reason != "" {
			t.problems.Add(owner, ir.SeverityError, reason, "%s; its hosts are not served over HTTPS", msg)
			continue
		}
		for _, h := range serve {
			if _, taken := st.sni[h]; taken { // listed twice
				continue
			}
			st.sni[h] = sniClaim{secret: ref, by: t.describe(r, owner.Section)}
			st.chain(secret).hosts = append(st.chain(secret).hosts, h)
		}
		st.httpsOwners = append(st.httpsOwners, t.ref(r, ""))
	}
	if ngx.forceSSLRedirect {
		// Every host of the Ingress that some Ingress serves over HTTPS (emitIngress decides).
		st.redirectToHTTPS(ruleHosts, mine, fallback)
	}
}

// ingressDefaultBackend resolves an Ingress's default backend: the catch-all of the "*"
// virtual host unless an older Ingress (or a rule of this one) has it, and the fallback of
// the Ingress's own hosts when it has any. It returns the fallback route, nil when the
// default backend is not served at all.
func (t *l7) ingressDefaultBackend(st *ingressState, r *v1alpha1.Route, db *networkingv1.IngressBackend, hasHosts bool, ngx *nginxIngress) *ir.Route {
	owner := t.ref(r, "defaultBackend")
	if db.Service == nil {
		t.problems.Add(owner, ir.SeverityError, ReasonUnsupportedBackend, "only Service backends are supported; not served")
		return nil
	}
	catchAll := ingressClaim{domain: "*", path: "/"}
	c, taken := st.claims[catchAll]
	own := taken && c.route == r.Name // a rule of this Ingress serves / on any host
	switch {
	case own && !hasHosts:
		return nil
	case taken && !own && !hasHosts:
		t.problems.Add(owner, ir.SeverityError, ReasonPathConflict, "the catch-all of requests for any host is already served by %s; the default backend is not served", c.by)
		return nil
	}
	cluster, ok := t.ingressBackend(r, owner, r.Spec.Source.Kubernetes.Route.GetNamespace(), db, ngx.http2)
	if !ok {
		return nil
	}
	ngx.backend(t, owner, cluster)
	fallback := &ir.Route{
		Name:     r.Name + "/default-backend",
		Owners:   []ir.ObjectRef{owner},
		Match:    ir.RouteMatch{PathPrefix: "/"},
		Backends: []ir.WeightedCluster{{Cluster: cluster, Weight: 1}},
	}
	switch {
	case own:
	case taken:
		t.problems.Add(owner, ir.SeverityWarning, ReasonPathConflict, "the catch-all of requests for any host is already served by %s; the default backend serves only this Ingress's hosts", c.by)
	default:
		st.claims[catchAll] = claimant{route: r.Name, by: t.describe(r, "defaultBackend")}
		vh := st.vhost("*")
		vh.paths = append(vh.paths, &ingressRoute{path: "/", route: fallback})
	}
	return fallback
}

// describe names a section of a Route's tenant object for messages: "Ingress shop/web
// (rule 0 path /)".
func (t *l7) describe(r *v1alpha1.Route, section string) string {
	kind, ns, name := "", "", r.Name
	if src := r.Spec.Source.Kubernetes; src != nil {
		kind, ns, name = src.Route.GetKind(), src.Route.GetNamespace(), src.Route.GetName()
	}
	s := fmt.Sprintf("%s %s/%s", kind, truncate(ns), truncate(name))
	if section != "" {
		s += " (" + section + ")"
	}
	return s
}

// ingressBackend resolves an Ingress backend to a cluster, reporting a problem on owner when
// it cannot.
func (t *l7) ingressBackend(r *v1alpha1.Route, owner ir.ObjectRef, ns string, b *networkingv1.IngressBackend, http2 bool) (string, bool) {
	if b.Resource != nil || b.Service == nil {
		t.problems.Add(owner, ir.SeverityError, ReasonUnsupportedBackend, "only Service backends are supported; not served")
		return "", false
	}
	port := b.Service.Port.Number
	if name := b.Service.Port.Name; name != "" && port == 0 {
		svc := t.service(r, ns, b.Service.Name)
		if svc == nil {
			t.problems.Add(owner, ir.SeverityError, ReasonBackendNotFound, "Service %s/%s is not among the Services the route carries", truncate(ns), truncate(b.Service.Name))
			return "", false
		}
		for _, p := range svc.Spec.Ports {
			if p.Name == name && v1alpha1.ProtocolOrTCP(p.Protocol) == corev1.ProtocolTCP {
				port = p.Port
				break
			}
		}
		if port == 0 {
			t.problems.Add(owner, ir.SeverityError, ReasonBackendNotFound, "Service %s/%s has no TCP port named %q", truncate(ns), truncate(b.Service.Name), truncate(name))
			return "", false
		}
	}
	be, reason, msg := t.backend(r, owner, ns, b.Service.Name, port, http2, "")
	if reason != "" {
		t.problems.Add(owner, ir.SeverityError, reason, "%s", msg)
		return "", false
	}
	return be.cluster, true
}

// ingressHost normalizes a host (lower case, no trailing dot) and checks it is a DNS name or
// a wildcard "*.<DNS name>"; otherwise it says why not.
func ingressHost(host string) (string, string) {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	var errs []string
	if strings.HasPrefix(h, "*.") {
		errs = validation.IsWildcardDNS1123Subdomain(h)
	} else {
		errs = validation.IsDNS1123Subdomain(h)
	}
	if len(errs) > 0 {
		return "", "is not a DNS name: " + truncate(strings.Join(errs, "; "))
	}
	for _, label := range strings.Split(strings.TrimPrefix(h, "*."), ".") {
		if len(label) > validation.DNS1123LabelMaxLength {
			return "", fmt.Sprintf("has a label longer than %d characters", validation.DNS1123LabelMaxLength)
		}
	}
	if suffix, ok := strings.CutPrefix(h, "*."); ok {
		// kubelb writes this regex, in one shape on which ProgramSize is exact
		// (TestProgramSizeMatchesEnvoy): it is held to Envoy's own limit, not re2.Check's margin.
		if n, err := re2.ProgramSize(wildcardAuthority(suffix)); err != nil || n > re2.EnvoyMaxProgramSize {
			return "", fmt.Sprintf("is too long for a wildcard host: Envoy checks that exactly one label comes before %s with a regular expression, and Envoy would refuse this one as too complex (RE2 program size %d, at most %d)",
				truncate(suffix), n, re2.EnvoyMaxProgramSize)
		}
	}
	return h, ""
}

// wildcardAuthority is the regular expression that matches the :authority of a request for
// exactly one DNS label before suffix (a wildcard host "*.<suffix>"), with or without a port.
// Its RE2 program grows with suffix: ingressHost refuses a suffix too long for Envoy.
func wildcardAuthority(suffix string) string {
	return `(?i)^[^.:]+\.` + regexp.QuoteMeta(suffix) + `(:[0-9]+)?$`
}

// ingressPath reads a path: exact or (element-wise) prefix, and the path to match. Prefix
// and ImplementationSpecific paths match whole path elements (/foo matches /foo and
// /foo/bar, not /foobar); a trailing slash is ignored.
func ingressPath(p networkingv1.HTTPIngressPath) (bool, string, string) {
	exact := false
	switch {
	case p.PathType == nil, *p.PathType == networkingv1.PathTypePrefix, *p.PathType == networkingv1.PathTypeImplementationSpecific:
	case *p.PathType == networkingv1.PathTypeExact:
		exact = true
	default:
		return false, "", fmt.Sprintf("pathType %q is not Exact, Prefix or ImplementationSpecific", truncate(string(*p.PathType)))
	}
	path := p.Path
	if path == "" && !exact {
		path = "/"
	}
	switch {
	case !strings.HasPrefix(path, "/"):
		return false, "", fmt.Sprintf("path %q is not absolute (it must start with /)", truncate(path))
	case len(path) > maxIngressPath:
		return false, "", fmt.Sprintf("path is longer than %d characters", maxIngressPath)
	case strings.ContainsAny(path, "?#"):
		return false, "", fmt.Sprintf("path %q holds ? or #, which never appear in a request path", truncate(path))
	case strings.ContainsFunc(path, func(c rune) bool { return c <= ' ' || c >= 0x7f }):
		return false, "", fmt.Sprintf("path %q holds spaces, control or non-ASCII characters (percent-encode them)", truncate(path))
	}
	if !exact {
		for len(path) > 1 && strings.HasSuffix(path, "/") {
			path = path[:len(path)-1]
		}
	}
	return exact, path, ""
}

func describeMatch(c ingressClaim) string {
	host := "any host"
	if c.domain != "*" {
		host = "host " + c.domain
	}
	if c.exact {
		return fmt.Sprintf("exact path %s on %s", c.path, host)
	}
	if c.regex {
		return fmt.Sprintf("regular expression path %s on %s", truncate(c.path), host)
	}
	return fmt.Sprintf("path prefix %s on %s", c.path, host)
}

func (st *ingressState) vhost(domain string) *ingressVHost {
	vh, ok := st.vhosts[domain]
	if !ok {
		vh = &ingressVHost{domain: domain}
		st.vhosts[domain] = vh
	}
	return vh
}

// redirectToHTTPS marks the paths of one Ingress (mine, by domain) and its default backend
// (fallback, nil for none) on hosts (listed in its spec.tls) to redirect from HTTP to HTTPS,
// which they do when the host is served over HTTPS (emitIngress decides).
func (st *ingressState) redirectToHTTPS(hosts []string, mine map[string][]*ingressRoute, fallback *ir.Route) {
	for _, host := range hosts {
		h, msg := ingressHost(host)
		if msg != "" {
			continue // reported with the TLS entry
		}
		for _, p := range mine[h] {
			p.sslRedirect = true
		}
		if vh, ok := st.vhosts[h]; ok && fallback != nil && vh.fallback == fallback {
			vh.fallbackSSLRedirect = true
		}
	}
}

// otherHosts are the hosts served over HTTPS with another certificate than secret's, sorted:
// on secret's chain a request for one of them came over a connection made for another server
// name (HTTP/2 clients coalesce connections) and is answered 421 Misdirected Request, so
// the client retries on a connection of its own. Envoy prefers an exact domain over a
// wildcard, so a host of the chain inside another chain's wildcard keeps its own routes.
func (st *ingressState) otherHosts(secret string) []string {
	var out []string
	for s, c := range st.chains {
		if s != secret {
			for _, h := range c.hosts {
				if h != anyServerName { // unknown hosts are not misdirected: they get 404
					out = append(out, h)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func (st *ingressState) chain(secret string) *ingressChain {
	c, ok := st.chains[secret]
	if !ok {
		c = &ingressChain{secret: secret}
		st.chains[secret] = c
	}
	return c
}

// virtualHost builds the IR virtual host of a domain: exact paths first, then prefixes,
// longest first, then the fallback (default backend) when no prefix / is served.
//
// A wildcard host matches exactly one DNS label in Kubernetes ("*.example.com" matches
// a.example.com, not b.a.example.com), while Envoy's wildcard domain matches any depth. So
// the routes of a wildcard host also match the Host header (:authority) against one label,
// and the routes of anyHost (the "*" virtual host; nil over HTTPS) follow them, for the deeper
// hosts that the wildcard must not take.
//
// With toHTTPS (the HTTP listener, for a host served over HTTPS), the routes of the Ingresses
// that redirect the host answer with a redirect to HTTPS instead.
func (vh *ingressVHost) virtualHost(anyHost *ingressVHost, toHTTPS bool) *ir.VirtualHost {
	paths := slices.Clone(vh.paths)
	slices.SortStableFunc(paths, func(a, b *ingressRoute) int {
		if a.exact != b.exact {
			if a.exact {
				return -1
			}
			return 1
		}
		return cmp.Or(-cmp.Compare(len(a.path), len(b.path)), cmp.Compare(a.path, b.path))
	})
	var authority []ir.StringMatch
	if suffix, ok := strings.CutPrefix(vh.domain, "*."); ok {
		authority = []ir.StringMatch{{Name: ":authority", Value: wildcardAuthority(suffix), Regex: true}}
	}
	out := &ir.VirtualHost{Name: vh.domain, Domains: []string{vh.domain}}
	add := func(r *ir.Route, redirect bool) {
		c := cloneRoute(r)
		c.Match.Headers = append(c.Match.Headers, authority...)
		if redirect && toHTTPS {
			c = httpsRedirect(c)
		}
		out.Routes = append(out.Routes, c)
	}
	catchAll := false
	for _, p := range paths {
		add(p.route, p.sslRedirect)
		catchAll = catchAll || (!p.exact && p.path == "/")
	}
	if !catchAll && vh.fallback != nil {
		add(vh.fallback, vh.fallbackSSLRedirect)
	}
	if authority != nil && anyHost != nil {
		out.Routes = append(out.Routes, anyHost.virtualHost(nil, false).Routes...)
	}
	return out
}

// cloneRoute copies a route, so that route configurations never share elements.
func cloneRoute(r *ir.Route) *ir.Route {
	c := *r
	c.Owners = slices.Clone(r.Owners)
	c.Backends = slices.Clone(r.Backends)
	c.Mirrors = slices.Clone(r.Mirrors)
	c.Match.Headers = slices.Clone(r.Match.Headers)
	return &c
}

// emitIngress adds the shared Ingress listeners and their route configurations.
func (t *l7) emitIngress(st *ingressState, httpPort, httpsPort uint32) {
	bound := map[uint32]string{}
	for _, l := range t.cfg.Listeners {
		if l.Protocol != ir.ProtocolUDP {
			bound[l.Port] = l.Name
		}
	}
	var limits *ir.HeaderLimits
	if t.in.HeaderLimits != nil {
		hl := *t.in.HeaderLimits
		limits = &hl
	}
	// Whether the HTTPS listener is made: a host redirects to HTTPS only then.
	_, httpsTaken := bound[httpsPort]
	httpsServed := httpsPort != 0 && httpsPort != httpPort && len(st.chains) > 0 && !httpsTaken
	domains := make([]string, 0, len(st.vhosts))
	for d, vh := range st.vhosts {
		if len(vh.paths) > 0 || vh.fallback != nil {
			domains = append(domains, d)
		}
	}
	slices.Sort(domains)

	var httpCORS, httpSession bool
	if httpPort != 0 && len(domains) > 0 {
		if other, ok := bound[httpPort]; ok {
			for _, o := range st.httpOwners {
				t.problems.Add(o, ir.SeverityError, ReasonListenerPortConflict, "the Ingress listener port %d is already used by %s; the Ingress is not served over HTTP", httpPort, other)
			}
		} else {
			rc := &ir.RouteConfig{Name: IngressHTTPListener}
			for _, d := range domains {
				_, tls := st.sni[d]
				rc.VirtualHosts = append(rc.VirtualHosts, st.vhosts[d].virtualHost(st.vhosts["*"], tls && httpsServed))
			}
			t.cfg.RouteConfigs = append(t.cfg.RouteConfigs, rc)
			httpCORS, httpSession = rc.HasCORS(), rc.HasSessionPersistence()
			bound[httpPort] = IngressHTTPListener
			t.cfg.Listeners = append(t.cfg.Listeners, &ir.Listener{
				Name:              IngressHTTPListener,
				Address:           t.opts.ListenerAddress,
				Port:              httpPort,
				Protocol:          ir.ProtocolHTTP,
				StatPrefix:        IngressHTTPListener,
				Owners:            slices.Clone(st.httpOwners),
				RouteConfig:       IngressHTTPListener,
				HeaderLimits:      limits,
				StreamIdleTimeout: ir.Duration(t.opts.StreamIdleTimeout),
				AccessLog:         t.opts.AccessLog,
				CORS:              httpCORS,
				StatefulSession:   httpSession,
			})
		}
	}

	if httpsPort == 0 || len(st.chains) == 0 {
		return
	}
	if other, ok := bound[httpsPort]; ok {
		for _, o := range st.httpsOwners {
			t.problems.Add(o, ir.SeverityError, ReasonListenerPortConflict, "the Ingress listener port %d is already used by %s; nothing is served over HTTPS", httpsPort, other)
		}
		return
	}
	secrets := make([]string, 0, len(st.chains))
	for s := range st.chains {
		secrets = append(secrets, s)
	}
	slices.Sort(secrets)
	l := &ir.Listener{
		Name:              IngressHTTPSListener,
		Address:           t.opts.ListenerAddress,
		Port:              httpsPort,
		Protocol:          ir.ProtocolHTTPS,
		StatPrefix:        IngressHTTPSListener,
		Owners:            slices.Clone(st.httpsOwners),
		HeaderLimits:      limits,
		StreamIdleTimeout: ir.Duration(t.opts.StreamIdleTimeout),
		AccessLog:         t.opts.AccessLog,
	}
	for _, s := range secrets {
		c := st.chains[s]
		hosts := slices.Clone(c.hosts)
		slices.Sort(hosts)
		// The chain of connections without a matching server name, when this certificate
		// serves them: the same routes, on a chain without server names.
		anyName := slices.Contains(hosts, anyServerName)
		hosts = slices.DeleteFunc(hosts, func(h string) bool { return h == anyServerName })
		rc := &ir.RouteConfig{Name: IngressHTTPSListener + "-" + s}
		if c.vhost != nil {
			rc.VirtualHosts = []*ir.VirtualHost{c.vhost}
		} else {
			domains := hosts
			if anyName { // the host-less routes, after the named hosts
				domains = append(slices.Clone(hosts), anyServerName)
			}
			for _, h := range domains {
				if vh, ok := st.vhosts[h]; ok && (len(vh.paths) > 0 || vh.fallback != nil) {
					rc.VirtualHosts = append(rc.VirtualHosts, vh.virtualHost(nil, false))
				}
			}
		}
		if other := st.otherHosts(s); len(other) > 0 {
			rc.VirtualHosts = append(rc.VirtualHosts, misdirectedHost(other, slices.Clone(st.httpsOwners)...))
		}
		t.cfg.RouteConfigs = append(t.cfg.RouteConfigs, rc)
		l.CORS = l.CORS || rc.HasCORS()
		l.StatefulSession = l.StatefulSession || rc.HasSessionPersistence()
		if len(hosts) > 0 {
			l.TLS = append(l.TLS, &ir.TLSServer{ServerNames: hosts, Secrets: []string{s}, RouteConfig: rc.Name})
		}
		if anyName {
			l.TLS = append(l.TLS, &ir.TLSServer{Secrets: []string{s}, RouteConfig: rc.Name})
		}
	}
	t.cfg.Listeners = append(t.cfg.Listeners, l)
}

// anyServerName stands for connections without a matching server name (no SNI, or one no
// other chain takes) among the hosts served over HTTPS: a TLS entry without hosts of an
// Ingress without rule hosts claims it, and its certificate is served on the listener's
// fallback chain (no server names), which routes by the Ingress's host-less rules.
const anyServerName = "*"

// defaultCertificateSecret is the IR name of the tenant's default Ingress certificate.
const defaultCertificateSecret = "default-certificate"

// defaultCertificate is the IR Secret of the tenant's default Ingress certificate
// (Input.DefaultCertificate, set), added once, or why it cannot be served.
func (t *l7) defaultCertificate(owner ir.ObjectRef) (string, string, string) {
	if s, ok := t.secrets[defaultCertificateSecret]; ok {
		s.Owners = append(s.Owners, owner)
		return defaultCertificateSecret, "", ""
	}
	d := t.in.DefaultCertificate
	crt, key := d.Data[corev1.TLSCertKey], d.Data[corev1.TLSPrivateKeyKey]
	if _, err := tls.X509KeyPair(crt, key); err != nil {
		return "", ReasonInvalidCertificate, fmt.Sprintf("the tenant's default certificate (Secret %s/%s) does not hold a usable certificate and key (tls.crt, tls.key): %s", truncate(d.Namespace), truncate(d.Name), truncate(err.Error()))
	}
	s := &ir.Secret{Name: defaultCertificateSecret, Owners: []ir.ObjectRef{owner}, CertChain: crt, PrivateKey: key}
	t.secrets[defaultCertificateSecret] = s
	t.cfg.Secrets = append(t.cfg.Secrets, s)
	return defaultCertificateSecret, "", ""
}
