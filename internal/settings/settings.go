// Package settings computes what applies to one tenant from the hub-wide Config "default" and
// the tenant's own Tenant object: Tenant settings override Config. It is pure: objects in,
// settings out.
package settings

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/trafficpolicy"
	"kubelb.dev/kubelb/internal/translate"
)

// DefaultEnvoyReplicas is used when neither Config nor Tenant set replicas (the product
// specification's default, and the Config CRD's).
const DefaultEnvoyReplicas int32 = 3

// Default limits of a tenant, when neither Config nor Tenant set one (docs/tenants.md#limits).
// A default never caps a tenant silently (issue 31): it is above what a tenant migrating from
// KubeLB CE brings (1000 Services of two ports), and the Tenant's condition
// LimitsNearlyReached and the alert KubeLBTenantNearLimit warn from 80 % of any limit. The
// limits that split something shared (listener ports, NodePorts) stay below the whole of it,
// so that one tenant alone cannot take all of it from the others (issue 26); a hub with many
// tenants sizes them in Config default.
const (
	// DefaultLimitLoadBalancers is the size of the default listener-port range
	// (--envoy-port-range 10000-19999); listenerPorts bounds them first.
	DefaultLimitLoadBalancers int32 = 10000
	// DefaultLimitRoutes bounds the Routes, which take no listener port of their own: what the
	// Layer 7 translation of one tenant costs (docs/performance.md).
	DefaultLimitRoutes int32 = 1000
	// DefaultLimitListenerPorts is half the default listener-port range (10000-19999): one
	// tenant alone leaves the other half to the others.
	DefaultLimitListenerPorts       int32 = 5000
	DefaultLimitEndpointsPerCluster int32 = 1000
	// DefaultLimitNodePorts is about three quarters of Kubernetes' default NodePort range
	// (30000-32767, 2768 ports): 1000 two-port Services fit, and 720 ports stay for the other
	// tenants and the platform team's own Services.
	DefaultLimitNodePorts int32 = 2048
	// DefaultLimitEndpoints keeps one tenant's snapshot near 250 MiB of the manager's memory
	// (docs/performance.md).
	DefaultLimitEndpoints int32 = 500000
	// DefaultLimitHealthCheckProbesPerSecond: 3 proxies checking about 3300 endpoints every
	// 5 s; the largest tenant (500000 endpoints) is checked about every 21 minutes (the factor is
	// rounded up to a power of two).
	DefaultLimitHealthCheckProbesPerSecond int32 = 2000
	// DefaultTotalHealthCheckProbesPerSecond is split between the tenants: ten get their
	// whole default budget.
	DefaultTotalHealthCheckProbesPerSecond int32 = 20000
	// DefaultLimitObjectBytes bounds the LoadBalancers and Routes of one tenant together
	// (4 KiB each at the default counts); DefaultLimitSyncSecretBytes the data of its
	// SyncSecrets (about 800 TLS certificates with their keys). With them the largest tenant the
	// defaults allow costs the manager tens of MiB, not GiB (docs/performance.md, "A hostile
	// tenant's largest footprint").
	DefaultLimitObjectBytes     int64 = 8 << 20
	DefaultLimitSyncSecrets     int32 = 250
	DefaultLimitSyncSecretBytes int64 = 4 << 20
	// DefaultLimitAddresses: the ccm writes one Addresses object ("default"); a few more
	// leave room for tooling.
	DefaultLimitAddresses int32 = 4
)

// Limits are a tenant's effective limits (api/v1alpha1 Limits, resolved).
type Limits struct {
	LoadBalancers       int
	Routes              int
	ListenerPorts       int
	NodePorts           int
	EndpointsPerCluster int
	Endpoints           int
	// HealthCheckProbesPerSecond is the tenant's own health-check budget; the manager
	// gives it at most its share of TotalHealthCheckProbesPerSecond (the Config's alone).
	HealthCheckProbesPerSecond      int
	TotalHealthCheckProbesPerSecond int
	ObjectBytes                     int64
	SyncSecrets                     int
	SyncSecretBytes                 int64
	Addresses                       int
}

