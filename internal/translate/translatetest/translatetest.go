// Package translatetest holds test helpers for the translation pipeline: the YAML form of a
// front-end Input used by the golden files, the whole pipeline (front end + back end) in one
// call, stable YAML renderings of the IR and of Envoy resources, and a checker that a set of
// Envoy resources is something Envoy accepts.
package translatetest

import (
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/translate"
)

// LoadInput reads an Input from a golden testdata/*.in.yaml file.
func LoadInput(path string) (translate.Input, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return translate.Input{}, err
	}
	var g goldenInput
	if err := yaml.UnmarshalStrict(raw, &g); err != nil {
		return translate.Input{}, fmt.Errorf("parse %s: %w", path, err)
	}
	return g.input(), nil
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
	// Routes, the Route controller's hub Services and the synced hub Secrets (Layer 7).
	Routes        []v1alpha1.Route `json:"routes,omitempty"`
	RouteServices []corev1.Service `json:"routeServices,omitempty"`
	Secrets       []corev1.Secret  `json:"secrets,omitempty"`
	HeaderLimits  *ir.HeaderLimits `json:"headerLimits,omitempty"`
	// DNS settings and the certificates of LoadBalancer hostnames (by LoadBalancer name).
	DNS             translate.DNS            `json:"dns,omitempty"`
	HostnameSecrets map[string]corev1.Secret `json:"hostnameSecrets,omitempty"`
}

type goldenOptions struct {
	ListenerAddress          string            `json:"listenerAddress,omitempty"`
	ListenerAddressIPv6      string            `json:"listenerAddressIPv6,omitempty"`
	ConnectTimeout           metav1.Duration   `json:"connectTimeout,omitempty"`
	MaxConnectionsPerCluster uint32            `json:"maxConnectionsPerCluster,omitempty"`
	UDPSessionIdleTimeout    metav1.Duration   `json:"udpSessionIdleTimeout,omitempty"`
	HealthCheck              goldenHealthCheck `json:"healthCheck,omitempty"`
}

type goldenHealthCheck struct {
	Disabled           bool            `json:"disabled,omitempty"`
	Interval           metav1.Duration `json:"interval,omitempty"`
	Timeout            metav1.Duration `json:"timeout,omitempty"`
	UnhealthyThreshold uint32          `json:"unhealthyThreshold,omitempty"`
	HealthyThreshold   uint32          `json:"healthyThreshold,omitempty"`
	NoTrafficInterval  metav1.Duration `json:"noTrafficInterval,omitempty"`
}

func (g goldenInput) input() translate.Input {
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
		Options: translate.Options{
			ListenerAddress:          g.Options.ListenerAddress,
			ListenerAddressIPv6:      g.Options.ListenerAddressIPv6,
			ConnectTimeout:           g.Options.ConnectTimeout.Duration,
			MaxConnectionsPerCluster: g.Options.MaxConnectionsPerCluster,
			UDPSessionIdleTimeout:    g.Options.UDPSessionIdleTimeout.Duration,
			HealthCheck: translate.HealthCheck{
				Disabled:           g.Options.HealthCheck.Disabled,
				Interval:           g.Options.HealthCheck.Interval.Duration,
				Timeout:            g.Options.HealthCheck.Timeout.Duration,
				UnhealthyThreshold: g.Options.HealthCheck.UnhealthyThreshold,
				HealthyThreshold:   g.Options.HealthCheck.HealthyThreshold,
				NoTrafficInterval:  g.Options.HealthCheck.NoTrafficInterval.Duration,
			},
		},
	}
	for _, a := range g.Addresses {
		in.Addresses[a.Name] = a
	}
	return in
}
