package ipam

import (
	"net/netip"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

func addressPool(name string, def bool, addrs ...string) kubelbv1alpha1.AddressPool {
	return kubelbv1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kubelbv1alpha1.AddressPoolSpec{Default: def, Addresses: addrs}}
}

// TestParsePool: CIDRs, ranges and single addresses of both families are read, overlapping
// and touching entries merged, sizes counted (an IPv6 /64 beyond int64), and unreadable
// entries named.
func TestParsePool(t *testing.T) {
	ap := addressPool("p", false,
		"10.0.0.0/30", "10.0.0.4-10.0.0.5", "10.0.0.1", " 10.0.1.7/28 ", "fd00::/64", "fd00::5-fd00::9",
		"not-an-ip", "10.0.0.9-fd00::1", "10.0.0.9-10.0.0.8", "::ffff:10.0.0.1/120", "fe80::1%eth0-fe80::2", "10.0.0.0/33", "garbage")
	p := ParsePool(&ap)
	if got := p.Size(v4).String(); got != "22" { // 10.0.0.0-10.0.0.5 (6) + 10.0.1.0/28 (16)
		t.Errorf("IPv4 size %s, want 22", got)
	}
	if got := p.Size(v6).String(); got != "18446744073709551616" {
		t.Errorf("IPv6 size %s, want 2^64", got)
	}
	if len(p.ranges[v4]) != 2 || len(p.ranges[v6]) != 1 {
		t.Errorf("ranges %v, want two IPv4 and one IPv6 after merging", p.ranges)
	}
	for _, in := range []string{"10.0.0.0", "10.0.0.5", "10.0.1.15", "fd00::ffff:ffff:ffff:ffff"} {
		if !p.Contains(netip.MustParseAddr(in)) {
			t.Errorf("pool does not contain %s", in)
		}
	}
	for _, out := range []string{"10.0.0.6", "10.0.1.16", "9.255.255.255", "fd00:0:0:1::"} {
		if p.Contains(netip.MustParseAddr(out)) {
			t.Errorf("pool contains %s", out)
		}
	}
	if len(p.Invalid) != 7 {
		t.Fatalf("invalid entries %q, want 7", p.Invalid)
	}
	for i, want := range []string{"not a range", "of one IP family", "must not be after", "not a CIDR", "not a range", "not a CIDR", "not a CIDR, a range A-B or an address"} {
		if !strings.Contains(p.Invalid[i], want) {
			t.Errorf("invalid entry %d: %q, want it to say %q", i, p.Invalid[i], want)
		}
	}
	// The last addresses of the families merge without overflow.
	top := addressPool("top", false, "255.255.255.254/31", "255.255.255.255", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fff0/124")
	tp := ParsePool(&top)
	if tp.Size(v4).String() != "2" || tp.Size(v6).String() != "16" || len(tp.Invalid) != 0 {
		t.Errorf("top pool sizes %s/%s, invalid %v", tp.Size(v4), tp.Size(v6), tp.Invalid)
	}
}
