package ir

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"kubelb.dev/kubelb/internal/re2"
	"kubelb.dev/kubelb/internal/sourcerange"
)

// Validate reports every reason the back end could not turn the Config into a consistent
// Envoy configuration: names missing or repeated, references to elements that do not exist,
// two listeners on one address and port, out-of-range ports, bad endpoints and matches.
// A front end must only ever produce Configs that validate; the back end checks again.
func (c *Config) Validate() error {
	return c.ValidateWith(nil)
}

// ValidationMemo is what Config.ValidateWith keeps of a Config found valid for the next one,
// whose unchanged elements are the same pointers (translate.Incremental hands them on, and
// elements are never modified): while the clusters are the same, a cluster, a route
// configuration or a virtual host found valid is not checked again, and a route
// configuration's HTTP filters are not worked out again from its routes. The zero value is
// ready; a memo is not safe for concurrent use.
type ValidationMemo struct {
	clusters []*Cluster
	names    map[string]bool
	rcs      map[*RouteConfig]*rcFacts
	vhosts   map[*VirtualHost]bool
}

// rcFacts is what a route configuration's routes ask of the listeners serving it.
type rcFacts struct {
	cors, session, ranges, basic, limit, key, global bool
	compress                                         map[Compressor]bool
	jwt                                              []JWT
	extAuths, oidcs                                  []string
}

func factsOf(rc *RouteConfig) *rcFacts {
	f := &rcFacts{compress: make(map[Compressor]bool, len(Compressors))}
	for _, cp := range Compressors {
		f.compress[cp] = rc.HasCompressor(cp)
	}
	f.jwt, f.extAuths, f.oidcs = rc.JWTRequirements(), rc.ExtAuthNames(), rc.OIDCNames()
	f.cors, f.session, f.ranges = rc.HasCORS(), rc.HasSessionPersistence(), rc.HasSourceRanges()
	f.basic, f.limit, f.key, f.global = rc.HasBasicAuth(), rc.HasRateLimit(), rc.HasAPIKeyAuth(), rc.HasGlobalRateLimit()
	return f
}

