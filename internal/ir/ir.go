// Package ir is the intermediate representation between kubelb's front ends (internal/translate:
// hub objects → IR) and its back end (internal/xds/translator: IR → Envoy resources).
//
// The IR is plain Go data with no Envoy protos and no Kubernetes types: listeners (TCP, UDP,
// HTTP, HTTPS with SNI), route configurations with virtual hosts and routes, clusters with
// their endpoints, and TLS secrets. Every element names the objects it was made from
// (Owners), so a problem found later (by the back end, or an Envoy NACK) can be reported on
// those objects.
//
// A Config owns three properties the pipeline relies on: Validate says whether the back end
// can turn it into a consistent Envoy configuration; Normalize puts it in its one
// deterministic order; Equal compares two normalized Configs, so an unchanged tenant is never
// translated or pushed again.
package ir

import (
	"cmp"
	"encoding/json"
	"reflect"
	"slices"
	"time"
)

// Protocol of a listener.
type Protocol string

// Listener protocols.
const (
	ProtocolTCP   Protocol = "TCP"
	ProtocolUDP   Protocol = "UDP"
	ProtocolHTTP  Protocol = "HTTP"
	ProtocolHTTPS Protocol = "HTTPS"
	// ProtocolHTTP3 serves HTTP/3 over QUIC on a UDP port: the routes of an HTTPS listener,
	// its TLS servers (terminated into HTTP only) chosen by SNI (validate.go).
	ProtocolHTTP3 Protocol = "HTTP3"
)

// ServesHTTP reports whether a listener of protocol p serves HTTP routes through connection
// managers (HTTP, HTTPS, HTTP3).
func (p Protocol) ServesHTTP() bool {
	return p == ProtocolHTTP || p == ProtocolHTTPS || p == ProtocolHTTP3
}

// BindsUDP reports whether a listener of protocol p binds a UDP socket (UDP, HTTP3).
func (p Protocol) BindsUDP() bool { return p == ProtocolUDP || p == ProtocolHTTP3 }

// UpstreamProtocol is what a cluster speaks to its endpoints.
type UpstreamProtocol string

// Upstream protocols.
const (
	UpstreamTCP   UpstreamProtocol = "TCP"
	UpstreamUDP   UpstreamProtocol = "UDP"
	UpstreamHTTP1 UpstreamProtocol = "HTTP1"
	UpstreamHTTP2 UpstreamProtocol = "HTTP2"
)

// Config is the whole desired configuration of one tenant's Envoy fleet.
type Config struct {
	Listeners    []*Listener    `json:"listeners,omitempty"`
	RouteConfigs []*RouteConfig `json:"routeConfigs,omitempty"`
	Clusters     []*Cluster     `json:"clusters,omitempty"`
	Secrets      []*Secret      `json:"secrets,omitempty"`
	// RateLimitService (ratelimit.go) is the tenant's rate-limit service, set exactly when a
	// route has a GlobalRateLimit.
	RateLimitService *RateLimitService `json:"rateLimitService,omitempty"`
}

