// Command kubelb is the kubelb manager: it runs in the management cluster, allocates ports,
// serves Envoy xDS, deploys the per-tenant Envoy fleets and writes status back.
package main

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"kubelb.dev/kubelb/internal/envoydrain"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/manager"
	"kubelb.dev/kubelb/internal/manager/envoyfleet"
	"kubelb.dev/kubelb/internal/manager/tenant"
	"kubelb.dev/kubelb/internal/nodeip"
	"kubelb.dev/kubelb/internal/process"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds"
	xdsbootstrap "kubelb.dev/kubelb/internal/xds/bootstrap"
)

const summary = "kubelb: the kubelb manager for the management cluster; allocates ports, serves Envoy xDS,\nruns the per-tenant Envoy fleets and writes status back to tenants.\n\n" +
	"kubelb " + envoydrain.Command + " [" + envoydrain.DrainCommand + "] runs the Envoy pods' shutdown manager sidecar instead (see its --help)."

// notYetFlags are accepted but not implemented yet: setting one changes nothing, and the
// manager logs one warning at start naming those that were set. docs/configuration.md marks
// each "not yet" (a test checks it). Remove a flag from here when it is wired.
var notYetFlags = []string{"enable-gateway-api"}

// deprecatedFlags are accepted so that command lines written for KubeLB CE keep working, and
// ignored: the binary logs one warning at start naming those that were given.
var deprecatedFlags = []string{"enable-tenant-migration"}

type options struct {
	process.Common
	manager.Options
	xdsAddr  process.Address
	xdsProto process.Enum
	// xdsLimits bound what one xDS client and one tenant's clients may cost the server.
	xdsLimits xds.Limits
	portRange string
	// networkPolicy shapes the Envoy fleets' NetworkPolicy, from networkPolicyFlags.
	networkPolicy      tenant.NetworkPolicyOptions
	networkPolicyFlags tenant.NetworkPolicyFlags
	// addressProvider gives the hub Services of type LoadBalancer their addresses: none
	// (MetalLB or a cloud does), node-ip (the labelled hub nodes) or ipam (AddressPools).
	addressProvider process.Enum
	// reservedPorts and nodeIPNAT tune the node-IP mode (--address-provider=node-ip).
	reservedPorts nodeip.ReservedPortsFlag
	nodeIPNAT     bool
	// providerWarning names the node-IP flags given with another provider ("" when none).
	providerWarning string
	// addressProviderClass is the loadBalancerClass of the hub Services the provider serves
	// ("": those without a class).
	addressProviderClass string
	// webhookAddr is where the admission webhook serves ("": it does not); webhookHost the
	// name (or address) the API server dials it by, which its certificate carries.
	webhookAddr, webhookHost string
	// notYetWarning names the not-yet flags that were set ("" when none).
	notYetWarning string
	// deprecatedWarning names the deprecated flags that were given ("" when none).
	deprecatedWarning string
}