// ValidateWith is Validate, skipping what m (nil: nothing) found valid in the last Config;
// m then keeps what this Config has found valid, when it is.
func (c *Config) ValidateWith(m *ValidationMemo) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	same := m != nil && m.names != nil && slices.Equal(c.Clusters, m.clusters)
	var clusters map[string]bool
	if same {
		clusters = m.names
	} else {
		clusters = make(map[string]bool, len(c.Clusters))
		for _, cl := range c.Clusters {
			if cl.Name == "" || clusters[cl.Name] {
				fail("cluster %q: name empty or repeated", cl.Name)
			}
			clusters[cl.Name] = true
			if err := cl.validate(); err != nil {
				fail("cluster %q: %w", cl.Name, err)
			}
		}
	}
	var prevRCs map[*RouteConfig]*rcFacts
	var prevHosts map[*VirtualHost]bool
	if same {
		prevRCs, prevHosts = m.rcs, m.vhosts
	}
	rcs := make(map[*RouteConfig]*rcFacts, len(c.RouteConfigs))
	secrets := map[string]bool{}
	for _, s := range c.Secrets {
		if s.Name == "" || secrets[s.Name] {
			fail("secret %q: name empty or repeated", s.Name)
		}
		secrets[s.Name] = true
		if generic := len(s.Generic) > 0; generic != (len(s.CertChain) == 0 && len(s.PrivateKey) == 0) || (!generic && (len(s.CertChain) == 0 || len(s.PrivateKey) == 0)) {
			fail("secret %q: certificate or key missing, or a generic secret with them", s.Name)
		}
	}
	for _, cl := range c.Clusters {
		if cl.TLS != nil && cl.TLS.ClientCertificate != "" && !secrets[cl.TLS.ClientCertificate] {
			fail("cluster %q: upstream TLS: client certificate %q does not exist", cl.Name, cl.TLS.ClientCertificate)
		}
	}
	routeConfigs := map[string]bool{}
	for _, rc := range c.RouteConfigs {
		if rc.Name == "" || routeConfigs[rc.Name] {
			fail("route config %q: name empty or repeated", rc.Name)
		}
		routeConfigs[rc.Name] = true
		if f, ok := prevRCs[rc]; ok {
			rcs[rc] = f
			continue
		}
		if err := rc.validate(clusters, prevHosts); err != nil {
			fail("route config %q: %w", rc.Name, err)
		}
	}

	// A route's CORS policy and session persistence need Envoy's CORS and stateful session
	// filters in every listener serving it.
	corsRoutes, sessionRoutes, rangeRoutes := map[string]bool{}, map[string]bool{}, map[string]bool{}
	basicRoutes, limitRoutes, keyRoutes := map[string]bool{}, map[string]bool{}, map[string]bool{}
	globalRoutes, anyGlobal := map[string]bool{}, false
	jwtRequirements, extAuths, oidcs := map[string][]JWT{}, map[string][]string{}, map[string][]string{}
	compressRoutes := map[Compressor]map[string]bool{}
	for _, cp := range Compressors {
		compressRoutes[cp] = map[string]bool{}
	}
	for _, rc := range c.RouteConfigs {
		f := rcs[rc]
		if f == nil {
			f = factsOf(rc)
			rcs[rc] = f
		}
		for _, cp := range Compressors {
			compressRoutes[cp][rc.Name] = f.compress[cp]
		}
		jwtRequirements[rc.Name], extAuths[rc.Name] = f.jwt, f.extAuths
		oidcs[rc.Name] = f.oidcs
		corsRoutes[rc.Name], sessionRoutes[rc.Name] = f.cors, f.session
		rangeRoutes[rc.Name] = f.ranges
		basicRoutes[rc.Name], limitRoutes[rc.Name] = f.basic, f.limit
		keyRoutes[rc.Name] = f.key
		globalRoutes[rc.Name] = f.global
		anyGlobal = anyGlobal || globalRoutes[rc.Name]
	}
	// Global rate limits need the tenant's rate-limit service, and it is there only for them.
	switch {
	case anyGlobal && c.RateLimitService == nil:
		fail("a route has a global rate limit, but there is no rate-limit service")
	case !anyGlobal && c.RateLimitService != nil:
		fail("a rate-limit service, but no route has a global rate limit")
	case c.RateLimitService != nil:
		if err := c.RateLimitService.validate(clusters); err != nil {
			fail("%w", err)
		}
		if _, err := c.GlobalRateLimits(); err != nil {
			fail("%w", err)
		}
	}

	type bindKey struct {
		family, addr string
		port         uint32
	}
	overQUIC := map[string]bool{} // the route configurations HTTP3 listeners serve
	listeners := make(map[string]bool, len(c.Listeners))
	bound := make(map[bindKey]string, len(c.Listeners))
	for _, l := range c.Listeners {
		if l.Name == "" || listeners[l.Name] {
			fail("listener %q: name empty or repeated", l.Name)
		}
		listeners[l.Name] = true
		if err := l.validate(clusters, routeConfigs, secrets); err != nil {
			fail("listener %q: %w", l.Name, err)
		}
		if err := l.validateHTTPFilter("CORS", l.CORS, corsRoutes); err != nil {
			fail("listener %q: %w", l.Name, err)
		}
		if err := l.validateHTTPFilter("stateful session", l.StatefulSession, sessionRoutes); err != nil {
			fail("listener %q: %w", l.Name, err)
		}
		if err := l.validateHTTPFilter("RBAC", l.RouteSourceRanges, rangeRoutes); err != nil {
			fail("listener %q: %w", l.Name, err)
		}
		if err := l.validateHTTPFilter("basic auth", l.BasicAuth, basicRoutes); err != nil {
			fail("listener %q: %w", l.Name, err)
		}
		if err := l.validateHTTPFilter("API key auth", l.APIKeyAuth, keyRoutes); err != nil {
			fail("listener %q: %w", l.Name, err)
		}
		if err := l.validateHTTPFilter("local rate-limit", l.RateLimit, limitRoutes); err != nil {
			fail("listener %q: %w", l.Name, err)
		}
		if err := l.validateHTTPFilter("rate-limit", l.GlobalRateLimit != nil, globalRoutes); err != nil {
			fail("listener %q: %w", l.Name, err)
		}
		if l.GlobalRateLimit != nil && c.RateLimitService != nil && *l.GlobalRateLimit != *c.RateLimitService {
			fail("listener %q: its rate-limit service is not the Config's", l.Name)
		}
		if err := l.validateJWT(clusters, jwtRequirements); err != nil {
			fail("listener %q: %w", l.Name, err)
		}
		if err := l.validateExtAuth(clusters, extAuths); err != nil {
			fail("listener %q: %w", l.Name, err)
		}
		if err := l.validateOIDC(clusters, secrets, oidcs); err != nil {
			fail("listener %q: %w", l.Name, err)
		}
		if err := l.validateCompressors(compressRoutes); err != nil {
			fail("listener %q: %w", l.Name, err)
		}
		family := "tcp"
		if l.Protocol.BindsUDP() {
			family = "udp"
		}
		bind := func(addr string) {
			key := bindKey{family, addr, l.Port}
			if other, ok := bound[key]; ok {
				fail("listeners %q and %q both bind %s/%s/%d", other, l.Name, family, addr, l.Port)
			}
			bound[key] = l.Name
		}
		bind(l.Address)
		for _, addr := range l.AdditionalAddresses {
			bind(addr)
		}
		if l.Protocol == ProtocolHTTP3 {
			for _, t := range l.TLS {
				overQUIC[t.RouteConfig] = true
			}
		}
	}
	// alt-svc advertises HTTP/3 only where it is served.
	for _, rc := range c.RouteConfigs {
		switch {
		case rc.HTTP3Port > 65535:
			fail("route config %q: HTTP/3 port %d out of range 1-65535", rc.Name, rc.HTTP3Port)
		case rc.HTTP3Port != 0 && !overQUIC[rc.Name]:
			fail("route config %q advertises HTTP/3, but no HTTP3 listener serves it", rc.Name)
		}
	}
	if m != nil {
		if len(errs) > 0 {
			*m = ValidationMemo{}
			return errors.Join(errs...)
		}
		// The virtual hosts found valid: those of the route configurations checked now are
		// added to the last ones; the map is made again from the Config's alone when those
		// gone outnumber them.
		hosts, live := prevHosts, 0
		if hosts == nil {
			hosts = map[*VirtualHost]bool{}
		}
		for _, rc := range c.RouteConfigs {
			live += len(rc.VirtualHosts)
			if _, checked := prevRCs[rc]; !checked {
				for _, vh := range rc.VirtualHosts {
					hosts[vh] = true
				}
			}
		}
		if len(hosts) > 2*live+1024 {
			hosts = make(map[*VirtualHost]bool, live)
			for _, rc := range c.RouteConfigs {
				for _, vh := range rc.VirtualHosts {
					hosts[vh] = true
				}
			}
		}
		*m = ValidationMemo{clusters: c.Clusters, names: clusters, rcs: rcs, vhosts: hosts}
	}
	return errors.Join(errs...)
}