// Tenant is the effective configuration of one tenant.
type Tenant struct {
	// Name of the tenant (without the tenant- prefix); "" for a namespace with no Tenant.
	Name string
	// LoadBalancerClass of the hub Services exposing the Envoy fleet; nil leaves it unset.
	LoadBalancerClass *string
	// DisableLoadBalancer turns layer-4 load balancing off for the tenant.
	DisableLoadBalancer bool
	// AllocateNodePorts is allocateLoadBalancerNodePorts of the tenant's hub Services of type
	// LoadBalancer — its LoadBalancers', Gateways' and its Ingress Service —
	// (spec.loadBalancer.allocateNodePorts of the Tenant, else of the Config, else true).
	AllocateNodePorts bool
	IngressClass      *string
	DisableIngress    bool
	GatewayClass      *string
	DisableGatewayAPI bool
	// Envoy is the Envoy fleet settings with the Tenant's replicas, resources, header
	// limits and access log applied.
	Envoy kubelbv1alpha1.EnvoyProxy
	// Annotations decides which annotations reach hub objects.
	AnnotationSettings kubelbv1alpha1.AnnotationSettings
	// EndpointPolicy holds the allow and deny entries of the tenant's endpoint policy: the
	// Tenant's spec.endpointPolicy.allow replaces the Config's when set (not nil), and so does
	// its deny list. Hub ranges are not here: the envoycp controller adds them.
	EndpointPolicy translate.EndpointPolicy
	// DNS decides the tenant's LoadBalancer hostnames (translate.LoadBalancerHostname):
	// Config and Tenant spec.dns.wildcardDomain and allowExplicitHostnames, each field of the
	// Tenant's overriding the Config's when set; its ReservedDomains are spec.dns.reservedDomains
	// and spec.dns.wildcardDomain of the Config and of the Tenant, all of them.
	DNS translate.DNS
	// UseDNSAnnotations puts the external-dns hostname annotation listing the tenant's
	// LoadBalancer hostnames on its Ingress Service (spec.dns.useDNSAnnotations).
	UseDNSAnnotations bool
	// DefaultClusterIssuer is the cert-manager ClusterIssuer of the Certificates of
	// LoadBalancer hostnames (spec.certificates.defaultClusterIssuer); "" makes none.
	DefaultClusterIssuer string
	// Limits bound what the tenant may hold: each field of the Tenant's spec.limits overrides
	// the Config's, and unset ones take the Default* constants.
	Limits Limits
	// Upstream holds the tenant's upstream options (Config and Tenant spec.upstream and
	// spec.http, each field of the Tenant's overriding the Config's); zero fields keep
	// translate's defaults (for RequestTimeout, none).
	// The envoycp controller overlays them onto its own options (Options.WithUpstream).
	// Its LoadBalancerProxyProtocol is spec.loadBalancer.proxyProtocol (resolveProxyProtocol).
	Upstream translate.Options
	// IPMode is spec.loadBalancer.ipMode of the Tenant, else of the Config; nil when
	// neither sets it (translate.IPMode decides).
	IPMode *corev1.LoadBalancerIPMode
	// AddressPool is the AddressPool the tenant's hub Services take their addresses from
	// (--address-provider=ipam): spec.loadBalancer.addressPool of the Tenant, else of the
	// Config; "" is the default pool.
	AddressPool string
	// NodeSet is the value of kubelb.k8c.io/use-as-loadbalancer of the hub nodes whose
	// addresses the tenant's hub Services get (--address-provider=node-ip):
	// spec.loadBalancer.nodeSet of the Tenant, else of the Config; "" is the default set.
	NodeSet string
	// IngressSSLRedirect is spec.ingress.sslRedirect of the Tenant, else of the Config (unset:
	// false); the envoycp controller passes it to translate (Options.IngressSSLRedirect).
	IngressSSLRedirect bool
	// IngressDefaultCertificate is spec.ingress.defaultCertificate of the Tenant, else of the
	// Config (nil: none); the envoycp controller reads that Secret for translate
	// (Input.DefaultCertificate).
	IngressDefaultCertificate *types.NamespacedName
	// StaticAddresses are the addresses the tenant's Gateways may ask for (the Tenant's
	// spec.gatewayAPI.staticAddresses; a Config grants none): IPs as single-address
	// prefixes, CIDRs masked; at most MaxStaticAddresses, unreadable entries left out.
	StaticAddresses []netip.Prefix
	// TrafficPolicies are the bounds of spec.trafficPolicies that apply to the tenant's
	// traffic policies, each field of the Tenant's overriding the Config's, with where each is
	// set (nil: none); the Tenant controller tells the ccm in TenantState, and Upstream
	// carries them to translate (Options.TrafficPolicies).
	TrafficPolicies *kubelbv1alpha1.TenantTrafficPolicyBounds
	// InvalidEndpointPolicy lists entries that are not CIDRs and were left out (the CRDs
	// refuse them, so only objects stored before their validation have any).
	InvalidEndpointPolicy []string
	// RateLimit is the Config's spec.rateLimit, the store of global rate limits, when it
	// is valid (RateLimitStoreError); nil: none, and global rate limits are
	// OverPlatformBound. Hub-wide: a Tenant cannot set it.
	RateLimit *kubelbv1alpha1.RateLimitStore
	// InvalidRateLimit says why the Config's spec.rateLimit was left out (nil: it was not).
	InvalidRateLimit error
}