// Listener is one port Envoy listens on.
type Listener struct {
	// Name is unique among listeners.
	Name string `json:"name"`
	// Address is the IP the listener binds, e.g. "0.0.0.0".
	Address string `json:"address"`
	// AdditionalAddresses (TCP, UDP) are more IPs the listener binds on the same port, one
	// socket each: the other IP family of a dual-stack load balancer (e.g. "::" next to
	// "0.0.0.0"; an IPv6 socket accepts IPv6 only, so both bind). None is Address.
	AdditionalAddresses []string `json:"additionalAddresses,omitempty"`
	// Port is the port it binds (1-65535).
	Port uint32 `json:"port"`
	// Protocol decides which of the fields below are used.
	Protocol Protocol `json:"protocol"`
	// StatPrefix is the readable prefix of the listener's stats.
	StatPrefix string `json:"statPrefix"`
	// Owners are the objects (and sections) this listener serves.
	Owners []ObjectRef `json:"owners,omitempty"`

	// TCP: every connection goes to Cluster, or is shared by weight among Backends (with
	// FailedWeight): exactly one of Cluster and Backends is set, and the front ends set
	// Cluster whenever every connection goes to one cluster. UDP: every datagram goes to
	// Cluster (Backends is not used).
	Cluster string `json:"cluster,omitempty"`
	// Backends (TCP) share the connections by weight; a backend of weight 0 gets none.
	Backends []WeightedCluster `json:"backends,omitempty"`
	// FailedWeight (TCP, with Backends) is the weight of backends that could not be
	// resolved: that share of the connections is closed as soon as it is accepted.
	FailedWeight uint32 `json:"failedWeight,omitempty"`
	// HashSourceIP (TCP, UDP) hashes the client address, for session persistence.
	HashSourceIP bool `json:"hashSourceIP,omitempty"`
	// IdleTimeout (UDP) ends sessions without datagrams for this long.
	IdleTimeout Duration `json:"idleTimeout,omitempty"`
	// SourceRanges (TCP, UDP), when set, are the only client addresses served: canonical
	// CIDRs (sourcerange.Valid), sorted, unique. A connection from any other address is
	// closed as soon as it is accepted (TCP), a datagram from one is dropped (UDP). Empty:
	// every client.
	SourceRanges []string `json:"sourceRanges,omitempty"`
	// Authorization (TCP; stream_policy.go), when set, decides by the client address (the
	// peer of the connection) which connections are proxied: a refused one is closed before
	// any upstream connection is made (a TCPRoute's SecurityPolicy).
	Authorization *Authorization `json:"authorization,omitempty"`

	// RouteConfig (HTTP) names the route configuration served over RDS.
	RouteConfig string `json:"routeConfig,omitempty"`
	// TLS (HTTPS): one filter chain per server, chosen by SNI; each terminates TLS into HTTP
	// routes (Secret, RouteConfig), terminates it and proxies the plain stream (Secret,
	// Cluster or Backends), or passes it through to clusters (Cluster or Backends). HTTP3:
	// one QUIC filter chain per server, each terminated into HTTP routes (no client
	// validation).
	TLS []*TLSServer `json:"tls,omitempty"`
	// HeaderLimits (HTTP, HTTPS) bound request headers; nil keeps Envoy's defaults.
	HeaderLimits *HeaderLimits `json:"headerLimits,omitempty"`
	// ClientTraffic (HTTP, HTTPS; TCP its connection settings only; clienttraffic.go) is how
	// the listener and its connection managers treat the clients' connections and requests
	// (a Gateway's ClientTrafficPolicy); nil keeps Envoy's defaults.
	ClientTraffic *ClientTraffic `json:"clientTraffic,omitempty"`
	// StreamIdleTimeout (HTTP, HTTPS) ends requests and streams with no traffic either way
	// for this long, unless their route sets its own; 0 keeps Envoy's default (5 min).
	StreamIdleTimeout Duration `json:"streamIdleTimeout,omitempty"`
	// AccessLog (TCP, HTTP, HTTPS, HTTP3; never set on UDP) writes one JSON line per connection (TCP, TLS
	// passthrough) or request (HTTP) to Envoy's stdout.
	AccessLog bool `json:"accessLog,omitempty"`
	// CORS (HTTP, HTTPS) runs Envoy's CORS filter, which applies the CORS policies of the
	// routes; set exactly when a route served by the listener has one.
	CORS bool `json:"cors,omitempty"`
	// StatefulSession (HTTP, HTTPS) runs Envoy's stateful session filter, which applies the
	// session persistence of the routes; set exactly when a route served by the listener has
	// one.
	StatefulSession bool `json:"statefulSession,omitempty"`
	// RouteSourceRanges (HTTP, HTTPS) runs Envoy's RBAC filter, which applies the source
	// ranges and authorizations of the routes; set exactly when a route served by the listener
	// has some.
	RouteSourceRanges bool `json:"routeSourceRanges,omitempty"`
	// BasicAuth (HTTP, HTTPS) runs Envoy's basic_auth filter, off but for the routes with a
	// BasicAuth; set exactly when a route served by the listener has one.
	BasicAuth bool `json:"basicAuth,omitempty"`
	// JWT (HTTP, HTTPS; jwt.go) holds the JWT providers and requirements of the routes it
	// serves (Route.JWT): Envoy's jwt_authn filter runs with them. Set exactly when a route
	// served by the listener has JWT authentication.
	JWT *ListenerJWT `json:"jwt,omitempty"`
	// RateLimit (HTTP, HTTPS) runs Envoy's local rate-limit filter, which applies the rate
	// limits of the routes; set exactly when a route served by the listener has one.
	RateLimit bool `json:"rateLimit,omitempty"`
	// GlobalRateLimit (HTTP, HTTPS) runs Envoy's rate-limit filter, which asks the tenant's
	// rate-limit service (equal to Config.RateLimitService; the listener is built from its
	// own fields) about the requests of the routes with a global rate limit; set exactly when
	// a route served by the listener has one.
	GlobalRateLimit *RateLimitService `json:"globalRateLimit,omitempty"`
	// Compressors (HTTP, HTTPS; compression.go) run Envoy's compressor filter with each of
	// these libraries, off but for the routes that compress with it; in Compressors' order,
	// set exactly when a route served by the listener compresses with it.
	Compressors []Compressor `json:"compressors,omitempty"`
	// APIKeyAuth (HTTP, HTTPS) runs Envoy's api_key_auth filter, off but for the routes with
	// an APIKeyAuth; set exactly when a route served by the listener has one.
	APIKeyAuth bool `json:"apiKeyAuth,omitempty"`
	// ExtAuth (HTTP, HTTPS) are the external authorization services the routes served by the
	// listener ask (extauth.go), sorted by name; one Envoy ext_authz filter each, off but for
	// those routes.
	ExtAuth []ExtAuthService `json:"extAuth,omitempty"`
	// OIDC (HTTP, HTTPS) are the OpenID Connect logins the routes served by the listener run
	// (oidc.go), sorted by name; one Envoy oauth2 filter each, off but for those routes.
	OIDC []OIDC `json:"oidc,omitempty"`
}

