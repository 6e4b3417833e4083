// Package manager holds the hub-side wiring: options shared by the hub controllers in its
// sub-packages.
package manager

// Options configure the manager's controllers (from cmd/kubelb flags).
type Options struct {
	// Namespace the manager runs in; holds Config "default".
	Namespace string
	// XDSListenAddress is where the xDS gRPC server listens.
	XDSListenAddress string
	// EnableGatewayAPI turns on the Gateway API controllers.
	EnableGatewayAPI bool
	// Debug turns on debug logging.
	Debug bool
}
