package tenant

import (
	"flag"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// NetworkPolicyFlags are the manager's flags that shape the Envoy fleets' NetworkPolicy. The
// manager binds them (cmd/kubelb), and the chart test reads the manager chart's arguments
// with them: one parser for both.
type NetworkPolicyFlags struct {
	enabled                                     bool
	egress, except, managerPods, dnsNS, dnsPods string
}

// Bind adds the flags to fs with their defaults.
func (f *NetworkPolicyFlags) Bind(fs *flag.FlagSet) {
	fs.BoolVar(&f.enabled, "envoy-network-policy", true, "Keep the NetworkPolicy kubelb-envoy in every tenant namespace: the Envoy pods may reach only --envoy-egress-cidrs, the manager's xDS port and the cluster DNS.")
	fs.StringVar(&f.egress, "envoy-egress-cidrs", strings.Join(DefaultEgressCIDRs, ","), "Comma-separated CIDRs where tenant nodes may be: the Envoy pods may connect there.")
	fs.StringVar(&f.except, "envoy-egress-except-cidrs", strings.Join(DefaultExceptCIDRs, ","), "Comma-separated hub CIDRs carved out of --envoy-egress-cidrs (add the hub's Pod, Service and node CIDRs).")
	fs.StringVar(&f.managerPods, "manager-pod-labels", "", "Labels of the manager's pods, k=v,...: the Envoy pods may reach their xDS port (empty: every pod of --namespace).")
	fs.StringVar(&f.dnsNS, "envoy-dns-namespace", "kube-system", "Namespace of the cluster DNS the Envoy pods may query on port 53 (empty: no DNS).")
	fs.StringVar(&f.dnsPods, "envoy-dns-pod-labels", "k8s-app=kube-dns", "Labels of the cluster DNS pods, k=v,...")
}

// Options returns what the flags say; the xDS port is that of xdsListenAddress (the manager's
// --listen-address).
func (f *NetworkPolicyFlags) Options(xdsListenAddress string) (NetworkPolicyOptions, error) {
	o := NetworkPolicyOptions{Disabled: !f.enabled, DNSNamespace: f.dnsNS}
	for _, c := range []struct {
		name, value string
		dst         *[]string
	}{{"envoy-egress-cidrs", f.egress, &o.EgressCIDRs}, {"envoy-egress-except-cidrs", f.except, &o.ExceptCIDRs}} {
		*c.dst = []string{}
		for _, cidr := range strings.Split(c.value, ",") {
			if cidr = strings.TrimSpace(cidr); cidr == "" {
				continue
			}
			if _, err := netip.ParsePrefix(cidr); err != nil {
				return o, fmt.Errorf("invalid value %q for flag --%s: %q is not a CIDR", c.value, c.name, cidr)
			}
			*c.dst = append(*c.dst, cidr)
		}
	}
	if len(o.EgressCIDRs) == 0 && !o.Disabled {
		return o, fmt.Errorf("flag --envoy-egress-cidrs must not be empty (turn the policy off with --envoy-network-policy=false)")
	}
	for _, l := range []struct {
		name, value string
		dst         *map[string]string
	}{{"manager-pod-labels", f.managerPods, &o.ManagerPodLabels}, {"envoy-dns-pod-labels", f.dnsPods, &o.DNSPodLabels}} {
		set, err := labels.ConvertSelectorToLabelsMap(l.value)
		if err != nil {
			return o, fmt.Errorf("invalid value %q for flag --%s: %w", l.value, l.name, err)
		}
		*l.dst = set
	}
	_, port, _ := net.SplitHostPort(xdsListenAddress)
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return o, fmt.Errorf("invalid value %q for flag --listen-address: no port", xdsListenAddress)
	}
	o.XDSPort = int32(p)
	return o, nil
}
