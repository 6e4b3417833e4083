package oidckeys

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"testing"

	"kubelb.dev/kubelb/internal/translate"
)

// TestDesired: a login keeps its key while it is there, whatever comes and goes around it; a
// new login gets a random key of its own; a login gone loses its key; a key of the wrong size
// is made anew; at most max keys, those of logins that have one first; no login, no keys.
func TestDesired(t *testing.T) {
	name := translate.OIDCCookieKeyName
	first, err := Desired(nil, []string{"r1/ns/a", "r2/ns/b"}, 16, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	a, b := first[name("r1/ns/a")], first[name("r2/ns/b")]
	if len(first) != 2 || len(a) != translate.OIDCCookieKeySize || len(b) != translate.OIDCCookieKeySize || bytes.Equal(a, b) {
		t.Fatalf("first keys %x, want two different keys of %d bytes", first, translate.OIDCCookieKeySize)
	}
	// Rebuilt (a restart reads the same Secret): the same keys.
	again, err := Desired(first, []string{"r1/ns/a", "r2/ns/b"}, 16, rand.Reader)
	if err != nil || !sameKeys(again, first) {
		t.Fatalf("rebuilt: %x (%v), want the same keys", again, err)
	}
	// A login before the others (an older Route) and b gone: a kept, c new, b dropped.
	next, err := Desired(first, []string{"r0/ns/c", "r1/ns/a"}, 16, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if len(next) != 2 || !bytes.Equal(next[name("r1/ns/a")], a) || len(next[name("r0/ns/c")]) != translate.OIDCCookieKeySize || next[name("r2/ns/b")] != nil {
		t.Errorf("next keys %x, want a's kept, c's new, b's gone", next)
	}
	// A key of the wrong size is made anew.
	fixed, err := Desired(map[string][]byte{name("r1/ns/a"): []byte("short")}, []string{"r1/ns/a"}, 16, rand.Reader)
	if err != nil || len(fixed[name("r1/ns/a")]) != translate.OIDCCookieKeySize {
		t.Errorf("a short key: %x (%v), want a new one", fixed, err)
	}
	// Bounded: 20 logins get 16 keys; the logins with keys keep them, then the oldest.
	var logins []string
	for i := range 20 {
		logins = append(logins, fmt.Sprintf("r%02d/ns/p", i))
	}
	kept := map[string][]byte{name(logins[19]): a}
	bounded, err := Desired(kept, logins, 16, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if len(bounded) != 16 || !bytes.Equal(bounded[name(logins[19])], a) || bounded[name(logins[0])] == nil || bounded[name(logins[15])] != nil {
		t.Errorf("%d keys (the 20th's kept %v, the 1st's %v, the 16th's %v), want 16: the 20th's kept, the 15 oldest new", len(bounded),
			bounded[name(logins[19])] != nil, bounded[name(logins[0])] != nil, bounded[name(logins[15])] != nil)
	}
	if none, err := Desired(first, nil, 16, rand.Reader); none != nil || err != nil {
		t.Errorf("no login: %x (%v), want none", none, err)
	}
	// The random source failing is an error, never a weak key.
	if _, err := Desired(nil, []string{"r1/ns/a"}, 16, bytes.NewReader(nil)); err == nil {
		t.Error("an empty random source gave a key")
	}
}