// Resolve merges Config (may be nil) and Tenant (may be nil).
func Resolve(config *kubelbv1alpha1.Config, tenant *kubelbv1alpha1.Tenant) Tenant {
	out := Tenant{AllocateNodePorts: true}
	if config != nil {
		spec := config.Spec.DeepCopy()
		out.LoadBalancerClass = spec.LoadBalancer.Class
		if spec.LoadBalancer.AllocateNodePorts != nil {
			out.AllocateNodePorts = *spec.LoadBalancer.AllocateNodePorts
		}
		out.DisableLoadBalancer = spec.LoadBalancer.Disable
		out.IngressClass = spec.Ingress.Class
		out.DisableIngress = spec.Ingress.Disable
		out.GatewayClass = spec.GatewayAPI.Class
		out.DisableGatewayAPI = spec.GatewayAPI.Disable
		out.Envoy = spec.EnvoyProxy
		out.AnnotationSettings = spec.AnnotationSettings
	}
	if config != nil && config.Spec.RateLimit != nil {
		if out.InvalidRateLimit = RateLimitStoreError(config.Spec.RateLimit); out.InvalidRateLimit == nil {
			out.RateLimit = config.Spec.RateLimit.DeepCopy()
		}
	}
	resolveDNS(&out, config, tenant)
	out.Limits = resolveLimits(config, tenant)
	out.Upstream = resolveUpstream(config, tenant)
	out.TrafficPolicies = resolveTrafficPolicies(config, tenant)
	out.Upstream.TrafficPolicies = trafficpolicy.BoundsOf(out.TrafficPolicies)
	out.Upstream.LoadBalancerProxyProtocol = resolveProxyProtocol(config, tenant)
	for _, in := range layers(config, tenant,
		func(s *kubelbv1alpha1.ConfigSpec) *kubelbv1alpha1.IngressSettings { return &s.Ingress },
		func(s *kubelbv1alpha1.TenantSpec) *kubelbv1alpha1.IngressSettings { return &s.Ingress }) {
		if in.SSLRedirect != nil {
			out.IngressSSLRedirect = *in.SSLRedirect
		}
		if c := in.DefaultCertificate; c != nil {
			out.IngressDefaultCertificate = &types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
		}
	}
	out.IPMode = resolveIPMode(config, tenant)
	out.AddressPool = resolveLoadBalancerString(config, tenant, func(lb *kubelbv1alpha1.LoadBalancerSettings) *string { return lb.AddressPool })
	out.NodeSet = resolveLoadBalancerString(config, tenant, func(lb *kubelbv1alpha1.LoadBalancerSettings) *string { return lb.NodeSet })
	var allow, deny []string
	allowSrc, denySrc := translate.SourceConfigAllow, translate.SourceConfigDeny
	if config != nil && config.Spec.EndpointPolicy != nil {
		allow, deny = config.Spec.EndpointPolicy.Allow, config.Spec.EndpointPolicy.Deny
	}
	if tenant != nil && tenant.Spec.EndpointPolicy != nil {
		if p := tenant.Spec.EndpointPolicy; p.Allow != nil {
			allow, allowSrc = p.Allow, translate.SourceTenantAllow
		}
		if p := tenant.Spec.EndpointPolicy; p.Deny != nil {
			deny, denySrc = p.Deny, translate.SourceTenantDeny
		}
	}
	out.EndpointPolicy.Allow, out.InvalidEndpointPolicy = policyRules(allow, allowSrc, out.InvalidEndpointPolicy)
	out.EndpointPolicy.Deny, out.InvalidEndpointPolicy = policyRules(deny, denySrc, out.InvalidEndpointPolicy)

	if out.Envoy.Replicas == 0 && (config == nil || config.Spec.EnvoyProxy.Replicas == 0) {
		out.Envoy.Replicas = DefaultEnvoyReplicas
	}
	if tenant == nil {
		return out
	}
	spec := tenant.Spec.DeepCopy()
	out.Name = tenant.Name
	if spec.LoadBalancer.Class != nil {
		out.LoadBalancerClass = spec.LoadBalancer.Class
	}
	out.DisableLoadBalancer = out.DisableLoadBalancer || spec.LoadBalancer.Disable
	if spec.LoadBalancer.AllocateNodePorts != nil {
		out.AllocateNodePorts = *spec.LoadBalancer.AllocateNodePorts
	}
	if spec.Ingress.Class != nil {
		out.IngressClass = spec.Ingress.Class
	}
	out.DisableIngress = out.DisableIngress || spec.Ingress.Disable
	if spec.GatewayAPI.Class != nil {
		out.GatewayClass = spec.GatewayAPI.Class
	}
	out.DisableGatewayAPI = out.DisableGatewayAPI || spec.GatewayAPI.Disable
	if spec.EnvoyProxy.Replicas != nil {
		out.Envoy.Replicas = *spec.EnvoyProxy.Replicas
	}
	if spec.EnvoyProxy.Resources != nil {
		out.Envoy.Resources = spec.EnvoyProxy.Resources
	}
	if spec.EnvoyProxy.HeaderLimits != nil {
		out.Envoy.HeaderLimits = spec.EnvoyProxy.HeaderLimits
	}
	if spec.EnvoyProxy.AccessLog != nil {
		out.Envoy.AccessLog = spec.EnvoyProxy.AccessLog
	}
	out.StaticAddresses = StaticAddressGrant(spec.GatewayAPI.StaticAddresses)
	a := spec.AnnotationSettings
	if a.PropagatedAnnotations != nil {
		out.AnnotationSettings.PropagatedAnnotations = a.PropagatedAnnotations
	}
	if a.PropagateAllAnnotations != nil {
		out.AnnotationSettings.PropagateAllAnnotations = a.PropagateAllAnnotations
	}
	if a.DeniedAnnotations != nil {
		out.AnnotationSettings.DeniedAnnotations = a.DeniedAnnotations
	}
	if a.DefaultAnnotations != nil {
		out.AnnotationSettings.DefaultAnnotations = a.DefaultAnnotations
	}
	if a.AllowedSteeringAnnotations != nil {
		out.AnnotationSettings.AllowedSteeringAnnotations = a.AllowedSteeringAnnotations
	}
	return out
}

