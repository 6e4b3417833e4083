package envoycp

// The predicates, for the external tests.
var (
	RouteChanged        = routeChanged
	RouteServiceChanged = routeServiceChanged
	SyncedSecretChanged = syncedSecretChanged
)