// TLSServer is one filter chain of an HTTPS listener, chosen by SNI: the hostnames it
// answers and what it does with the connection. Three kinds may share one listener:
//   - terminated into HTTP: Secrets and RouteConfig (an HTTPS listener, an Ingress);
//   - terminated into TCP: Secrets, and Cluster or Backends that receive the decrypted stream
//     (a TLS listener in mode Terminate, its TLSRoutes);
//   - passed through: Cluster or Backends that receive the TLS connection as it is, no
//     Secrets (a TLS listener in mode Passthrough).
type TLSServer struct {
	// ServerNames matched against SNI; empty matches any (the fallback chain).
	ServerNames []string `json:"serverNames,omitempty"`
	// Secrets name the certificates (Secrets of this Config), terminated chains only. With
	// more than one, Envoy picks for each connection the one whose names match its SNI and
	// whose key type the client supports (an RSA and an ECDSA certificate for one host, or
	// certificates for different hosts under a wildcard); the first when none matches.
	Secrets []string `json:"secrets,omitempty"`
	// RouteConfig names the route configuration of a chain terminated into HTTP.
	RouteConfig string `json:"routeConfig,omitempty"`
	// Cluster receives the connection (still encrypted without Secret, decrypted with it) by
	// TCP proxy; or Backends share the connections by weight, with FailedWeight as for a TCP
	// Listener. A chain that proxies sets exactly one of Cluster and Backends, or only
	// FailedWeight when none of its backends can be used (a TLSRoute whose backends'
	// BackendTLSPolicies the hub cannot use): every connection is then refused.
	Cluster      string            `json:"cluster,omitempty"`
	Backends     []WeightedCluster `json:"backends,omitempty"`
	FailedWeight uint32            `json:"failedWeight,omitempty"`
	// Authorization and HashSourceIP (a chain that proxies; stream_policy.go): which clients'
	// connections the chain proxies (as Listener.Authorization), and whether they are hashed
	// on the client address (clusters balancing by consistent hash): a TLSRoute's policies.
	Authorization *Authorization `json:"authorization,omitempty"`
	HashSourceIP  bool           `json:"hashSourceIP,omitempty"`
	// ClientValidation (a terminating chain) asks clients for a certificate and verifies it;
	// nil asks for none.
	ClientValidation *ClientValidation `json:"clientValidation,omitempty"`
}

// ClientValidation is the verification of the certificates clients present (mutual TLS).
type ClientValidation struct {
	// CACertificates is a PEM bundle of the CA certificates a client's certificate must
	// chain to.
	CACertificates string `json:"caCertificates"`
	// AllowInsecureFallback accepts clients without a certificate, or whose certificate does
	// not verify (Gateway API's AllowInsecureFallback); otherwise only clients presenting a
	// certificate that verifies are accepted.
	AllowInsecureFallback bool `json:"allowInsecureFallback,omitempty"`
	// Optional accepts clients without a certificate, but a certificate a client presents
	// must verify (a ClientTrafficPolicy's optional, or mode VerifyIfGiven).
	Optional bool `json:"optional,omitempty"`
}

// Terminates reports whether the chain terminates TLS (it has a certificate).
func (s *TLSServer) Terminates() bool { return len(s.Secrets) > 0 }

// Proxies reports whether the chain proxies the connection to clusters by TCP proxy (passed
// through, or terminated into TCP) rather than serving HTTP routes; a chain whose every
// backend failed (only FailedWeight) proxies too, refusing every connection.
func (s *TLSServer) Proxies() bool {
	return s.Cluster != "" || len(s.Backends) > 0 || s.FailedWeight > 0
}

// HeaderLimits bound the request headers an HTTP listener accepts.
type HeaderLimits struct {
	MaxRequestHeadersKB    uint32 `json:"maxRequestHeadersKB,omitempty"`
	MaxRequestHeadersCount uint32 `json:"maxRequestHeadersCount,omitempty"`
}

// RouteConfig is a route table served over RDS.
type RouteConfig struct {
	Name         string         `json:"name"`
	VirtualHosts []*VirtualHost `json:"virtualHosts,omitempty"`
	// HTTP3Port (0: none) advertises HTTP/3 on this port of the same host in every response
	// (alt-svc: h3=":<port>"; ma=86400): set only on a route configuration an HTTP3
	// listener serves too.
	HTTP3Port uint32 `json:"http3Port,omitempty"`
}

// VirtualHost groups the routes of a set of domains.
type VirtualHost struct {
	// Name is unique within its route configuration.
	Name string `json:"name"`
	// Domains matched against the Host header; "*" matches any.
	Domains []string `json:"domains"`
	// Routes in match order: the first route that matches wins.
	Routes []*Route `json:"routes,omitempty"`
}

