package sourcerange_test

import (
	"fmt"
	"strings"
	"testing"

	"kubelb.dev/kubelb/internal/sourcerange"
)

// TestParse: ranges are read as Kubernetes reads loadBalancerSourceRanges (spaces
// trimmed, host bits cleared, IPv4 leading zeros decimal) and written in one canonical form;
// anything else is refused with the entry named.
func TestParse(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"10.0.0.0/8":          "10.0.0.0/8",
		" 203.0.113.7/24 ":    "203.0.113.0/24",
		"010.001.0.0/16":      "10.1.0.0/16",
		"2001:DB8::1/32":      "2001:db8::/32",
		"0.0.0.0/0":           "0.0.0.0/0",
		"::/0":                "::/0",
		"192.0.2.1/32":        "192.0.2.1/32",
		"::ffff:10.0.0.0/104": "::ffff:10.0.0.0/104",
	} {
		if got, err := sourcerange.Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "office", "10.0.0.0", "10.0.0.0/33", "192.168.1.300/24", "fe80::1%eth0/64", "10.0.0.0/8,10.1.0.0/16", "2001:db8::/129"} {
		if got, err := sourcerange.Parse(in); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", strings.TrimSpace(in))) {
			t.Errorf("Parse(%q) = %q, %v; want an error naming it", in, got, err)
		}
	}
}
