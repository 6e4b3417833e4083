// Package ccm holds the tenant-side controllers: they mirror LoadBalancer Services and Ready
// node addresses into the tenant's namespace of the hub, copy the hub's status back onto the
// Services, and report the hub's Programmed condition as Events on them. Ingresses and Gateway
// API objects are mirrored as Routes by package source (set up from here). Secrets are not
// mirrored yet: that option is accepted and ignored (cmd/ccm logs a warning when it is set).
package ccm

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
	// Disable*Controller switch single kinds off.
	DisableIngressController   bool
	DisableGatewayController   bool
	DisableHTTPRouteController bool
	DisableGRPCRouteController bool
	DisableTLSRouteController  bool
	DisableTCPRouteController  bool
	DisableUDPRouteController  bool

	// Not yet implemented: accepted from the flags and ignored by Setup.
	EnableSecretSynchronizer bool

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
