// Package translate holds kubelb's front ends: they turn a tenant's hub objects into the IR
// (internal/ir) plus problems keyed by object. The Layer 4 front end (l4.go) translates
// LoadBalancers and Addresses; the back end in internal/xds/translator turns the IR into
// Envoy resources.
//
// Before the front ends, Hold leaves out what the tenant's settings and limits hold back
// (held.go: the problems and Route statuses of those objects), and the API forms of the
// settings the manager reads become Input fields here (HeaderLimits, HubRanges): the manager
// only gathers the objects and publishes what comes out.
//
// Translation is a pure function of its input: no client, no clock, no globals. The same
// Input always gives the same IR, so an unchanged tenant is never re-pushed. Bad input on one
// object (or one of its sections) is reported as an ir.Problem on that object and never drops
// another object's configuration.
package translate

import (
	"cmp"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// Defaults of Options.
const (
	DefaultListenerAddress          = "0.0.0.0"
	DefaultListenerAddressIPv6      = "::"
	DefaultConnectTimeout           = 5 * time.Second
	DefaultHealthCheckInterval      = 5 * time.Second
	DefaultHealthCheckTimeout       = 2 * time.Second
	DefaultHealthCheckUnhealthy     = 2
	DefaultHealthCheckHealthy       = 1
	DefaultMaxConnectionsPerCluster = 1 << 20
	DefaultUDPSessionIdleTimeout    = 60 * time.Second
	// DefaultStreamIdleTimeout is Envoy's own default, stated so that it shows in the
	// configuration and bounds the per-route annotation.
	DefaultStreamIdleTimeout = 5 * time.Minute
)

// Bounds of the upstream options that Config and Tenant spec.upstream and the annotations of
// a LoadBalancer may set (the CRDs validate the same ranges; see UpstreamBounds).
const (
	MinConnectTimeout           = 10 * time.Millisecond
	MaxConnectTimeout           = 10 * time.Minute
	MinUDPSessionIdleTimeout    = time.Second
	MaxUDPSessionIdleTimeout    = 24 * time.Hour
	MinHealthCheckInterval      = time.Second
	MaxHealthCheckInterval      = time.Hour
	MinHealthCheckTimeout       = 10 * time.Millisecond
	MaxHealthCheckTimeout       = time.Hour
	MinNoTrafficInterval        = time.Second
	MaxNoTrafficInterval        = time.Hour
	MaxHealthCheckThreshold     = 100
	MaxMaxConnectionsPerCluster = 1<<31 - 1
	// MaxRequestTimeout bounds spec.http.requestTimeout and the request-timeout annotation
	// (0s, no timeout, is allowed); the stream idle timeout goes from MinStreamIdleTimeout
	// to MaxStreamIdleTimeout, and the annotation up to the tenant's.
	MaxRequestTimeout    = 24 * time.Hour
	MinStreamIdleTimeout = time.Second
	MaxStreamIdleTimeout = 24 * time.Hour
)

// Input is everything Translate reads: one tenant's state on the hub.
type Input struct {
	// Tenant is the hub namespace of the tenant, e.g. "tenant-a".
	Tenant string
	// LoadBalancers of the tenant; objects being deleted must already be left out.
	LoadBalancers []v1alpha1.LoadBalancer
	// HubServices are the hub Services of the LoadBalancers ("envoy-<lb name>", made by the
	// manager's LoadBalancer controller; no tenant can write them), by LoadBalancer name.
	// They are the record of the listener ports: the targetPort of the hub Service port with
	// a LoadBalancer port's protocol and number is that port's listener port, and their
	// spec.ipFamilies are the families the listeners bind. A LoadBalancer without one has
	// no listener port yet (PortPending), or none left (PortNotAllocated, when the hub
	// Service's v1alpha1.AnnotationPortsExhausted lists the port). The LoadBalancer status,
	// which the tenant may write and which is written after the hub Service, is not read.
	HubServices map[string]*corev1.Service
	// Addresses of the tenant by object name (normally only "default").
	Addresses map[string]v1alpha1.Addresses
	// Options tune the generated configuration.
	Options Options
	// Policy decides which endpoint IPs may be used (see EndpointPolicy); the defaults
	// (DefaultDenied) apply even to the zero value.
	Policy EndpointPolicy
	// Resolved holds the addresses of the endpoint hostnames (EndpointHostnames) by name,
	// as the manager resolved them. Translation never resolves a name: a hostname endpoint
	// becomes one endpoint per resolved address the Policy allows, and a name missing here
	// is left out (HostnameNotResolved).
	Resolved map[string]Resolved

	// Routes of the tenant (Layer 7: Ingresses, Gateways, Gateway API routes); objects being
	// deleted must already be left out.
	Routes []v1alpha1.Route
	// RouteServices are the hub Services the Route controller made for the tenant: one per
	// Gateway Route (label LabelRouteName) and the shared Ingress Service (LabelIngressService).
	// Their targetPorts are the Envoy listener ports, their status the addresses to report.
	RouteServices []corev1.Service
	// Secrets are the hub Secrets made from the tenant's SyncSecrets, labelled with the
	// origin namespace and name of the tenant Secret.
	Secrets []corev1.Secret
	// HeaderLimits bound the request headers of HTTP listeners (Config/Tenant
	// envoyProxy.headerLimits); nil keeps Envoy's defaults.
	HeaderLimits *ir.HeaderLimits

	// DNS decides the LoadBalancer hostnames (Config/Tenant spec.dns; see
	// LoadBalancerHostname); the zero value gives none.
	DNS DNS
	// StaticAddresses are the addresses the tenant's Gateways may ask for in spec.addresses
	// (the Tenant's spec.gatewayAPI.staticAddresses, settings.StaticAddressGrant); none: a
	// Gateway asking for an address is not Programmed (AddressNotUsable).
	StaticAddresses []netip.Prefix
	// HostnameSecrets are the certificates of LoadBalancer hostnames by LoadBalancer name:
	// the Secret hubnames.HostnameSecretName(lb name) in the tenant namespace (made by cert-manager
	// for the hostname). A hostname without one is not served.
	HostnameSecrets map[string]corev1.Secret
	// DefaultCertificate is the tenant's default Ingress certificate (Config/Tenant
	// spec.ingress.defaultCertificate, a hub Secret the manager read), served for Ingress TLS
	// entries that name no Secret; nil when none is set or it cannot be read, and then
	// DefaultCertificateProblem says why ("" when none is set).
	DefaultCertificate        *corev1.Secret
	DefaultCertificateProblem string
	// OIDCCookieKeys are the keys that sign the session cookies of the tenant's OIDC logins,
	// by OIDCCookieKeyName of the login (OIDCLogins): random, made by the manager
	// (internal/manager/oidckeys) and kept only on the hub, where no tenant credential reads
	// them. A login without one (or with one not of OIDCCookieKeySize bytes) is not served:
	// its routes answer 500 until the manager has made it.
	OIDCCookieKeys map[string][]byte
	// OIDCProviders are the OpenID Connect providers' discovery documents the manager read,
	// by issuer (OIDCIssuers: the logins that give no endpoints). Translation never fetches
	// one: a login whose issuer is missing here is not served (its routes answer 500).
	OIDCProviders map[string]OIDCProvider
}

// OIDCProvider is what the manager read of an issuer's discovery document
// (<issuer>/.well-known/openid-configuration): its endpoints, checked as a policy's own
// (trafficpolicy.CheckOIDCDiscovered), or why it could not be read, in words the tenant may
// read.
type OIDCProvider struct {
	AuthorizationEndpoint string `json:"authorizationEndpoint,omitempty"`
	TokenEndpoint         string `json:"tokenEndpoint,omitempty"`
	Error                 string `json:"error,omitempty"`
}

// Options tune the generated Envoy configuration. The zero value means "all defaults".
type Options struct {
	// ListenerAddress is the address listeners bind to; default "0.0.0.0".
	ListenerAddress string
	// ListenerAddressIPv6 is the address the listeners of LoadBalancers whose hub Service
	// got IPv6 (status.service.ipFamilies) bind for it; default "::". A dual-stack
	// LoadBalancer's listeners bind both addresses (ListenerAddress first).
	ListenerAddressIPv6 string
	// ConnectTimeout of upstream connections; default 5s.
	ConnectTimeout time.Duration
	// MaxConnectionsPerCluster is the circuit-breaker limit on connections (TCP) or sessions
	// (UDP) per cluster and Envoy; default 1Mi. Envoy's own default (1024) would silently cap
	// every tenant Service at 1024 concurrent connections per proxy.
	MaxConnectionsPerCluster uint32
	// UDPSessionIdleTimeout ends UDP sessions without datagrams for this long; default 60s.
	UDPSessionIdleTimeout time.Duration
	// HealthCheck of Layer 4 clusters (see HealthCheck).
	HealthCheck HealthCheck
	// MaxEndpointsPerCluster bounds the endpoints of one cluster (the tenant's
	// spec.limits.endpointsPerCluster): the first ones in address order are kept, and the
	// object is told (QuotaExceeded, a Warning). Zero keeps them all.
	MaxEndpointsPerCluster int
	// MaxEndpoints bounds the endpoints of all the tenant's clusters together: the clusters
	// translated first (LoadBalancers oldest first, port by port, then Routes) take theirs
	// first; the rest get fewer or none, and their objects are told (QuotaExceeded). Zero
	// keeps them all. Not yet set by the manager: no limit of the API carries it.
	MaxEndpoints int
	// HealthCheckProbesPerSecond is the tenant's health-check budget: the most active
	// health-check probes per second all its proxies together may send (each proxy checks
	// every endpoint of every checked cluster once per interval). Over it, intervals are
	// stretched, and for the largest clusters checks turned off (HealthCheckThrottled).
	// Zero: no budget.
	HealthCheckProbesPerSecond int
	// HealthCheckProxies is the number of proxies of the tenant's fleet, each of which
	// checks every endpoint; default 1.
	HealthCheckProxies int
	// AccessLog writes an access log of every TCP and HTTP listener to Envoy's stdout
	// (Config/Tenant envoyProxy.accessLog).
	AccessLog bool
	// RequestTimeout bounds each request (for gRPC each stream) of the routes that set no
	// timeout of their own (Config/Tenant spec.http.requestTimeout); 0: none, requests take
	// as long as they take (Envoy's 15 s default never applies).
	RequestTimeout time.Duration
	// StreamIdleTimeout ends requests and streams with no traffic either way for this long
	// (spec.http.streamIdleTimeout); default DefaultStreamIdleTimeout.
	StreamIdleTimeout time.Duration
	// IngressSSLRedirect redirects requests over HTTP for the TLS hosts of Ingresses to
	// HTTPS (Config/Tenant spec.ingress.sslRedirect; an Ingress's kubelb.k8c.io/ssl-redirect
	// annotation overrides it). See docs/l7.md "HTTP to HTTPS redirect".
	IngressSSLRedirect bool
	// TrafficPolicies are the platform team's bounds on the tenant's traffic policies
	// (Config/Tenant spec.trafficPolicies; nil: none): a BackendTrafficPolicy or
	// SecurityPolicy over one is not applied, and its Route is told (OverPlatformBound).
	TrafficPolicies *trafficpolicy.Bounds
	// RateLimitService is the address ("IP:port", gRPC) of the tenant's rate-limit service,
	// which counts the global rate limits of its BackendTrafficPolicies for its whole fleet
	// (ratelimit.go); "" when the hub has none: a policy with a global limit then applies
	// not at all (OverPlatformBound, ratelimit.go).
	RateLimitService string
	// LoadBalancerProxyProtocol makes the TCP listeners of the tenant's LoadBalancers read a
	// PROXY protocol header from the hub's load balancer on every connection (Config/Tenant
	// spec.loadBalancer.proxyProtocol; see l4.go). The zero value reads none.
	LoadBalancerProxyProtocol HubProxyProtocol
	// KeyServerCAs is a PEM bundle of the CA certificates that verify the key servers JWT
	// providers fetch from at their URL (remoteJWKS without backendRefs); "" (always, but in
	// tests) uses Envoy's system bundle (ir.SystemCABundle). No tenant or platform setting
	// sets it.
	KeyServerCAs string
}

// HubProxyProtocol is whether listeners read a PROXY protocol header (Enabled), and whether
// they also serve connections without one (Optional, as from their peer's address). A value,
// not a pointer: Options are hashed as printed (fingerprint).
type HubProxyProtocol struct {
	Enabled  bool `json:"enabled,omitempty"`
	Optional bool `json:"optional,omitempty"`
}

// HealthCheck configures the active health checks of Layer 4 clusters: a TCP connect to each
// node's NodePort for TCP ports, and, for a LoadBalancer with spec.healthCheckNodePort
// (externalTrafficPolicy Local), GET /healthz on that port of each node for its TCP and UDP
// ports alike. Other UDP clusters are not health checked. The zero value means "enabled, with
// the defaults"; Disabled turns both kinds off.
type HealthCheck struct {
	// Disabled turns active health checking off.
	Disabled bool
	// Interval between checks; default 5s.
	Interval time.Duration
	// Timeout of one check; default 2s.
	Timeout time.Duration
	// UnhealthyThreshold is the number of failed checks that mark a host unhealthy; default 2.
	UnhealthyThreshold uint32
	// HealthyThreshold is the number of passed checks that mark a host healthy again; default 1.
	HealthyThreshold uint32
	// NoTrafficInterval is the interval used while a cluster has seen no traffic; zero keeps
	// Envoy's default (60s), which keeps idle tenants cheap.
	NoTrafficInterval time.Duration
}

// WithUpstream returns o with the upstream options set in u (ConnectTimeout,
// MaxConnectionsPerCluster, UDPSessionIdleTimeout, StreamIdleTimeout, HealthCheck: each
// non-zero field, and HealthCheck.Disabled when true; RequestTimeout, TrafficPolicies and
// LoadBalancerProxyProtocol always) in place of o's. The manager overlays a tenant's
// resolved spec.upstream onto its own options with it.
func (o Options) WithUpstream(u Options) Options {
	o.ConnectTimeout = setOr(u.ConnectTimeout, o.ConnectTimeout)
	o.MaxConnectionsPerCluster = setOr(u.MaxConnectionsPerCluster, o.MaxConnectionsPerCluster)
	o.UDPSessionIdleTimeout = setOr(u.UDPSessionIdleTimeout, o.UDPSessionIdleTimeout)
	// The tenant's resolved request timeout is final: 0 is a value (none), not "unset".
	o.RequestTimeout = u.RequestTimeout
	o.StreamIdleTimeout = setOr(u.StreamIdleTimeout, o.StreamIdleTimeout)
	// The tenant's bounds are final too: nil is none; and so is the hub's PROXY protocol.
	o.TrafficPolicies = u.TrafficPolicies
	o.LoadBalancerProxyProtocol = u.LoadBalancerProxyProtocol
	hc, uh := &o.HealthCheck, u.HealthCheck
	hc.Disabled = hc.Disabled || uh.Disabled
	hc.Interval = setOr(uh.Interval, hc.Interval)
	hc.Timeout = setOr(uh.Timeout, hc.Timeout)
	hc.UnhealthyThreshold = setOr(uh.UnhealthyThreshold, hc.UnhealthyThreshold)
	hc.HealthyThreshold = setOr(uh.HealthyThreshold, hc.HealthyThreshold)
	hc.NoTrafficInterval = setOr(uh.NoTrafficInterval, hc.NoTrafficInterval)
	return o
}

// setOr returns v when it is set (above its type's zero value: a positive number or
// duration, a non-empty string), else fallback.
func setOr[T cmp.Ordered](v, fallback T) T {
	var zero T
	if v > zero {
		return v
	}
	return fallback
}

// DurationInRange reports whether d is within [lo, hi].
func DurationInRange(d, lo, hi time.Duration) bool { return d >= lo && d <= hi }

// withDefaults fills in every unset option.
func (o Options) withDefaults() Options {
	o.ListenerAddress = setOr(o.ListenerAddress, DefaultListenerAddress)
	o.ListenerAddressIPv6 = setOr(o.ListenerAddressIPv6, DefaultListenerAddressIPv6)
	o.ConnectTimeout = setOr(o.ConnectTimeout, DefaultConnectTimeout)
	o.MaxConnectionsPerCluster = setOr(o.MaxConnectionsPerCluster, DefaultMaxConnectionsPerCluster)
	o.UDPSessionIdleTimeout = setOr(o.UDPSessionIdleTimeout, DefaultUDPSessionIdleTimeout)
	o.StreamIdleTimeout = setOr(o.StreamIdleTimeout, DefaultStreamIdleTimeout)
	hc := &o.HealthCheck
	hc.Interval = setOr(hc.Interval, DefaultHealthCheckInterval)
	hc.Timeout = setOr(hc.Timeout, DefaultHealthCheckTimeout)
	hc.UnhealthyThreshold = setOr(hc.UnhealthyThreshold, DefaultHealthCheckUnhealthy)
	hc.HealthyThreshold = setOr(hc.HealthyThreshold, DefaultHealthCheckHealthy)
	return o
}

// Reasons of problems. "Skipped" reasons mean the port (or LoadBalancer) got no listener;
// every problem carries its severity: ir.SeverityError when the port is not served (skipped,
// or served with no endpoint at all), ir.SeverityWarning when it is served but degraded.
const (
	// ReasonInvalidName: the LoadBalancer name cannot be used in Envoy names (skipped).
	ReasonInvalidName = "InvalidName"
	// ReasonUnsupportedProtocol: the port's protocol is neither TCP nor UDP (skipped).
	ReasonUnsupportedProtocol = "UnsupportedProtocol"
	// ReasonInvalidPort: a port number is out of range or repeated (the port is skipped, or
	// for an endpoint port, that endpoint group is left out).
	ReasonInvalidPort = "InvalidPort"
	// ReasonPortNotAllocated: the hub's listener port range had no port left for it (the
	// hub Service lists it in v1alpha1.AnnotationPortsExhausted; skipped).
	ReasonPortNotAllocated = "PortNotAllocated"
	// ReasonPortPending (a Warning): no listener port in the hub Service yet (a
	// LoadBalancer's, a Gateway's, the tenant's Ingress Service), and none refused: the
	// manager has not allocated it yet (skipped for now). It is never a condition:
	// Settled.Translate serves such an object at its last version with every port, or not
	// at all, and removes the problem; the translation after the allocation gives the verdict.
	ReasonPortPending = "PortPending"
	// ReasonListenerPortConflict: another port already uses the listener port (skipped).
	ReasonListenerPortConflict = "ListenerPortConflict"
	// ReasonAddressesNotFound: the referenced Addresses object does not exist (no endpoints).
	ReasonAddressesNotFound = "AddressesNotFound"
	// ReasonInvalidAddress: an endpoint address is neither an IP nor a DNS name (left out).
	ReasonInvalidAddress = "InvalidAddress"
	// ReasonEndpointDenied: an endpoint IP is denied by the endpoint policy (left out).
	ReasonEndpointDenied = "EndpointDenied"
	// ReasonEndpointPortNotFound: an endpoint group has no port for this port (left out).
	ReasonEndpointPortNotFound = "EndpointPortNotFound"
	// ReasonNoEndpoints: the cluster has no endpoints at all (e.g. no Ready nodes).
	ReasonNoEndpoints = "NoEndpoints"
	// ReasonInvalidAnnotation: an annotation value is not understood (ignored).
	ReasonInvalidAnnotation = "InvalidAnnotation"
	// ReasonProxyProtocolUnsupported: PROXY protocol was asked for a UDP port (ignored).
	ReasonProxyProtocolUnsupported = "ProxyProtocolUnsupported"
	// ReasonUnsupportedPersistence: spec.persistence.type is not understood (ignored); on a
	// Gateway API route, a part of sessionPersistence Envoy cannot keep (ignored), or a name,
	// type or timeout that turns the rule's session persistence off.
	ReasonUnsupportedPersistence = "UnsupportedPersistence"
	// ReasonQuotaExceeded: a cluster has more endpoints than Options.MaxEndpointsPerCluster
	// (the tenant's limit), or the tenant's clusters more than Options.MaxEndpoints; only the
	// first ones are used. Also the Error of an object the tenant's limits refuse (Hold).
	ReasonQuotaExceeded = "QuotaExceeded"
	// ReasonInvalidSourceRanges: spec.sourceRanges has an entry that is not a CIDR, or too
	// many entries: none of the LoadBalancer's ports (nor its hostname) is served until it is
	// fixed (fail closed: a restriction never silently widens).
	ReasonInvalidSourceRanges = "InvalidSourceRanges"
	// ReasonClientAddressUnknown: the LoadBalancer has source ranges, but its hub Service is of
	// type ClusterIP: clients reach Envoy through something inside the hub cluster, whose
	// address Envoy sees instead of the client's. The ranges are enforced against that
	// address (which normally refuses everyone). Also on the section "hostname" when the
	// tenant's Ingress Service, which serves the hostname, does not keep the clients'
	// addresses (externalTrafficPolicy Local on a Service of type LoadBalancer or NodePort),
	// and on a UDP port with source ranges while the hub's load balancer gives the clients'
	// addresses by PROXY protocol (Options.LoadBalancerProxyProtocol), which Envoy cannot read
	// on UDP. A PROXY protocol header the hub requires names the client: no Warning for
	// ClusterIP then.
	ReasonClientAddressUnknown = "ClientAddressUnknown"
)

// KindLoadBalancer is the kind of the objects the Layer 4 front end reports problems on.
const KindLoadBalancer = "LoadBalancer"
