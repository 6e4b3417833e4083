// Package translate turns a tenant's LoadBalancers and Addresses into Envoy resources.
//
// It is a pure function of its input: no client, no clock, no globals. The same Input always
// gives the same Output, byte for byte, so snapshot versions derived from it are stable and an
// unchanged tenant is never re-pushed. Bad input on one LoadBalancer (or one of its ports) is
// reported as a Problem and never drops another LoadBalancer's configuration.
package translate

import (
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// Defaults of Options.
const (
	DefaultListenerAddress          = "0.0.0.0"
	DefaultConnectTimeout           = 5 * time.Second
	DefaultHealthCheckInterval      = 5 * time.Second
	DefaultHealthCheckTimeout       = 2 * time.Second
	DefaultHealthCheckUnhealthy     = 2
	DefaultHealthCheckHealthy       = 1
	DefaultMaxConnectionsPerCluster = 1 << 20
	DefaultUDPSessionIdleTimeout    = 60 * time.Second
)

// Input is everything Translate reads: one tenant's state on the hub.
type Input struct {
	// Tenant is the hub namespace of the tenant, e.g. "tenant-a".
	Tenant string
	// LoadBalancers of the tenant; objects being deleted must already be left out.
	LoadBalancers []v1alpha1.LoadBalancer
	// Addresses of the tenant by object name (normally only "default").
	Addresses map[string]v1alpha1.Addresses
	// Options tune the generated configuration.
	Options Options
}

// Options tune the generated Envoy configuration. The zero value means "all defaults".
type Options struct {
	// ListenerAddress is the address listeners bind to; default "0.0.0.0".
	ListenerAddress string
	// ConnectTimeout of upstream connections; default 5s.
	ConnectTimeout time.Duration
	// MaxConnectionsPerCluster is the circuit-breaker limit on connections (TCP) or sessions
	// (UDP) per cluster and Envoy; default 1Mi. Envoy's own default (1024) would silently cap
	// every tenant Service at 1024 concurrent connections per proxy.
	MaxConnectionsPerCluster uint32
	// UDPSessionIdleTimeout ends UDP sessions without datagrams for this long; default 60s.
	UDPSessionIdleTimeout time.Duration
	// HealthCheck of TCP clusters.
	HealthCheck HealthCheck
}

// HealthCheck configures the active TCP connect health check of TCP clusters. UDP clusters
// are not health checked. The zero value means "enabled, with the defaults".
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

// withDefaults fills in every unset option.
func (o Options) withDefaults() Options {
	if o.ListenerAddress == "" {
		o.ListenerAddress = DefaultListenerAddress
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.MaxConnectionsPerCluster == 0 {
		o.MaxConnectionsPerCluster = DefaultMaxConnectionsPerCluster
	}
	if o.UDPSessionIdleTimeout <= 0 {
		o.UDPSessionIdleTimeout = DefaultUDPSessionIdleTimeout
	}
	hc := &o.HealthCheck
	if hc.Interval <= 0 {
		hc.Interval = DefaultHealthCheckInterval
	}
	if hc.Timeout <= 0 {
		hc.Timeout = DefaultHealthCheckTimeout
	}
	if hc.UnhealthyThreshold == 0 {
		hc.UnhealthyThreshold = DefaultHealthCheckUnhealthy
	}
	if hc.HealthyThreshold == 0 {
		hc.HealthyThreshold = DefaultHealthCheckHealthy
	}
	return o
}

// Output is the Envoy configuration of one tenant plus what went wrong per LoadBalancer.
type Output struct {
	// Listeners (*listenerv3.Listener), sorted by name.
	Listeners []types.Resource
	// Clusters (*clusterv3.Cluster), sorted by name.
	Clusters []types.Resource
	// Endpoints (*endpointv3.ClusterLoadAssignment) of the EDS clusters, sorted by name.
	Endpoints []types.Resource
	// Problems by LoadBalancer name; LoadBalancers without problems have no entry.
	Problems map[string][]Problem
}

// Resources returns the resources keyed by xDS type URL, as cache.NewSnapshot takes them.
func (o Output) Resources() map[resource.Type][]types.Resource {
	return map[resource.Type][]types.Resource{
		resource.ListenerType: o.Listeners,
		resource.ClusterType:  o.Clusters,
		resource.EndpointType: o.Endpoints,
	}
}

// Problem is something wrong with a LoadBalancer (or one of its ports) that a controller
// should surface on it as a condition or event.
type Problem struct {
	// Port names the affected port as "<protocol>/<port>" (plus " (<name>)" when named);
	// empty when the problem concerns the whole LoadBalancer.
	Port string `json:"port,omitempty"`
	// Reason is a CamelCase reason, one of the Reason* constants.
	Reason string `json:"reason"`
	// Message says what happened, for humans.
	Message string `json:"message"`
}

// Reasons of problems. "Skipped" reasons mean the port (or LoadBalancer) got no listener;
// the others mean it is programmed but degraded.
const (
	// ReasonInvalidName: the LoadBalancer name cannot be used in Envoy names (skipped).
	ReasonInvalidName = "InvalidName"
	// ReasonUnsupportedProtocol: the port's protocol is neither TCP nor UDP (skipped).
	ReasonUnsupportedProtocol = "UnsupportedProtocol"
	// ReasonInvalidPort: a port number is out of range or repeated (the port is skipped, or
	// for an endpoint port, that endpoint group is left out).
	ReasonInvalidPort = "InvalidPort"
	// ReasonPortNotAllocated: no listener port in status.service.ports yet (skipped).
	ReasonPortNotAllocated = "PortNotAllocated"
	// ReasonListenerPortConflict: another port already uses the listener port (skipped).
	ReasonListenerPortConflict = "ListenerPortConflict"
	// ReasonAddressesNotFound: the referenced Addresses object does not exist (no endpoints).
	ReasonAddressesNotFound = "AddressesNotFound"
	// ReasonInvalidAddress: an endpoint address is neither an IP nor a DNS name (left out).
	ReasonInvalidAddress = "InvalidAddress"
	// ReasonEndpointPortNotFound: an endpoint group has no port for this port (left out).
	ReasonEndpointPortNotFound = "EndpointPortNotFound"
	// ReasonNoEndpoints: the cluster has no endpoints at all (e.g. no Ready nodes).
	ReasonNoEndpoints = "NoEndpoints"
	// ReasonInvalidAnnotation: an annotation value is not understood (ignored).
	ReasonInvalidAnnotation = "InvalidAnnotation"
	// ReasonProxyProtocolUnsupported: PROXY protocol was asked for a UDP port (ignored).
	ReasonProxyProtocolUnsupported = "ProxyProtocolUnsupported"
	// ReasonUnsupportedPersistence: spec.persistence.type is not understood (ignored).
	ReasonUnsupportedPersistence = "UnsupportedPersistence"
	// ReasonInvalidConfig: the generated Envoy config failed validation (skipped); a bug.
	ReasonInvalidConfig = "InvalidConfig"
)
