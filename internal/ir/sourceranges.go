package ir

// HasSourceRanges reports whether a route of the configuration has source ranges or an
// authorization (both need Envoy's RBAC filter).
func (rc *RouteConfig) HasSourceRanges() bool {
	return rc.anyRoute(func(r *Route) bool { return len(r.SourceRanges) > 0 || r.Authorization != nil })
}