// MaxStaticAddresses is the most entries of a Tenant's spec.gatewayAPI.staticAddresses read
// (the CRD's bound).
const MaxStaticAddresses = 64

// StaticAddressGrant reads a Tenant's spec.gatewayAPI.staticAddresses: each an IP address (a
// single-address prefix) or a CIDR (masked), the first MaxStaticAddresses; entries that are
// neither (the CRD refuses them; objects stored before it may hold some) are left out.
func StaticAddressGrant(entries []string) []netip.Prefix {
	var out []netip.Prefix
	for i, e := range entries {
		if i == MaxStaticAddresses {
			break
		}
		e = strings.TrimSpace(e)
		if a, err := netip.ParseAddr(e); err == nil && a.Zone() == "" {
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		} else if p, err := netip.ParsePrefix(e); err == nil && !p.Addr().Is4In6() {
			out = append(out, p.Masked())
		}
	}
	return out
}

// resolveDNS sets the DNS and certificate settings: each field of the Tenant's spec.dns and
// spec.certificates overrides the Config's when set (not nil), so a Tenant can also turn off
// what the Config turns on (allowExplicitHostnames: false, wildcardDomain: "").
func resolveDNS(out *Tenant, config *kubelbv1alpha1.Config, tenant *kubelbv1alpha1.Tenant) {
	specs := layers(config, tenant,
		func(s *kubelbv1alpha1.ConfigSpec) *kubelbv1alpha1.DNSSettings { return &s.DNS },
		func(s *kubelbv1alpha1.TenantSpec) *kubelbv1alpha1.DNSSettings { return &s.DNS })
	certs := layers(config, tenant,
		func(s *kubelbv1alpha1.ConfigSpec) *kubelbv1alpha1.CertificatesSettings { return &s.Certificates },
		func(s *kubelbv1alpha1.TenantSpec) *kubelbv1alpha1.CertificatesSettings { return &s.Certificates })
	for _, d := range specs {
		if d.WildcardDomain != nil {
			out.DNS.WildcardDomain = *d.WildcardDomain
		}
		if d.AllowExplicitHostnames != nil {
			out.DNS.AllowExplicitHostnames = *d.AllowExplicitHostnames
		}
		if d.UseDNSAnnotations != nil {
			out.UseDNSAnnotations = *d.UseDNSAnnotations
		}
		// Reserved domains add up, and so do the wildcard domains: a Tenant cannot give
		// itself the Config's generated names.
		out.DNS.ReservedDomains = append(out.DNS.ReservedDomains, d.ReservedDomains...)
		if d.WildcardDomain != nil {
			out.DNS.ReservedDomains = append(out.DNS.ReservedDomains, *d.WildcardDomain)
		}
	}
	for _, c := range certs {
		if c.DefaultClusterIssuer != nil {
			out.DefaultClusterIssuer = strings.TrimSpace(*c.DefaultClusterIssuer)
		}
	}
}