func (l *Listener) validate(clusters, routeConfigs, secrets map[string]bool) error {
	if ip, err := netip.ParseAddr(l.Address); err != nil || ip.Zone() != "" {
		return fmt.Errorf("address %q is not an IP address", l.Address)
	}
	if len(l.AdditionalAddresses) > 0 && l.Protocol != ProtocolTCP && l.Protocol != ProtocolUDP {
		return fmt.Errorf("additional addresses on a %s listener (TCP and UDP only)", l.Protocol)
	}
	for i, a := range l.AdditionalAddresses {
		if ip, err := netip.ParseAddr(a); err != nil || ip.Zone() != "" {
			return fmt.Errorf("additional address %q is not an IP address", a)
		}
		if a == l.Address || slices.Contains(l.AdditionalAddresses[:i], a) {
			return fmt.Errorf("address %s is bound twice", a)
		}
	}
	if l.Port < 1 || l.Port > 65535 {
		return fmt.Errorf("port %d out of range 1-65535", l.Port)
	}
	if IsFleetPort(l.Port) {
		return fmt.Errorf("port %d is one of the Envoy pods' own ports", l.Port)
	}
	if l.StatPrefix == "" {
		return errors.New("stat prefix empty")
	}
	if l.StreamIdleTimeout < 0 || (l.StreamIdleTimeout != 0 && !l.Protocol.ServesHTTP()) {
		return errors.New("a stream idle timeout is for HTTP, HTTPS and HTTP3 listeners, and not negative")
	}
	if err := l.ClientTraffic.validate(l.Protocol); err != nil {
		return err
	}
	if len(l.SourceRanges) > 0 && l.Protocol != ProtocolTCP && l.Protocol != ProtocolUDP {
		return fmt.Errorf("source ranges on a %s listener (TCP and UDP only; HTTP routes have their own)", l.Protocol)
	}
	if err := sourcerange.Valid(l.SourceRanges); err != nil {
		return err
	}
	if err := l.validateStreamPolicy(); err != nil {
		return err
	}
	switch l.Protocol {
	case ProtocolTCP:
		if err := validateStream(l.Cluster, l.Backends, l.FailedWeight, clusters); err != nil {
			return err
		}
	case ProtocolUDP:
		if !clusters[l.Cluster] {
			return fmt.Errorf("cluster %q does not exist", l.Cluster)
		}
		if len(l.Backends) > 0 || l.FailedWeight > 0 {
			return errors.New("a UDP listener has one cluster, not weighted backends")
		}
	case ProtocolHTTP:
		if !routeConfigs[l.RouteConfig] {
			return fmt.Errorf("route config %q does not exist", l.RouteConfig)
		}
	case ProtocolHTTPS, ProtocolHTTP3:
		if len(l.TLS) == 0 {
			return fmt.Errorf("%s listener without TLS servers", l.Protocol)
		}
		names := map[string]bool{}
		fallbacks := 0
		for _, t := range l.TLS {
			if err := t.validate(clusters, routeConfigs, secrets); err != nil {
				return fmt.Errorf("TLS server %v: %w", t.ServerNames, err)
			}
			if l.Protocol == ProtocolHTTP3 && (t.Proxies() || t.ClientValidation != nil) {
				return fmt.Errorf("TLS server %v of an HTTP3 listener proxies or validates client certificates (QUIC chains serve HTTP routes only)", t.ServerNames)
			}
			for _, n := range t.ServerNames {
				if n == "" {
					return errors.New("empty server name")
				}
			}
			if len(t.ServerNames) == 0 {
				fallbacks++
			}
			for _, n := range t.ServerNames {
				if names[n] {
					return fmt.Errorf("server name %q is in two TLS servers", n)
				}
				names[n] = true
			}
		}
		if fallbacks > 1 {
			return errors.New("more than one TLS server without server names")
		}
	default:
		return fmt.Errorf("protocol %q is not supported", l.Protocol)
	}
	return nil
}

