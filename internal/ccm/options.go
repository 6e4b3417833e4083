// Package ccm holds the tenant-side controllers: they mirror LoadBalancer Services, Ingresses,
// Gateway API objects, TLS Secrets and Ready node addresses into the tenant's namespace of the
// hub, and copy the hub's status back.
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

	EnableCloudProvider      bool
	EnableGatewayAPI         bool
	EnableSecretSynchronizer bool
	InstallGatewayAPICRDs    bool
	GatewayAPICRDsChannel    string

	UseLoadBalancerClass bool
	UseIngressClass      bool
	UseGatewayClass      bool

	DisableIngressController   bool
	DisableGatewayController   bool
	DisableHTTPRouteController bool
	DisableGRPCRouteController bool

	// MaxConcurrentReconciles is the number of workers of each Service controller (mirror
	// and status); 0 means DefaultMaxConcurrentReconciles.
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
