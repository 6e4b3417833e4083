package reach

import "iter"

// Clusters is a tenant's clusters as of one snapshot, read on demand
// (xds.Server.ClusterEndpoints): the version of each cluster's endpoints is cheap to read,
// its endpoints are read when asked for. A Judge reads again only the clusters whose
// version changed.
type Clusters struct {
	// Versions yields every cluster with the version of its endpoints: a cluster whose
	// version is the one it had has the endpoints it had. Clusters without endpoints may be
	// yielded. Nil: no clusters.
	Versions iter.Seq2[string, Version]
	// Endpoints returns the endpoints (host:port, sorted, distinct) of a cluster yielded by
	// Versions, none when it has none.
	Endpoints func(cluster string) []string
}

// Version identifies what a cluster's endpoints were read from (for a snapshot's cluster,
// the digests of its Cluster and ClusterLoadAssignment resources).
type Version struct{ Cluster, Assignment string }

// StaticClusters are clusters of fixed endpoints (cluster → host:port addresses, sorted,
// distinct); the version of each is the hash of its endpoints.
func StaticClusters(endpoints map[string][]string) Clusters {
	return Clusters{
		Versions: func(yield func(string, Version) bool) {
			for c, addrs := range endpoints {
				if !yield(c, Version{Cluster: EndpointsHash(addrs)}) {
					return
				}
			}
		},
		Endpoints: func(c string) []string { return endpoints[c] },
	}
}

// All reads the endpoints of every cluster that has any: what PlanChecks plans from.
func (c Clusters) All() map[string][]string {
	out := map[string][]string{}
	if c.Versions == nil {
		return out
	}
	for name := range c.Versions {
		if addrs := c.Endpoints(name); len(addrs) > 0 {
			out[name] = addrs
		}
	}
	return out
}