// resolveLimits takes each limit from the Tenant, else the Config, else its default.
func resolveLimits(config *kubelbv1alpha1.Config, tenant *kubelbv1alpha1.Tenant) Limits {
	out := Limits{
		LoadBalancers:       int(DefaultLimitLoadBalancers),
		Routes:              int(DefaultLimitRoutes),
		ListenerPorts:       int(DefaultLimitListenerPorts),
		NodePorts:           int(DefaultLimitNodePorts),
		EndpointsPerCluster: int(DefaultLimitEndpointsPerCluster),
		Endpoints:           int(DefaultLimitEndpoints),
		ObjectBytes:         DefaultLimitObjectBytes,
		SyncSecrets:         int(DefaultLimitSyncSecrets),
		SyncSecretBytes:     DefaultLimitSyncSecretBytes,
		Addresses:           int(DefaultLimitAddresses),

		HealthCheckProbesPerSecond:      int(DefaultLimitHealthCheckProbesPerSecond),
		TotalHealthCheckProbesPerSecond: int(DefaultTotalHealthCheckProbesPerSecond),
	}
	if config != nil && config.Spec.TotalHealthCheckProbesPerSecond != nil && *config.Spec.TotalHealthCheckProbesPerSecond > 0 {
		out.TotalHealthCheckProbesPerSecond = int(*config.Spec.TotalHealthCheckProbesPerSecond)
	}
	specs := layers(config, tenant,
		func(s *kubelbv1alpha1.ConfigSpec) *kubelbv1alpha1.Limits { return &s.Limits },
		func(s *kubelbv1alpha1.TenantSpec) *kubelbv1alpha1.Limits { return &s.Limits })
	set := func(dst *int, v *int32) {
		if v != nil && *v >= 0 {
			*dst = int(*v)
		}
	}
	set64 := func(dst *int64, v *int64) {
		if v != nil && *v >= 0 {
			*dst = *v
		}
	}
	for _, l := range specs {
		set(&out.LoadBalancers, l.LoadBalancers)
		set(&out.Routes, l.Routes)
		set(&out.ListenerPorts, l.ListenerPorts)
		set(&out.NodePorts, l.NodePorts)
		set(&out.EndpointsPerCluster, l.EndpointsPerCluster)
		set(&out.Endpoints, l.Endpoints)
		if v := l.HealthCheckProbesPerSecond; v != nil && *v > 0 {
			out.HealthCheckProbesPerSecond = int(*v)
		}
		set64(&out.ObjectBytes, l.ObjectBytes)
		set(&out.SyncSecrets, l.SyncSecrets)
		set64(&out.SyncSecretBytes, l.SyncSecretBytes)
		set(&out.Addresses, l.Addresses)
	}
	return out
}

