// Command ccm runs in a tenant cluster and mirrors its load balancing objects into the
// tenant's namespace of the kubelb management cluster (--mode=hub), or, in a cluster without
// a hub (--mode=standalone), gives LoadBalancer Services the addresses of labelled nodes or
// of AddressPools.
package main

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/types"

	"kubelb.dev/kubelb/internal/ccm"
	"kubelb.dev/kubelb/internal/ccm/hubtoken"
	"kubelb.dev/kubelb/internal/nodeip"
	"kubelb.dev/kubelb/internal/process"
)

const summary = "ccm: kubelb's cloud controller for a tenant cluster; mirrors LoadBalancer Services,\nReady node addresses, Ingresses, Gateway API objects and TLS Secrets into the hub.\nWith --mode=standalone (no hub): LoadBalancer Services get the addresses of labelled nodes,\nor of AddressPools (--address-provider=ipam)."

// notYetFlags are accepted but not implemented yet: setting one changes nothing, and the ccm
// logs one warning at start naming those that were set. docs/configuration.md marks each
// "not yet" (a test checks it). Remove a flag from here when it is wired.
var notYetFlags = []string{}

// deprecatedFlags are accepted so that command lines written for KubeLB CE keep working, and
// ignored: the binary logs one warning at start naming those that were given.
var deprecatedFlags = []string{"enable-tenant-migration"}

type options struct {
	process.Common
	ccm.Options
	HubKubeconfig           string
	HubKubeconfigSecret     secretRef
	HubKubeconfigSecretKey  string
	LeaderElectionNamespace string
	nodeAddressType         process.Enum
	mode                    process.Enum
	// addressProvider gives the Services their addresses in standalone mode: node-ip (the
	// labelled nodes') or ipam (the AddressPools).
	addressProvider    process.Enum
	reservedPorts      nodeip.ReservedPortsFlag
	gatewayCRDsChannel process.Enum
	// notYetWarning names the not-yet flags that were set ("" when none).
	notYetWarning string
	// deprecatedWarning names the deprecated flags that were given ("" when none).
	deprecatedWarning string
	// modeWarning names the flags given that the mode does not use ("" when none).
	modeWarning string
	// providerWarning names the flags given that the address provider does not use ("" when
	// none).
	providerWarning string
}

// Values of --address-provider.
const (
	addressProviderNodeIP = "node-ip"
	addressProviderIPAM   = "ipam"
)

// nodeIPOnlyFlags do nothing with --address-provider=ipam.
var nodeIPOnlyFlags = []string{"reserved-ports", "node-ip-nat"}

// hubOnlyFlags do nothing in standalone mode: there is no hub, and only LoadBalancer Services
// are served.
var hubOnlyFlags = []string{"cluster-name", "kubelb-kubeconfig", "kubelb-kubeconfig-secret", "kubelb-kubeconfig-secret-key",
	"enable-gateway-api", "enable-secret-synchronizer", "install-gateway-api-crds", "gateway-api-crds-channel",
	"use-ingress-class", "use-gateway-class", "disable-ingress-controller", "disable-gateway-controller",
	"disable-httproute-controller", "disable-grpcroute-controller", "disable-tlsroute-controller",
	"disable-tcproute-controller", "disable-udproute-controller", "disable-gateway-services", "node-address-type", "max-concurrent-reconciles"}

// standaloneOnlyFlags do nothing in hub mode.
var standaloneOnlyFlags = []string{"reserved-ports", "address-provider", "node-ip-nat"}

func parse(args []string) (*options, *process.FlagSet, error) {
	return parseWith("ccm", args, nil)
}

