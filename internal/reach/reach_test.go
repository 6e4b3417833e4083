package reach

import (
	"fmt"
	"maps"
	"strings"
	"testing"
)

func TestSummaryAndDecide(t *testing.T) {
	live, dead := "10.0.0.1:30080", "10.0.0.2:30080"
	asked := map[string][]string{"lb-a": {dead, live}}
	tr := NewTracker()

	// Asked, nothing reported yet: not yet checked.
	tr.Hear("tenant-a", "p1", Report{Asked: asked})
	if got := tr.Summary("tenant-a"); len(got) != 0 {
		t.Fatalf("summary before any report = %+v, want none", got)
	}
	if v := Decide(asked, found(tr.Summary("tenant-a")), Checks{}); v.Reason != ReasonNotYetChecked || v.Status != "Unknown" {
		t.Fatalf("verdict before any report = %+v", v)
	}

	// One answers, one does not.
	tr.Hear("tenant-a", "p1", Report{Asked: asked, Health: map[string]map[string]bool{"lb-a": {live: true, dead: false}}})
	v := Decide(asked, found(tr.Summary("tenant-a")), Checks{})
	if v.Status != "False" || v.Reason != ReasonSomeUnreachable || v.Reachable != 1 || v.Unreachable != 1 || !strings.Contains(v.Message, dead) || strings.Contains(v.Message, live) {
		t.Fatalf("verdict with one dead endpoint = %+v", v)
	}

	// A second proxy reaches both: the endpoint is still unreachable from p1.
	tr.Hear("tenant-a", "p2", Report{Asked: asked, Health: map[string]map[string]bool{"lb-a": {live: true, dead: true}}})
	if v := Decide(asked, found(tr.Summary("tenant-a")), Checks{}); v.Reason != ReasonSomeUnreachable {
		t.Fatalf("verdict with p1 failing = %+v", v)
	}
	// p1 disconnects: its reports go.
	tr.Forget("tenant-a", "p1")
	if v := Decide(asked, found(tr.Summary("tenant-a")), Checks{}); v.Status != "True" || v.Reason != ReasonReachable || v.Reachable != 2 {
		t.Fatalf("verdict after p1 left = %+v", v)
	}

	// None answers.
	tr.Hear("tenant-a", "p2", Report{Asked: asked, Health: map[string]map[string]bool{"lb-a": {live: false, dead: false}}})
	if v := Decide(asked, found(tr.Summary("tenant-a")), Checks{}); v.Status != "False" || v.Reason != ReasonNoneReachable || v.Unreachable != 2 {
		t.Fatalf("verdict with none reachable = %+v", v)
	}

	// The endpoints change: what was found of the old set is not used.
	changed := map[string][]string{"lb-a": {live}}
	if v := Decide(changed, found(tr.Summary("tenant-a")), Checks{}); v.Reason != ReasonNotYetChecked {
		t.Fatalf("verdict for a changed set = %+v", v)
	}
	// Another tenant's summary is its own.
	if got := tr.Summary("tenant-b"); got != nil {
		t.Fatalf("tenant-b summary = %+v", got)
	}
	if v := Decide(map[string][]string{"lb-a": nil}, nil, Checks{}); v.Reason != ReasonNotYetChecked || !strings.Contains(v.Message, "no endpoints") {
		t.Fatalf("verdict without endpoints = %+v", v)
	}
}

func TestDecideAcrossReplicasAndBounds(t *testing.T) {
	var addrs []string
	for i := range 20 {
		addrs = append(addrs, "10.0.1."+string(rune('a'+i))+":1")
	}
	h := EndpointsHash(addrs)
	if EndpointsHash([]string{addrs[1], addrs[0]}) != EndpointsHash([]string{addrs[0], addrs[1]}) {
		t.Fatal("the hash depends on the order")
	}
	v := Decide(map[string][]string{"c": addrs}, []Found{
		{Cluster: "c", Endpoints: h, UnreachableCount: 12, Unreachable: addrs[:8]},
		{Cluster: "c", Endpoints: h, UnreachableCount: 1, Unreachable: []string{addrs[19]}},
		{Cluster: "c", Endpoints: h, Unreachable: []string{"192.0.2.1:1"}}, // not an endpoint of c
	}, Checks{})
	if v.Unreachable != 12 || v.Reachable != 8 || !strings.Contains(v.Message, "(and 4 more)") || strings.Contains(v.Message, "192.0.2.1") {
		t.Fatalf("verdict = %+v", v)
	}
}