// validate checks one chain: certificates that exist, each named once, and exactly
// one of a route configuration (HTTP) and a TCP proxy target.
func (t *TLSServer) validate(clusters, routeConfigs, secrets map[string]bool) error {
	for i, name := range t.Secrets {
		if !secrets[name] {
			return fmt.Errorf("secret %q does not exist", name)
		}
		if slices.Contains(t.Secrets[:i], name) {
			return fmt.Errorf("secret %q is named twice", name)
		}
	}
	if cv := t.ClientValidation; cv != nil {
		switch {
		case cv.CACertificates == "" || len(cv.CACertificates) > maxCABundle:
			return fmt.Errorf("client validation with %d bytes of CA certificates, not 1 to %d", len(cv.CACertificates), maxCABundle)
		case cv.Optional && cv.AllowInsecureFallback:
			return errors.New("client validation both optional and with an insecure fallback: give one")
		}
	}
	if err := t.validateStreamPolicy(); err != nil {
		return err
	}
	switch {
	case t.Proxies():
		if t.ClientValidation != nil && !t.Terminates() {
			return errors.New("client validation on a chain that passes TLS through (terminating chains only)")
		}

		if t.RouteConfig != "" {
			return errors.New("both a route config and clusters: a chain serves HTTP routes or proxies TCP")
		}
		return validateStream(t.Cluster, t.Backends, t.FailedWeight, clusters)
	case !t.Terminates():
		return errors.New("neither a certificate nor clusters: a chain terminates TLS or passes it through")
	case t.FailedWeight > 0:
		return errors.New("failed weight on a chain that serves HTTP routes")
	case !routeConfigs[t.RouteConfig]:
		return fmt.Errorf("route config %q does not exist", t.RouteConfig)
	}
	return nil
}

// validateHTTPFilter checks that the listener runs the HTTP filter (runs) exactly when a
// route configuration it serves has a route that needs it (routes, by route configuration).
func (l *Listener) validateHTTPFilter(filter string, runs bool, routes map[string]bool) error {
	needs := routes[l.RouteConfig]
	for _, t := range l.TLS {
		needs = needs || routes[t.RouteConfig]
	}
	switch {
	case runs && !l.Protocol.ServesHTTP():
		return fmt.Errorf("the %s filter on a %s listener (HTTP, HTTPS and HTTP3 only)", filter, l.Protocol)
	case needs && !runs:
		return fmt.Errorf("a route it serves needs the %s filter, but the listener does not run it", filter)
	case !needs && runs:
		return fmt.Errorf("the %s filter runs, but no route it serves needs it", filter)
	}
	return nil
}

// HasCORS reports whether a route of the configuration has a CORS policy.
func (rc *RouteConfig) HasCORS() bool {
	return rc.anyRoute(func(r *Route) bool { return r.CORS != nil })
}

// HasSessionPersistence reports whether a route of the configuration has session persistence.
func (rc *RouteConfig) HasSessionPersistence() bool {
	return rc.anyRoute(func(r *Route) bool { return r.SessionPersistence != nil })
}

func (rc *RouteConfig) anyRoute(f func(*Route) bool) bool {
	for _, vh := range rc.VirtualHosts {
		if slices.ContainsFunc(vh.Routes, f) {
			return true
		}
	}
	return false
}