// Route matches requests and says what to do with them: forward to weighted backends,
// redirect, or answer directly.
type Route struct {
	Name   string      `json:"name"`
	Owners []ObjectRef `json:"owners,omitempty"`
	Match  RouteMatch  `json:"match"`

	// Backends share the traffic by weight. Exactly one of Backends, Redirect and
	// DirectResponse is set.
	Backends       []WeightedCluster `json:"backends,omitempty"`
	Redirect       *Redirect         `json:"redirect,omitempty"`
	DirectResponse *DirectResponse   `json:"directResponse,omitempty"`
	// FailedWeight (with Backends) is the weight of backends that could not be resolved:
	// that share of the requests is answered with 500.
	FailedWeight uint32 `json:"failedWeight,omitempty"`

	RequestHeaders  *HeaderModifier `json:"requestHeaders,omitempty"`
	ResponseHeaders *HeaderModifier `json:"responseHeaders,omitempty"`
	Rewrite         *URLRewrite     `json:"rewrite,omitempty"`
	// Timeout (with Backends) bounds the whole request, for gRPC the whole stream; 0 lets
	// requests and streams take as long as they take (Envoy's own 15 s default never
	// applies).
	Timeout Duration `json:"timeout,omitempty"`
	// IdleTimeout (with Backends) ends a request or stream with no traffic either way for
	// this long; 0 keeps the listener's StreamIdleTimeout.
	IdleTimeout Duration `json:"idleTimeout,omitempty"`
	// BackendTimeout bounds each try against a backend; 0 means no separate bound.
	BackendTimeout Duration `json:"backendTimeout,omitempty"`
	// Retry (with Backends) tries a request again on another try; nil: never.
	Retry *RetryPolicy `json:"retry,omitempty"`
	// Mirrors (with Backends) get a copy of a share of the requests; their answers are
	// dropped.
	Mirrors []Mirror `json:"mirrors,omitempty"`
	// CORS answers CORS preflight requests and adds CORS headers to responses of requests
	// from allowed origins; nil for none. The listeners serving the route set CORS.
	CORS *CORSPolicy `json:"cors,omitempty"`
	// SessionPersistence (with Backends) keeps a client's requests on the backend endpoint
	// that served its first one, by a cookie or a header naming it; nil for none. The
	// listeners serving the route set StatefulSession.
	SessionPersistence *SessionPersistence `json:"sessionPersistence,omitempty"`
	// SourceRanges, when set, are the only client addresses (the peer of the connection)
	// whose requests the route serves: canonical CIDRs (sourcerange.Valid), sorted, unique;
	// other clients are answered 403. Empty: every client. The listeners serving the route
	// set RouteSourceRanges.
	SourceRanges []string `json:"sourceRanges,omitempty"`
	// Authorization, when set, decides by the client address (the peer of the connection)
	// whose requests the route serves: the first rule whose ranges hold the address allows
	// or denies the request, the default action when none does; a denied request is
	// answered 403. Not with SourceRanges. The listeners serving the route set
	// RouteSourceRanges.
	Authorization *Authorization `json:"authorization,omitempty"`
	// BasicAuth, when set, answers 401 to requests without the credentials of one of its
	// users (after Authorization and SourceRanges). The listeners serving the route set
	// BasicAuth.
	BasicAuth *BasicAuth `json:"basicAuth,omitempty"`
	// JWT (jwt.go), when set, answers 401 to requests without a JSON Web Token that one of
	// its providers verifies (after Authorization and SourceRanges, before BasicAuth). The
	// listeners serving the route hold its providers and requirement (Listener.JWT).
	JWT *JWT `json:"jwt,omitempty"`
	// Hash (with Backends) is what the route's requests are hashed on for clusters that
	// balance by consistent hash (LBMaglev); nil for none (requests then spread at random).
	Hash *HashPolicy `json:"hash,omitempty"`
	// MaxRequestBytes (with Backends), when above 0, answers 413 to a request whose
	// Content-Length is larger, without reaching a backend (at most MaxRequestBodyLimit). A
	// request without a Content-Length (chunked) is not limited: the body is never buffered.
	MaxRequestBytes int64 `json:"maxRequestBytes,omitempty"`
	// RateLimit (ratelimit.go), when set, answers 429 to the requests over its limits.
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
	// GlobalRateLimit (ratelimit.go), when set, answers 429 to the requests over its limits,
	// counted for the tenant's whole fleet.
	GlobalRateLimit *GlobalRateLimit `json:"globalRateLimit,omitempty"`
	// Compression (compression.go), when set, compresses the responses of the route with
	// the first of these compressors the client accepts (Accept-Encoding); the request then
	// reaches the backend without its Accept-Encoding, so the backend answers uncompressed.
	Compression []Compressor `json:"compression,omitempty"`
	// APIKeyAuth (apikey.go), when set, answers 401 to requests without one of its clients'
	// API keys (after Authorization and SourceRanges, with JWT and BasicAuth). The listeners
	// serving the route set APIKeyAuth.
	APIKeyAuth *APIKeyAuth `json:"apiKeyAuth,omitempty"`
	// ExtAuth, when set, names the external authorization service of the listeners serving
	// the route (ExtAuthService.Name) that decides on each request (after the other
	// authentications).
	ExtAuth string `json:"extAuth,omitempty"`
	// OIDC, when set, names the OpenID Connect login of the listeners serving the route
	// (OIDC.Name): a request without a valid session is redirected to its provider.
	OIDC string `json:"oidc,omitempty"`
}

// MaxRequestBodyLimit bounds Route.MaxRequestBytes: 1 TiB.
const MaxRequestBodyLimit int64 = 1 << 40

// Authorization is an ordered list of allow and deny rules on the client address, and the
// action when none matches (a SecurityPolicy's authorization; an Ingress's deny list).
type Authorization struct {
	// DefaultAllow: a request no rule matches is served (else answered 403).
	DefaultAllow bool `json:"defaultAllow,omitempty"`
	// Rules in order, the first matching decides; at most sourcerange.Max ranges in all.
	Rules []AuthorizationRule `json:"rules,omitempty"`
}

