package translate

import (
	"fmt"
	"net/netip"
	"slices"
)

// Sources of endpoint policy rules, named in EndpointDenied messages.
const (
	SourceDefault        = "default"
	SourceHubServiceCIDR = "hub Service CIDR"
	SourceHubPodCIDR     = "hub Pod CIDR"
	SourceHubNode        = "hub node address"
	SourceConfigAllow    = "Config allow"
	SourceConfigDeny     = "Config deny"
	SourceTenantAllow    = "Tenant allow"
	SourceTenantDeny     = "Tenant deny"
)

// EndpointPolicy decides which endpoint IPs a tenant may point its Envoy fleet at. The
// built-in defaults (DefaultDenied: loopback, link-local, multicast) always
// apply; the zero value adds nothing to them.
//
// Policy entries apply to IP endpoints and to the addresses hostname endpoints resolved to
// (Input.Resolved: the manager resolves names, Envoy never does).
//
// The rule: the most specific entry (longest prefix) containing the address decides. At
// equal length an explicit deny (Config/Tenant deny) beats an allow, and an allow beats a
// default or hub range. An address no entry contains is allowed. So only an allow entry
// opens a default-denied or hub range (and only one at least as specific as the range), and
// a deny entry inside an allow wins.
type EndpointPolicy struct {
	// Allow entries open what the defaults and Hub deny (Config or Tenant allow).
	Allow []PolicyRule `json:"allow,omitempty"`
	// Deny entries set by the operator (Config or Tenant deny).
	Deny []PolicyRule `json:"deny,omitempty"`
	// Hub ranges the manager discovered: the hub's Service CIDRs, Pod CIDRs and node
	// addresses. They are denied like the defaults.
	Hub []PolicyRule `json:"hub,omitempty"`
}

// PolicyRule is one CIDR of an EndpointPolicy and where it came from.
type PolicyRule struct {
	Prefix netip.Prefix `json:"prefix"`
	// Source names where the entry came from (the Source* constants).
	Source string `json:"source"`
}

func (r PolicyRule) String() string { return fmt.Sprintf("%s (%s)", r.Prefix, r.Source) }

// DefaultDenied are the ranges denied unless an allow entry opens them: loopback (the Envoy
// admin listens there), link-local (cloud metadata at 169.254.169.254) and multicast. The
// unspecified addresses (0.0.0.0, ::) are never usable: they are refused as InvalidAddress,
// and no allow entry opens them.
var DefaultDenied = []PolicyRule{
	{netip.MustParsePrefix("127.0.0.0/8"), SourceDefault},
	{netip.MustParsePrefix("::1/128"), SourceDefault},
	{netip.MustParsePrefix("169.254.0.0/16"), SourceDefault},
	{netip.MustParsePrefix("fe80::/10"), SourceDefault},
	{netip.MustParsePrefix("224.0.0.0/4"), SourceDefault},
	{netip.MustParsePrefix("ff00::/8"), SourceDefault},
}

// rank orders entries of equal prefix length: the higher wins.
type rank uint8

const (
	rankBuiltin rank = iota // defaults and hub ranges
	rankAllow
	rankDeny // explicit deny
)

type rule struct {
	PolicyRule
	rank rank
}

// policy is an EndpointPolicy compiled for lookups: the entries by prefix, and the prefix
// lengths in use per address family, longest first. A lookup tries each length in use (at
// most 33 for IPv4, 129 for IPv6), however many entries the hub's nodes and ranges add; a
// memo keeps the decisions, since a tenant's node addresses repeat in every LoadBalancer.
type policy struct {
	rules map[netip.Prefix]rule
	lens4 []int
	lens6 []int
	memo  map[netip.Addr]*rule
}

func compilePolicy(p EndpointPolicy) *policy {
	c := &policy{rules: map[netip.Prefix]rule{}, memo: map[netip.Addr]*rule{}}
	add := func(rs []PolicyRule, rk rank) {
		for _, r := range rs {
			if !r.Prefix.IsValid() {
				continue
			}
			r.Prefix = r.Prefix.Masked()
			if r.Prefix.Addr().Is4In6() {
				r.Prefix = netip.PrefixFrom(r.Prefix.Addr().Unmap(), max(r.Prefix.Bits()-96, 0)).Masked()
			}
			// Of entries with the same prefix, the higher rank decides (the first of equals).
			if old, ok := c.rules[r.Prefix]; ok && rk <= old.rank {
				continue
			}
			c.rules[r.Prefix] = rule{r, rk}
		}
	}
	add(DefaultDenied, rankBuiltin)
	add(p.Hub, rankBuiltin)
	add(p.Allow, rankAllow)
	add(p.Deny, rankDeny)
	seen4, seen6 := map[int]bool{}, map[int]bool{}
	for pfx := range c.rules {
		bits := pfx.Bits()
		if pfx.Addr().Is4() {
			if !seen4[bits] {
				seen4[bits] = true
				c.lens4 = append(c.lens4, bits)
			}
		} else if !seen6[bits] {
			seen6[bits] = true
			c.lens6 = append(c.lens6, bits)
		}
	}
	slices.SortFunc(c.lens4, func(a, b int) int { return b - a })
	slices.SortFunc(c.lens6, func(a, b int) int { return b - a })
	return c
}

// denied returns the rule that denies ip, or nil when ip is allowed: the entry of the longest
// prefix containing ip decides.
func (c *policy) denied(ip netip.Addr) *rule {
	if d, ok := c.memo[ip]; ok {
		return d
	}
	lens := c.lens6
	if ip.Is4() {
		lens = c.lens4
	}
	var best *rule
	for _, bits := range lens {
		pfx, err := ip.Prefix(bits)
		if err != nil {
			continue
		}
		if r, ok := c.rules[pfx]; ok {
			best = &r
			break
		}
	}
	if best != nil && best.rank == rankAllow {
		best = nil
	}
	c.memo[ip] = best
	return best
}
