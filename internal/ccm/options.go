// Package ccm holds the tenant-side controllers: they mirror LoadBalancer Services and Ready
// node addresses into the tenant's namespace of the hub, copy the hub's status back onto the
// Services, and report the hub's Programmed condition as Events on them. Ingresses and Gateway
// API objects are mirrored as Routes by package source (set up from here); TLS Secrets are
// mirrored as SyncSecrets by internal/ccm/secrets.
package ccm

import (
	"kubelb.dev/kubelb/internal/ccm/secrets"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/nodeip"
)

// NodeAddressType values: which node address the hub sends traffic to.
const (
	NodeAddressExternalIP = "ExternalIP"
	NodeAddressInternalIP = "InternalIP"
	NodeAddressHostname   = "Hostname"
)

// Modes of the ccm (--mode).
const (
	// ModeHub mirrors the tenant's objects into its namespace of the hub (the default).
	ModeHub = "hub"
	// ModeStandalone gives LoadBalancer Services addresses itself, with no hub: the node-IP
	// mode (internal/nodeip) or the address pools (internal/ipam).
	ModeStandalone = "standalone"
)

// Options configure the ccm's controllers (from cmd/ccm flags).
type Options struct {
	// Mode is ModeHub ("" too) or ModeStandalone (SetupStandalone: node-IP mode, no hub).
	Mode string
	// ReservedPorts are the ports no Service may take on a node address (standalone mode).
	ReservedPorts []nodeip.PortRange
	// NodeIPNAT keeps the 1:1 NAT shadow Services (standalone node-IP mode, --node-ip-nat).
	NodeIPNAT bool

	// ClusterName is the tenant's namespace on the hub (tenant-<name>), or the tenant's name
	// (<name>): Setup uses HubNamespace(ClusterName).
	ClusterName string
	// NodeAddressType is ExternalIP, InternalIP or Hostname.
	NodeAddressType string

	// EnableCloudProvider makes the ccm the load balancer implementation of the tenant's
	// Services: it mirrors them with Ready node addresses and NodePorts as endpoints and copies
	// the hub's address into their status. Off, another implementation (e.g. MetalLB) serves
	// them, and the ccm mirrors them with the addresses that implementation put in their
	// status as endpoints, and leaves their status alone (KubeLB CE's meaning).
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
	// DisableGatewayServices stops keeping the tenant Service <gateway>-kubelb of each
	// served Gateway (source.GatewayServiceReconciler).
	DisableGatewayServices bool

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

// HubNamespace returns the tenant's namespace on the hub for a --cluster-name value, which
// may name the tenant with or without the tenant- prefix ("shroud" and "tenant-shroud" both
// mean namespace tenant-shroud), as KubeLB CE accepts it. A tenant whose own name starts
// with tenant- is named by its full namespace (tenant-tenant-x).
func HubNamespace(clusterName string) string {
	if clusterName == "" || hubnames.IsTenantNamespace(clusterName) {
		return clusterName
	}
	return hubnames.TenantNamespace(clusterName)
}
