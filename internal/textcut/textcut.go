// Package textcut shortens text for the places that bound it: messages and notes that quote
// tenant-written values, Event notes, condition messages, status fields.
package textcut

import "unicode/utf8"

// Marks that end a cut text.
const (
	// Dots ends a cut Event note or condition message.
	Dots = "..."
	// Ellipsis ends a tenant-written value quoted in a problem message.
	Ellipsis = "…"
)

// Cut returns s when it has at most max bytes. Otherwise it returns the longest prefix of s
// that ends on a character boundary and leaves room for mark within max bytes, followed by
// mark ("" for none). Cut text is valid UTF-8 when s is. When mark alone is longer than max,
// the result is mark.
func Cut(s string, max int, mark string) string {
	if len(s) <= max {
		return s
	}
	n := max - len(mark)
	if n <= 0 {
		return mark
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + mark
}
