package textcut

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    string
		max  int
		mark string
		want string
	}{
		{"short", 10, Dots, "short"},
		{"exactly10!", 10, Dots, "exactly10!"},
		{"eleven byte", 10, Dots, "eleven ..."},
		{"abcdef", 4, "", "abcd"},
		{"éé", 3, "", "é"},                 // not into the second é
		{"aééé", 5, Dots, "a..."},          // "aé" and the dots would be 6 bytes
		{"abcdefghij", 5, Ellipsis, "ab…"}, // the ellipsis is 3 bytes
		{"abcdef", 2, Dots, "..."},         // the mark alone is longer than max
		{"", 0, Dots, ""},
	} {
		if got := Cut(tc.s, tc.max, tc.mark); got != tc.want {
			t.Errorf("Cut(%q, %d, %q) = %q, want %q", tc.s, tc.max, tc.mark, got, tc.want)
		}
	}
}

// TestCutKeepsRunes: text of two-byte characters cut to Event note and condition message sizes
// stays valid UTF-8, within the bound, ends with the mark and starts as it did.
func TestCutKeepsRunes(t *testing.T) {
	t.Parallel()
	s := strings.Repeat("é", 600) // 1200 bytes
	for _, max := range []int{1000, 1023, 1024} {
		for _, mark := range []string{Dots, Ellipsis, " … (more in the object's Events)", ""} {
			got := Cut(s, max, mark)
			if len(got) > max || !strings.HasSuffix(got, mark) || !strings.HasPrefix(got, "é") || !utf8.ValidString(got) || len(got) < max-len(mark)-1 {
				t.Errorf("cut to %d with %q: %d bytes, valid UTF-8 %v, ends %q", max, mark, len(got), utf8.ValidString(got), got[len(got)-8:])
			}
		}
	}
}