// AuthorizationRule allows or denies the clients of its ranges: canonical CIDRs
// (sourcerange.Valid), sorted, unique, at least one.
type AuthorizationRule struct {
	Allow        bool     `json:"allow,omitempty"`
	SourceRanges []string `json:"sourceRanges"`
}

// HashPolicy is what a request is hashed on (a BackendTrafficPolicy's consistentHash):
// exactly one of SourceIP, Header and Cookie.
type HashPolicy struct {
	SourceIP bool `json:"sourceIP,omitempty"`
	// Header is a lower-case header name (a token).
	Header string `json:"header,omitempty"`
	// Cookie is a cookie name (a token); with CookieTTL (whole seconds) Envoy sets the
	// cookie on answers to requests that have none.
	Cookie    string   `json:"cookie,omitempty"`
	CookieTTL Duration `json:"cookieTTL,omitempty"`
}

// SessionPersistence is a route's session persistence (Gateway API sessionPersistence):
// exactly one of Cookie and Header. Envoy's answer carries the endpoint of the session (a
// Set-Cookie, or the header); a request that sends it back goes to that endpoint while it is
// one of the route's, and to any endpoint (which starts a new session) when it is not.
type SessionPersistence struct {
	Cookie *SessionCookie `json:"cookie,omitempty"`
	// Header is the lower-case name of the request and response header carrying the session.
	Header string `json:"header,omitempty"`
}

// SessionCookie is the cookie of a cookie-based session.
type SessionCookie struct {
	// Name is the cookie's name, an RFC 6265 token.
	Name string `json:"name"`
	// Path is the cookie's Path attribute, starting with "/".
	Path string `json:"path"`
	// TTL (whole seconds) is the cookie's Max-Age and the session's lifetime; 0: a session
	// cookie, kept until the browser ends the session.
	TTL Duration `json:"ttl,omitempty"`
}

// RetryPolicy retries a request (Gateway API HTTPRoute retry): after a connection failure,
// a reset, a try that ran out of BackendTimeout, or an answer with one of Codes.
type RetryPolicy struct {
	// Attempts is how many times a request is tried again, at least 1 (0 with On: none).
	Attempts uint32 `json:"attempts"`
	// On, when set, are Envoy's retry triggers (a BackendTrafficPolicy's retryOn), instead
	// of connection failures, resets and (with Codes) retriable-status-codes.
	On []string `json:"retryOn,omitempty"`
	// MaxBackoff bounds the growing time before a try again; 0: ten times Backoff.
	MaxBackoff Duration `json:"maxBackoff,omitempty"`
	// Codes are the status codes (400 to 599) answered by a backend that are tried again,
	// sorted; none: only failures without an answer.
	Codes []uint32 `json:"codes,omitempty"`
	// Backoff is the least time before a try again (growing for the next ones); 0: Envoy's
	// 25 ms.
	Backoff Duration `json:"backoff,omitempty"`
}

// Mirror is a cluster requests are copied to: PerMillion of them (1 to 1000000, all).
type Mirror struct {
	Cluster    string `json:"cluster"`
	PerMillion uint32 `json:"perMillion"`
	// Host is the Host header of the copies (ingress-nginx's mirror-target, mirror-host);
	// "": the request's with "-shadow" appended (Envoy's default).
	Host string `json:"host,omitempty"`
}

// MaxMirrorHost bounds Mirror.Host (a DNS name with a port).
const MaxMirrorHost = 253 + len(":65535")

// CORSPolicy is a route's Cross-Origin Resource Sharing policy.
type CORSPolicy struct {
	// AllowOrigins are "*" alone (any origin) or origins scheme://host[:port]: scheme http or
	// https, lower case, the port left out when it is the scheme's (80, 443) and then
	// matching with or without it; the host may be "*" (any host) or start with "*." (any
	// number of labels to the left).
	AllowOrigins []string `json:"allowOrigins,omitempty"`
	// AllowMethods, AllowHeaders: "*" alone (Envoy answers a preflight with the method or
	// headers it asks for), or the names sent as they are.
	AllowMethods []string `json:"allowMethods,omitempty"`
	AllowHeaders []string `json:"allowHeaders,omitempty"`
	// ExposeHeaders are the response headers scripts may read ("*" for all).
	ExposeHeaders []string `json:"exposeHeaders,omitempty"`
	// MaxAge is how long (seconds, at least 1) a client may cache a preflight answer.
	MaxAge uint32 `json:"maxAge"`
	// AllowCredentials sends Access-Control-Allow-Credentials: true.
	AllowCredentials bool `json:"allowCredentials,omitempty"`
}

// RouteMatch is what a request must match. The zero value matches every request.
type RouteMatch struct {
	// At most one of the three path matches is set; none matches every path.
	PathExact  string `json:"pathExact,omitempty"`
	PathPrefix string `json:"pathPrefix,omitempty"`
	PathRegex  string `json:"pathRegex,omitempty"`

	Headers     []StringMatch `json:"headers,omitempty"`
	QueryParams []StringMatch `json:"queryParams,omitempty"`
	// Method matches the HTTP method; "" matches any.
	Method string `json:"method,omitempty"`
}