func parse(args []string) (*options, *process.FlagSet, error) {
	o := &options{}
	fs := process.NewFlagSet("kubelb")
	o.Bind(fs, ":9443")
	o.xdsAddr.Value = ":8001"
	ns := os.Getenv("NAMESPACE")
	if ns == "" {
		ns = "kubelb"
	}
	fs.Var(&o.xdsAddr, "listen-address", "Address the Envoy xDS gRPC server listens on.")
	fs.StringVar(&o.Namespace, "namespace", ns, "Namespace the manager runs in and reads Config \"default\" from (env NAMESPACE).")
	fs.StringVar(&o.EnvoyXDSAddress, "envoy-xds-address", "", "host:port the Envoy fleets dial for xDS (default kubelb.<namespace>.svc:<port of --listen-address>).")
	o.xdsProto = process.Enum{Value: string(xdsbootstrap.DefaultProtocol), Allowed: xdsbootstrap.Protocols}
	fs.Var(&o.xdsProto, "envoy-xds-protocol", "xDS protocol of the Envoy fleets: delta (only what changed is sent) or sotw (state of the world: every update of a type carries all of it). The server serves both; a change rolls the fleets' pods.")
	o.xdsLimits = xds.DefaultLimits()
	fs.IntVar(&o.xdsLimits.ConnectionsPerTenant, "xds-max-connections-per-tenant", o.xdsLimits.ConnectionsPerTenant,
		"Most xDS connections one tenant's clients may have open on one manager replica (an Envoy opens one); one more is closed after its TLS handshake.")
	fs.IntVar(&o.xdsLimits.StreamsPerConnection, "xds-max-streams-per-connection", o.xdsLimits.StreamsPerConnection,
		"Most xDS streams one connection may have open (an Envoy opens one); more are refused with ResourceExhausted.")
	fs.IntVar(&o.xdsLimits.StreamsPerTenant, "xds-max-streams-per-tenant", o.xdsLimits.StreamsPerTenant,
		"Most xDS streams one tenant's clients may have open on one manager replica (an Envoy opens one); more are refused with ResourceExhausted.")
	fs.Float64Var(&o.xdsLimits.RequestsPerSecond, "xds-requests-per-second", o.xdsLimits.RequestsPerSecond,
		"Rate of xDS requests one stream may send; beyond it (and --xds-request-burst) requests are delayed.")
	fs.IntVar(&o.xdsLimits.RequestBurst, "xds-request-burst", o.xdsLimits.RequestBurst, "Burst of xDS requests one stream may send at once.")
	fs.Float64Var(&o.xdsLimits.TenantRequestsPerSecond, "xds-tenant-requests-per-second", o.xdsLimits.TenantRequestsPerSecond,
		"Rate of xDS requests (and stream opens) of one tenant's clients together, per manager replica; beyond it (and --xds-tenant-request-burst) requests are delayed.")
	fs.IntVar(&o.xdsLimits.TenantRequestBurst, "xds-tenant-request-burst", o.xdsLimits.TenantRequestBurst,
		"Burst of xDS requests (and stream opens) one tenant's clients may send at once, per manager replica.")
	fs.IntVar(&o.xdsLimits.MaxRequestBytes, "xds-max-request-bytes", o.xdsLimits.MaxRequestBytes,
		"Largest xDS request the server reads (bytes); a larger one closes its stream with ResourceExhausted.")
	fs.StringVar(&o.EnvoyListenerAddress, "envoy-listener-address", "0.0.0.0", "Address the Envoy listeners bind to.")
	fs.StringVar(&o.EnvoyListenerAddressIPv6, "envoy-listener-address-ipv6", translate.DefaultListenerAddressIPv6,
		"IPv6 address the Envoy listeners of LoadBalancers whose hub Service has IPv6 bind (as well as --envoy-listener-address when it is dual-stack).")
	fs.StringVar(&o.EnvoyImage, "envoy-image", envoyfleet.DefaultEnvoyImage, "Envoy image of the fleets (Config envoyProxy.image overrides it); the official full and distroless images both work.")
	fs.StringVar(&o.EnvoyShutdownManagerImage, "envoy-shutdown-manager-image", envoyfleet.DefaultShutdownManagerImage(),
		"Image of the shutdown manager sidecar of the Envoy pods, which drains Envoy before it stops (\"kubelb envoy-shutdown-manager\"): the manager's own image (the chart sets it).")
	fs.StringVar(&o.portRange, "envoy-port-range", "10000-19999", "Range of listener ports allocated on the Envoy fleets, min-max.")
	fs.StringVar(&o.TenantKubeconfigServer, "tenant-kubeconfig-server", "", "Hub API server URL written into the tenants' ccm kubeconfigs (default: from kube-public/cluster-info).")
	fs.DurationVar(&o.TenantTokenTTL, "tenant-token-ttl", tenant.DefaultTokenTTL, "Lifetime of the ccm tokens in the tenants' kubeconfigs (at least 10m); the manager replaces them after 80% of it and the ccm renews its own.")
	o.networkPolicyFlags.Bind(fs.FlagSet)
	o.addressProvider = process.Enum{Value: addressProviderNone, Allowed: []string{addressProviderNone, addressProviderNodeIP, addressProviderIPAM}}
	fs.Var(&o.addressProvider, "address-provider", "What gives kubelb's hub Services of type LoadBalancer their addresses: none (MetalLB or a cloud), node-ip (the Ready hub nodes labelled kubelb.k8c.io/use-as-loadbalancer=<the tenant's spec.loadBalancer.nodeSet>) or ipam (the AddressPools); docs/modes.md.")
	if err := o.reservedPorts.Set(nodeip.DefaultReservedPorts); err != nil {
		return nil, fs, err
	}
	fs.Var(&o.reservedPorts, "reserved-ports", "With --address-provider=node-ip: ports no hub Service may take on a hub node's address, comma-separated PORT[-PORT][/PROTOCOL] (no protocol: all). Empty: none.")
	fs.BoolVar(&o.nodeIPNAT, "node-ip-nat", false, "With --address-provider=node-ip: keep a 1:1 NAT shadow ClusterIP Service (externalIPs = the hub nodes' private addresses) beside each hub Service whose nodes' public addresses are not on their interfaces.")
	fs.StringVar(&o.addressProviderClass, "address-provider-class", "", "loadBalancerClass of the hub Services the address provider serves (the Tenant's or Config's spec.loadBalancer.class); empty: those without a class.")
	fs.BoolVar(&o.EnableGatewayAPI, "enable-gateway-api", false, process.NotYetHelp+"Run the Gateway API controllers.")
	fs.StringVar(&o.webhookAddr, "admission-webhook-address", "",
		"host:port the admission webhook serves on (HTTPS, certificate from the manager's CA), which refuses tenant writes past their byte limits; empty: no webhook (the kubelb-manager chart sets it).")
	fs.StringVar(&o.webhookHost, "admission-webhook-host", "",
		"Name or address the API server reaches the admission webhook by, for its certificate (default kubelb.<namespace>.svc).")
	fs.BoolVar(&o.Debug, "debug", false, "Log at debug level.")
	fs.DeprecatedBool("enable-tenant-migration", true, "KubeLB CE removed its tenant migration controller and kept the flag as a no-op; kubelb never had one.")
	fs.Topic("Manager", "namespace", "enable-gateway-api", "tenant-kubeconfig-server", "tenant-token-ttl")
	fs.Topic("Envoy fleets", "envoy-image", "envoy-shutdown-manager-image", "envoy-port-range", "envoy-listener-address",
		"envoy-listener-address-ipv6", "envoy-xds-address", "envoy-xds-protocol")
	fs.Topic("Envoy network policy", "envoy-network-policy", "envoy-egress-cidrs", "envoy-egress-except-cidrs",
		"envoy-dns-namespace", "envoy-dns-pod-labels", "manager-pod-labels")
	fs.Topic("xDS server", "listen-address", "xds-max-connections-per-tenant", "xds-max-streams-per-connection",
		"xds-max-streams-per-tenant", "xds-requests-per-second", "xds-request-burst", "xds-tenant-requests-per-second",
		"xds-tenant-request-burst", "xds-max-request-bytes")
	fs.Topic("Hub Service addresses", "address-provider", "address-provider-class", "reserved-ports", "node-ip-nat")
	fs.Topic("Admission webhook", "admission-webhook-address", "admission-webhook-host")
	o.Topics(fs, "debug")
	fs.Topic("Deprecated", "enable-tenant-migration")
	if err := fs.Parse(args); err != nil {
		return nil, fs, err
	}
	o.XDSListenAddress = o.xdsAddr.Value
	o.EnvoyXDSProtocol = o.xdsProto.Value
	o.notYetWarning = fs.NotYetWarning(notYetFlags)
	o.deprecatedWarning = fs.DeprecatedWarning(deprecatedFlags)
	for _, f := range []struct {
		name string
		ok   bool
	}{
		{"xds-max-connections-per-tenant", o.xdsLimits.ConnectionsPerTenant > 0},
		{"xds-max-streams-per-connection", o.xdsLimits.StreamsPerConnection > 0 && o.xdsLimits.StreamsPerConnection <= 1<<16},
		{"xds-max-streams-per-tenant", o.xdsLimits.StreamsPerTenant > 0},
		{"xds-requests-per-second", o.xdsLimits.RequestsPerSecond > 0},
		{"xds-request-burst", o.xdsLimits.RequestBurst > 0},
		{"xds-tenant-requests-per-second", o.xdsLimits.TenantRequestsPerSecond > 0},
		{"xds-tenant-request-burst", o.xdsLimits.TenantRequestBurst > 0},
		{"xds-max-request-bytes", o.xdsLimits.MaxRequestBytes > 0},
	} {
		if !f.ok {
			return nil, fs, fmt.Errorf("flag --%s must be positive (and --xds-max-streams-per-connection at most 65536)", f.name)
		}
	}
	if o.TenantTokenTTL < tenant.MinTokenTTL {
		return nil, fs, fmt.Errorf("invalid value %q for flag --tenant-token-ttl: at least %s", o.TenantTokenTTL, tenant.MinTokenTTL)
	}
	if _, err := fmt.Sscanf(o.portRange, "%d-%d", &o.PortRangeMin, &o.PortRangeMax); err != nil ||
		o.PortRangeMin < 1 || o.PortRangeMax > 65535 || o.PortRangeMin > o.PortRangeMax {
		return nil, fs, fmt.Errorf("invalid value %q for flag --envoy-port-range: want min-max within 1-65535", o.portRange)
	}
	if err := ir.CheckPortRange(int32(o.PortRangeMin), int32(o.PortRangeMax)); err != nil {
		return nil, fs, fmt.Errorf("invalid value %q for flag --envoy-port-range: %w", o.portRange, err)
	}
	if o.EnvoyXDSAddress == "" {
		_, port, _ := net.SplitHostPort(o.XDSListenAddress)
		o.EnvoyXDSAddress = fmt.Sprintf("kubelb.%s.svc:%s", o.Namespace, port)
	}
	if _, _, err := net.SplitHostPort(o.EnvoyXDSAddress); err != nil {
		return nil, fs, fmt.Errorf("invalid value %q for flag --envoy-xds-address: want host:port", o.EnvoyXDSAddress)
	}
	if o.Namespace == "" {
		return nil, fs, fmt.Errorf("flag --namespace must not be empty")
	}
	if o.webhookAddr != "" {
		if _, _, err := net.SplitHostPort(o.webhookAddr); err != nil {
			return nil, fs, fmt.Errorf("invalid value %q for flag --admission-webhook-address: want host:port", o.webhookAddr)
		}
	}
	if o.webhookHost == "" {
		o.webhookHost = "kubelb." + o.Namespace + ".svc"
	}
	if ip, err := netip.ParseAddr(o.EnvoyListenerAddressIPv6); err != nil || !ip.Is6() || ip.Is4In6() || ip.Zone() != "" {
		return nil, fs, fmt.Errorf("invalid value %q for flag --envoy-listener-address-ipv6: want an IPv6 address", o.EnvoyListenerAddressIPv6)
	}
	if c := o.addressProviderClass; c != "" {
		if errs := validation.IsQualifiedName(c); len(errs) > 0 {
			return nil, fs, fmt.Errorf("invalid value %q for flag --address-provider-class: not a loadBalancerClass: %s", c, strings.Join(errs, "; "))
		}
	}
	if o.addressProvider.Value != addressProviderNodeIP {
		o.providerWarning = fs.GivenWarning(nodeIPOnlyFlags, "with --address-provider="+o.addressProvider.Value)
	}
	np, err := o.networkPolicyFlags.Options(o.XDSListenAddress)
	if err != nil {
		return nil, fs, err
	}
	o.networkPolicy = np
	return o, fs, o.Validate()
}

// Values of --address-provider.
const (
	addressProviderNone   = "none"
	addressProviderNodeIP = "node-ip"
	addressProviderIPAM   = "ipam"
)

// nodeIPOnlyFlags do nothing without --address-provider=node-ip.
var nodeIPOnlyFlags = []string{"reserved-ports", "node-ip-nat"}

func main() {
	if len(os.Args) > 1 && os.Args[1] == envoydrain.Command {
		shutdownManagerMain(os.Args[2:])
		return
	}
	process.Main("kubelb", summary, parse, run)
}
