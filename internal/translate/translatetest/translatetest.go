// Package translatetest holds test helpers for the translation pipeline: the YAML form of a
// front-end Input used by the golden files, the whole pipeline (front end + back end) in one
// call, stable YAML renderings of the IR and of Envoy resources, and a checker that a set of
// Envoy resources is something Envoy accepts.
package translatetest

import (
	"fmt"
	"net/netip"
	"os"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/trafficpolicy"
	"kubelb.dev/kubelb/internal/translate"
)

// LoadInput reads an Input from a golden testdata/*.in.yaml file: what LoadCase reads, less
// what its holds hold back (translate.Hold), as the manager hands it to translate.Run.
func LoadInput(path string) (translate.Input, error) {
	in, holds, err := LoadCase(path)
	if err != nil {
		return translate.Input{}, err
	}
	in, _ = translate.Hold(in, holds)
	return in, nil
}

// LoadCase reads a golden testdata/*.in.yaml file: the tenant's objects as the manager
// gathers them, with the API forms of its settings converted (translate.HeaderLimits,
// translate.HubRanges), and what its settings and limits hold back (translate.Holds).
func LoadCase(path string) (translate.Input, translate.Holds, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return translate.Input{}, translate.Holds{}, err
	}
	var g goldenInput
	if err := yaml.UnmarshalStrict(raw, &g); err != nil {
		return translate.Input{}, translate.Holds{}, fmt.Errorf("parse %s: %w", path, err)
	}
	in, err := g.input()
	if err != nil {
		return translate.Input{}, translate.Holds{}, fmt.Errorf("%s: %w", path, err)
	}
	return in, g.Held, nil
}

// goldenInput is the YAML form of an Input: Addresses as a list, durations as strings.
type goldenInput struct {
	Tenant  string        `json:"tenant"`
	Options goldenOptions `json:"options,omitempty"`
	// EndpointPolicy is the Input's Policy: allow, deny and hub entries of {prefix, source}.
	EndpointPolicy translate.EndpointPolicy `json:"endpointPolicy,omitempty"`
	Addresses      []v1alpha1.Addresses     `json:"addresses,omitempty"`
	// Resolved are the addresses the manager resolved for endpoint hostnames, by name.
	Resolved      map[string]translate.Resolved `json:"resolved,omitempty"`
	LoadBalancers []v1alpha1.LoadBalancer       `json:"loadBalancers,omitempty"`
	// HubServices are the LoadBalancers' hub Services ("envoy-<lb name>", labelled with the
	// LoadBalancer's name). When the file has none, they are made from the allocations the
	// LoadBalancers' status.service records (HubServicesFromStatus), as the manager's
	// LoadBalancer controller would have made them.
	HubServices []corev1.Service `json:"hubServices,omitempty"`
	// Routes, the Route controller's hub Services and the synced hub Secrets (Layer 7).
	Routes        []v1alpha1.Route `json:"routes,omitempty"`
	RouteServices []corev1.Service `json:"routeServices,omitempty"`
	Secrets       []corev1.Secret  `json:"secrets,omitempty"`
	HeaderLimits  *ir.HeaderLimits `json:"headerLimits,omitempty"`
	// EnvoyHeaderLimits are the header limits as the tenant's Config or Tenant sets them
	// (envoyProxy.headerLimits), converted with translate.HeaderLimits; not with HeaderLimits.
	EnvoyHeaderLimits *v1alpha1.HeaderLimits `json:"envoyHeaderLimits,omitempty"`
	// HubServiceCIDRs and HubNodes are the hub's, made into the endpoint policy's hub ranges
	// with translate.HubRanges; not with endpointPolicy.hub.
	HubServiceCIDRs []networkingv1.ServiceCIDR `json:"hubServiceCIDRs,omitempty"`
	HubNodes        []corev1.Node              `json:"hubNodes,omitempty"`
	// Held is what the tenant's settings and limits hold back (translate.Hold).
	Held translate.Holds `json:"held,omitempty"`
	// DNS settings and the certificates of LoadBalancer hostnames (by LoadBalancer name).
	DNS             translate.DNS            `json:"dns,omitempty"`
	HostnameSecrets map[string]corev1.Secret `json:"hostnameSecrets,omitempty"`
	// The tenant's default Ingress certificate, or why it cannot be used.
	DefaultCertificate        *corev1.Secret `json:"defaultCertificate,omitempty"`
	DefaultCertificateProblem string         `json:"defaultCertificateProblem,omitempty"`
	// StaticAddresses is the tenant's grant (Tenant spec.gatewayAPI.staticAddresses): IP
	// addresses and CIDRs.
	StaticAddresses []string `json:"staticAddresses,omitempty"`
	// OIDCCookieKeys are the cookie keys of the OIDC logins as the manager keeps them (the
	// data of Secret kubelb-oidc-keys: by translate.OIDCCookieKeyName of the login).
	OIDCCookieKeys map[string][]byte `json:"oidcCookieKeys,omitempty"`
	// OIDCProviders are the discovery documents the manager read, by issuer.
	OIDCProviders map[string]translate.OIDCProvider `json:"oidcProviders,omitempty"`
}