// StringMatch matches a header or query parameter by name and value.
type StringMatch struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// Regex makes Value a RE2 regular expression; otherwise it must match exactly.
	Regex bool `json:"regex,omitempty"`
}

// WeightedCluster is one backend of a route, a TCP listener or a passthrough chain.
type WeightedCluster struct {
	Cluster string `json:"cluster"`
	Weight  uint32 `json:"weight"`
	// RequestHeaders and ResponseHeaders (routes only) change the headers of the requests
	// sent to this backend and of its responses, after the route's own.
	RequestHeaders  *HeaderModifier `json:"requestHeaders,omitempty"`
	ResponseHeaders *HeaderModifier `json:"responseHeaders,omitempty"`
}

// HasHeaders reports whether the backend changes headers.
func (w *WeightedCluster) HasHeaders() bool {
	return w.RequestHeaders != nil || w.ResponseHeaders != nil
}

// Redirect answers with a redirect; empty fields keep the request's value.
type Redirect struct {
	Scheme   string `json:"scheme,omitempty"`
	Hostname string `json:"hostname,omitempty"`
	Port     uint32 `json:"port,omitempty"`
	// Path replaces the whole path; PathPrefix replaces the matched prefix; PathRegex
	// rewrites the parts of the path it matches. At most one.
	Path       string        `json:"path,omitempty"`
	PathPrefix string        `json:"pathPrefix,omitempty"`
	PathRegex  *RegexRewrite `json:"pathRegex,omitempty"`
	// StatusCode is 301, 302, 303, 307 or 308; 0 means 302.
	StatusCode uint32 `json:"statusCode,omitempty"`
}

// DirectResponse answers without a backend.
type DirectResponse struct {
	Status uint32 `json:"status"`
	Body   string `json:"body,omitempty"`
}

// HeaderModifier changes headers.
type HeaderModifier struct {
	Set    []Header `json:"set,omitempty"`
	Add    []Header `json:"add,omitempty"`
	Remove []string `json:"remove,omitempty"`
}

// Header is one header name and value.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// URLRewrite rewrites the request before it is forwarded.
type URLRewrite struct {
	Hostname string `json:"hostname,omitempty"`
	// Path replaces the whole path; PathPrefix replaces the matched prefix; PathRegex
	// rewrites the parts of the path it matches. At most one.
	Path       string        `json:"path,omitempty"`
	PathPrefix string        `json:"pathPrefix,omitempty"`
	PathRegex  *RegexRewrite `json:"pathRegex,omitempty"`
}

// RegexRewrite replaces the parts of a path (without its query) that match Pattern (RE2) by
// Substitution, in which \1 … refer to the pattern's groups.
type RegexRewrite struct {
	Pattern      string `json:"pattern"`
	Substitution string `json:"substitution"`
}

// Cluster is a set of upstream endpoints and how to reach them.
type Cluster struct {
	// Name is unique among clusters.
	Name string `json:"name"`
	// StatName is the readable name of the cluster's stats.
	StatName string           `json:"statName"`
	Protocol UpstreamProtocol `json:"protocol"`
	Owners   []ObjectRef      `json:"owners,omitempty"`
	// Endpoints, sorted and unique, served over EDS. They are IP addresses only: Envoy never
	// resolves a name of a tenant (the manager resolves hostname endpoints before translation).
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	// Groups, when set, share the cluster's connections (sessions for UDP) by weight among
	// groups of its endpoints before any endpoint is picked within the chosen group (Envoy
	// localities): the weighted backends of a UDPRoute, whose UDP proxy sends every datagram
	// to one cluster. Every endpoint then names its group, and a group without endpoints gets
	// no share (its weight goes to the others). Without Groups no endpoint names one.
	Groups         []EndpointGroup `json:"groups,omitempty"`
	ConnectTimeout Duration        `json:"connectTimeout"`
	// MaxConnections is the circuit-breaker limit on connections, requests and pending
	// requests (sessions for UDP).
	MaxConnections uint32 `json:"maxConnections"`
	// HealthCheck is an active health check (TCP connect, or HTTP GET); nil disables it.
	HealthCheck *HealthCheck `json:"healthCheck,omitempty"`
	// HashSourceIP picks endpoints by a hash (ring hash) instead of round robin.
	HashSourceIP bool `json:"hashSourceIP,omitempty"`
	// ProxyProtocol sends a PROXY protocol v2 header on every upstream connection (TCP).
	ProxyProtocol bool `json:"proxyProtocol,omitempty"`
	// TLS encrypts every upstream connection (HTTP and TCP clusters; a BackendTLSPolicy); nil sends
	// plain text.
	TLS *UpstreamTLS `json:"tls,omitempty"`
	// Traffic is what a BackendTrafficPolicy asks of an HTTP cluster; nil: the defaults.
	Traffic *ClusterTraffic `json:"traffic,omitempty"`
}

// Load-balancing policies of ClusterTraffic.LB.
const (
	LBRoundRobin   = "RoundRobin"
	LBLeastRequest = "LeastRequest"
	LBRandom       = "Random"
	LBMaglev       = "Maglev"
)

