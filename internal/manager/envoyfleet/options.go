package envoyfleet

import (
	"fmt"
	"net"
	"strconv"

	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/version"
	xdsbootstrap "kubelb.dev/kubelb/internal/xds/bootstrap"
)

// Names and labels of a tenant's Envoy fleet. The e2e harness and operators find the fleet by
// these: ConfigMap envoy-bootstrap (key bootstrap.yaml) and Deployment or DaemonSet envoy in
// the tenant namespace.
const (
	// BootstrapConfigMapName is the ConfigMap with the Envoy bootstrap in a tenant namespace.
	BootstrapConfigMapName = "envoy-bootstrap"
	// BootstrapKey is the key of the bootstrap in that ConfigMap.
	BootstrapKey = "bootstrap.yaml"
	// WorkloadName is the name of the tenant's Envoy Deployment or DaemonSet.
	WorkloadName = "envoy"
	// AnnotationConfigHash on the workload is a hash of what the manager wants it to be; the
	// workload is updated only when that changes.
	AnnotationConfigHash = "kubelb.k8c.io/config-hash"
	// AnnotationBootstrapHash on the pod template rolls the pods when the bootstrap changes.
	AnnotationBootstrapHash = "kubelb.k8c.io/bootstrap-hash"

	// DefaultEnvoyImage is the Envoy image unless the flag or Config says otherwise. The pods
	// need no shell, so the distroless image (envoyproxy/envoy:distroless-v1.40.0) serves as
	// well.
	DefaultEnvoyImage = "envoyproxy/envoy:v1.40.0"
	// ManagerImageRepository is the repository of the manager's image, which is also the
	// shutdown manager's (DefaultShutdownManagerImage).
	ManagerImageRepository = "ghcr.io/kubelb/kubelb-manager"
	// AdminPort is the port of Envoy's admin interface in the pods, on loopback only: the
	// shutdown manager drains Envoy through it; nothing outside the pod can reach it.
	AdminPort = ir.EnvoyAdminPort
	// ShutdownManagerPort is the port of the shutdown manager's GET /drained (the Envoy
	// container's preStop hook, which the kubelet sends to the pod's address). Outside the
	// listener port range, as AdminPort and ReadyPort (ir.CheckPortRange).
	ShutdownManagerPort = ir.ShutdownManagerPort
	// ReadyPort is the port of the readiness listener, which serves only GET /ready (from the
	// admin interface) for the kubelet's readiness probe. It was 19003, inside the default
	// listener port range, until issue 26.
	ReadyPort = ir.EnvoyReadyPort
	// StatsPort is the port of the stats listener, which serves only GET /stats/prometheus
	// (from the admin interface) for Prometheus (the chart's PodMonitor scrapes the pods'
	// port named StatsPortName).
	StatsPort = ir.EnvoyStatsPort
	// StatsPortName names StatsPort in the Envoy container.
	StatsPortName = "stats"
	// DefaultXDSPort is the port of the manager's xDS server.
	DefaultXDSPort = 8001
)

// DefaultShutdownManagerImage is the manager's image of this build's version,
// ManagerImageRepository:<version>, as the chart's default image.
func DefaultShutdownManagerImage() string {
	return ManagerImageRepository + ":" + version.Get().GitVersion
}

// Options configure the Envoy fleet controller (from cmd/kubelb flags).
type Options struct {
	// Namespace the manager runs in; holds Config "default".
	Namespace string
	// EnvoyImage is the Envoy image; Config envoyProxy.image overrides it.
	EnvoyImage string
	// ShutdownManagerImage is the image of the pods' shutdown manager sidecar, which runs
	// "kubelb envoy-shutdown-manager" (the manager's image); default
	// DefaultShutdownManagerImage().
	ShutdownManagerImage string
	// XDSAddress is the host:port Envoy dials for xDS; default kubelb.<Namespace>.svc:8001.
	XDSAddress string
	// XDSProtocol is the xDS protocol the fleets' bootstrap asks for (delta or sotw);
	// default delta. Changing it changes the bootstrap, so the pods roll.
	XDSProtocol xdsbootstrap.Protocol
}

func (o Options) withDefaults() (Options, error) {
	if o.Namespace == "" {
		return o, fmt.Errorf("envoy fleet controller: the manager namespace must be set")
	}
	if o.EnvoyImage == "" {
		o.EnvoyImage = DefaultEnvoyImage
	}
	if o.ShutdownManagerImage == "" {
		o.ShutdownManagerImage = DefaultShutdownManagerImage()
	}
	if o.XDSProtocol == "" {
		o.XDSProtocol = xdsbootstrap.DefaultProtocol
	}
	if o.XDSProtocol != xdsbootstrap.ProtocolDelta && o.XDSProtocol != xdsbootstrap.ProtocolSotW {
		return o, fmt.Errorf("envoy fleet controller: unknown xDS protocol %q", o.XDSProtocol)
	}
	if o.XDSAddress == "" {
		o.XDSAddress = net.JoinHostPort("kubelb."+o.Namespace+".svc", strconv.Itoa(DefaultXDSPort))
	}
	host, port, err := net.SplitHostPort(o.XDSAddress)
	if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
		return o, fmt.Errorf("envoy fleet controller: xDS address %q must be host:port", o.XDSAddress)
	}
	return o, nil
}
