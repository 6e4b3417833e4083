package reach

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestJudgeEqualsDecide: after every step of a random sequence of changes (endpoints added
// and removed, clusters added and removed, a cluster's version moving with or without its
// endpoints, objects moving between clusters, found entries about current, older and
// unknown endpoints, and tenants crossing MaxCheckedEndpoints), the verdicts a Judge decided
// so far, applied in order, are those Decide gives from the whole tenant.
func TestJudgeEqualsDecide(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { judgeAgainstDecide(t, seed) })
	}
}

// keepObjects judges the objects named "o…", as their name without a suffix ("/…"), and
// not the others: as the status Writer drops the namespace and the kinds it does not judge.
func keepObjects(o string) (string, bool) {
	name, _, _ := strings.Cut(o, "/")
	return name, strings.HasPrefix(o, "o")
}

func judgeAgainstDecide(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 7))
	const nClusters, nObjects = 8, 10
	addr := func(i int) string { return fmt.Sprintf("10.0.%d.%d:30080", i/250, i%250) }
	pool := make([]string, 12)
	for i := range pool {
		pool[i] = addr(i)
	}
	big := make([]string, MaxCheckedEndpoints-5)
	for i := range big {
		big[i] = addr(1000 + i)
	}
	slices.Sort(big)
	endpoints := map[string][]string{} // cluster → sorted endpoints (none: no key)
	versions := map[string]Version{}
	bump := 0
	setEndpoints := func(c string, addrs []string) {
		addrs = slices.Compact(slices.Sorted(slices.Values(addrs)))
		if len(addrs) == 0 {
			delete(endpoints, c)
		} else {
			endpoints[c] = addrs
		}
		bump++
		versions[c] = Version{Cluster: fmt.Sprint(bump)}
	}
	randomAddrs := func() []string {
		if rnd.IntN(12) == 0 {
			return big
		}
		var out []string
		for range rnd.IntN(4) {
			out = append(out, pool[rnd.IntN(len(pool))])
		}
		return out
	}
	owners := map[string][]string{}
	var found []Found
	omitted := false
	j := &Judge[string]{}
	view := map[string]Verdict{}

	for step := range 300 {
		c := fmt.Sprintf("c%d", rnd.IntN(nClusters))
		switch rnd.IntN(8) {
		case 0: // new endpoints, or a new cluster
			setEndpoints(c, randomAddrs())
		case 1: // the cluster is gone
			delete(endpoints, c)
			delete(versions, c)
		case 2: // another version, the same endpoints
			if _, ok := versions[c]; ok {
				setEndpoints(c, endpoints[c])
			}
		case 3, 4: // an object moves, joins or leaves a cluster (a new map: the old is the Judge's)
			owners = maps.Clone(owners)
			o := fmt.Sprintf("o%d", rnd.IntN(nObjects))
			if rnd.IntN(4) == 0 {
				o += "/other-namespace"
			}
			if rnd.IntN(5) == 0 {
				o = "x" + o[1:] // not judged
			}
			list := slices.DeleteFunc(slices.Clone(owners[c]), func(s string) bool { return s == o })
			if len(list) == len(owners[c]) {
				list = append(list, o)
			}
			if len(list) == 0 {
				delete(owners, c)
			} else {
				owners[c] = list
			}
		case 5: // a replica's entry about the cluster's current endpoints, or about others
			found = slices.Clone(found)
			f := Found{Cluster: c, Endpoints: EndpointsHash(endpoints[c])}
			if rnd.IntN(4) == 0 {
				f.Endpoints = EndpointsHash(randomAddrs())
			}
			for _, a := range endpoints[c] {
				if rnd.IntN(3) == 0 && len(f.Unreachable) < 5 {
					f.Unreachable = append(f.Unreachable, a)
				}
			}
			f.UnreachableCount = len(f.Unreachable) + rnd.IntN(2)
			found = append(found, f)
		case 6: // an entry goes (stale, or its replica moved on)
			if len(found) > 0 {
				i := rnd.IntN(len(found))
				found = slices.Delete(slices.Clone(found), i, i+1)
			}
		case 7: // a replica starts or stops leaving clusters out of its report
			omitted = !omitted
		}
		j.SetClusters(Clusters{
			Versions: func(yield func(string, Version) bool) {
				for c, v := range versions {
					if !yield(c, v) {
						return
					}
				}
			},
			Endpoints: func(c string) []string { return endpoints[c] },
		})
		for _, f := range found {
			if got := j.Hash(f.Cluster); got != "" && endpoints[f.Cluster] == nil || got == "" && endpoints[f.Cluster] != nil {
				t.Fatalf("step %d: Hash(%s) = %q with endpoints %v", step, f.Cluster, got, endpoints[f.Cluster])
			}
		}
		decided, gone := j.Look(owners, keepObjects, found, omitted)
		maps.Copy(view, decided)
		for _, k := range gone {
			delete(view, k)
		}
		if want := decideAll(endpoints, owners, found, omitted); !maps.Equal(view, want) {
			for k := range want {
				if view[k] != want[k] {
					t.Errorf("step %d: %s: judged %+v, want %+v", step, k, view[k], want[k])
				}
			}
			t.Fatalf("step %d: judged %d objects, want %d", step, len(view), len(want))
		}
	}
}

// decideAll is every object's verdict from the whole tenant, as the status Writer decided
// before it kept a Judge.
func decideAll(endpoints map[string][]string, owners map[string][]string, found []Found, omitted bool) map[string]Verdict {
	checks := PlanChecks(endpoints)
	checks.Omitted = omitted
	clustersOf := map[string]map[string][]string{}
	for c, os := range owners {
		for _, o := range os {
			k, ok := keepObjects(o)
			if !ok {
				continue
			}
			if clustersOf[k] == nil {
				clustersOf[k] = map[string][]string{}
			}
			clustersOf[k][c] = endpoints[c]
		}
	}
	out := map[string]Verdict{}
	for k, clusters := range clustersOf {
		out[k] = Decide(clusters, found, checks)
	}
	return out
}