// TestReachTooManyEndpoints: PlanChecks leaves out, by cluster name, the clusters whose endpoints
// no longer fit in MaxCheckedEndpoints, and an object with such a cluster is Unknown
// (TooManyEndpoints, with the counts and the cap) unless what is checked of it is unreachable.
func TestReachTooManyEndpoints(t *testing.T) {
	endpoints := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("10.%s.%d.%d:30080", prefix, i/250, i%250)
		}
		return out
	}
	clusters := map[string][]string{
		"a": endpoints("1", MaxCheckedEndpoints-100),
		"b": endpoints("2", 200), // does not fit after a
		"c": endpoints("3", 100), // fits after a
		"d": endpoints("4", 1),   // does not fit after a and c
	}
	checks := PlanChecks(clusters)
	if !maps.Equal(checks.Skipped, map[string]bool{"b": true, "d": true}) {
		t.Fatalf("PlanChecks = %+v, want b and d skipped", checks)
	}
	if got := PlanChecks(map[string][]string{"a": clusters["a"], "c": clusters["c"]}); got.Skipped != nil {
		t.Fatalf("PlanChecks under the cap = %+v, want nothing skipped", got)
	}

	c := clusters["c"]
	healthy := []Found{{Cluster: "c", Endpoints: EndpointsHash(c)}}
	v := Decide(map[string][]string{"b": clusters["b"]}, healthy, checks)
	want := fmt.Sprintf("this object's endpoints are left out: the tenant has more endpoints than the hub's Envoy proxies health-check, at most %d", MaxCheckedEndpoints)
	if v.Status != "Unknown" || v.Reason != ReasonTooManyEndpoints || !strings.Contains(v.Message, want) || v.Reachable != 0 || v.Unreachable != 0 {
		t.Fatalf("verdict of a skipped cluster = %+v, want Unknown %s with %q", v, ReasonTooManyEndpoints, want)
	}
	// The verdict does not move with the tenant's count: a skipped object is not written
	// again for every Service the tenant adds.
	grown := maps.Clone(clusters)
	grown["e"] = endpoints("5", 1000)
	if again := Decide(map[string][]string{"b": clusters["b"]}, healthy, PlanChecks(grown)); again != v {
		t.Errorf("verdict of a skipped cluster moved with the tenant's count: %+v → %+v", v, again)
	}
	// Partly checked: reachable where checked, still not a True verdict.
	v = Decide(map[string][]string{"c": c, "d": clusters["d"]}, healthy, checks)
	if v.Status != "Unknown" || v.Reason != ReasonTooManyEndpoints || !strings.Contains(v.Message, "1 of this object's 101 endpoints are left out") || v.Reachable != 100 {
		t.Fatalf("verdict of a partly skipped object = %+v", v)
	}
	// Not yet reported on, and partly skipped: the cap is what lasts.
	if v := Decide(map[string][]string{"c": c, "d": clusters["d"]}, nil, checks); v.Reason != ReasonTooManyEndpoints {
		t.Fatalf("verdict of a partly skipped, unreported object = %+v", v)
	}
	// Unreachable where checked: False, whatever is skipped.
	down := []Found{{Cluster: "c", Endpoints: EndpointsHash(c), UnreachableCount: 100, Unreachable: c[:MaxNamed]}}
	if v := Decide(map[string][]string{"c": c, "d": clusters["d"]}, down, checks); v.Status != "False" || v.Reason != ReasonSomeUnreachable || v.Unreachable != 100 {
		t.Fatalf("verdict of a partly skipped object with unreachable endpoints = %+v", v)
	}
	// Not skipped, all checked: True as before.
	if v := Decide(map[string][]string{"c": c}, healthy, checks); v.Status != "True" {
		t.Fatalf("verdict of a checked cluster = %+v", v)
	}
}

func found(s []ClusterHealth) []Found {
	out := make([]Found, 0, len(s))
	for _, c := range s {
		out = append(out, Found{Cluster: c.Cluster, Endpoints: c.Endpoints, UnreachableCount: len(c.Unreachable), Unreachable: c.Unreachable})
	}
	return out
}

// TestDecideHealthNotReported: while a replica left clusters out of its report, a cluster
// nobody reported on is HealthNotReported (naming the cap), not NotYetChecked; unreachable
// endpoints reported elsewhere still make the verdict False.
func TestDecideHealthNotReported(t *testing.T) {
	clusters := map[string][]string{"a": {"10.0.0.1:1", "10.0.0.2:1"}, "b": {"10.0.0.3:1"}}
	found := []Found{{Cluster: "b", Endpoints: EndpointsHash(clusters["b"])}}
	v := Decide(clusters, found, Checks{Omitted: true})
	if v.Status != "Unknown" || v.Reason != ReasonHealthNotReported || !strings.Contains(v.Message, "2 of 3 endpoints") || !strings.Contains(v.Message, fmt.Sprint(MaxReportedClusters)) {
		t.Errorf("omitted: %+v", v)
	}
	if v := Decide(clusters, found, Checks{}); v.Reason != ReasonNotYetChecked {
		t.Errorf("nothing omitted: %+v, want NotYetChecked", v)
	}
	found[0].UnreachableCount, found[0].Unreachable = 1, []string{"10.0.0.3:1"}
	if v := Decide(clusters, found, Checks{Omitted: true}); v.Status != "False" {
		t.Errorf("an unreachable endpoint reported: %+v, want False", v)
	}
}
