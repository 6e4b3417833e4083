package reach

import (
	"maps"
	"slices"
)

// Judge decides the verdicts of a tenant's objects (K identifies one) look after look, and
// at each look decides again only the objects whose inputs changed since the previous one:
// the endpoints of one of their clusters, what the replicas found of one of their clusters,
// the set of their clusters, or the tenant's Checks (then every object). Its verdicts are
// those Decide gives from the whole tenant (TestJudgeEqualsDecide). A look is SetClusters,
// then Look; the zero Judge has seen nothing.
type Judge[K comparable] struct {
	clusters  map[string]*judgedCluster // with or without endpoints
	endpoints map[string][]string       // the clusters that have endpoints
	total     int                       // their endpoints
	checks    Checks
	// changed are the clusters whose endpoints changed since the last Look.
	changed map[string]bool
	// recount is set when a cluster's number of endpoints changed since the last Look (the
	// Checks may have).
	recount bool
	// pass numbers the SetClusters calls (a cluster not seen in this one is gone).
	pass uint64

	owners     map[string][]K // cluster → owners, as the last Look was given them
	clustersOf map[K]map[string]bool
	found      []Found // as the last Look was given them
	byCluster  map[string][]Found
	verdicts   map[K]Verdict
}

type judgedCluster struct {
	version Version
	hash    string // EndpointsHash of its endpoints, "" without
	pass    uint64
}

// SetClusters brings the Judge's clusters to c, reading the endpoints of those whose version
// changed only.
func (j *Judge[K]) SetClusters(c Clusters) {
	if j.clusters == nil {
		j.clusters, j.endpoints, j.changed = map[string]*judgedCluster{}, map[string][]string{}, map[string]bool{}
	}
	j.pass++
	seen := 0
	if c.Versions != nil {
		for name, v := range c.Versions {
			seen++
			jc := j.clusters[name]
			if jc == nil {
				jc = &judgedCluster{}
				j.clusters[name] = jc
			} else if jc.version == v {
				jc.pass = j.pass
				continue
			}
			jc.version, jc.pass = v, j.pass
			j.setEndpoints(name, jc, c.Endpoints(name))
		}
	}
	if seen == len(j.clusters) {
		return // none is gone
	}
	for name, jc := range j.clusters {
		if jc.pass != j.pass {
			j.setEndpoints(name, jc, nil)
			delete(j.clusters, name)
		}
	}
}

// setEndpoints records a cluster's endpoints, and that they changed if they did.
func (j *Judge[K]) setEndpoints(name string, jc *judgedCluster, addrs []string) {
	if slices.Equal(addrs, j.endpoints[name]) {
		return
	}
	if n := len(addrs) - len(j.endpoints[name]); n != 0 {
		j.total += n
		j.recount = true
	}
	if len(addrs) == 0 {
		delete(j.endpoints, name)
		jc.hash = ""
	} else {
		j.endpoints[name] = addrs
		jc.hash = EndpointsHash(addrs)
	}
	j.changed[name] = true
}

// Hash is the EndpointsHash of a cluster's current endpoints, "" when it has none.
func (j *Judge[K]) Hash(cluster string) string {
	if jc := j.clusters[cluster]; jc != nil {
		return jc.hash
	}
	return ""
}

// Look decides again the objects whose inputs changed since the previous Look: owners are
// the owners of each cluster (keep tells which are judged, and as which K), found what the
// replicas found (Found entries that count). It returns the verdicts decided, and the
// objects that had a verdict and no longer own a cluster. owners and found are kept until
// the next Look: they must not be modified.
func (j *Judge[K]) Look(owners map[string][]K, keep func(K) (K, bool), found []Found, omitted bool) (decided map[K]Verdict, gone []K) {
	if j.clusters == nil {
		j.SetClusters(Clusters{})
	}
	if j.clustersOf == nil {
		j.clustersOf, j.verdicts = map[K]map[string]bool{}, map[K]Verdict{}
	}
	dirty := map[K]bool{}
	both := 0 // clusters owned before and now
	for c, os := range owners {
		old, had := j.owners[c]
		if had {
			both++
			if slices.Equal(os, old) {
				continue
			}
		}
		j.own(c, old, keep, false, dirty)
		j.own(c, os, keep, true, dirty)
	}
	if both < len(j.owners) {
		for c, old := range j.owners {
			if _, ok := owners[c]; !ok {
				j.own(c, old, keep, false, dirty)
			}
		}
	}
	j.owners = owners

	if !slices.EqualFunc(found, j.found, equalFound) {
		byCluster := map[string][]Found{}
		for _, f := range found {
			byCluster[f.Cluster] = append(byCluster[f.Cluster], f)
		}
		for c, fs := range byCluster {
			if !slices.EqualFunc(fs, j.byCluster[c], equalFound) {
				j.changed[c] = true
			}
		}
		for c := range j.byCluster {
			if _, ok := byCluster[c]; !ok {
				j.changed[c] = true
			}
		}
		j.byCluster = byCluster
	}
	j.found = found

	// PlanChecks plans from the clusters' numbers of endpoints, and skips nothing while the
	// tenant's endpoints fit. Verdicts depend on which clusters are skipped, not on the count.
	checks := j.checks
	switch {
	case j.total <= MaxCheckedEndpoints:
		checks = Checks{}
	case j.recount:
		checks = PlanChecks(j.endpoints)
	}
	j.recount = false
	checks.Omitted = omitted
	if !maps.Equal(checks.Skipped, j.checks.Skipped) || checks.Omitted != j.checks.Omitted {
		for k := range j.clustersOf {
			dirty[k] = true
		}
	}
	j.checks = checks

	for c := range j.changed {
		for _, o := range j.owners[c] {
			if k, ok := keep(o); ok {
				dirty[k] = true
			}
		}
	}
	clear(j.changed)

	decided = make(map[K]Verdict, len(dirty))
	for k := range dirty {
		cs := j.clustersOf[k]
		if len(cs) == 0 {
			delete(j.clustersOf, k)
			if _, ok := j.verdicts[k]; ok {
				delete(j.verdicts, k)
				gone = append(gone, k)
			}
			continue
		}
		endpoints := make(map[string][]string, len(cs))
		var fs []Found
		for c := range cs {
			endpoints[c] = j.endpoints[c]
			fs = append(fs, j.byCluster[c]...)
		}
		v := Decide(endpoints, fs, j.checks)
		j.verdicts[k] = v
		decided[k] = v
	}
	return decided, gone
}

// own records that the owners of cluster c own it (add) or no longer do, and marks them.
func (j *Judge[K]) own(c string, owners []K, keep func(K) (K, bool), add bool, dirty map[K]bool) {
	for _, o := range owners {
		k, ok := keep(o)
		if !ok {
			continue
		}
		dirty[k] = true
		switch {
		case add && j.clustersOf[k] == nil:
			j.clustersOf[k] = map[string]bool{c: true}
		case add:
			j.clustersOf[k][c] = true
		default:
			delete(j.clustersOf[k], c)
		}
	}
}

// Verdict is the object's verdict at the last Look, if it had one.
func (j *Judge[K]) Verdict(k K) (Verdict, bool) {
	v, ok := j.verdicts[k]
	return v, ok
}

func equalFound(a, b Found) bool {
	return a.Cluster == b.Cluster && a.Endpoints == b.Endpoints && a.UnreachableCount == b.UnreachableCount && slices.Equal(a.Unreachable, b.Unreachable)
}
