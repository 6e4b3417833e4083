// Package ipam is kubelb's address pools (--address-provider=ipam, PureLB-style): Services of
// type LoadBalancer take addresses from AddressPool resources. Allocate is the one pure,
// deterministic decision over all served Services; the Reconciler puts its verdicts on the
// Services (internal/lbaddress) and the pools' use in their status. Allocations are stored in
// the Services' status only, so a restarted controller rebuilds the same result.
package ipam

import (
	"cmp"
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/textcut"
)

// Families are indexed 0 (IPv4) and 1 (IPv6).
const (
	v4 = 0
	v6 = 1
)

// familyNames are the Kubernetes names of the families.
var familyNames = [2]corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}

// family is the index of ip's family.
func family(ip netip.Addr) int {
	if ip.Is4() {
		return v4
	}
	return v6
}

// addrRange is the addresses from first to last, both included, of one family.
type addrRange struct{ first, last netip.Addr }

// Pool is an AddressPool as the allocator reads it.
type Pool struct {
	Name    string
	Created time.Time
	Default bool
	// ranges per family, sorted and merged (no two overlap or touch).
	ranges [2][]addrRange
	// Invalid names the entries of spec.addresses that could not be read, and why.
	Invalid []string
	// Namespaces are the only namespaces whose Services may take from the pool; none: all.
	Namespaces []string
}

// Allows tells whether Services of namespace ns may take from the pool.
func (p *Pool) Allows(ns string) bool {
	return len(p.Namespaces) == 0 || slices.Contains(p.Namespaces, ns)
}

// ParsePool reads an AddressPool; unreadable entries are left out and named in Invalid.
func ParsePool(p *kubelbv1alpha1.AddressPool) Pool {
	out := Pool{Name: p.Name, Created: p.CreationTimestamp.Time, Default: p.Spec.Default, Namespaces: p.Spec.AllowedNamespaces}
	for i, e := range p.Spec.Addresses {
		if i == kubelbv1alpha1.MaxAddressPoolEntries {
			out.Invalid = append(out.Invalid, fmt.Sprintf("entries after the first %d", kubelbv1alpha1.MaxAddressPoolEntries))
			break
		}
		r, err := parseEntry(e)
		if err != nil {
			out.Invalid = append(out.Invalid, err.Error())
			continue
		}
		f := family(r.first)
		out.ranges[f] = append(out.ranges[f], r)
	}
	for f := range out.ranges {
		out.ranges[f] = merge(out.ranges[f])
	}
	return out
}

// parseEntry reads one entry: a CIDR, a range A-B of one family, or a single address.
func parseEntry(e string) (addrRange, error) {
	s := strings.TrimSpace(e)
	bad := func(why string) (addrRange, error) {
		return addrRange{}, fmt.Errorf("%q: %s", textcut.Cut(e, 100, textcut.Dots), why)
	}
	usable := func(ip netip.Addr) bool { return ip.IsValid() && ip.Zone() == "" && !ip.Is4In6() }
	switch {
	case strings.Contains(s, "/"):
		p, err := netip.ParsePrefix(s)
		if err != nil || !usable(p.Addr()) {
			return bad("not a CIDR (10.0.0.0/28, fd00::/120)")
		}
		p = p.Masked()
		return addrRange{first: p.Addr(), last: lastOf(p)}, nil
	case strings.Contains(s, "-"):
		a, b, _ := strings.Cut(s, "-")
		first, err1 := netip.ParseAddr(strings.TrimSpace(a))
		last, err2 := netip.ParseAddr(strings.TrimSpace(b))
		switch {
		case err1 != nil || err2 != nil || !usable(first) || !usable(last):
			return bad("not a range of two addresses (10.0.0.10-10.0.0.20)")
		case first.Is4() != last.Is4():
			return bad("the ends of a range must be of one IP family")
		case last.Less(first):
			return bad("the first address of a range must not be after the last")
		}
		return addrRange{first: first, last: last}, nil
	default:
		ip, err := netip.ParseAddr(s)
		if err != nil || !usable(ip) {
			return bad("not a CIDR, a range A-B or an address")
		}
		return addrRange{first: ip, last: ip}, nil
	}
}

// lastOf is the last address of a masked prefix.
func lastOf(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	ip, _ := netip.AddrFromSlice(b)
	return ip
}

// merge sorts ranges and joins those that overlap or touch.
func merge(rs []addrRange) []addrRange {
	slices.SortFunc(rs, func(a, b addrRange) int { return cmp.Or(a.first.Compare(b.first), a.last.Compare(b.last)) })
	var out []addrRange
	for _, r := range rs {
		if n := len(out); n > 0 {
			prev := &out[n-1]
			if !prev.last.Less(r.first) || prev.last.Next() == r.first { // overlaps or touches
				if prev.last.Less(r.last) {
					prev.last = r.last
				}
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// Has tells whether the pool has addresses of family f.
func (p *Pool) Has(f int) bool { return len(p.ranges[f]) > 0 }

// Contains tells whether ip is one of the pool's addresses.
func (p *Pool) Contains(ip netip.Addr) bool {
	rs := p.ranges[family(ip)]
	i, _ := slices.BinarySearchFunc(rs, ip, func(r addrRange, ip netip.Addr) int {
		if r.last.Less(ip) {
			return -1
		}
		return 0
	})
	return i < len(rs) && !ip.Less(rs[i].first)
}

// Size is the number of the pool's addresses of family f.
func (p *Pool) Size(f int) *big.Int {
	n := new(big.Int)
	for _, r := range p.ranges[f] {
		a, b := r.first.As16(), r.last.As16()
		d := new(big.Int).Sub(new(big.Int).SetBytes(b[:]), new(big.Int).SetBytes(a[:]))
		n.Add(n, d.Add(d, big.NewInt(1)))
	}
	return n
}