// validateStream checks where a TCP proxy sends connections: exactly one of cluster and
// backends, every cluster existing, the weights (with failed) adding up to 1..2^32-1.
func validateStream(cluster string, backends []WeightedCluster, failed uint32, clusters map[string]bool) error {
	if cluster == "" && len(backends) == 0 && failed > 0 {
		return nil // every connection is refused (no backend can be used)
	}
	if (cluster == "") == (len(backends) == 0) {
		return errors.New("exactly one of cluster and backends must be set")
	}
	if cluster != "" {
		if failed > 0 {
			return errors.New("failed weight without backends")
		}
		if !clusters[cluster] {
			return fmt.Errorf("cluster %q does not exist", cluster)
		}
		return nil
	}
	total := uint64(failed)
	for _, b := range backends {
		if !clusters[b.Cluster] {
			return fmt.Errorf("cluster %q does not exist", b.Cluster)
		}
		if b.HasHeaders() {
			return fmt.Errorf("backend %q changes headers: only the backends of HTTP routes can", b.Cluster)
		}
		total += uint64(b.Weight)
	}
	if total == 0 || total > 1<<32-1 {
		return fmt.Errorf("backend weights add up to %d; want 1 to 4294967295", total)
	}
	return nil
}

// validate checks the route configuration; the routes of a virtual host in valid (found valid
// with the same clusters) are not checked again.
func (rc *RouteConfig) validate(clusters map[string]bool, valid map[*VirtualHost]bool) error {
	vhosts := map[string]bool{}
	domains := map[string]bool{}
	for _, vh := range rc.VirtualHosts {
		if vh.Name == "" || vhosts[vh.Name] {
			return fmt.Errorf("virtual host %q: name empty or repeated", vh.Name)
		}
		vhosts[vh.Name] = true
		if len(vh.Domains) == 0 {
			return fmt.Errorf("virtual host %q has no domains", vh.Name)
		}
		for _, d := range vh.Domains {
			if d == "" || domains[d] {
				return fmt.Errorf("virtual host %q: domain %q empty or in two virtual hosts", vh.Name, d)
			}
			domains[d] = true
		}
		if valid[vh] {
			continue
		}
		for _, r := range vh.Routes {
			if err := r.validate(clusters); err != nil {
				return fmt.Errorf("virtual host %q route %q: %w", vh.Name, r.Name, err)
			}
		}
	}
	return nil
}