// resolveUpstream takes each upstream option (spec.upstream, and spec.http's timeouts) from
// the Tenant, else the Config; unset ones
// (and values outside translate's bounds, which the CRDs refuse) stay zero: the defaults.
func resolveUpstream(config *kubelbv1alpha1.Config, tenant *kubelbv1alpha1.Tenant) translate.Options {
	specs := layers(config, tenant,
		func(s *kubelbv1alpha1.ConfigSpec) *kubelbv1alpha1.UpstreamSettings { return &s.Upstream },
		func(s *kubelbv1alpha1.TenantSpec) *kubelbv1alpha1.UpstreamSettings { return &s.Upstream })
	var out translate.Options
	dur := func(dst *time.Duration, v *metav1.Duration, lo, hi time.Duration) {
		if v != nil && translate.DurationInRange(v.Duration, lo, hi) {
			*dst = v.Duration
		}
	}
	count := func(dst *uint32, v *int32, hi int64) {
		if v != nil && *v >= 1 && int64(*v) <= hi {
			*dst = uint32(*v)
		}
	}
	for _, u := range specs {
		dur(&out.ConnectTimeout, u.ConnectTimeout, translate.MinConnectTimeout, translate.MaxConnectTimeout)
		count(&out.MaxConnectionsPerCluster, u.MaxConnections, translate.MaxMaxConnectionsPerCluster)
		dur(&out.UDPSessionIdleTimeout, u.UDPIdleTimeout, translate.MinUDPSessionIdleTimeout, translate.MaxUDPSessionIdleTimeout)
		h, hc := &u.HealthCheck, &out.HealthCheck
		if h.Disable != nil {
			hc.Disabled = *h.Disable
		}
		dur(&hc.Interval, h.Interval, translate.MinHealthCheckInterval, translate.MaxHealthCheckInterval)
		dur(&hc.Timeout, h.Timeout, translate.MinHealthCheckTimeout, translate.MaxHealthCheckTimeout)
		count(&hc.UnhealthyThreshold, h.UnhealthyThreshold, translate.MaxHealthCheckThreshold)
		count(&hc.HealthyThreshold, h.HealthyThreshold, translate.MaxHealthCheckThreshold)
		dur(&hc.NoTrafficInterval, h.NoTrafficInterval, translate.MinNoTrafficInterval, translate.MaxNoTrafficInterval)
	}
	for _, h := range layers(config, tenant,
		func(s *kubelbv1alpha1.ConfigSpec) *kubelbv1alpha1.HTTPSettings { return &s.HTTP },
		func(s *kubelbv1alpha1.TenantSpec) *kubelbv1alpha1.HTTPSettings { return &s.HTTP }) {
		// 0s is a request timeout of its own (none): a Tenant's 0s overrides a Config's 30s.
		dur(&out.RequestTimeout, h.RequestTimeout, 0, translate.MaxRequestTimeout)
		dur(&out.StreamIdleTimeout, h.StreamIdleTimeout, translate.MinStreamIdleTimeout, translate.MaxStreamIdleTimeout)
	}
	return out
}

// resolveTrafficPolicies takes each bound of spec.trafficPolicies from the Tenant, else the
// Config, naming where it is set; nil when neither sets one.
func resolveTrafficPolicies(config *kubelbv1alpha1.Config, tenant *kubelbv1alpha1.Tenant) *kubelbv1alpha1.TenantTrafficPolicyBounds {
	out := &kubelbv1alpha1.TenantTrafficPolicyBounds{}
	set := func(field, where string) {
		if out.SetBy == nil {
			out.SetBy = map[string]string{}
		}
		out.SetBy[field] = where
	}
	layer := func(b *kubelbv1alpha1.TrafficPolicyBounds, where string) {
		if b == nil {
			return
		}
		b = b.DeepCopy()
		if b.Features != nil {
			out.Features = b.Features
			set(trafficpolicy.BoundFeatures, where)
		}
		if b.MaxRequestsPerSecond != nil && *b.MaxRequestsPerSecond > 0 {
			out.MaxRequestsPerSecond = b.MaxRequestsPerSecond
			set(trafficpolicy.BoundMaxRequestsPerSecond, where)
		}
		if b.MaxRetries != nil && *b.MaxRetries >= 0 {
			out.MaxRetries = b.MaxRetries
			set(trafficpolicy.BoundMaxRetries, where)
		}
		if b.MaxRequestTimeout != nil && b.MaxRequestTimeout.Duration > 0 {
			out.MaxRequestTimeout = b.MaxRequestTimeout
			set(trafficpolicy.BoundMaxRequestTimeout, where)
		}
	}
	if config != nil {
		layer(config.Spec.TrafficPolicies, "Config "+config.Name)
	}
	if tenant != nil {
		layer(tenant.Spec.TrafficPolicies, "Tenant "+tenant.Name)
	}
	if out.SetBy == nil {
		return nil
	}
	return out
}

// resolveIPMode takes spec.loadBalancer.ipMode from the Tenant, else the Config.
func resolveIPMode(config *kubelbv1alpha1.Config, tenant *kubelbv1alpha1.Tenant) *corev1.LoadBalancerIPMode {
	var out *corev1.LoadBalancerIPMode
	for _, lb := range layers(config, tenant,
		func(s *kubelbv1alpha1.ConfigSpec) *kubelbv1alpha1.LoadBalancerSettings { return &s.LoadBalancer },
		func(s *kubelbv1alpha1.TenantSpec) *kubelbv1alpha1.LoadBalancerSettings { return &s.LoadBalancer }) {
		if lb.IPMode == nil {
			continue
		}
		if v, ok := translate.ParseIPMode(string(*lb.IPMode)); ok {
			out = &v
		}
	}
	return out
}

