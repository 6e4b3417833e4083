package envoycp

// The predicates, for the external tests.
var (
	RouteChanged        = routeChanged
	RouteServiceChanged = routeServiceChanged
	SyncedSecretChanged = syncedSecretChanged
	// OIDCCookieKeysChanged: the manager's OIDC cookie keys.
	OIDCCookieKeysChanged = oidcCookieKeysChanged
)