func (r *Route) validate(clusters map[string]bool) error {
	actions := 0
	if len(r.Backends) > 0 {
		actions++
	}
	if r.Redirect != nil {
		actions++
	}
	if r.DirectResponse != nil {
		actions++
	}
	if actions != 1 {
		return errors.New("exactly one of backends, redirect and direct response must be set")
	}
	if err := sourcerange.Valid(r.SourceRanges); err != nil {
		return err
	}
	if r.MaxRequestBytes < 0 || r.MaxRequestBytes > MaxRequestBodyLimit || (r.MaxRequestBytes > 0 && len(r.Backends) == 0) {
		return fmt.Errorf("request body limit %d: want 0-%d, on a route with backends", r.MaxRequestBytes, MaxRequestBodyLimit)
	}
	if err := r.Authorization.validate(); err != nil {
		return err
	}
	if err := r.BasicAuth.validate(); err != nil {
		return err
	}
	if err := r.APIKeyAuth.validate(); err != nil {
		return err
	}
	if err := r.JWT.validate(); err != nil {
		return err
	}
	if err := r.GlobalRateLimit.validate(); err != nil {
		return err
	}
	if err := r.RateLimit.validate(); err != nil {
		return err
	}
	if err := validateCompression(r.Compression); err != nil {
		return err
	}
	if len(r.Compression) > 0 && len(r.Backends) == 0 {
		return errors.New("compression on a route without backends")
	}
	if r.Authorization != nil && len(r.SourceRanges) > 0 {
		return errors.New("source ranges and authorization are both set")
	}
	var total uint64
	for _, b := range r.Backends {
		if !clusters[b.Cluster] {
			return fmt.Errorf("cluster %q does not exist", b.Cluster)
		}
		for _, h := range []*HeaderModifier{b.RequestHeaders, b.ResponseHeaders} {
			if err := h.validate(); err != nil {
				return fmt.Errorf("backend %q: %w", b.Cluster, err)
			}
		}
		total += uint64(b.Weight)
	}
	for _, h := range []*HeaderModifier{r.RequestHeaders, r.ResponseHeaders} {
		if err := h.validate(); err != nil {
			return err
		}
	}
	if err := r.CORS.validate(); err != nil {
		return fmt.Errorf("CORS: %w", err)
	}
	if r.Timeout < 0 || r.IdleTimeout < 0 || r.BackendTimeout < 0 {
		return errors.New("a negative timeout")
	}
	if len(r.Backends) == 0 && (r.Timeout != 0 || r.IdleTimeout != 0 || r.BackendTimeout != 0 || len(r.Mirrors) > 0 || r.Retry != nil || r.SessionPersistence != nil) {
		return errors.New("timeouts, retries, mirrors or session persistence without backends")
	}
	if err := r.Retry.validate(); err != nil {
		return fmt.Errorf("retry: %w", err)
	}
	if err := r.SessionPersistence.Validate(); err != nil {
		return fmt.Errorf("session persistence: %w", err)
	}
	if err := r.Hash.Validate(); err != nil {
		return err
	}
	if r.Hash != nil && len(r.Backends) == 0 {
		return errors.New("a hash policy without backends")
	}
	for _, m := range r.Mirrors {
		if !clusters[m.Cluster] {
			return fmt.Errorf("mirror cluster %q does not exist", m.Cluster)
		}
		if m.PerMillion == 0 || m.PerMillion > 1000000 {
			return fmt.Errorf("mirror share %d per million; want 1 to 1000000", m.PerMillion)
		}
		if len(m.Host) > MaxMirrorHost || strings.ContainsFunc(m.Host, func(c rune) bool { return c <= ' ' || c >= 0x7f || c == '/' }) {
			return fmt.Errorf("mirror host %q is not a host", m.Host)
		}
	}
	if r.FailedWeight > 0 && len(r.Backends) == 0 {
		return errors.New("failed weight without backends")
	}
	total += uint64(r.FailedWeight)
	if len(r.Backends) > 0 && (total == 0 || total > 1<<32-1) {
		return fmt.Errorf("backend weights add up to %d; want 1 to 4294967295", total)
	}
	m := r.Match
	paths := 0
	for _, p := range []string{m.PathExact, m.PathPrefix, m.PathRegex} {
		if p != "" {
			paths++
		}
	}
	if paths > 1 {
		return errors.New("more than one path match")
	}
	if m.PathExact != "" && !strings.HasPrefix(m.PathExact, "/") || m.PathPrefix != "" && !strings.HasPrefix(m.PathPrefix, "/") {
		return errors.New("path matches must start with /")
	}
	if m.PathRegex != "" {
		if err := checkRegex(m.PathRegex); err != nil {
			return fmt.Errorf("path regex: %w", err)
		}
	}
	for _, sm := range append(append([]StringMatch(nil), m.Headers...), m.QueryParams...) {
		if sm.Name == "" {
			return errors.New("header or query match without a name")
		}
		if sm.Regex {
			if err := checkRegex(sm.Value); err != nil {
				return fmt.Errorf("match %q: %w", sm.Name, err)
			}
		}
	}
	if rd := r.Redirect; rd != nil {
		switch rd.StatusCode {
		case 0, 301, 302, 303, 307, 308:
		default:
			return fmt.Errorf("redirect status %d is not a redirect", rd.StatusCode)
		}
		if countSet(rd.Path != "", rd.PathPrefix != "", rd.PathRegex != nil) > 1 {
			return errors.New("redirect sets more than one of path, path prefix and path regex")
		}
		if err := rd.PathRegex.validate(); err != nil {
			return fmt.Errorf("redirect: %w", err)
		}
	}
	if d := r.DirectResponse; d != nil && (d.Status < 200 || d.Status > 599) {
		return fmt.Errorf("direct response status %d out of range 200-599", d.Status)
	}
	if rw := r.Rewrite; rw != nil {
		if countSet(rw.Path != "", rw.PathPrefix != "", rw.PathRegex != nil) > 1 {
			return errors.New("rewrite sets more than one of path, path prefix and path regex")
		}
		if err := rw.PathRegex.validate(); err != nil {
			return fmt.Errorf("rewrite: %w", err)
		}
	}
	return nil
}

