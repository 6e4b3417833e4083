package ir

import "fmt"

// The Envoy pods' own ports. A listener never binds one of them: the listener port range
// (--envoy-port-range) must leave them out (CheckPortRange), the translation treats such a
// port as not allocated, and Validate refuses a listener on one.
const (
	// EnvoyAdminPort is Envoy's admin interface, on loopback only.
	EnvoyAdminPort = 9901
	// ShutdownManagerPort is the shutdown manager's GET /drained (the preStop hook).
	ShutdownManagerPort = 9902
	// EnvoyReadyPort is the readiness listener (GET /ready only).
	EnvoyReadyPort = 9903
	// EnvoyStatsPort is the stats listener (GET /stats/prometheus only), which Prometheus
	// scrapes.
	EnvoyStatsPort = 9904
)

// FleetPorts are the Envoy pods' own ports, in order.
var FleetPorts = []uint32{EnvoyAdminPort, ShutdownManagerPort, EnvoyReadyPort, EnvoyStatsPort}

// IsFleetPort reports whether port is one of FleetPorts.
func IsFleetPort(port uint32) bool {
	for _, p := range FleetPorts {
		if p == port {
			return true
		}
	}
	return false
}

// CheckPortRange refuses a listener port range min-max that includes one of the Envoy pods'
// own ports.
func CheckPortRange(minPort, maxPort int32) error {
	for _, p := range FleetPorts {
		if int64(minPort) <= int64(p) && int64(p) <= int64(maxPort) {
			return fmt.Errorf("port range %d-%d includes port %d, which the Envoy pods use themselves (admin %d, shutdown manager %d, readiness %d, stats %d)",
				minPort, maxPort, p, EnvoyAdminPort, ShutdownManagerPort, EnvoyReadyPort, EnvoyStatsPort)
		}
	}
	return nil
}
