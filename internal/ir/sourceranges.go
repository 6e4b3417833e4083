package ir

// HasSourceRanges reports whether a route of the configuration has source ranges.
func (rc *RouteConfig) HasSourceRanges() bool {
	return rc.anyRoute(func(r *Route) bool { return len(r.SourceRanges) > 0 })
}