func (c *Cluster) validate() error {
	switch c.Protocol {
	case UpstreamTCP, UpstreamUDP, UpstreamHTTP1, UpstreamHTTP2:
	default:
		return fmt.Errorf("protocol %q is not supported", c.Protocol)
	}
	if c.StatName == "" {
		return errors.New("stat name empty")
	}
	if c.ConnectTimeout <= 0 {
		return errors.New("connect timeout must be positive")
	}
	if c.MaxConnections == 0 {
		return errors.New("max connections must be positive")
	}
	if c.ProxyProtocol && c.Protocol == UpstreamUDP {
		return errors.New("PROXY protocol on a UDP cluster")
	}
	if hc := c.HealthCheck; hc != nil && (hc.Interval <= 0 || hc.Timeout <= 0 || hc.HealthyThreshold == 0 || hc.UnhealthyThreshold == 0) {
		return errors.New("health check interval, timeout and thresholds must be positive")
	}
	if hc := c.HealthCheck; hc != nil {
		if hc.Port > 65535 {
			return fmt.Errorf("health check port %d out of range 1-65535", hc.Port)
		}
		if hc.HTTPPath != "" && (!strings.HasPrefix(hc.HTTPPath, "/") || len(hc.HTTPPath) > 1024 || strings.ContainsFunc(hc.HTTPPath, func(r rune) bool { return r <= ' ' || r >= 0x7f })) {
			return fmt.Errorf("health check path %q is not a plain absolute path", hc.HTTPPath)
		}
		if c.Protocol == UpstreamUDP && (hc.HTTPPath == "" || hc.Port == 0) {
			// A TCP connect to a UDP port says nothing: a UDP cluster is only checked over
			// HTTP on a separate port (kube-proxy's healthCheckNodePort).
			return errors.New("a UDP cluster's health check must be an HTTP check on its own port")
		}
	}
	if err := c.Traffic.validate(c); err != nil {
		return fmt.Errorf("traffic policy: %w", err)
	}
	if t := c.TLS; t != nil {
		if err := t.validate(c.Protocol); err != nil {
			return fmt.Errorf("upstream TLS: %w", err)
		}
	}
	groups := make(map[string]bool, len(c.Groups))
	var total uint64
	for _, g := range c.Groups {
		if g.Name == "" || groups[g.Name] {
			return fmt.Errorf("endpoint group %q: name empty or repeated", g.Name)
		}
		if g.Weight == 0 {
			return fmt.Errorf("endpoint group %q has weight 0 (leave it out instead)", g.Name)
		}
		groups[g.Name] = true
		total += uint64(g.Weight)
	}
	if total > 1<<32-1 {
		return fmt.Errorf("the weights of the endpoint groups add up to %d, more than 2^32-1", total)
	}
	for _, e := range c.Endpoints {
		if e.Port < 1 || e.Port > 65535 {
			return fmt.Errorf("endpoint %s port %d out of range 1-65535", e.Address, e.Port)
		}
		ip, err := netip.ParseAddr(e.Address)
		if err != nil || ip.Zone() != "" || ip.IsUnspecified() {
			return fmt.Errorf("endpoint address %q is not a usable IP address", e.Address)
		}
		if (e.Group != "") != (len(c.Groups) > 0) || (e.Group != "" && !groups[e.Group]) {
			return fmt.Errorf("endpoint %s:%d names group %q, which the cluster does not have", e.Address, e.Port, e.Group)
		}
	}
	return nil
}

// Bounds of upstream TLS: the BackendTLSPolicy API's (5 names), a CA bundle of 64 KiB.
const (
	maxSubjectAltNames = 5
	maxCABundle        = 64 << 10
)

func (t *UpstreamTLS) validate(p UpstreamProtocol) error {
	if p != UpstreamHTTP1 && p != UpstreamHTTP2 && p != UpstreamTCP {
		return fmt.Errorf("on a %s cluster", p)
	}
	if len(t.SNI) == 0 || len(t.SNI) > 253 || strings.ContainsFunc(t.SNI, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		return fmt.Errorf("SNI %q is not a DNS name", t.SNI)
	}
	if (t.CACertificates == "") == !t.SystemCA {
		return errors.New("exactly one of CA certificates and the system CA must be set")
	}
	if len(t.CACertificates) > maxCABundle {
		return fmt.Errorf("CA certificates of %d bytes, more than %d", len(t.CACertificates), maxCABundle)
	}
	if len(t.SubjectAltNames) == 0 || len(t.SubjectAltNames) > maxSubjectAltNames {
		return fmt.Errorf("%d subject alternative names, not 1 to %d", len(t.SubjectAltNames), maxSubjectAltNames)
	}
	for _, n := range t.SubjectAltNames {
		if n.Type != SANDNS && n.Type != SANURI {
			return fmt.Errorf("subject alternative name type %q", n.Type)
		}
		if n.Value == "" || len(n.Value) > 253 || strings.ContainsFunc(n.Value, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
			return fmt.Errorf("subject alternative name %q is empty, too long or not printable", n.Value)
		}
	}
	return nil
}

