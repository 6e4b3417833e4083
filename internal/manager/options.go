// Package manager holds the hub-side wiring: options shared by the hub controllers in its
// sub-packages.
package manager

import "time"

// Options configure the manager's controllers (from cmd/kubelb flags).
type Options struct {
	// Namespace the manager runs in; holds Config "default".
	Namespace string
	// XDSListenAddress is where the xDS gRPC server listens.
	XDSListenAddress string
	// EnvoyXDSAddress is the host:port the Envoy fleets dial for xDS
	// (default kubelb.<namespace>.svc:8001).
	EnvoyXDSAddress string
	// EnvoyXDSProtocol is the xDS protocol of the fleets' bootstrap: "delta" (default) or
	// "sotw" (state of the world).
	EnvoyXDSProtocol string
	// EnvoyListenerAddress is the address Envoy listeners bind to.
	EnvoyListenerAddress string
	// EnvoyListenerAddressIPv6 is the address the Envoy listeners of LoadBalancers whose hub
	// Service got IPv6 bind for it (translate.Options.ListenerAddressIPv6).
	EnvoyListenerAddressIPv6 string
	// EnvoyImage is the Envoy image of the fleets, unless Config sets one.
	EnvoyImage string
	// EnvoyShutdownManagerImage is the image of the fleets' shutdown manager sidecar (the
	// manager's own image).
	EnvoyShutdownManagerImage string
	// PortRangeMin and PortRangeMax bound the listener ports allocated on the Envoy fleets.
	PortRangeMin, PortRangeMax int
	// TenantKubeconfigServer is the hub API server URL written into tenants' kubeconfigs
	// ("" reads it from kube-public/cluster-info).
	TenantKubeconfigServer string
	// TenantTokenTTL is the lifetime of the ccm tokens in the tenants' kubeconfigs.
	TenantTokenTTL time.Duration
	// EnableGatewayAPI is meant to turn on the Gateway API controllers; not yet implemented
	// (accepted and ignored, cmd/kubelb logs a warning when it is set).
	EnableGatewayAPI bool
	// Debug turns on debug logging.
	Debug bool
}