// ClusterTraffic is a BackendTrafficPolicy's settings of an HTTP cluster. Zero fields keep
// the defaults (round robin; the circuit breaker of MaxConnections; no outlier detection).
type ClusterTraffic struct {
	// LB is LBRoundRobin, LBLeastRequest, LBRandom or LBMaglev ("": round robin);
	// MaglevTableSize a prime (0: Envoy's 65537).
	LB              string `json:"lb,omitempty"`
	MaglevTableSize uint64 `json:"maglevTableSize,omitempty"`
	// Circuit-breaker thresholds, at most MaxConnections each; 0: MaxConnections (retries:
	// Envoy's 3).
	MaxPendingRequests uint32 `json:"maxPendingRequests,omitempty"`
	MaxRequests        uint32 `json:"maxRequests,omitempty"`
	MaxRetries         uint32 `json:"maxRetries,omitempty"`
	// MaxRequestsPerConnection closes an upstream connection after this many requests; 0:
	// no bound.
	MaxRequestsPerConnection uint32 `json:"maxRequestsPerConnection,omitempty"`
	// IdleTimeout closes an upstream connection without requests for this long; 0: Envoy's
	// hour.
	IdleTimeout Duration `json:"idleTimeout,omitempty"`
	// Outlier ejects endpoints that keep failing (passive health check); nil: none.
	Outlier *OutlierDetection `json:"outlier,omitempty"`
}

// OutlierDetection is Envoy's outlier detection; zero fields keep Envoy's defaults.
type OutlierDetection struct {
	SplitExternalLocalOriginErrors bool `json:"splitExternalLocalOriginErrors,omitempty"`
	// AlwaysEjectOne ejects one failing endpoint even beyond MaxEjectionPercent.
	AlwaysEjectOne   bool     `json:"alwaysEjectOne,omitempty"`
	Interval         Duration `json:"interval,omitempty"`
	BaseEjectionTime Duration `json:"baseEjectionTime,omitempty"`
	// Counts: nil keeps Envoy's default.
	Consecutive5xx                 *uint32 `json:"consecutive5xx,omitempty"`
	ConsecutiveGatewayErrors       *uint32 `json:"consecutiveGatewayErrors,omitempty"`
	ConsecutiveLocalOriginFailures *uint32 `json:"consecutiveLocalOriginFailures,omitempty"`
	MaxEjectionPercent             *uint32 `json:"maxEjectionPercent,omitempty"`
}

// UpstreamTLS is TLS towards a cluster's endpoints, the backend's certificate verified.
type UpstreamTLS struct {
	// SNI is the server name sent, a DNS name.
	SNI string `json:"sni"`
	// CACertificates is a PEM bundle of the CA certificates that verify the backend's
	// certificate; SystemCA uses Envoy's system bundle (SystemCABundle) instead. Exactly one.
	CACertificates string `json:"caCertificates,omitempty"`
	SystemCA       bool   `json:"systemCA,omitempty"`
	// SubjectAltNames are the names of which the backend's certificate must carry one.
	SubjectAltNames []SubjectAltName `json:"subjectAltNames"`
	// ClientCertificate names the Secret (of this Config) presented to the backend as the
	// client certificate; "" presents none.
	ClientCertificate string `json:"clientCertificate,omitempty"`
}

// SystemCABundle is the system CA bundle of Envoy's images (envoyproxy/envoy and its
// distroless variant, Debian and Ubuntu's ca-certificates).
const SystemCABundle = "/etc/ssl/certs/ca-certificates.crt"

// SubjectAltName types.
const (
	SANDNS = "DNS"
	SANURI = "URI"
)

// SubjectAltName is a name a certificate may carry: Type SANDNS or SANURI, matched exactly.
type SubjectAltName struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// Endpoint is one upstream host and port.
type Endpoint struct {
	// Address is an IP address (never a name).
	Address string `json:"address"`
	Port    uint32 `json:"port"`
	// Group names the cluster's EndpointGroup the endpoint belongs to (with Groups only).
	Group string `json:"group,omitempty"`
}

// EndpointGroup is a share of a cluster's connections, given to the endpoints that name it.
type EndpointGroup struct {
	// Name is unique in the cluster.
	Name string `json:"name"`
	// Weight is the group's share against the other groups' (1 or more; the weights of a
	// cluster add up to at most 2^32-1).
	Weight uint32 `json:"weight"`
}

// HealthCheck is an active health check of every endpoint of a cluster: a TCP connect, or,
// with HTTPPath, an HTTP/1.1 GET of that path that passes on status 200 only.
type HealthCheck struct {
	// HTTPPath, when set, makes the check an HTTP GET of this path (starting with "/").
	HTTPPath string `json:"httpPath,omitempty"`
	// Port, when set, is the port checked on every endpoint's address instead of the
	// endpoint's own port (kube-proxy's healthCheckNodePort). A UDP cluster is checked only
	// over HTTP on such a port.
	Port uint32 `json:"port,omitempty"`
	// NoPanic turns Envoy's panic mode off: by default, when fewer than half the hosts are
	// healthy, Envoy spreads traffic over all of them, healthy or not. With
	// externalTrafficPolicy Local, a few healthy nodes among many is the normal case, and the
	// others drop the connections, so only healthy hosts may get traffic (none when none is).
	NoPanic bool `json:"noPanic,omitempty"`

	Interval           Duration `json:"interval"`
	Timeout            Duration `json:"timeout"`
	UnhealthyThreshold uint32   `json:"unhealthyThreshold"`
	HealthyThreshold   uint32   `json:"healthyThreshold"`
	// NoTrafficInterval is how often the healthy endpoints of a cluster that has seen no
	// traffic are checked; 0 is EnvoyNoTrafficInterval. Its unhealthy endpoints are checked at
	// Interval (or NoTrafficInterval when shorter).
	NoTrafficInterval Duration `json:"noTrafficInterval,omitempty"`
}