// resolveProxyProtocol takes spec.loadBalancer.proxyProtocol's enabled and optional each from
// the Tenant, else the Config: the PROXY protocol the TCP listeners of the tenant's
// LoadBalancers read (translate.Options.LoadBalancerProxyProtocol).
func resolveProxyProtocol(config *kubelbv1alpha1.Config, tenant *kubelbv1alpha1.Tenant) translate.HubProxyProtocol {
	var out translate.HubProxyProtocol
	for _, lb := range layers(config, tenant,
		func(s *kubelbv1alpha1.ConfigSpec) *kubelbv1alpha1.LoadBalancerSettings { return &s.LoadBalancer },
		func(s *kubelbv1alpha1.TenantSpec) *kubelbv1alpha1.LoadBalancerSettings { return &s.LoadBalancer }) {
		if p := lb.ProxyProtocol; p != nil {
			if p.Enabled != nil {
				out.Enabled = *p.Enabled
			}
			if p.Optional != nil {
				out.Optional = *p.Optional
			}
		}
	}
	return out
}

// resolveLoadBalancerString takes a string field of spec.loadBalancer (field) from the Tenant,
// else the Config ("" when neither sets it).
func resolveLoadBalancerString(config *kubelbv1alpha1.Config, tenant *kubelbv1alpha1.Tenant, field func(*kubelbv1alpha1.LoadBalancerSettings) *string) string {
	out := ""
	for _, lb := range layers(config, tenant,
		func(s *kubelbv1alpha1.ConfigSpec) *kubelbv1alpha1.LoadBalancerSettings { return &s.LoadBalancer },
		func(s *kubelbv1alpha1.TenantSpec) *kubelbv1alpha1.LoadBalancerSettings { return &s.LoadBalancer }) {
		if v := field(lb); v != nil {
			out = strings.TrimSpace(*v)
		}
	}
	return out
}

// layers returns the settings of one kind that apply to a tenant, the Config's first and the
// Tenant's last (either may be nil), so that a loop over them lets the Tenant's fields
// override the Config's.
func layers[T any](config *kubelbv1alpha1.Config, tenant *kubelbv1alpha1.Tenant,
	ofConfig func(*kubelbv1alpha1.ConfigSpec) *T, ofTenant func(*kubelbv1alpha1.TenantSpec) *T) []*T {
	out := make([]*T, 0, 2)
	if config != nil {
		out = append(out, ofConfig(&config.Spec))
	}
	if tenant != nil {
		out = append(out, ofTenant(&tenant.Spec))
	}
	return out
}

// policyRules parses CIDRs into policy rules of source src; entries that are not CIDRs are
// appended to invalid, as "<source>: <entry>".
func policyRules(cidrs []string, src string, invalid []string) ([]translate.PolicyRule, []string) {
	var out []translate.PolicyRule
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			invalid = append(invalid, src+": "+c)
			continue
		}
		out = append(out, translate.PolicyRule{Prefix: p.Masked(), Source: src})
	}
	return out, invalid
}

