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
// admin listens there), link-local (cloud metadata at 169.254.169.254), multicast, the other
// clouds' metadata addresses outside link-local, and the special-purpose ranges of the IANA
// registries (RFC 6890 and its successors) that are never a tenant's endpoint: "this
// network", reserved and broadcast, benchmarking, IETF protocol assignments, anycast
// services, and for IPv6 the IPv4-compatible and IPv4-translated forms, the discard
// prefixes, Teredo, the local-use NAT64 prefix, site-local and SRv6 SIDs. The
// private ranges (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7) stay allowed: they are
// where tenants' nodes live; so do the documentation ranges (192.0.2.0/24, 198.51.100.0/24,
// 203.0.113.0/24, 2001:db8::/32, 3fff::/20), which no network routes and which examples and
// tests use as endpoints. The unspecified addresses (0.0.0.0, ::) are never usable:
// they are refused as InvalidAddress, and no allow entry opens them.
//
// IPv6 forms that carry an IPv4 address (IPv4-mapped ::ffff:0:0/96, NAT64 64:ff9b::/96,
// 6to4 2002::/16) are checked twice: as the IPv6 address and as the IPv4 address they carry
// (EmbeddedIPv4); either denial refuses the endpoint.
var DefaultDenied = []PolicyRule{
	// Loopback, link-local (169.254.169.254: AWS, GCP, Azure IMDS, OpenStack, Oracle, ...;
	// 169.254.0.23: Tencent), multicast.
	{netip.MustParsePrefix("127.0.0.0/8"), SourceDefault},
	{netip.MustParsePrefix("::1/128"), SourceDefault},
	{netip.MustParsePrefix("169.254.0.0/16"), SourceDefault},
	{netip.MustParsePrefix("fe80::/10"), SourceDefault},
	{netip.MustParsePrefix("224.0.0.0/4"), SourceDefault},
	{netip.MustParsePrefix("ff00::/8"), SourceDefault},
	// Cloud metadata and host services outside link-local.
	{netip.MustParsePrefix("100.100.100.200/32"), SourceDefault}, // Alibaba Cloud metadata
	{netip.MustParsePrefix("168.63.129.16/32"), SourceDefault},   // Azure wireserver
	{netip.MustParsePrefix("fd00:ec2::/32"), SourceDefault},      // AWS IPv6 metadata, DNS, NTP (fd00:ec2::254, ::253, ::123)
	// IANA IPv4 special-purpose registry.
	{netip.MustParsePrefix("0.0.0.0/8"), SourceDefault},       // "this network"
	{netip.MustParsePrefix("192.0.0.0/24"), SourceDefault},    // IETF protocol assignments (192.0.0.192: Oracle metadata)
	{netip.MustParsePrefix("192.31.196.0/24"), SourceDefault}, // AS112-v4
	{netip.MustParsePrefix("192.52.193.0/24"), SourceDefault}, // AMT
	{netip.MustParsePrefix("192.88.99.0/24"), SourceDefault},  // 6to4 relay anycast (deprecated)
	{netip.MustParsePrefix("192.175.48.0/24"), SourceDefault}, // AS112 direct delegation
	{netip.MustParsePrefix("198.18.0.0/15"), SourceDefault},   // benchmarking
	{netip.MustParsePrefix("240.0.0.0/4"), SourceDefault},     // reserved, and 255.255.255.255 broadcast
	// IANA IPv6 special-purpose registry.
	{netip.MustParsePrefix("::/96"), SourceDefault},           // IPv4-compatible (deprecated)
	{netip.MustParsePrefix("::ffff:0:0:0/96"), SourceDefault}, // IPv4-translated (SIIT)
	{netip.MustParsePrefix("64:ff9b:1::/48"), SourceDefault},  // local-use NAT64 (the hub's own translators)
	{netip.MustParsePrefix("100::/63"), SourceDefault},        // discard-only and dummy prefixes
	{netip.MustParsePrefix("2001::/23"), SourceDefault},       // IETF protocol assignments: Teredo 2001::/32, benchmarking, ORCHID, AMT, AS112
	{netip.MustParsePrefix("5f00::/16"), SourceDefault},       // SRv6 SIDs
	{netip.MustParsePrefix("fec0::/10"), SourceDefault},       // site-local (deprecated)
}

// Ranges of IPv6 addresses that carry an IPv4 address which the network may reach (the
// IPv4-mapped form is unmapped before any check).
var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052: the IPv4 address in the last 32 bits
	sixToFour      = netip.MustParsePrefix("2002::/16")    // RFC 3056: the IPv4 address in bits 16-47
)

// EmbeddedIPv4 returns the IPv4 address an IPv6 address carries in a form that reaches that
// IPv4 address (IPv4-mapped, NAT64 64:ff9b::/96, 6to4 2002::/16) and the form's name; ok is
// false for any other address. The endpoint policy applies to the IPv4 address as well.
func EmbeddedIPv4(ip netip.Addr) (v4 netip.Addr, form string, ok bool) {
	if ip.Is4In6() {
		return ip.Unmap(), "IPv4-mapped", true
	}
	if !ip.Is6() {
		return netip.Addr{}, "", false
	}
	b := ip.As16()
	switch {
	case nat64WellKnown.Contains(ip):
		return netip.AddrFrom4([4]byte(b[12:16])), "NAT64", true
	case sixToFour.Contains(ip):
		return netip.AddrFrom4([4]byte(b[2:6])), "6to4", true
	}
	return netip.Addr{}, "", false
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

// Allows reports whether the policy lets the hub reach ip (what the manager dials itself,
// such as an OIDC issuer, is checked as a translated endpoint is).
func (p EndpointPolicy) Allows(ip netip.Addr) bool { return compilePolicy(p).denied(ip) == nil }

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
// prefix containing ip decides. An IPv6 address that carries an IPv4 address (EmbeddedIPv4)
// is denied when either the IPv6 address or the IPv4 address is: an allow of the IPv6 form
// never opens a denied IPv4 address behind it.
func (c *policy) denied(ip netip.Addr) *rule {
	if d, ok := c.memo[ip]; ok {
		return d
	}
	d := c.lookup(ip.Unmap())
	if v4, form, ok := EmbeddedIPv4(ip); ok && d == nil && ip.Is6() && !ip.Is4In6() {
		if d4 := c.lookup(v4); d4 != nil {
			r := *d4
			r.Source = fmt.Sprintf("%s, carried by the %s address %s", r.Source, form, ip)
			d = &r
		}
	}
	c.memo[ip] = d
	return d
}

// lookup returns the rule that decides ip when it denies it, nil when ip is allowed.
func (c *policy) lookup(ip netip.Addr) *rule {
	lens := c.lens6
	if ip.Is4() {
		lens = c.lens4
	}
	for _, bits := range lens {
		pfx, err := ip.Prefix(bits)
		if err != nil {
			continue
		}
		if r, ok := c.rules[pfx]; ok {
			if r.rank == rankAllow {
				return nil
			}
			return &r
		}
	}
	return nil
}