type goldenOptions struct {
	ListenerAddress          string            `json:"listenerAddress,omitempty"`
	ListenerAddressIPv6      string            `json:"listenerAddressIPv6,omitempty"`
	ConnectTimeout           metav1.Duration   `json:"connectTimeout,omitempty"`
	MaxConnectionsPerCluster uint32            `json:"maxConnectionsPerCluster,omitempty"`
	UDPSessionIdleTimeout    metav1.Duration   `json:"udpSessionIdleTimeout,omitempty"`
	HealthCheck              goldenHealthCheck `json:"healthCheck,omitempty"`
	// The tenant's health-check budget and the proxies of its fleet.
	HealthCheckProbesPerSecond int `json:"healthCheckProbesPerSecond,omitempty"`
	HealthCheckProxies         int `json:"healthCheckProxies,omitempty"`
	// AccessLog: the tenant's envoyProxy.accessLog.enabled.
	AccessLog bool `json:"accessLog,omitempty"`
	// The tenant's spec.http timeouts.
	RequestTimeout    metav1.Duration `json:"requestTimeout,omitempty"`
	StreamIdleTimeout metav1.Duration `json:"streamIdleTimeout,omitempty"`
	// IngressSSLRedirect: the tenant's spec.ingress.sslRedirect.
	IngressSSLRedirect bool `json:"ingressSSLRedirect,omitempty"`
	// TrafficPolicies: the tenant's spec.trafficPolicies bounds as the settings resolve
	// them (with setBy).
	TrafficPolicies *v1alpha1.TenantTrafficPolicyBounds `json:"trafficPolicies,omitempty"`
	// RateLimitService: the address of the tenant's rate-limit service ("IP:port").
	RateLimitService string `json:"rateLimitService,omitempty"`
	// LoadBalancerProxyProtocol: the tenant's spec.loadBalancer.proxyProtocol as the settings
	// resolve it.
	LoadBalancerProxyProtocol translate.HubProxyProtocol `json:"loadBalancerProxyProtocol,omitempty"`
}

type goldenHealthCheck struct {
	Disabled           bool            `json:"disabled,omitempty"`
	Interval           metav1.Duration `json:"interval,omitempty"`
	Timeout            metav1.Duration `json:"timeout,omitempty"`
	UnhealthyThreshold uint32          `json:"unhealthyThreshold,omitempty"`
	HealthyThreshold   uint32          `json:"healthyThreshold,omitempty"`
	NoTrafficInterval  metav1.Duration `json:"noTrafficInterval,omitempty"`
}