// parseWith parses the ccm's flags as program (the ccm, or a subcommand of it), with extra
// flags that extra (nil: none) adds to the flag set.
func parseWith(program string, args []string, extra func(*process.FlagSet)) (*options, *process.FlagSet, error) {
	o := &options{}
	fs := process.NewFlagSet(program)
	o.Bind(fs, ":9445")
	o.nodeAddressType = process.Enum{Value: ccm.NodeAddressExternalIP, Allowed: []string{ccm.NodeAddressExternalIP, ccm.NodeAddressInternalIP, ccm.NodeAddressHostname}}
	o.gatewayCRDsChannel = process.Enum{Value: "standard", Allowed: []string{"standard", "experimental"}}
	o.mode = process.Enum{Value: ccm.ModeHub, Allowed: []string{ccm.ModeHub, ccm.ModeStandalone}}
	if err := o.reservedPorts.Set(ccm.DefaultReservedPorts); err != nil {
		return nil, fs, err
	}
	fs.Var(&o.mode, "mode", "hub: mirror the cluster's load balancing objects into the management cluster. standalone: no hub; LoadBalancer Services get the addresses of the Ready nodes labelled kubelb.k8c.io/use-as-loadbalancer (node-IP mode, docs/modes.md); --cluster-name and --kubelb-kubeconfig are not used.")
	o.addressProvider = process.Enum{Value: addressProviderNodeIP, Allowed: []string{addressProviderNodeIP, addressProviderIPAM}}
	fs.Var(&o.addressProvider, "address-provider", "Standalone mode: what gives LoadBalancer Services their addresses: node-ip (the Ready nodes labelled kubelb.k8c.io/use-as-loadbalancer) or ipam (the AddressPools, docs/modes.md).")
	fs.Var(&o.reservedPorts, "reserved-ports", "Standalone mode: ports no LoadBalancer Service may take on a node address, comma-separated PORT[-PORT][/PROTOCOL] (no protocol: all). Empty: none.")
	fs.BoolVar(&o.NodeIPNAT, "node-ip-nat", false, "Standalone node-IP mode: keep a 1:1 NAT shadow ClusterIP Service (<name>-kubelb-nat, externalIPs = the nodes' private addresses) beside each Service whose nodes' public addresses are not on their interfaces (docs/modes.md).")
	fs.StringVar(&o.ClusterName, "cluster-name", "", "The tenant's namespace in the management cluster, tenant-<tenant name>, or the tenant's name (tenant- is then prefixed, as KubeLB CE does). Required in hub mode.")
	fs.StringVar(&o.HubKubeconfig, "kubelb-kubeconfig", "~/.kube/kubelb", "Kubeconfig of the management cluster (the Secret kubelb-ccm-kubeconfig the manager made).")
	fs.Var(&o.HubKubeconfigSecret, "kubelb-kubeconfig-secret", "Secret (namespace/name) in this cluster that --kubelb-kubeconfig comes from; every renewed hub token is written back into it, so a restart starts from a fresh token. Empty: the token is renewed in memory only.")
	fs.StringVar(&o.HubKubeconfigSecretKey, "kubelb-kubeconfig-secret-key", hubtoken.DefaultSecretKey, "Key of the kubeconfig in --kubelb-kubeconfig-secret.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election lease in the tenant cluster (default: $POD_NAMESPACE, else kube-system).")
	fs.BoolVar(&o.EnableCloudProvider, "enable-cloud-provider", true, "Be the load balancer implementation of the tenant's LoadBalancer Services: mirror them with Ready node addresses and NodePorts, and copy the hub's address into their status. false: mirror them with the addresses another implementation put in their status, and leave their status alone (KubeLB CE's meaning).")
	fs.BoolVar(&o.EnableGatewayAPI, "enable-gateway-api", false, "Mirror Gateways, HTTPRoutes, GRPCRoutes, TLSRoutes, TCPRoutes and UDPRoutes (needs the Gateway API CRDs; kinds whose CRD is missing are skipped with a warning).")
	fs.BoolVar(&o.EnableSecretSynchronizer, "enable-secret-synchronizer", false, "Mirror every Secret labelled kubelb.k8c.io/managed-by=kubelb into the hub as a SyncSecret (TLS Secrets named by served Ingresses and Gateways are mirrored anyway).")
	fs.BoolVar(&o.InstallGatewayAPICRDs, "install-gateway-api-crds", false, "Install the Gateway API CRDs into the tenant cluster at start-up (server-side apply), and Envoy Gateway's BackendTrafficPolicy, SecurityPolicy and ClientTrafficPolicy CRDs, each when the tenant has none, with --enable-gateway-api.")
	fs.Var(&o.gatewayCRDsChannel, "gateway-api-crds-channel", "Gateway API CRD channel to install: standard or experimental.")
	fs.BoolVar(&o.UseLoadBalancerClass, "use-loadbalancer-class", false, "Only handle Services with loadBalancerClass kubelb.")
	fs.BoolVar(&o.UseIngressClass, "use-ingress-class", true, "Only handle Ingresses with ingress class kubelb (spec.ingressClassName, or the kubernetes.io/ingress.class annotation); false: every Ingress.")
	fs.BoolVar(&o.UseGatewayClass, "use-gateway-class", true, "The Gateway named kubelb is served only when its class is kubelb (false: whatever its class). Gateways whose class has controllerName kubelb.k8c.io/gateway-controller are always served.")
	fs.BoolVar(&o.DisableIngressController, "disable-ingress-controller", false, "Do not mirror Ingresses.")
	fs.BoolVar(&o.DisableGatewayController, "disable-gateway-controller", false, "Do not mirror Gateways.")
	fs.BoolVar(&o.DisableHTTPRouteController, "disable-httproute-controller", false, "Do not mirror HTTPRoutes.")
	fs.BoolVar(&o.DisableGRPCRouteController, "disable-grpcroute-controller", false, "Do not mirror GRPCRoutes.")
	fs.BoolVar(&o.DisableTLSRouteController, "disable-tlsroute-controller", false, "Do not mirror TLSRoutes.")
	fs.BoolVar(&o.DisableTCPRouteController, "disable-tcproute-controller", false, "Do not mirror TCPRoutes.")
	fs.BoolVar(&o.DisableUDPRouteController, "disable-udproute-controller", false, "Do not mirror UDPRoutes.")
	fs.BoolVar(&o.DisableGatewayServices, "disable-gateway-services", false, "Do not keep a Service <gateway>-kubelb in the namespace of each served Gateway (headless, resolving to the Gateway's addresses, or ExternalName for a hostname; with the labels and annotations of its spec.infrastructure).")
	fs.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", 8, "Workers of each Service controller (mirroring, and status copying) and of each Ingress and Gateway API controller.")
	fs.Var(&o.nodeAddressType, "node-address-type", "Node address the hub sends traffic to: ExternalIP, InternalIP or Hostname.")
	fs.DeprecatedBool("enable-tenant-migration", true, "KubeLB CE removed its tenant migration controller and kept the flag as a no-op; kubelb never had one.")
	fs.Topic("Mode and hub", "mode", "cluster-name", "kubelb-kubeconfig", "kubelb-kubeconfig-secret", "kubelb-kubeconfig-secret-key")
	fs.Topic("Services", "enable-cloud-provider", "use-loadbalancer-class", "node-address-type", "max-concurrent-reconciles")
	fs.Topic("Standalone mode", "address-provider", "reserved-ports", "node-ip-nat")
	fs.Topic("Ingress and Gateway API", "use-ingress-class", "use-gateway-class", "enable-gateway-api", "install-gateway-api-crds",
		"gateway-api-crds-channel", "disable-ingress-controller", "disable-gateway-controller", "disable-httproute-controller",
		"disable-grpcroute-controller", "disable-tlsroute-controller", "disable-tcproute-controller", "disable-udproute-controller", "disable-gateway-services")
	fs.Topic("Secrets", "enable-secret-synchronizer")
	fs.Topic("Leader election", "leader-election-namespace")
	o.Topics(fs)
	fs.Topic("Deprecated", "enable-tenant-migration")
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		return nil, fs, err
	}
	o.Mode = o.mode.Value
	o.ReservedPorts = o.reservedPorts.Ranges
	switch {
	case o.Mode == ccm.ModeHub && o.ClusterName == "":
		return nil, fs, errors.New("flag --cluster-name is required")
	case o.Mode != ccm.ModeStandalone && o.addressProvider.Value != addressProviderNodeIP:
		return nil, fs, fmt.Errorf("flag --address-provider=%s needs --mode=standalone (in hub mode the hub gives the addresses)", o.addressProvider.Value)
	case o.Mode == ccm.ModeStandalone && !o.EnableCloudProvider:
		return nil, fs, errors.New("flag --enable-cloud-provider=false cannot be used with --mode=standalone (standalone mode is the load balancer implementation)")
	}
	o.NodeAddressType = o.nodeAddressType.Value
	o.ClusterName = ccm.HubNamespace(o.ClusterName)
	o.GatewayAPICRDsChannel = o.gatewayCRDsChannel.Value
	o.notYetWarning = fs.NotYetWarning(notYetFlags)
	if o.Mode == ccm.ModeStandalone {
		o.modeWarning = fs.GivenWarning(hubOnlyFlags, "in --mode="+o.Mode)
		if o.addressProvider.Value == addressProviderIPAM {
			o.providerWarning = fs.GivenWarning(nodeIPOnlyFlags, "with --address-provider=ipam")
		}
	} else {
		o.modeWarning = fs.GivenWarning(standaloneOnlyFlags, "in --mode="+o.Mode)
	}
	o.deprecatedWarning = fs.DeprecatedWarning(deprecatedFlags)
	if o.LeaderElectionNamespace == "" {
		o.LeaderElectionNamespace = os.Getenv("POD_NAMESPACE")
	}
	if o.LeaderElectionNamespace == "" {
		o.LeaderElectionNamespace = "kube-system"
	}
	return o, fs, o.Validate()
}

// secretRef is a flag value "namespace/name"; empty means none.
type secretRef struct{ types.NamespacedName }

// String returns namespace/name, or "" when unset.
func (s *secretRef) String() string {
	if s.Name == "" {
		return ""
	}
	return s.NamespacedName.String()
}

// Set parses namespace/name.
func (s *secretRef) Set(v string) error {
	if v == "" {
		s.NamespacedName = types.NamespacedName{}
		return nil
	}
	ref, err := hubtoken.ParseSecretRef(v)
	if err != nil {
		return err
	}
	s.NamespacedName = ref
	return nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == releaseCommand {
		process.MainArgs("ccm "+releaseCommand, releaseSummary, os.Args[2:], parseRelease, runRelease)
		return
	}
	process.Main("ccm", summary, parse, run)
}
