// Package ccm holds the tenant-side controllers: they mirror LoadBalancer Services and Ready
// node addresses into the tenant's namespace of the hub, copy the hub's status back onto the
// Services, and report the hub's Programmed condition as Events on them. Ingresses and Gateway
// API objects are mirrored as Routes by package source (set up from here); TLS Secrets are
// mirrored as SyncSecrets by internal/ccm/secrets.
package ccm

import "kubelb.dev/kubelb/internal/ccm/secrets"

// NodeAddressType values: which node address the hub sends traffic to.
const (
	NodeAddressExternalIP = "ExternalIP"
	NodeAddressInternalIP = "InternalIP"
	NodeAddressHostname   = "Hostname"
)

// Options configure the ccm's controllers (from cmd/ccm flags).
type Options struct {
	// ClusterName is the tenant's namespace on the hub (tenant-<name>).
	ClusterName string
	// NodeAddressType is ExternalIP, InternalIP or Hostname.
	NodeAddressType string

	// EnableCloudProvider runs the Service and node controllers.
	EnableCloudProvider bool
	// UseLoadBalancerClass limits the ccm to Services of loadBalancerClass kubelb.
	UseLoadBalancerClass bool

	// Layer 7 (package source). EnableGatewayAPI runs the Gateway API controllers;
	// InstallGatewayAPICRDs installs the CRDs of GatewayAPICRDsChannel at start-up.
	EnableGatewayAPI      bool
	InstallGatewayAPICRDs bool
	GatewayAPICRDsChannel string
	// UseIngressClass limits the ccm to Ingresses of class kubelb; UseGatewayClass applies
	// KubeLB CE's rule to the Gateway named kubelb (see source.GatewayServed).
	UseIngressClass bool
	UseGatewayClass bool
	// EnableSecretSynchronizer mirrors every Secret labelled kubelb.k8c.io/managed-by=kubelb
	// (the TLS Secrets of served Ingresses and Gateways are mirrored anyway).
	EnableSecretSynchronizer bool
	// Disable*Controller switch single kinds off (DisableIngressController also stops the
	// mirroring of Ingresses' Secrets).
	DisableIngressController   bool
	DisableGatewayController   bool
	DisableHTTPRouteController bool
	DisableGRPCRouteController bool
	DisableTLSRouteController  bool
	DisableTCPRouteController  bool
	DisableUDPRouteController  bool

	// MaxConcurrentReconciles is the number of workers of each Service controller (mirror
	// and status) and of each Layer 7 controller; 0 means DefaultMaxConcurrentReconciles.
	MaxConcurrentReconciles int
}

// DefaultMaxConcurrentReconciles is the number of workers per Service controller when
// Options.MaxConcurrentReconciles is 0: enough that a burst of creates does not hold up
// status updates, few enough for a small tenant control plane.
const DefaultMaxConcurrentReconciles = 8

// workers returns the effective number of workers per Service controller.
func (o Options) workers() int {
	if o.MaxConcurrentReconciles > 0 {
		return o.MaxConcurrentReconciles
	}
	return DefaultMaxConcurrentReconciles
}

// secretOptions are the Secret synchronizer's options.
func (o Options) secretOptions() secrets.Options {
	return secrets.Options{
		Namespace:       o.ClusterName,
		Ingress:         !o.DisableIngressController,
		UseIngressClass: o.UseIngressClass,
		Gateway:         o.EnableGatewayAPI,
		UseGatewayClass: o.UseGatewayClass,
		Labelled:        o.EnableSecretSynchronizer,
	}
}
