package translator

import (
	"slices"
	"testing"

	"kubelb.dev/kubelb/internal/ir"
)

// TestStreamRanges: the ranges whose longest-prefix match (Envoy's choice of a filter chain)
// gives the verdict of the first rule holding an address: a range held by an earlier rule's
// is left out, one holding an earlier rule's stays (the earlier, more specific, decides its
// addresses), IPv4 and IPv6 apart.
func TestStreamRanges(t *testing.T) {
	for _, c := range []struct {
		name        string
		rules       []ir.AuthorizationRule
		allow, deny []string
	}{
		{"deny inside allow", []ir.AuthorizationRule{
			{SourceRanges: []string{"10.1.2.3/32"}}, {Allow: true, SourceRanges: []string{"10.0.0.0/8"}}},
			[]string{"10.0.0.0/8"}, []string{"10.1.2.3/32"}},
		{"allow first: a later deny inside it never decides", []ir.AuthorizationRule{
			{Allow: true, SourceRanges: []string{"10.0.0.0/8"}}, {SourceRanges: []string{"10.1.2.3/32", "192.0.2.0/24"}}},
			[]string{"10.0.0.0/8"}, []string{"192.0.2.0/24"}},
		{"equal ranges: the first", []ir.AuthorizationRule{
			{SourceRanges: []string{"192.0.2.0/24"}}, {Allow: true, SourceRanges: []string{"192.0.2.0/24", "::/0"}}},
			[]string{"::/0"}, []string{"192.0.2.0/24"}},
		{"IPv4 and IPv6 apart", []ir.AuthorizationRule{
			{Allow: true, SourceRanges: []string{"::/0"}}, {SourceRanges: []string{"0.0.0.0/0"}}},
			[]string{"::/0"}, []string{"0.0.0.0/0"}},
	} {
		allow, deny := streamRanges(&ir.Authorization{Rules: c.rules})
		if !slices.Equal(allow, c.allow) || !slices.Equal(deny, c.deny) {
			t.Errorf("%s: allow %v deny %v, want %v %v", c.name, allow, deny, c.allow, c.deny)
		}
	}
}