func countSet(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

func (rr *RegexRewrite) validate() error {
	if rr == nil {
		return nil
	}
	if rr.Pattern == "" {
		return errors.New("path regex without a pattern")
	}
	if err := checkRegex(rr.Pattern); err != nil {
		return fmt.Errorf("path regex: %w", err)
	}
	return nil
}

// checkRegex refuses a regex RE2 (as Envoy runs it) does not parse. Its program size is the
// front end's to check (re2.Check), where a refusal concerns one rule: here it would stop the
// whole tenant's configuration.
func checkRegex(re string) error {
	_, err := re2.ProgramSize(re)
	return err
}

// MaxRetryAttempts bounds RetryPolicy.Attempts.
const MaxRetryAttempts = 10

// validate checks a retry policy (nil: none): 1 to MaxRetryAttempts attempts, sorted unique
// codes from 400 to 599, a backoff of 0 or at least a millisecond (Envoy's least).
func (p *RetryPolicy) validate() error {
	if p == nil {
		return nil
	}
	if (p.Attempts < 1 && len(p.On) == 0) || p.Attempts > MaxRetryAttempts {
		return fmt.Errorf("%d attempts; want 1 to %d", p.Attempts, MaxRetryAttempts)
	}
	for _, on := range p.On {
		if on == "" || strings.ContainsAny(on, ", ") {
			return fmt.Errorf("retry trigger %q is not a single trigger", on)
		}
	}
	if p.MaxBackoff > 0 && p.MaxBackoff < p.Backoff {
		return fmt.Errorf("max backoff %s is less than backoff %s", p.MaxBackoff.D(), p.Backoff.D())
	}
	for i, c := range p.Codes {
		if c < 400 || c > 599 {
			return fmt.Errorf("status code %d; want 400 to 599", c)
		}
		if i > 0 && p.Codes[i-1] >= c {
			return errors.New("status codes not sorted and unique")
		}
	}
	if p.Backoff < 0 || p.Backoff > 0 && p.Backoff < Duration(time.Millisecond) {
		return fmt.Errorf("backoff %s; want 0 or at least 1ms", p.Backoff.D())
	}
	return nil
}

// maxMaglevTableSize is Envoy's largest Maglev table.
const maxMaglevTableSize = 5000011

// validate checks a cluster's traffic settings (nil: none): a known load balancer, a Maglev
// table size Envoy takes, thresholds within MaxConnections; TCP and UDP clusters take what
// acts on connections only (validateStream).
func (t *ClusterTraffic) validate(c *Cluster) error {
	if t == nil {
		return nil
	}
	if err := t.validateStream(c.Protocol); err != nil {
		return err
	}
	switch t.LB {
	case "", LBRoundRobin, LBLeastRequest, LBRandom, LBMaglev:
	default:
		return fmt.Errorf("load balancer %q is not supported", t.LB)
	}
	if t.MaglevTableSize != 0 && (t.LB != LBMaglev || t.MaglevTableSize > maxMaglevTableSize) {
		return fmt.Errorf("maglev table size %d without Maglev or above %d", t.MaglevTableSize, maxMaglevTableSize)
	}
	if c.HashSourceIP && t.LB != "" {
		return errors.New("a load balancer and HashSourceIP together")
	}
	for _, n := range []uint32{t.MaxPendingRequests, t.MaxRequests, t.MaxRetries} {
		if n > c.MaxConnections {
			return fmt.Errorf("circuit-breaker threshold %d above max connections %d", n, c.MaxConnections)
		}
	}
	if t.IdleTimeout < 0 {
		return errors.New("negative idle timeout")
	}
	if o := t.Outlier; o != nil {
		if o.Interval < 0 || o.BaseEjectionTime < 0 {
			return errors.New("negative outlier detection interval")
		}
		if o.MaxEjectionPercent != nil && *o.MaxEjectionPercent > 100 {
			return fmt.Errorf("max ejection percent %d above 100", *o.MaxEjectionPercent)
		}
	}
	return nil
}

// Validate checks a route's hash policy (nil: none): exactly one source, names as tokens.
func (h *HashPolicy) Validate() error {
	if h == nil {
		return nil
	}
	if countSet(h.SourceIP, h.Header != "", h.Cookie != "") != 1 {
		return errors.New("hash policy: exactly one of source IP, header and cookie")
	}
	if h.Header != "" && !headerNameRE.MatchString(h.Header) {
		return fmt.Errorf("hash policy header %q is not a lower-case token", h.Header)
	}
	if h.Cookie != "" && (!cookieNameRE.MatchString(h.Cookie) || len(h.Cookie) > 256) {
		return fmt.Errorf("hash policy cookie %q is not a token", h.Cookie)
	}
	if h.CookieTTL < 0 || (h.CookieTTL > 0 && h.Cookie == "") {
		return errors.New("hash policy cookie TTL without a cookie, or negative")
	}
	return nil
}

// validate checks an authorization: its rules' ranges valid, at least one per rule, at most
// sourcerange.Max in all.
func (a *Authorization) validate() error {
	if a == nil {
		return nil
	}
	total := 0
	for i, r := range a.Rules {
		if len(r.SourceRanges) == 0 {
			return fmt.Errorf("authorization rule %d has no source ranges", i)
		}
		if err := sourcerange.Valid(r.SourceRanges); err != nil {
			return fmt.Errorf("authorization rule %d: %w", i, err)
		}
		total += len(r.SourceRanges)
	}
	if total > sourcerange.Max {
		return fmt.Errorf("authorization has %d source ranges, at most %d", total, sourcerange.Max)
	}
	return nil
}
