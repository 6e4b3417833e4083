// Package sourcerange reads the client address ranges tenants restrict their load balancers
// to (a Service's loadBalancerSourceRanges, an Ingress's allow list), as Kubernetes reads them.
// Both the ccm and the hub's translation use it; it depends on neither.
package sourcerange

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	netutils "k8s.io/utils/net"
)

// Max bounds the source ranges of one listener or route.
const Max = 64

// Parse reads one client address range as Kubernetes writes them in
// loadBalancerSourceRanges: a CIDR ("10.0.0.0/8", "2001:db8::/32"; spaces around it ignored),
// its address bits past the prefix length cleared as Kubernetes does ("10.1.2.3/8" is
// 10.0.0.0/8). It returns the canonical form: the network address, no zone, an IPv4-mapped
// IPv6 range as it is.
//
// Kubernetes reads the ranges "sloppily" (IPv4 octets with leading zeros are decimal:
// "010.0.0.0/8" is 10.0.0.0/8), and so does this, so that a range the tenant's API server
// accepted means the same here.
func Parse(s string) (string, error) {
	s = strings.TrimSpace(s)
	p, err := netip.ParsePrefix(s)
	if err != nil {
		p, err = parseSloppy(s)
	}
	if err != nil {
		return "", fmt.Errorf("%q is not a CIDR such as 203.0.113.0/24 or 2001:db8::/32", s)
	}
	if p.Addr().Zone() != "" {
		return "", fmt.Errorf("%q has an IPv6 zone", s)
	}
	return p.Masked().String(), nil
}

// parseSloppy reads a CIDR as Kubernetes validates loadBalancerSourceRanges
// (netutils.ParseCIDRSloppy).
func parseSloppy(s string) (netip.Prefix, error) {
	_, n, err := netutils.ParseCIDRSloppy(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	addr, ok := netip.AddrFromSlice(n.IP)
	ones, bits := n.Mask.Size()
	if !ok || bits == 0 {
		return netip.Prefix{}, errors.New("not a CIDR")
	}
	if bits == 32 {
		addr = addr.Unmap()
	}
	return netip.PrefixFrom(addr, ones), nil
}

// Valid checks a list of source ranges as the IR holds them: at most
// Max, each canonical (Parse gives it back unchanged), sorted, unique.
func Valid(ranges []string) error {
	if len(ranges) > Max {
		return fmt.Errorf("%d source ranges, at most %d", len(ranges), Max)
	}
	for i, r := range ranges {
		c, err := Parse(r)
		if err != nil {
			return err
		}
		if c != r {
			return fmt.Errorf("source range %q is not canonical (%s)", r, c)
		}
		if i > 0 && ranges[i-1] >= r {
			return errors.New("source ranges are not sorted and unique")
		}
	}
	return nil
}

// Sort sorts canonical source ranges and drops repeats (the IR's order).
func Sort(ranges []string) []string {
	out := slices.Clone(ranges)
	slices.Sort(out)
	return slices.Compact(out)
}
