package reach

import (
	"maps"
	"slices"
)

// MaxCheckedEndpoints bounds the endpoints one proxy is asked to health-check (each cluster's
// endpoints counted once per cluster): what a tenant's clusters have beyond it is not checked.
const MaxCheckedEndpoints = 4096

// Checks is which of a tenant's clusters its proxies are asked to health-check. Health
// discovery (internal/xds) asks what it says, and the leader reads from it which objects
// cannot get a verdict: both compute it from the tenant's snapshot with PlanChecks.
type Checks struct {
	// Skipped are the clusters left out: their endpoints do not fit in MaxCheckedEndpoints.
	Skipped map[string]bool
	// Omitted: a manager replica left clusters its proxies reported on out of its report
	// (MaxReportedClusters); a cluster without a report may be one of them.
	Omitted bool
}

// PlanChecks decides which clusters (name → distinct endpoints) are health-checked: by name,
// each cluster whose endpoints still fit in MaxCheckedEndpoints with those of the clusters
// before it that were taken; the others are skipped.
func PlanChecks(clusters map[string][]string) Checks {
	c := Checks{}
	taken := 0
	for _, name := range slices.Sorted(maps.Keys(clusters)) {
		n := len(clusters[name])
		if taken+n > MaxCheckedEndpoints {
			if c.Skipped == nil {
				c.Skipped = map[string]bool{}
			}
			c.Skipped[name] = true
			continue
		}
		taken += n
	}
	return c
}
