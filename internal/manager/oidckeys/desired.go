package oidckeys

import (
	"fmt"
	"io"
	"slices"

	"kubelb.dev/kubelb/internal/translate"
)

// Desired is the cookie keys a tenant's Secret should hold for logins (translate.OIDCLogins,
// oldest Route first), given the keys it holds (current): a login keeps its key (sessions stay
// valid across rebuilds, restarts and the coming and going of other logins), a login without
// one gets a new random key from random, and a key of no login is dropped. At most max
// (translate.MaxOIDCCookieKeys) keys are kept: the logins that already have a key first, then
// the others in order; a login left without a key is not served until one is freed. A key not
// of translate.OIDCCookieKeySize bytes is made anew. nil when no login needs a key.
func Desired(current map[string][]byte, logins []string, max int, random io.Reader) (map[string][]byte, error) {
	names := make([]string, 0, len(logins))
	for _, l := range logins {
		if n := translate.OIDCCookieKeyName(l); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	out := map[string][]byte{}
	for _, n := range names {
		if k := current[n]; len(k) == translate.OIDCCookieKeySize && len(out) < max {
			out[n] = k
		}
	}
	for _, n := range names {
		if _, ok := out[n]; ok || len(out) >= max {
			continue
		}
		k := make([]byte, translate.OIDCCookieKeySize)
		if _, err := io.ReadFull(random, k); err != nil {
			return nil, fmt.Errorf("making an OIDC cookie key: %w", err)
		}
		out[n] = k
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