func (g goldenInput) input() (translate.Input, error) {
	in := translate.Input{
		Tenant:          g.Tenant,
		LoadBalancers:   g.LoadBalancers,
		Addresses:       map[string]v1alpha1.Addresses{},
		Policy:          g.EndpointPolicy,
		Resolved:        g.Resolved,
		Routes:          g.Routes,
		RouteServices:   g.RouteServices,
		Secrets:         g.Secrets,
		HeaderLimits:    g.HeaderLimits,
		DNS:             g.DNS,
		HostnameSecrets: g.HostnameSecrets,
		OIDCCookieKeys:  g.OIDCCookieKeys,
		OIDCProviders:   g.OIDCProviders,

		DefaultCertificate:        g.DefaultCertificate,
		DefaultCertificateProblem: g.DefaultCertificateProblem,
		Options: translate.Options{
			ListenerAddress:          g.Options.ListenerAddress,
			ListenerAddressIPv6:      g.Options.ListenerAddressIPv6,
			ConnectTimeout:           g.Options.ConnectTimeout.Duration,
			MaxConnectionsPerCluster: g.Options.MaxConnectionsPerCluster,
			UDPSessionIdleTimeout:    g.Options.UDPSessionIdleTimeout.Duration,
			RequestTimeout:           g.Options.RequestTimeout.Duration,
			StreamIdleTimeout:        g.Options.StreamIdleTimeout.Duration,
			IngressSSLRedirect:       g.Options.IngressSSLRedirect,
			HealthCheck: translate.HealthCheck{
				Disabled:           g.Options.HealthCheck.Disabled,
				Interval:           g.Options.HealthCheck.Interval.Duration,
				Timeout:            g.Options.HealthCheck.Timeout.Duration,
				UnhealthyThreshold: g.Options.HealthCheck.UnhealthyThreshold,
				HealthyThreshold:   g.Options.HealthCheck.HealthyThreshold,
				NoTrafficInterval:  g.Options.HealthCheck.NoTrafficInterval.Duration,
			},
			HealthCheckProbesPerSecond: g.Options.HealthCheckProbesPerSecond,
			HealthCheckProxies:         g.Options.HealthCheckProxies,
			AccessLog:                  g.Options.AccessLog,
			TrafficPolicies:            trafficpolicy.BoundsOf(g.Options.TrafficPolicies),
			RateLimitService:           g.Options.RateLimitService,
			LoadBalancerProxyProtocol:  g.Options.LoadBalancerProxyProtocol,
		},
	}
	for _, a := range g.Addresses {
		in.Addresses[a.Name] = a
	}
	for _, e := range g.StaticAddresses {
		p, err := netip.ParsePrefix(e)
		if a, aerr := netip.ParseAddr(e); aerr == nil {
			p, err = netip.PrefixFrom(a, a.BitLen()), nil
		}
		if err != nil {
			return translate.Input{}, fmt.Errorf("staticAddresses: %w", err)
		}
		in.StaticAddresses = append(in.StaticAddresses, p.Masked())
	}
	if g.EnvoyHeaderLimits != nil {
		if g.HeaderLimits != nil {
			return translate.Input{}, fmt.Errorf("both headerLimits and envoyHeaderLimits")
		}
		in.HeaderLimits, _ = translate.HeaderLimits(g.EnvoyHeaderLimits)
	}
	if g.HubServiceCIDRs != nil || g.HubNodes != nil {
		if g.EndpointPolicy.Hub != nil {
			return translate.Input{}, fmt.Errorf("both endpointPolicy.hub and hubServiceCIDRs or hubNodes")
		}
		in.Policy.Hub = translate.HubRanges(g.HubServiceCIDRs, g.HubNodes)
	}
	if g.HubServices == nil {
		in.HubServices = HubServicesFromStatus(in.LoadBalancers)
	} else {
		in.HubServices = map[string]*corev1.Service{}
		for i := range g.HubServices {
			svc := &g.HubServices[i]
			in.HubServices[svc.Labels[v1alpha1.LabelLoadBalancerName]] = svc
		}
	}
	return in, nil
}

// HubServicesFromStatus returns the hub Services the manager's LoadBalancer controller
// makes for the allocations recorded in the LoadBalancers' status.service (ports and IP
// families), by LoadBalancer name: one port per spec port that has a status port
// (v1alpha1.LoadBalancerStatus.StatusPortFor) with a listener port, of the spec port's
// protocol and number, targetPort the listener port. A LoadBalancer without any gets none.
// Tests record allocations in the status, where the manager records them too; translation
// reads only the hub Services.
func HubServicesFromStatus(lbs []v1alpha1.LoadBalancer) map[string]*corev1.Service {
	out := map[string]*corev1.Service{}
	for i := range lbs {
		lb := &lbs[i]
		var ports []corev1.ServicePort
		for _, p := range lb.Spec.Ports {
			sp, ok := lb.Status.StatusPortFor(p)
			if !ok || sp.UpstreamTargetPort == 0 {
				continue
			}
			ports = append(ports, corev1.ServicePort{Name: p.Name, Protocol: v1alpha1.ProtocolOrTCP(p.Protocol), Port: p.Port,
				TargetPort: intstr.FromInt32(sp.UpstreamTargetPort)})
		}
		if len(ports) == 0 {
			continue
		}
		out[lb.Name] = &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "envoy-" + lb.Name, Namespace: lb.Namespace,
				Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue,
					v1alpha1.LabelLoadBalancerNS: lb.Namespace, v1alpha1.LabelLoadBalancerName: lb.Name}},
			Spec: corev1.ServiceSpec{Ports: ports, IPFamilies: slices.Clone(lb.Status.Service.IPFamilies)},
		}
	}
	return out
}