// EnvoyNoTrafficInterval is Envoy's no_traffic_interval when the configuration leaves it
// unset, and the interval of the healthy endpoints of an idle cluster when HealthCheck's
// NoTrafficInterval is 0.
const EnvoyNoTrafficInterval = 60 * time.Second

// Secret is a TLS certificate and key, PEM encoded; or, with Generic set (and neither of
// them), an opaque value (an OIDC client secret or HMAC key, oidc.go).
type Secret struct {
	Name       string      `json:"name"`
	Owners     []ObjectRef `json:"owners,omitempty"`
	CertChain  []byte      `json:"certChain,omitempty"`
	PrivateKey []byte      `json:"privateKey,omitempty"`
	Generic    []byte      `json:"generic,omitempty"`
}

// Normalize puts the Config in its one deterministic order: every list of named elements is
// sorted by name, endpoints by address and port (duplicates dropped), owners sorted and
// unique, endpoint groups by name. Route order within a virtual host is meaningful and kept.
// An element already in that order is not written to: the elements of a Config may be shared
// with an earlier Config (translate.Incremental hands them on), which others may be reading.
func (c *Config) Normalize() {
	byName := func(a, b interface{ name() string }) int { return cmp.Compare(a.name(), b.name()) }
	slices.SortFunc(c.Listeners, func(a, b *Listener) int { return byName(a, b) })
	slices.SortFunc(c.RouteConfigs, func(a, b *RouteConfig) int { return byName(a, b) })
	slices.SortFunc(c.Clusters, func(a, b *Cluster) int { return byName(a, b) })
	slices.SortFunc(c.Secrets, func(a, b *Secret) int { return byName(a, b) })
	for _, l := range c.Listeners {
		normalizeRefsIn(&l.Owners)
	}
	for _, rc := range c.RouteConfigs {
		sortIn(rc.VirtualHosts, func(a, b *VirtualHost) int { return byName(a, b) })
		for _, vh := range rc.VirtualHosts {
			for _, r := range vh.Routes {
				normalizeRefsIn(&r.Owners)
			}
		}
	}
	for _, cl := range c.Clusters {
		normalizeRefsIn(&cl.Owners)
		sortIn(cl.Endpoints, func(a, b Endpoint) int {
			return cmp.Or(cmp.Compare(a.Address, b.Address), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Group, b.Group))
		})
		if eps := slices.Compact(cl.Endpoints); len(eps) != len(cl.Endpoints) {
			cl.Endpoints = eps
		}
		sortIn(cl.Groups, func(a, b EndpointGroup) int { return cmp.Compare(a.Name, b.Name) })
	}
	for _, s := range c.Secrets {
		normalizeRefsIn(&s.Owners)
	}
}

// sortIn sorts s unless it is sorted already (then nothing is written).
func sortIn[S ~[]E, E any](s S, cmp func(a, b E) int) {
	if !slices.IsSortedFunc(s, cmp) {
		slices.SortFunc(s, cmp)
	}
}

// normalizeRefsIn is NormalizeRefs in place: nothing is written when *refs is normalized
// already.
func normalizeRefsIn(refs *[]ObjectRef) {
	if n := NormalizeRefs(*refs); len(n) != len(*refs) || n == nil && *refs != nil {
		*refs = n
	}
}

// Equal reports whether two Configs are the same, element by element (reflect.DeepEqual's
// answer). Both should be normalized. An element shared by both (the same pointer, as
// translate.Incremental hands on unchanged ones) is not compared field by field.
func (c *Config) Equal(o *Config) bool {
	if c == nil || o == nil {
		return c == o
	}
	return equalElements(c.Listeners, o.Listeners) && equalElements(c.RouteConfigs, o.RouteConfigs) &&
		equalElements(c.Clusters, o.Clusters) && equalElements(c.Secrets, o.Secrets) &&
		reflect.DeepEqual(c.RateLimitService, o.RateLimitService)
}

// equalElements is reflect.DeepEqual of two lists of elements, comparing shared ones by
// pointer only.
func equalElements[T any](a, b []*T) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && !reflect.DeepEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

func (l *Listener) name() string    { return l.Name }
func (r *RouteConfig) name() string { return r.Name }
func (v *VirtualHost) name() string { return v.Name }
func (c *Cluster) name() string     { return c.Name }
func (s *Secret) name() string      { return s.Name }

// Duration is a time.Duration that reads and writes as a string such as "5s" in YAML and JSON
// (the golden files), rather than as nanoseconds.
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes the duration as a string, e.g. "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a string such as "5s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}
