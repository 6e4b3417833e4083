package translatetest

import (
	"crypto/sha256"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/translate"
)

// OIDCCookieKeys are cookie keys for every OIDC login of routes (translate.OIDCLogins), as the
// manager keeps them (by translate.OIDCCookieKeyName): fixed for a test, of the login's name,
// where the manager's are random.
func OIDCCookieKeys(routes []v1alpha1.Route) map[string][]byte {
	out := map[string][]byte{}
	for _, login := range translate.OIDCLogins(routes) {
		sum := sha256.Sum256([]byte("test cookie key of " + login))
		out[translate.OIDCCookieKeyName(login)] = sum[:]
	}
	return out
}