// Annotations returns the annotations a hub object of the given kind gets from the tenant
// object's annotations: defaults for that kind (and "all") first, then the propagated ones.
// Denied annotations never pass; kubelb's own kubelb.k8c.io/ annotations are not copied.
func (t Tenant) Annotations(kind kubelbv1alpha1.AnnotatedResource, source map[string]string) map[string]string {
	a := t.AnnotationSettings
	out := map[string]string{}
	maps.Copy(out, a.DefaultAnnotations[kubelbv1alpha1.AnnotatedResourceAll])
	maps.Copy(out, a.DefaultAnnotations[kind])
	all := a.PropagateAllAnnotations != nil && *a.PropagateAllAnnotations
	for k, v := range source {
		if strings.HasPrefix(k, "kubelb.k8c.io/") || k == corev1.LastAppliedConfigAnnotation {
			continue
		}
		listed := false
		if a.PropagatedAnnotations != nil {
			want, ok := (*a.PropagatedAnnotations)[k]
			listed = ok && (want == "" || want == v)
		}
		if !listed && (!all || t.steeringDenied(k)) {
			continue
		}
		out[k] = v
	}
	for _, k := range a.DeniedAnnotations {
		delete(out, k)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// SteeringAnnotationPrefixes are the prefixes of annotation keys that steer a hub load
// balancer, an address provider or DNS: propagateAllAnnotations never copies them from a
// tenant object unless the platform team allows them (allowedSteeringAnnotations), for with
// them a tenant would pick another tenant's address or DNS name. A prefix ending in "/"
// matches keys of that prefix; one ending in "." also matches the keys of its subdomains
// ("service.beta.kubernetes.io/" and "service.kubernetes.io/" cover every cloud's; "metallb."
// every MetalLB domain).
var SteeringAnnotationPrefixes = []string{
	"metallb.universe.tf/", "metallb.io/",
	"kube-vip.io/",
	"external-dns.alpha.kubernetes.io/", "external-dns.kubernetes.io/",
	"service.beta.kubernetes.io/", "service.kubernetes.io/",
	"lbipam.cilium.io/", "io.cilium/", "io.cilium.", "cilium.io/",
	"purelb.io/",
	"networking.gke.io/", "cloud.google.com/",
	"loadbalancer.openstack.org/",
	"load-balancer.hetzner.cloud/",
	"k8s.ovn.org/",
	"projectcalico.org/",
	"dns.alpha.kubernetes.io/",
}

// IsSteeringAnnotation reports whether key is one of SteeringAnnotationPrefixes's.
func IsSteeringAnnotation(key string) bool {
	return matchesAny(key, SteeringAnnotationPrefixes)
}

// matchesAny reports whether key is one of entries, or starts with an entry ending in "/"
// or ".". A prefix "x/" also covers a key of a subdomain of x ("a.x/k").
func matchesAny(key string, entries []string) bool {
	prefix, _, hasSlash := strings.Cut(key, "/")
	for _, e := range entries {
		switch {
		case e == key:
			return true
		case strings.HasSuffix(e, "/") || strings.HasSuffix(e, "."):
			if strings.HasPrefix(key, e) {
				return true
			}
			if d := strings.TrimSuffix(e, "/"); hasSlash && d != e && strings.HasSuffix(prefix, "."+d) {
				return true
			}
		}
	}
	return false
}

// steeringDenied reports whether propagateAllAnnotations must not copy key: it steers a hub
// load balancer or DNS and the platform team did not allow it.
func (t Tenant) steeringDenied(key string) bool {
	return IsSteeringAnnotation(key) && !matchesAny(key, t.AnnotationSettings.AllowedSteeringAnnotations)
}

// DroppedSteeringAnnotations lists, sorted, the keys of source that propagateAllAnnotations
// would copy but for their steering a hub load balancer or DNS (nil when
// propagateAllAnnotations is off or none is dropped).
func (t Tenant) DroppedSteeringAnnotations(source map[string]string) []string {
	a := t.AnnotationSettings
	if a.PropagateAllAnnotations == nil || !*a.PropagateAllAnnotations {
		return nil
	}
	var out []string
	for k := range source {
		if a.PropagatedAnnotations != nil {
			if want, listed := (*a.PropagatedAnnotations)[k]; listed && (want == "" || want == source[k]) {
				continue
			}
		}
		if t.steeringDenied(k) && !slices.Contains(a.DeniedAnnotations, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// DroppedAnnotationsNote is the note of the Warning Event (reason AnnotationsDropped) of an
// object whose steering annotations (DroppedSteeringAnnotations) were not copied to its hub
// Service: what happened, what to do, and as many keys as an Event's note holds.
func DroppedAnnotationsNote(dropped []string) string {
	note := fmt.Sprintf("%d annotation(s) not copied to the hub Service: they steer the hub's load balancer or DNS, which the platform team has not allowed (allowedSteeringAnnotations of the Tenant or Config): ", len(dropped))
	const maxNote = 1000 // an Event's note holds 1024 bytes
	for i, k := range dropped {
		more := fmt.Sprintf(" and %d more", len(dropped)-i)
		if len(note)+len(k)+2+len(more) > maxNote {
			return strings.TrimSuffix(note, ", ") + more
		}
		note += k + ", "
	}
	return strings.TrimSuffix(note, ", ")
}

// DeniedKeys lists denied annotation keys, sorted (for messages).
func (t Tenant) DeniedKeys() []string {
	keys := slices.Clone(t.AnnotationSettings.DeniedAnnotations)
	slices.Sort(keys)
	return keys
}
